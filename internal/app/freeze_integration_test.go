//go:build integration

package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// The bounds a frozen store is held to: every order is answered 503 within freezeBound, and
// once the store resumes an order succeeds within recoveryBound.
const (
	freezeBound   = 3 * time.Second
	recoveryBound = time.Second
	freezeOrders  = 64 // fired at once, four times the instance's admission bound
	freezeInfl    = 16
	// killPool is the instance's Redis pool in TestKilledRedis, small so that a few orders open
	// go-redis's dial breaker.
	killPool = 16
	// breakerProbe is how often go-redis tries a dead server's address again once its dial
	// breaker is open (internal/pool's tryDial).
	breakerProbe = time.Second
	// killedDeadline is the order deadline in TestKilledRedis, long enough that an answer
	// waiting for it is told apart from one that does not.
	killedDeadline = 5 * time.Second
)

// TestFrozenRedis: a Redis that hangs (SIGSTOP) is answered with 503 within the bound, with
// goroutines bounded, and orders succeed again within a second of it resuming.
func TestFrozenRedis(t *testing.T) {
	rs := testenv.StartRedisServer(t)
	st := realStores(t, testenv.MySQLDSN(t), rs.Addr)
	testFreeze(t, st, rs.Freeze, rs.Thaw)
}

// TestFrozenMariaDB: the same with the database frozen, a MariaDB of the test's own.
func TestFrozenMariaDB(t *testing.T) {
	db := testenv.StartMariaDB(t)
	st := realStores(t, db.CreateDatabase("seckill_freeze"), testenv.Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379"))
	testFreeze(t, st, db.Freeze, db.Thaw)
}

// TestFrozenMariaDBVouchers: with the database frozen, reading and creating a voucher are
// answered 503 unavailable within the bound, by the order deadline (SECKILL_ORDER_TIMEOUT),
// not after the DSN's read timeout (database.DefaultReadTimeout, 5 s) or several of them.
func TestFrozenMariaDBVouchers(t *testing.T) {
	db := testenv.StartMariaDB(t)
	st := realStores(t, db.CreateDatabase("seckill_freeze"), testenv.Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379"))
	inst, err := app.New(context.Background(), discard, app.Config{AdminToken: "s", Lock: "redis",
		Order: order.Config{Timeout: time.Second}}, st)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	vid := newVoucher(t, inst, 10)
	get := func() *http.Request {
		return httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/vouchers/%d", vid), nil)
	}
	require.Equal(t, http.StatusOK, serveTimed(inst.Handler, get()).status, "a read before the freeze")

	db.Freeze()
	t.Cleanup(db.Thaw)
	now := time.Now().UTC()
	body := fmt.Sprintf(`{"title":"t","stock":1,"beginTime":%q,"endTime":%q}`, now.Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	create := httptest.NewRequest(http.MethodPost, "/api/vouchers", strings.NewReader(body))
	create.Header.Set("Authorization", "Bearer s")
	create.Header.Set("Content-Type", "application/json")
	for _, r := range []*http.Request{get(), create} {
		a := serveTimed(inst.Handler, r)
		assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s %s while the database is frozen: %+v", r.Method, r.URL.Path, a)
		assert.Equal(t, "unavailable", a.code, "%s %s", r.Method, r.URL.Path)
		assert.LessOrEqual(t, a.took, freezeBound, "%s %s answered within the bound", r.Method, r.URL.Path)
		t.Logf("frozen: %s %s answered %d %s in %s", r.Method, r.URL.Path, a.status, a.code, a.took.Round(time.Millisecond))
	}
}

func testFreeze(t *testing.T, st *app.Stores, freeze, thaw func()) {
	ctx := context.Background()
	inst, err := app.New(ctx, discard, app.Config{Lock: "redis", DBPool: database.Pool{MaxOpen: freezeInfl / app.InflightPerConn},
		Order: order.Config{MaxInflight: freezeInfl}}, st)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	vid, users := newVoucher(t, inst, 1000), randomUsers()
	require.Equal(t, http.StatusCreated, placeOrder(inst.Handler, vid, users).status, "an order before the freeze")
	base := runtime.NumGoroutine()

	freeze()
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			thaw()
		}
	})
	frozenBurst(t, base, func(i int) answer { return placeOrder(inst.Handler, vid, users+1+int64(i)) })

	thaw()
	thawed = true
	resumed := time.Now()
	last, _ := orderAgain(inst.Handler, vid, users+freezeOrders+1, resumed, recoveryBound)
	require.Equal(t, http.StatusCreated, last.status, "no order succeeded within %s of the store resuming: last %+v", recoveryBound, last)
	t.Logf("resumed: first order created %s after the store resumed", time.Since(resumed).Round(time.Millisecond))
	c, err := order.ReadCounts(inst.Registry)
	require.NoError(t, err)
	assert.Zero(t, c.LockLost, "no lock lapsed under its order")
}

// orderAgain places orders of new users, from user on, until one is answered 2xx or bound has
// passed since back, the moment the store was back: the first order after a store returns. It
// returns the last answer and the user who placed it.
func orderAgain(h http.Handler, vid, user int64, back time.Time, bound time.Duration) (answer, int64) {
	var last answer
	for ; time.Since(back) < bound; user++ {
		if last = placeOrder(h, vid, user); last.status < 300 {
			return last, user
		}
	}
	return last, user
}

// frozenBurst fires freezeOrders orders at once (place(i) each) at an instance whose store is
// frozen, and checks their answers: every one 503 within freezeBound, those beyond the
// instance's bound (freezeInfl) refused overloaded at once, and goroutines bounded by that bound,
// not by the orders fired (base: the goroutines before). It returns the answers' codes.
func frozenBurst(t *testing.T, base int, place func(i int) answer) map[string]int {
	t.Helper()
	answers := make([]answer, freezeOrders)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), int64(runtime.NumGoroutine())))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			<-start
			answers[i] = place(i)
		})
	}
	close(start)
	wg.Wait()
	close(stop)
	<-sampled

	codes := map[string]int{}
	var slowest time.Duration
	for _, a := range answers {
		assert.Equal(t, http.StatusServiceUnavailable, a.status, "an order while the store is frozen: %+v", a)
		assert.LessOrEqual(t, a.took, freezeBound, "answered within the bound: %+v", a)
		codes[a.code]++
		slowest = max(slowest, a.took)
	}
	assert.Equal(t, freezeOrders-freezeInfl, codes["overloaded"], "beyond the admission bound, refused at once: %v", codes)
	// The test's own goroutines (one per order and the sampler) plus what the instance
	// holds per admitted order (a transaction's watcher, a driver's cancel watcher, a dial):
	// bounded by the admission bound, not by the orders fired.
	extra := peak.Load() - int64(base) - freezeOrders - 1
	assert.LessOrEqual(t, extra, int64(4*freezeInfl), "goroutines beyond the orders' own at the peak")
	t.Logf("frozen: %d orders answered %v, slowest %s; goroutines: %d before, peak %d (%d beyond the orders' own)",
		freezeOrders, codes, slowest.Round(time.Millisecond), base, peak.Load(), extra)
	return codes
}

// TestFrozenRedisAsync: in the asynchronous mode Redis is where an order is admitted, so a
// Redis that hangs (SIGSTOP) mid-sale must be answered 503 within the bound as in the
// synchronous mode: the admissions beyond the instance's bound refused at once, the others
// unavailable by their deadline and the call that settles them, goroutines bounded. And 503
// means nothing was admitted: the calls given up on wait in Redis's socket and run when it
// resumes, as do the settling calls, which could not void their ids in time; the script
// refuses an order whose deadline has passed on Redis's clock, so none of them admits. (Before,
// every one of the 16 ran and admitted its order, answered 503.) A retry of each is a new
// order; once Redis resumes, an admission succeeds within a second, every order is written
// once, and the books balance.
func TestFrozenRedisAsync(t *testing.T) {
	ctx := context.Background()
	rs := testenv.StartRedisServer(t)
	st := realStores(t, testenv.MySQLDSN(t), rs.Addr)
	inst, err := app.New(ctx, discard, app.Config{OrderMode: app.ModeAsync, Lock: "redis",
		Async: async.Config{MaxInflight: freezeInfl}}, st)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	vid, users := newVoucher(t, inst, 1000), randomUsers()
	orders := map[int64]int64{} // user → the order id of its 202
	first := placeOrder(inst.Handler, vid, users)
	require.Equal(t, http.StatusAccepted, first.status, "an order before the freeze (the voucher loaded): %+v", first)
	orders[users] = first.orderID
	base := runtime.NumGoroutine()

	rs.Freeze()
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			rs.Thaw()
		}
	})
	codes := frozenBurst(t, base, func(i int) answer { return placeOrder(inst.Handler, vid, users+1+int64(i)) })
	assert.Equal(t, freezeInfl, codes["unavailable"], "within the bound, unavailable by the deadline: %v", codes)

	rs.Thaw()
	thawed = true
	resumed := time.Now()
	last, user := orderAgain(inst.Handler, vid, users+freezeOrders+1, resumed, recoveryBound)
	require.Equal(t, http.StatusAccepted, last.status, "no admission within %s of Redis resuming: last %+v", recoveryBound, last)
	orders[user] = last.orderID
	t.Logf("resumed: first admission %s after Redis resumed", time.Since(resumed).Round(time.Millisecond))

	// Every user answered 503 holds no order: its retry is admitted, a new order.
	for i := range freezeOrders {
		u := users + 1 + int64(i)
		again := placeOrder(inst.Handler, vid, u)
		require.Equal(t, http.StatusAccepted, again.status, "user %d, answered 503 during the freeze, retries: %+v", u, again)
		require.NotZero(t, again.orderID, "user %d's retry names its order: %+v", u, again)
		orders[u] = again.orderID
	}

	var b async.Book
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err = async.Reconcile(ctx, inst.Redis, inst.Async.Store, vid)
		require.NoError(t, err)
		backlog, err := inst.Async.Statuses.Backlog(ctx, vid)
		require.NoError(t, err)
		if b.Pending == 0 && backlog == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not drained: %+v", b)
		time.Sleep(20 * time.Millisecond)
	}
	assert.Zero(t, b.Drift(), "books %+v", b)
	var rows []struct{ ID, UserID int64 }
	require.NoError(t, inst.DB.Raw("SELECT id, user_id FROM voucher_orders WHERE voucher_id = ?", vid).Scan(&rows).Error)
	got := map[int64]int64{}
	for _, r := range rows {
		_, twice := got[r.UserID]
		assert.False(t, twice, "user %d has one order", r.UserID)
		got[r.UserID] = r.ID
	}
	assert.Equal(t, orders, got, "every order a client was told of is its one row, and no other row")
}

// TestKilledRedis: with Redis gone (killed: its port refuses connections) an order is answered
// 503 unavailable without waiting for its deadline, in both modes: a refused connection proves
// that no Redis holds the call to run it later, so there is nothing to wait out
// (TestFrozenRedisAsync waits out a hung one). Twice the pool's size of orders arrive at once,
// as under a sale's load. The asynchronous mode dials once a call (redisDials): every admission
// is answered within a few refusedBounds (with go-redis's five dials the pool's connections were held
// by slow dials, the settling calls timed out waiting for one, and the answers waited for the
// deadline). The synchronous mode dials five times, 100 ms apart, behind nginx's order gate in
// a deployment: its answers take up to a few of those 0.4 s. Then go-redis's dial breaker is
// open (as many dials failed as the pool has connections): it fails every dial at once and
// probes the address once a second, and when Redis comes back, started again empty, an order
// succeeds within the bound of a store that resumes and that probe.
func TestKilledRedis(t *testing.T) {
	for _, tt := range []struct {
		mode  string
		bound time.Duration // on each answer while Redis is dead
	}{
		{app.ModeSync, killedDeadline / 2},
		{app.ModeAsync, 3 * refusedBound}, // the slowest of 32 on a loaded machine; five dials waited for the deadline
	} {
		t.Run(tt.mode, func(t *testing.T) {
			ctx := context.Background()
			rs := testenv.StartRedisServer(t)
			st := realStores(t, testenv.MySQLDSN(t), rs.Addr)
			inst, err := app.New(ctx, discard, app.Config{OrderMode: tt.mode, Lock: "redis", RedisPool: killPool,
				Order: order.Config{Timeout: killedDeadline, LockTTL: 2 * killedDeadline}}, st)
			require.NoError(t, err)
			t.Cleanup(func() { _ = inst.Close() })
			vid, users := newVoucher(t, inst, 1000), randomUsers()
			require.Less(t, placeOrder(inst.Handler, vid, users).status, 300, "an order before the kill")

			rs.Kill()
			answers := make([]answer, 2*killPool)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() { answers[i] = placeOrder(inst.Handler, vid, users+1+int64(i)) })
			}
			wg.Wait()
			var slowest time.Duration
			for _, a := range answers {
				assert.Equal(t, http.StatusServiceUnavailable, a.status, "%+v", a)
				assert.Equal(t, "unavailable", a.code, "%+v", a)
				assert.Less(t, a.took, tt.bound, "%+v", a)
				slowest = max(slowest, a.took)
			}
			t.Logf("%d orders at once after the kill: the slowest answered in %s", len(answers), slowest.Round(time.Millisecond))
			user := users + 1 + int64(len(answers))

			// Once as many dials have failed as the pool has connections, go-redis fails every
			// dial at once and probes the server once a second in the background until a dial
			// succeeds: the first order after Redis is back may wait for that probe.
			rs.Restart()
			back := time.Now()
			last, _ := orderAgain(inst.Handler, vid, user, back, recoveryBound+breakerProbe)
			require.Less(t, last.status, 300, "no order within %s of Redis answering again: last %+v", recoveryBound+breakerProbe, last)
			t.Logf("Redis back: first order %s after it answered", time.Since(back).Round(time.Millisecond))
		})
	}
}
