package main

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const scalingCSV = `sweep,mode,instances,connections,ok_per_sec,p99_ms
instances,sync,1,64,700,120
instances,sync,2,64,800,110
instances,async,1,64,7000,20
instances,async,2,64,9000,15
instances,healthz,1,64,18000,6
instances,healthz,2,64,20000,5
connections,sync,2,16,600,40
connections,sync,2,64,800,110
connections,async,2,16,6000,4
connections,async,2,64,9000,15
connections,healthz,2,16,15000,2
connections,healthz,2,64,20000,5
`

func TestChartDrawsEverySeriesInValidSVG(t *testing.T) {
	pts, err := readPoints(strings.NewReader(scalingCSV))
	require.NoError(t, err)
	require.Len(t, pts, 12)
	svg, err := drawChart(pts, "2 cores, <test>")
	require.NoError(t, err)

	d := xml.NewDecoder(strings.NewReader(svg))
	lines := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	assert.Equal(t, 12, lines, "three series in each of four panels")
	assert.Contains(t, svg, "2 cores, &lt;test&gt;")
	assert.Contains(t, svg, "instances (64 connections)")
	assert.Contains(t, svg, "connections (2 instances)")
}

func TestChartRejectsBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"empty":        "",
		"header only":  "sweep,mode,instances,connections,ok_per_sec,p99_ms\n",
		"short line":   "h,h,h,h,h,h\ninstances,sync,1,64,700\n",
		"not a number": "h,h,h,h,h,h\ninstances,sync,one,64,700,1\n",
		"bad sweep":    "h,h,h,h,h,h\nthreads,sync,1,64,700,1\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readPoints(strings.NewReader(in))
			assert.Error(t, err)
		})
	}
}

func TestOpenLoopSendsEveryUserOnce(t *testing.T) {
	var n atomic.Int64
	users := make(chan string, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		users <- r.Header.Get("X-User-ID")
		if n.Add(1)%4 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	res, err := openLoop(context.Background(), srv.URL, 7, "", 400, 250*time.Millisecond, 100, 128, 8)
	require.NoError(t, err)
	close(users)
	seen := map[string]bool{}
	for u := range users {
		assert.False(t, seen[u], "user %s sent twice", u)
		seen[u] = true
	}
	assert.Equal(t, 100, res.Sent)
	assert.Len(t, seen, 100)
	assert.Equal(t, 0, res.Skipped)
	assert.Equal(t, map[string]int{"202": 75, "503": 25}, res.Statuses)
	assert.Greater(t, res.OKPerSec, 0.0)
	assert.LessOrEqual(t, res.P50Ms, res.P99Ms)
}

// TestOpenLoopGet: with a path to GET, the open loop sends that request, the same on every
// due time, without a user or a body, and counts its answers as it counts orders'.
func TestOpenLoopGet(t *testing.T) {
	var bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/healthz" || r.Header.Get("X-User-ID") != "" || r.ContentLength != 0 {
			bad.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()

	res, err := openLoop(context.Background(), srv.URL, 0, "/healthz", 400, 250*time.Millisecond, 100, 128, 8)
	require.NoError(t, err)
	assert.Zero(t, bad.Load(), "a request that was not a bare GET /healthz")
	assert.Equal(t, 100, res.Sent)
	assert.Equal(t, map[string]int{"200": 100}, res.Statuses)
}

// TestRateWantsOneTarget: harness rate sends orders of a voucher or GETs of a path, never both
// and never neither, and a path is a path.
func TestRateWantsOneTarget(t *testing.T) {
	for name, args := range map[string][]string{
		"neither":     {"-rate", "10", "-duration", "1s"},
		"both":        {"-voucher", "7", "-get", "/healthz", "-rate", "10", "-duration", "1s"},
		"not a path":  {"-get", "healthz", "-rate", "10", "-duration", "1s"},
		"zero rate":   {"-get", "/healthz", "-rate", "0", "-duration", "1s"},
		"no duration": {"-voucher", "7", "-rate", "10", "-duration", "0s"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errs strings.Builder
			err := runRate(context.Background(), append(args, "-url", "http://127.0.0.1:1"), &out, &errs)
			require.Error(t, err)
			assert.Empty(t, out.String(), "nothing was sent, so nothing is reported")
		})
	}
}

// TestOpenLoopSplitsBySecondDue: each second of the schedule holds the requests due in it,
// whenever their answers came, and its tail is its own: a stall in the second second shows
// there and not in the first.
func TestOpenLoopSplitsBySecondDue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Users 1-100 are due in the first second, 101-200 in the second: ten of those stall.
		if u, _ := strconv.Atoi(r.Header.Get("X-User-ID")); u > 100 && u <= 110 {
			time.Sleep(time.Second)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	res, err := openLoop(context.Background(), srv.URL, 7, "", 100, 2*time.Second, 1, 256, 64)
	require.NoError(t, err)
	require.Len(t, res.Seconds, 2)
	assert.Equal(t, 100, res.Seconds[0].Sent)
	assert.Equal(t, 100, res.Seconds[1].Sent)
	assert.Less(t, res.Seconds[0].MaxMs, 1000.0, "the first second's answers did not stall")
	assert.GreaterOrEqual(t, res.Seconds[1].MaxMs, 1000.0)
	assert.GreaterOrEqual(t, res.Seconds[1].P99Ms, 1000.0, "a tenth of the second second stalled")
	assert.Equal(t, res.MaxMs, res.Seconds[1].MaxMs)
	assert.GreaterOrEqual(t, res.P99AfterFirstSecondMs, 1000.0, "the stall is after the first second")
}

// TestOpenLoopP99AfterTheFirstSecond: a stall in the first second counts in the run's p99 and
// not in the p99 of the seconds after it.
func TestOpenLoopP99AfterTheFirstSecond(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Users 1-100 are due in the first second, 101-200 in the second: ten of the first stall.
		if u, _ := strconv.Atoi(r.Header.Get("X-User-ID")); u <= 10 {
			time.Sleep(time.Second)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	res, err := openLoop(context.Background(), srv.URL, 7, "", 100, 2*time.Second, 1, 256, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, res.P99Ms, 1000.0, "5 % of the run stalled")
	assert.Less(t, res.P99AfterFirstSecondMs, 1000.0, "nothing after the first second stalled")
	assert.Greater(t, res.P99AfterFirstSecondMs, 0.0)
}

func TestOpenLoopCountsWhatItCouldNotSend(t *testing.T) {
	// Each answer takes 20 ms; 50 requests are due within 50 ms and at most 2 may be in
	// flight, so most cannot be sent on time: they are counted, never queued.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
	}))
	defer srv.Close()

	res, err := openLoop(context.Background(), srv.URL, 7, "", 1000, 50*time.Millisecond, 1, 2, 2)
	require.NoError(t, err, "the run is reported; runRate turns skips into an error")
	assert.Equal(t, 50, res.Sent+res.Skipped)
	assert.Positive(t, res.Skipped)
	assert.Equal(t, res.Sent, res.Statuses["200"])
}
