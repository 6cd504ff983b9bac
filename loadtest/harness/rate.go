package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rateResult is one open-loop run of `harness rate`.
type rateResult struct {
	Rate        float64        `json:"rate"`
	DurationSec float64        `json:"durationSec"`
	Sent        int            `json:"sent"`
	Skipped     int            `json:"skipped"`
	Statuses    map[string]int `json:"statuses"`
	OKPerSec    float64        `json:"okPerSec"`
	P50Ms       float64        `json:"p50Ms"`
	P99Ms       float64        `json:"p99Ms"`
	MaxMs       float64        `json:"maxMs"`
	// P99AfterFirstSecondMs is the p99 of the requests due after the first second: the run
	// without its start, when the service's connections, heaps and goroutines are still
	// growing (docs/loadtest-journal.md, "The open loop's first seconds"). Zero for a run of a second.
	P99AfterFirstSecondMs float64 `json:"p99AfterFirstSecondMs"`
	// Seconds splits the run by when each request was due, one element a second: whether the
	// tail is one stall (the first second's connections, say) or spread over the run.
	Seconds []rateSecond `json:"seconds"`
}

// rateSecond is one second of an open loop's schedule: its requests and their latency.
type rateSecond struct {
	Sent  int     `json:"sent"`
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

// runRate drives an open loop of order requests at a fixed rate, every request a new user (or,
// with -get, of GET requests on one path: the trivial endpoint's control), and reports the
// answers and their latency. Latency is measured from the moment a request was due,
// not from when it was sent, so a client falling behind shows as latency instead of hiding it
// (coordinated omission). A request that would exceed -max-inflight is not sent and counted as
// skipped: the run is then void, and the command fails.
func runRate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL (nginx)")
	vid := fs.Int64("voucher", 0, "voucher to order")
	get := fs.String("get", "", "send GET on this path (e.g. /healthz) instead of orders: the open loop on the trivial endpoint")
	rate := fs.Float64("rate", 100, "requests per second")
	dur := fs.Duration("duration", 10*time.Second, "how long to send")
	userBase := fs.Int64("user-base", 5_000_000_000, "first user id")
	maxInflight := fs.Int("max-inflight", 8192, "requests in flight at most; more void the run")
	conns := fs.Int("connections", 256, "connections at most; a request due while all are busy waits for one, its wait counted in its latency")
	out := fs.String("out", "", "write the result as JSON to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the generator itself to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*vid <= 0) == (*get == "") || *rate <= 0 || *dur <= 0 {
		return errors.New("rate: want -voucher or -get, one of them, and -rate and -duration > 0")
	}
	if *get != "" && !strings.HasPrefix(*get, "/") {
		return fmt.Errorf("rate: -get %q: want a path, /healthz say", *get)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("rate: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("rate: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := openLoop(ctx, *base, *vid, *get, *rate, *dur, *userBase, *maxInflight, *conns)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rate: %.0f/s for %s: %d sent, %d skipped, answers %v; 2xx %.1f/s; latency p50 %.2f ms, p99 %.2f ms, max %.1f ms\n",
		res.Rate, *dur, res.Sent, res.Skipped, res.Statuses, res.OKPerSec, res.P50Ms, res.P99Ms, res.MaxMs)
	fmt.Fprint(stdout, "rate: p99 ms by second:")
	for _, s := range res.Seconds {
		fmt.Fprintf(stdout, " %.1f", s.P99Ms)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "rate: p99 after the first second %.2f ms\n", res.P99AfterFirstSecondMs)
	if *out != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			return fmt.Errorf("rate: %w", err)
		}
	}
	if res.Skipped > 0 {
		return fmt.Errorf("rate: %d requests not sent (more than %d in flight): the run does not show the service at %.0f/s", res.Skipped, *maxInflight, *rate)
	}
	return nil
}

// openLoop sends rate requests a second for dur, the i-th due at the start plus i/rate whatever
// the answers take: an order of voucher vid for user userBase+i, or, with get set, a GET of
// get. Each request's latency counts from when it was due.
func openLoop(ctx context.Context, base string, vid int64, get string, rate float64, dur time.Duration, userBase int64, maxInflight, conns int) (rateResult, error) {
	// The lean client (leanclient.go): at 8,000 requests a second net/http's client could not
	// keep to the schedule on this machine, and the run was void.
	client, err := newLeanClient(base, 30*time.Second, conns, conns)
	if err != nil {
		return rateResult{}, fmt.Errorf("rate: %w", err)
	}
	defer client.closeIdle()
	path := "/api/vouchers/" + strconv.FormatInt(vid, 10) + "/orders"
	send := func(user int64) (int, error) {
		code, _, err := client.post(path, user)
		return code, err
	}
	if get != "" {
		send = func(int64) (int, error) {
			code, _, err := client.get(get)
			return code, err
		}
	}
	n := int(rate * dur.Seconds())
	interval := time.Duration(float64(time.Second) / rate)

	var (
		mu       sync.Mutex
		statuses = map[string]int{}
		bySecond = make([][]time.Duration, int(dur/time.Second)+1) // latencies by the second each request was due
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, maxInflight)
	res := rateResult{Rate: rate}
	// One timer for the whole schedule, not one per request: time.After's allocation and
	// channel per request were part of the generator's cost at 8,500 requests a second.
	wait := time.NewTimer(time.Hour)
	defer wait.Stop()
	start := time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			wait.Reset(d)
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-wait.C:
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			res.Skipped++
			continue
		}
		res.Sent++
		wg.Add(1)
		go func(user int64) {
			defer wg.Done()
			defer func() { <-slots }()
			status := "error"
			if code, err := send(user); err == nil {
				status = strconv.Itoa(code)
			}
			took := time.Since(due)
			sec := int(due.Sub(start) / time.Second)
			mu.Lock()
			statuses[status]++
			bySecond[sec] = append(bySecond[sec], took)
			mu.Unlock()
		}(userBase + int64(i))
	}
	sendTime := time.Since(start)
	wg.Wait()
	res.DurationSec = sendTime.Seconds()
	res.Statuses = statuses
	ok := 0
	for s, c := range statuses {
		if len(s) == 3 && s[0] == '2' {
			ok += c
		}
	}
	res.OKPerSec = float64(ok) / res.DurationSec
	lat := slices.Concat(bySecond...)
	slices.Sort(lat)
	res.P50Ms = millis(pct(lat, 0.50))
	res.P99Ms = millis(pct(lat, 0.99))
	if len(lat) > 0 {
		res.MaxMs = millis(lat[len(lat)-1])
	}
	if len(bySecond) > 1 {
		rest := slices.Concat(bySecond[1:]...)
		slices.Sort(rest)
		res.P99AfterFirstSecondMs = millis(pct(rest, 0.99))
	}
	for _, l := range bySecond {
		if len(l) == 0 {
			continue
		}
		slices.Sort(l)
		res.Seconds = append(res.Seconds, rateSecond{Sent: len(l), P50Ms: millis(pct(l, 0.50)), P99Ms: millis(pct(l, 0.99)), MaxMs: millis(l[len(l)-1])})
	}
	return res, nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
