package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNginxLog(t *testing.T) {
	log := strings.Join([]string{
		"1.0|POST|201|201|312|127.0.0.1:1|0.010",                        // one attempt
		"1.1|POST|201|502, 201|0, 312|127.0.0.1:1, 127.0.0.1:2|0.020",   // connect failed, nothing sent: safe
		"1.2|POST|201|-, 201|-, 312|127.0.0.1:1, 127.0.0.1:2|0.020",     // idem, nginx writes - for no status
		"1.3|POST|201|502, 201|312, 312|127.0.0.1:1, 127.0.0.1:2|0.020", // sent, then passed on: a retried POST
		"1.4|GET|200|502, 200|120, 120|127.0.0.1:1, 127.0.0.1:2|0.020",  // a GET may be retried
		"1.5|POST|502|502|312|127.0.0.1:1|0.001",
		"1.6|POST|504|504|312|127.0.0.1:1|30.0",
		"1.7|POST|500|-|-|-|0.000",             // nginx's own 500
		"1.8|POST|500|500|312|127.0.0.1:1|0.1", // the instance's 500: not nginx's
	}, "\n")
	f, err := parseNginxLog(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, 9, f.Requests)
	assert.Equal(t, 1, f.RetriedPOSTs, "retried POSTs")
	assert.Equal(t, 2, f.MovedUnsent, "passed on before sending")
	assert.Equal(t, 1, f.Status502)
	assert.Equal(t, 1, f.All504)
	assert.Equal(t, 1, f.Own500)

	_, err = parseNginxLog(strings.NewReader("1.0 POST 201"))
	assert.Error(t, err, "a line in another format")
}

func TestClassifyAnswer(t *testing.T) {
	tests := []struct {
		status      int
		body        string
		code, order string
	}{
		{201, `{"orderId":"7312123456789012345"}`, "created", "7312123456789012345"},
		{409, `{"error":{"code":"already_ordered","message":"x"}}`, "already_ordered", ""},
		{409, `{"error":{"code":"already_ordered","orderId":"42"}}`, "already_ordered", "42"},
		{503, `{"error":{"code":"overloaded"}}`, "overloaded", ""},
		{502, `<html>502 Bad Gateway</html>`, "http_502", ""},
		{201, `{}`, "http_201", ""},
	}
	for _, tt := range tests {
		code, order := classifyAnswer(tt.status, []byte(tt.body))
		assert.Equal(t, tt.code, code, tt.body)
		assert.Equal(t, tt.order, order, tt.body)
	}
}

func TestAttemptFinal(t *testing.T) {
	for _, tt := range []struct {
		a    attempt
		want bool
	}{
		{attempt{Status: 201, Code: codeCreated}, true},
		{attempt{Status: 409, Code: "already_ordered"}, true},
		{attempt{Status: 409, Code: "sold_out"}, true},
		{attempt{Status: 409, Code: "order_in_progress"}, false},
		{attempt{Status: 503, Code: "overloaded"}, false},
		{attempt{Status: 502, Code: "http_502"}, false},
		{attempt{Status: 0, Code: codeConnError}, false},
	} {
		assert.Equal(t, tt.want, tt.a.final(), "%+v", tt.a)
	}
}

func TestUnservedAndLostReplies(t *testing.T) {
	as := []attempt{
		{User: 1, N: 1, Status: 503, Code: "unavailable"}, {User: 1, N: 2, Status: 201, Code: codeCreated, OrderID: "11"},
		{User: 2, N: 1, Status: 502, Code: "http_502"}, {User: 2, N: 2, Status: 409, Code: "already_ordered"}, // its 201 was lost
		{User: 3, N: 1, Status: 503, Code: "overloaded"}, {User: 3, N: 2, Status: 503, Code: "unavailable"}, // gave up
		{User: 4, N: 1, Status: 201, Code: codeCreated, OrderID: "44"}, {User: 4, N: 1, Status: 409, Code: "already_ordered"}, // a storm
		{User: 5, N: 1, Status: 409, Code: "already_ordered"}, // lost nothing: its order is nobody's answer
	}
	users, without := unserved(as)
	assert.Equal(t, 5, users)
	assert.Equal(t, 1, without)
	_, unnamed := knownOrders(as)
	assert.Equal(t, []int64{2}, unnamed)
}

func TestRecoveryAfter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s, e float64, code string) attempt {
		return attempt{Start: t0.Add(time.Duration(s * float64(time.Second))), End: t0.Add(time.Duration(e * float64(time.Second))), Code: code}
	}
	as := []attempt{
		at(-1, 0.5, codeCreated), // started before: does not count
		at(0.1, 0.2, "unavailable"),
		at(0.3, 0.9, codeCreated),
		at(0.4, 0.6, codeCreated),
	}
	d, ok := recoveryAfter(as, t0)
	require.True(t, ok)
	assert.Equal(t, 600*time.Millisecond, d)
	_, ok = recoveryAfter(as[:2], t0)
	assert.False(t, ok)
}

func TestParseAttemptsRoundTrip(t *testing.T) {
	csv := "1000000000,1500000000,main,7,2,409,already_ordered,\n1000000000,1200000000,head,8,1,201,created,42\n"
	as, err := parseAttempts(strings.NewReader(csv))
	require.NoError(t, err)
	require.Len(t, as, 2)
	assert.Equal(t, attempt{Start: time.Unix(1, 0), End: time.Unix(1, 500000000), Phase: "main", User: 7, N: 2, Status: 409, Code: "already_ordered"}, as[0])
	assert.Equal(t, 200*time.Millisecond, as[1].latency())
	_, err = parseAttempts(strings.NewReader("1,2,main\n"))
	assert.Error(t, err)
}

func TestPct(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 99*time.Millisecond, pct(d, 0.99))
	assert.Equal(t, 50*time.Millisecond, pct(d, 0.5))
	assert.Equal(t, time.Duration(0), pct(nil, 0.99))
}

// TestWriteLogsKnownOrders: orders.log lists the orders the client knows of as the k6 script
// logs them. Every 201, once: a 201 whose answer a retry's already_ordered repeats is one
// line, or the verdict would see a user answered twice; two different ids of one user stay
// two lines. A 409 already_ordered's id only for a user who had no 201 and lost an answer (no
// answer, a 502, a 503): its lost 201's order. An already_ordered id given to a user who lost
// nothing is not logged: its row is then one nobody was answered for, which the verdict fails.
func TestWriteLogsKnownOrders(t *testing.T) {
	d := &driver{c: loadConfig{out: t.TempDir(), scenario: "s"}, attempts: []attempt{
		{User: 1, N: 1, Status: 201, Code: codeCreated, OrderID: "11"},
		{User: 1, N: 2, Status: 409, Code: "already_ordered", OrderID: "11"},
		{User: 2, N: 1, Status: 201, Code: codeCreated, OrderID: "21"},
		{User: 2, N: 2, Status: 201, Code: codeCreated, OrderID: "22"},
		{User: 3, N: 1, Status: 502, Code: "http_502"},
		{User: 3, N: 2, Status: 409, Code: "already_ordered", OrderID: "31"},
		{User: 4, N: 1, Status: 409, Code: "already_ordered", OrderID: "41"},
		{User: 5, N: 1, Status: 0, Code: codeConnError},
		{User: 5, N: 2, Status: 409, Code: "already_ordered"},
		{User: 6, N: 1, Status: 503, Code: "unavailable"},
		{User: 6, N: 2, Status: 409, Code: "already_ordered", OrderID: "61"},
	}}
	require.NoError(t, d.write(7))
	f, err := os.Open(filepath.Join(d.c.out, "orders.log"))
	require.NoError(t, err)
	defer f.Close()
	orders, err := readOrders(f)
	require.NoError(t, err)
	got := map[string]int64{}
	for _, o := range orders {
		got[o.ID] = o.User
	}
	assert.Len(t, orders, len(got), "each order once: %+v", orders)
	assert.Equal(t, map[string]int64{"11": 1, "21": 2, "22": 2, "31": 3, "61": 6}, got)
	_, unnamed := knownOrders(d.attempts)
	assert.Equal(t, []int64{5}, unnamed, "users whose order is looked up by (user, voucher)")
}

// TestOverloadLightLoadFloor: the light load after an overload is judged against
// max(2 × its p99 before, -light-p99-floor). The short run's floor lets one stall of a few
// hundred milliseconds on shared cores through, which queueing (answers in seconds) is not.
func TestOverloadLightLoadFloor(t *testing.T) {
	capDir := t.TempDir()
	t0 := time.Unix(1000, 0)
	var capCSV strings.Builder
	for i := range 100 {
		s := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		fmt.Fprintf(&capCSV, "%d,%d,main,%d,1,201,created,%d\n", s.UnixNano(), s.Add(5*time.Millisecond).UnixNano(), i+1, i+1)
	}
	require.NoError(t, os.WriteFile(filepath.Join(capDir, "requests.csv"), []byte(capCSV.String()), 0o644))
	at := func(phase string, start time.Time, lat time.Duration, user int64, code string) attempt {
		status := 201
		if code != codeCreated {
			status = 503
		}
		return attempt{Start: start, End: start.Add(lat), Phase: phase, User: user, N: 1, Status: status, Code: code}
	}
	var as []attempt
	user := int64(1000)
	for i := range 60 { // the light load before: p99 10 ms
		user++
		as = append(as, at(phaseHead, t0.Add(time.Duration(i)*50*time.Millisecond), 10*time.Millisecond, user, codeCreated))
	}
	main := t0.Add(3 * time.Second)
	for i := range 100 {
		user++
		code := codeCreated
		if i%2 == 1 {
			code = "overloaded"
		}
		as = append(as, at(phaseMain, main.Add(time.Duration(i)*10*time.Millisecond), 5*time.Millisecond, user, code))
	}
	tail := main.Add(2 * time.Second)
	for i := range 80 { // the light load after: one stall of 150 ms
		user++
		lat := 8 * time.Millisecond
		if i == 40 {
			lat = 150 * time.Millisecond
		}
		as = append(as, at(phaseTail, tail.Add(time.Duration(i)*50*time.Millisecond), lat, user, codeCreated))
	}
	const name = "light load from 1 s after: p99"
	for _, tc := range []struct {
		floor time.Duration
		fails bool
	}{{20 * time.Millisecond, true}, {250 * time.Millisecond, false}} {
		c := &chaosCheck{w: io.Discard}
		f := chaosFlags{capacityDir: capDir, goodput: 0.1, overloadP99: time.Second, lightP99Floor: tc.floor}
		require.NoError(t, checkOverload(c, f, as))
		failed := slices.ContainsFunc(c.failed, func(s string) bool { return strings.HasPrefix(s, name) })
		assert.Equal(t, tc.fails, failed, "floor %s: failed %v", tc.floor, c.failed)
	}
}
