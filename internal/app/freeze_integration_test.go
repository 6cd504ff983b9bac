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
			answers[i] = placeOrder(inst.Handler, vid, users+1+int64(i))
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

	thaw()
	thawed = true
	resumed := time.Now()
	user := users + freezeOrders + 1
	var last answer
	for time.Since(resumed) < recoveryBound {
		if last = placeOrder(inst.Handler, vid, user); last.status == http.StatusCreated {
			break
		}
		user++
	}
	require.Equal(t, http.StatusCreated, last.status, "no order succeeded within %s of the store resuming: last %+v", recoveryBound, last)
	t.Logf("resumed: first order created %s after the store resumed", time.Since(resumed).Round(time.Millisecond))
	c, err := order.ReadCounts(inst.Registry)
	require.NoError(t, err)
	assert.Zero(t, c.LockLost, "no lock lapsed under its order")
}
