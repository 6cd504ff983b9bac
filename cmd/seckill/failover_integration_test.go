//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/verdict"
)

// The failover test's bounds and load. failoverBound is what the service is held to: from
// the primary's SIGKILL to the first order created on the promoted replica, and to the last
// 503. Sentinel alone needs SentinelDownAfter (1 s) to judge the primary down, then an
// election and the promotion; the rest is the clients finding the new primary.
const (
	failoverBound   = 10 * time.Second
	failoverWorkers = 12 // users in flight at once, each ordering on both instances at once
	failoverStock   = 100000
	failoverBefore  = 50               // orders created before the kill
	failoverAfter   = 25               // orders each instance creates after the switch
	failoverMaxRun  = 60 * time.Second // the load's hard stop, whatever happens
)

// failoverAnswer is one order's answer as the load saw it.
type failoverAnswer struct {
	instance   int
	user       int64
	status     int
	code       string // the error code; "" for 201
	orderID    string
	err        error // transport
	start, end time.Time
}

// failoverLoad orders with a fresh user per round, each user on both instances at once.
type failoverLoad struct {
	client  *http.Client
	bases   [2]string
	voucher int64
	stop    chan struct{}
	done    sync.WaitGroup
	users   atomic.Int64
	mu      sync.Mutex
	answers []failoverAnswer
}

func startFailoverLoad(bases [2]string, voucher int64) *failoverLoad {
	l := &failoverLoad{client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * failoverWorkers}},
		bases: bases, voucher: voucher, stop: make(chan struct{})}
	l.users.Store(time.Now().UnixNano() / 1000) // user ids no other run uses: lock keys never meet
	hardStop := time.Now().Add(failoverMaxRun)
	for range failoverWorkers {
		l.done.Go(func() {
			for time.Now().Before(hardStop) {
				select {
				case <-l.stop:
					return
				default:
				}
				user := l.users.Add(1)
				var wg sync.WaitGroup
				for i := range l.bases {
					wg.Go(func() { l.record(l.post(i, user)) })
				}
				wg.Wait()
			}
		})
	}
	return l
}

func (l *failoverLoad) post(instance int, user int64) failoverAnswer {
	a := failoverAnswer{instance: instance, user: user, start: time.Now()}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/vouchers/%d/orders", l.bases[instance], l.voucher), nil)
	req.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
	resp, err := l.client.Do(req)
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.status = resp.StatusCode
	var body struct {
		OrderID string `json:"orderId"`
		Error   struct{ Code string }
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		a.code = "not JSON: " + string(b)
	}
	a.orderID, a.code = body.OrderID, a.code+body.Error.Code
	return a
}

// record keeps a, which ends now.
func (l *failoverLoad) record(a failoverAnswer) {
	a.end = time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, a)
}

// created counts the 201s of instance (-1: either) to orders that started after since.
func (l *failoverLoad) created(instance int, since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.answers {
		if a.status == http.StatusCreated && (instance < 0 || a.instance == instance) && a.start.After(since) {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or within has passed.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readyz reports an instance's /readyz status and its redis check.
func readyz(base string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var body struct{ Checks map[string]string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Checks["redis"]
}

// TestSentinelFailoverUnderLoad kills the Redis primary (SIGKILL) under a storm through two
// `seckill serve` instances configured with SECKILL_REDIS_SENTINEL. While Sentinel fails
// over, the orders are answered 503 (never a 500, never an order without a lock) and /readyz
// reports Redis; after +switch-master both instances order again on the promoted replica
// within the bound, and the books balance.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	rs := testenv.StartSentinel(t)
	dsn := testenv.MySQLDSN(t)
	env := map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_REDIS_SENTINEL": rs.Setting()}
	require.NoError(t, run(context.Background(), []string{"seckill", "migrate"}, func(k string) string { return env[k] }, io.Discard, io.Discard))
	env = withEnv(env, "SECKILL_LOCK", "redis")
	a, b := startServe(t, env), startServe(t, env)
	bases := [2]string{a.base, b.base}
	vid := mustCreateVoucher(t, a.base, failoverStock)
	switched := rs.WatchSwitch()

	load := startFailoverLoad(bases, vid)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(load.stop)
			load.done.Wait()
		}
	}
	t.Cleanup(stop)
	waitFor(t, 20*time.Second, "orders before the kill", func() bool { return load.created(-1, time.Time{}) >= failoverBefore })

	// /readyz of instance a, sampled from the kill until both instances order again.
	type sample struct {
		status int
		redis  string
	}
	var samples []sample
	sampling, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			st, redisCheck := readyz(a.base)
			samples = append(samples, sample{st, redisCheck})
			select {
			case <-sampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	killAt := time.Now()
	rs.Primary.Kill()
	var sw testenv.Switch
	select {
	case sw = <-switched:
	case <-time.After(failoverBound):
		close(sampling)
		t.Fatalf("no +switch-master within %s of the primary's kill (logs in %s)", failoverBound, rs.Dir())
	}
	assert.Equal(t, rs.Replica.Addr, sw.Addr, "the replica is promoted")
	for i := range bases {
		waitFor(t, failoverBound, fmt.Sprintf("instance %d orders again after the switch", i),
			func() bool { return load.created(i, sw.At) >= failoverAfter })
	}
	close(sampling)
	<-sampled
	stop()
	for _, base := range bases {
		waitFor(t, 5*time.Second, base+" /readyz 200 after the failover", func() bool { st, _ := readyz(base); return st == http.StatusOK })
	}

	// Every answer is one the service may give; the 503s fall within the bound.
	codes := map[string]int{}
	var firstCreated [2]time.Time
	var last503 time.Time
	var answered []verdict.Answered
	for _, x := range load.answers {
		key := strings.TrimSpace(strconv.Itoa(x.status) + " " + x.code)
		codes[key]++
		switch {
		case x.err != nil:
			t.Errorf("transport error: %v", x.err)
		case x.status == http.StatusCreated:
			answered = append(answered, verdict.Answered{ID: x.orderID, User: x.user, Voucher: vid})
			if x.start.After(killAt) && (firstCreated[x.instance].IsZero() || x.end.Before(firstCreated[x.instance])) {
				firstCreated[x.instance] = x.end
			}
		case x.status == http.StatusServiceUnavailable && (x.code == "unavailable" || x.code == "overloaded"):
			if x.end.After(last503) {
				last503 = x.end
			}
		case x.status == http.StatusConflict && (x.code == "order_in_progress" || x.code == "already_ordered"):
		default:
			t.Errorf("an answer the service must not give: %d %q", x.status, x.code)
		}
	}
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	summary := ""
	for _, k := range keys {
		summary += fmt.Sprintf(" [%s]=%d", k, codes[k])
	}
	require.False(t, last503.IsZero(), "no 503 at all: the kill was not felt (answers:%s)", summary)
	recovered := firstCreated[0]
	if firstCreated[1].After(recovered) {
		recovered = firstCreated[1]
	}
	t.Logf("failover: +switch-master %s after the SIGKILL; first order created on the promoted replica %s after it "+
		"(instance a %s, b %s); last 503 answered %s after it; answers:%s",
		sw.At.Sub(killAt).Round(time.Millisecond), recovered.Sub(killAt).Round(time.Millisecond),
		firstCreated[0].Sub(killAt).Round(time.Millisecond), firstCreated[1].Sub(killAt).Round(time.Millisecond),
		last503.Sub(killAt).Round(time.Millisecond), summary)
	assert.LessOrEqual(t, recovered.Sub(killAt), failoverBound, "both instances order again within the bound")
	assert.LessOrEqual(t, last503.Sub(killAt), failoverBound, "503s end within the bound")

	// /readyz said so while Redis was away.
	sawDown := false
	for _, s := range samples {
		if s.status == http.StatusServiceUnavailable && s.redis != "" && s.redis != "ok" {
			sawDown = true
		}
	}
	assert.True(t, sawDown, "/readyz reported redis failing during the failover: %v", samples)

	// The books balance: the same verdict as the load test's.
	ctx := context.Background()
	db, err := database.OpenMySQL(ctx, dsn, database.Pool{MaxOpen: 2})
	require.NoError(t, err)
	defer db.Close()
	f := verdict.Facts{Client: "the test", Instances: 2, Counts: order.Counts{Orders: map[string]float64{}}}
	for _, base := range bases {
		c := counts(t, base)
		for k, v := range c.Orders {
			f.Counts.Orders[k] += v
		}
		f.Counts.LockLost += c.LockLost
	}
	require.NoError(t, verdict.ReadDB(ctx, db, []verdict.Voucher{{Scenario: "failover", ID: vid, Stock: failoverStock}}, answered, &f))
	checks := verdict.Evaluate(f)
	ok, msg := verdict.Judge(checks, false)
	assert.True(t, ok, "%s\n%+v", msg, checks)
}
