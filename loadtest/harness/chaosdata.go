package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// readAttempts reads the requests.csv that `harness load` wrote.
func readAttempts(path string) ([]attempt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read requests: %w", err)
	}
	defer f.Close()
	return parseAttempts(f)
}

func parseAttempts(r io.Reader) ([]attempt, error) {
	var as []attempt
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		p := strings.Split(sc.Text(), ",")
		if len(p) != 8 {
			return nil, fmt.Errorf("requests line %d: want 8 fields, got %d", n, len(p))
		}
		var ints [5]int64
		for i, j := range []int{0, 1, 3, 4, 5} {
			v, err := strconv.ParseInt(p[j], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("requests line %d: field %d: %w", n, j+1, err)
			}
			ints[i] = v
		}
		as = append(as, attempt{Start: time.Unix(0, ints[0]), End: time.Unix(0, ints[1]), Phase: p[2],
			User: ints[2], N: int(ints[3]), Status: int(ints[4]), Code: p[6], OrderID: p[7]})
	}
	return as, sc.Err()
}

// readWatch reads the watch.csv that `harness load` wrote.
func readWatch(path string) ([]watchSample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read watch: %w", err)
	}
	var ss []watchSample
	for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		p := strings.Split(line, ",")
		if len(p) != 6 {
			return nil, fmt.Errorf("watch line %d: want 6 fields", n+1)
		}
		t, err1 := strconv.ParseInt(p[0], 10, 64)
		inst, err2 := strconv.Atoi(p[1])
		g, err3 := strconv.ParseFloat(p[2], 64)
		fds, err4 := strconv.ParseFloat(p[3], 64)
		backlog, err5 := strconv.ParseFloat(p[4], 64)
		if err := firstErr(err1, err2, err3, err4, err5); err != nil {
			return nil, fmt.Errorf("watch line %d: %w", n+1, err)
		}
		ss = append(ss, watchSample{T: time.Unix(0, t), Instance: inst, Goroutines: g, OpenFDs: fds, Backlog: backlog, Err: p[5] == "true"})
	}
	return ss, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// readEvents reads the events file chaos.sh writes: "name unix-seconds" a line (date +%s.%N).
// A name given twice keeps its first time.
func readEvents(path string) (map[string]time.Time, error) {
	ev := map[string]time.Time{}
	if path == "" {
		return ev, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	for n, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("events line %d: want NAME SECONDS", n+1)
		}
		sec, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("events line %d: %w", n+1, err)
		}
		if _, ok := ev[f[0]]; !ok {
			ev[f[0]] = time.Unix(0, int64(sec*1e9))
		}
	}
	return ev, nil
}

// nginxFacts is what the access log (format chaos of scripts/cluster.sh) says about the run.
type nginxFacts struct {
	Requests        int
	RetriedPOSTs    int // POSTs passed to a second instance after bytes had gone to the first
	MovedUnsent     int // requests passed on after a connection failure (nothing sent: safe)
	Own500, All504  int // 500 nginx made itself (no upstream status); 504 of any origin
	Status502       int
	UpstreamAnswers map[string]int
}

// parseNginxLog reads lines "msec|method|status|upstream_status|upstream_bytes_sent|upstream_addr|request_time".
func parseNginxLog(r io.Reader) (nginxFacts, error) {
	f := nginxFacts{UpstreamAnswers: map[string]int{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		p := strings.Split(sc.Text(), "|")
		if len(p) != 7 {
			return f, fmt.Errorf("nginx log line %d: want 7 fields separated by |", n)
		}
		f.Requests++
		method, status, upStatus, sent := p[1], p[2], p[3], splitUpstream(p[4])
		switch {
		case status == "500" && upStatus == "-":
			f.Own500++
		case status == "504":
			f.All504++
		case status == "502":
			f.Status502++
		}
		if len(sent) > 1 {
			resent := slices.ContainsFunc(sent[:len(sent)-1], func(s string) bool { return s != "-" && s != "0" })
			switch {
			case resent && method == "POST":
				f.RetriedPOSTs++
			case !resent:
				f.MovedUnsent++
			}
		}
	}
	return f, sc.Err()
}

// splitUpstream splits nginx's per-attempt list ("312, 0" or "a : b" after an internal redirect).
func splitUpstream(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ':' || r == ' ' })
}
