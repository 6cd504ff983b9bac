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

	"github.com/seckill/seckill/internal/verdict"
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
		{202, `{"orderId":"7312123456789012346","status":"pending"}`, "admitted", "7312123456789012346"},
		{202, `{}`, "http_202", ""},
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
		{attempt{Status: 202, Code: codeAdmitted}, true},
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
	users, without := unserved(as, codeCreated)
	assert.Equal(t, 5, users)
	assert.Equal(t, 1, without)
	_, unnamed := knownOrders(as)
	assert.Equal(t, []int64{2}, unnamed)

	// The asynchronous mode's 202 serves its user; a 201 there is an answer of the wrong mode.
	async := []attempt{
		{User: 1, N: 1, Status: 503, Code: "unavailable"}, {User: 1, N: 2, Status: 202, Code: codeAdmitted, OrderID: "11"},
		{User: 2, N: 1, Status: 201, Code: codeCreated, OrderID: "21"},
	}
	users, without = unserved(async, codeAdmitted)
	assert.Equal(t, 2, users)
	assert.Equal(t, 1, without, "the 201 in an asynchronous run")
	known, _ := knownOrders(async)
	assert.Equal(t, []knownOrder{{ID: "11", User: 1}, {ID: "21", User: 2}}, known, "orders.log lists every order a user was told of")
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
	d, ok := recoveryAfter(as, t0, codeCreated)
	require.True(t, ok)
	assert.Equal(t, 600*time.Millisecond, d)
	_, ok = recoveryAfter(as[:2], t0, codeCreated)
	assert.False(t, ok)
	_, ok = recoveryAfter(as, t0, codeAdmitted)
	assert.False(t, ok, "201s do not end an asynchronous run's outage")
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

// TestWriteLogsAnOrderIdPerUser: an order id answered to two users is two answers, each
// compared with the database's row, which belongs to one of them. Written once, the second
// user's answer (a 201, or the 409 naming a lost reply's order) never reached the verdict,
// which passed with a user told of an order that is not theirs.
func TestWriteLogsAnOrderIdPerUser(t *testing.T) {
	d := &driver{c: loadConfig{out: t.TempDir(), scenario: "s"}, attempts: []attempt{
		{User: 1, N: 1, Status: 201, Code: codeCreated, OrderID: "11"},
		{User: 1, N: 2, Status: 201, Code: codeCreated, OrderID: "11"}, // the same order again: once
		{User: 2, N: 1, Status: 201, Code: codeCreated, OrderID: "11"},
		{User: 3, N: 1, Status: 502, Code: "http_502"},
		{User: 3, N: 2, Status: 409, Code: "already_ordered", OrderID: "11"},
	}}
	require.NoError(t, d.write(7))
	orders, err := readOrdersFile(filepath.Join(d.c.out, "orders.log"))
	require.NoError(t, err)
	answered := make([]verdict.Answered, 0, len(orders))
	for _, o := range orders {
		answered = append(answered, verdict.Answered{ID: o.ID, User: o.User, Voucher: o.Voucher})
	}
	f := verdict.Facts{Vouchers: []verdict.Voucher{{ID: 7}}}
	verdict.Compare(answered, map[string]verdict.Owner{"11": {User: 1, Voucher: 7}}, &f)
	assert.Equal(t, 3, f.Orders201, "got %d answers logged, want 3 (one per user): %+v", f.Orders201, orders)
	assert.Equal(t, 2, f.WrongOwner201, "got %d answers with another user's order, want 2", f.WrongOwner201)
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
		c := &chaosCheck{w: io.Discard, placed: codeCreated}
		f := chaosFlags{capacityDir: capDir, goodput: 0.1, overloadP99: time.Second, lightP99Floor: tc.floor}
		require.NoError(t, checkOverload(c, f, as))
		failed := slices.ContainsFunc(c.failed, func(s string) bool { return strings.HasPrefix(s, name) })
		assert.Equal(t, tc.fails, failed, "floor %s: failed %v", tc.floor, c.failed)
	}
}

// TestOverloadCapacityRunWithoutOrders: the goodput is judged against the mean of the capacity
// runs, and a run that placed no order (every answer a 503: the cluster broken by the overload)
// is no capacity. Counted as 0 it halved the mean, and an overload that kept half of the
// capacity passed the goodput threshold of 0.9.
func TestOverloadCapacityRunWithoutOrders(t *testing.T) {
	t0 := time.Unix(1000, 0)
	capRun := func(status int, code string) string {
		var csv strings.Builder
		for i := range 100 {
			s := t0.Add(time.Duration(i) * 10 * time.Millisecond)
			fmt.Fprintf(&csv, "%d,%d,main,%d,1,%d,%s,\n", s.UnixNano(), s.Add(5*time.Millisecond).UnixNano(), i+1, status, code)
		}
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "requests.csv"), []byte(csv.String()), 0o644))
		return dir
	}
	before, after := capRun(201, codeCreated), capRun(503, "unavailable")
	var as []attempt
	for i := range 100 { // half the capacity: every other request shed
		s := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		a := attempt{Start: s, End: s.Add(5 * time.Millisecond), Phase: phaseMain, User: int64(i + 1), N: 1, Status: 201, Code: codeCreated}
		if i%2 == 1 {
			a.Status, a.Code = 503, "overloaded"
		}
		as = append(as, a)
	}
	c := &chaosCheck{w: io.Discard, placed: codeCreated}
	f := chaosFlags{capacityDir: before + "," + after, goodput: 0.9, overloadP99: time.Second, lightP99Floor: time.Second}
	err := checkOverload(c, f, as)
	require.Error(t, err, "got no error, want one for a capacity run without orders; failed thresholds %v", c.failed)
	assert.Contains(t, err.Error(), after)
}

// TestAsyncMariaDBOutage: in the asynchronous mode a MariaDB fault is judged by what admission
// and the writers do with it: every request during the fault admitted (202), the backlog above
// its level before the fault (the orders waited: otherwise the fault tested nothing), and back
// to that level within -written-after of the store's return. Each way of failing fails its
// own threshold and only that one.
func TestAsyncMariaDBOutage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	start, end := t0.Add(5*time.Second), t0.Add(15*time.Second)
	up := end.Add(500 * time.Millisecond)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	attempts := func(during string) []attempt {
		var as []attempt
		for i := range 200 { // 10 a second for 20 s, each a new user
			s := sec(float64(i) / 10)
			code, status := codeAdmitted, 202
			if !s.Before(start) && s.Before(end) && during != codeAdmitted {
				code, status = during, 503
			}
			as = append(as, attempt{Start: s, End: s.Add(2 * time.Millisecond), Phase: phaseMain, User: int64(i + 1), N: 1, Status: status, Code: code})
			if status == 503 { // the client retries after the fault
				as = append(as, attempt{Start: up.Add(time.Second), End: up.Add(time.Second + time.Millisecond), Phase: phaseMain, User: int64(i + 1), N: 2, Status: 202, Code: codeAdmitted})
			}
		}
		return as
	}
	// backlog(s) is the gauge both instances read at s seconds in.
	type gauge func(s float64) float64
	rising := func(s float64) float64 {
		switch {
		case sec(s).Before(start):
			return 0
		case sec(s).Before(up.Add(2 * time.Second)):
			return 10 * (s - 5)
		}
		return 0
	}
	flat := func(float64) float64 { return 0 }
	stuck := func(s float64) float64 { return max(0, 10*(s-5)) }
	for _, tc := range []struct {
		name    string
		during  string
		backlog gauge
		fails   []string
	}{
		{"admitted through, written after", codeAdmitted, rising, nil},
		{"refused during the fault", "unavailable", rising, []string{"of those, answers other than 202"}},
		{"nothing waited", codeAdmitted, flat, []string{"backlog during the fault above"}},
		{"never written", codeAdmitted, stuck, []string{"backlog back to its level before"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var w strings.Builder
			for i := range 80 { // every 250 ms for 20 s
				s := float64(i) / 4
				for inst := 1; inst <= 2; inst++ {
					fmt.Fprintf(&w, "%d,%d,40,30,%g,false\n", sec(s).UnixNano(), inst, tc.backlog(s))
				}
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "watch.csv"), []byte(w.String()), 0o644))
			var out strings.Builder
			c := &chaosCheck{w: &out, placed: codeAdmitted}
			f := chaosFlags{experiment: "mariadb-kill", orderMode: "async", dir: dir, bound: 3 * time.Second, writtenAfter: 10 * time.Second, goroutines: 500}
			ev := map[string]time.Time{"fault_start": start, "fault_end": end, "store_up": up}
			require.NoError(t, checkStoreOutage(c, f, attempts(tc.during), ev))
			require.Len(t, c.failed, len(tc.fails), "failed %q\n%s", c.failed, out.String())
			for i, prefix := range tc.fails {
				assert.True(t, strings.HasPrefix(c.failed[i], prefix), "failed %q, want %q", c.failed[i], prefix)
			}
		})
	}
}

// TestAsyncRedisLatency: after Redis's latency spikes the asynchronous mode, which takes no
// lock, must serve the requests again; a 503 after the last spike fails, a 503 during one
// does not.
func TestAsyncRedisLatency(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := map[string]time.Time{"spike1_start": t0.Add(5 * time.Second), "spike1_end": t0.Add(9 * time.Second)}
	at := func(s float64, status int, code string, user int64) attempt {
		st := t0.Add(time.Duration(s * float64(time.Second)))
		return attempt{Start: st, End: st.Add(5 * time.Millisecond), Phase: phaseMain, User: user, N: 1, Status: status, Code: code}
	}
	served := []attempt{at(1, 202, codeAdmitted, 1), at(6, 503, "unavailable", 2), at(11, 202, codeAdmitted, 2), at(12, 202, codeAdmitted, 3)}
	notBack := append(slices.Clone(served), at(13, 503, "unavailable", 4), at(14, 202, codeAdmitted, 4))
	for _, tc := range []struct {
		name  string
		as    []attempt
		fails int
	}{{"served after", served, 0}, {"a 503 after the last spike", notBack, 1}} {
		c := &chaosCheck{w: io.Discard, placed: codeAdmitted}
		require.NoError(t, checkRedisLatency(c, chaosFlags{orderMode: "async"}, tc.as, ev))
		assert.Len(t, c.failed, tc.fails, "%s: %q", tc.name, c.failed)
	}
}
