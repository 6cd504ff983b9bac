package async_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
)

// frozenClock is a Config.Now that moves only when advanced: a back-off is then exact.
type frozenClock struct{ at atomic.Int64 }

func (c *frozenClock) now() time.Time          { return time.Unix(0, c.at.Load()) }
func (c *frozenClock) advance(d time.Duration) { c.at.Add(int64(d)) }

// withFrozenClock runs body on each pair of stores with a fixture whose Config.Now is a frozen
// clock, set a minute before the test starts: a sale that ended an hour before a moment of the
// test (strandedVoucher's), its times rounded by the database, is within the retention until
// the test moves the clock on.
func withFrozenClock(t *testing.T, body func(t *testing.T, f *fixture, c *frozenClock)) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			c := &frozenClock{}
			c.at.Store(time.Now().Add(-time.Minute).UnixNano())
			body(t, newFixture(t, s, async.Config{Now: c.now}), c)
		})
	}
}

// failsEveryLoad fails every call of the load script of the voucher whose users hash is users,
// as a Redis or a script that keeps failing would: the voucher stays stranded.
type failsEveryLoad struct {
	hookBase
	users string
}

func (h *failsEveryLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if (cmd.Name() != "evalsha" && cmd.Name() != "eval") || len(args) < 5 || args[4] != h.users {
			return next(ctx, cmd)
		}
		cmd.SetErr(errInjected)
		return errInjected
	}
}

// reloads is a writer whose discovery loads the stranded vouchers with loader, with what its
// hooks saw: the loads started, and each load's result once it ended.
type reloads struct {
	w       *async.Writer
	m       *async.Metrics
	started atomic.Int64
	done    chan string
}

func (f *fixture) reloadingWriter(loader *async.Loader) *reloads {
	f.t.Helper()
	r := &reloads{m: async.NewMetrics(prometheus.NewRegistry()), done: make(chan string, 16)}
	r.w = async.NewWriter(f.rdb, f.store, loader, r.m, quiet, f.cfg)
	async.SetReloadHooks(r.w, func(int64) { r.started.Add(1) }, func(_ int64, result string) { r.done <- result })
	f.t.Cleanup(func() { stopped(f.t, r.w) })
	return r
}

// discovered runs one discovery and returns the result of the load it started, failing the
// test when it started none.
func (r *reloads) discovered(t *testing.T) string {
	t.Helper()
	before := r.started.Load()
	async.Discover(r.w)
	require.Equal(t, before+1, r.started.Load(), "the discovery started a load of the stranded voucher")
	select {
	case res := <-r.done:
		return res
	case <-time.After(eventuallyBound):
		t.Fatalf("the load did not end within %s", eventuallyBound)
		return ""
	}
}

// TestDiscoveryLoadsStrandedVoucher: a load that failed after it registered a voucher whose
// sale is over left it without a sale hash, and no order comes to load it again. Discovery
// counted it (MetricStranded) and nothing loaded it until an instance started, so it was never
// retired; it now loads it, through the loader the admissions share, and the voucher is then
// retired as any other (the frozen clock keeps it within the retention until then).
func TestDiscoveryLoadsStrandedVoucher(t *testing.T) {
	t.Parallel()
	withFrozenClock(t, func(t *testing.T, f *fixture, c *frozenClock) {
		ctx := context.Background()
		vid := f.strandedVoucher()
		sale, _, _, _, _ := async.KeysOf(vid)
		r := f.reloadingWriter(f.loader)

		assert.Equal(t, async.StrandedLoaded, r.discovered(t))
		require.Equal(t, int64(1), f.rdb.Exists(ctx, sale).Val(), "discovery loaded the stranded voucher")
		assert.Equal(t, 1.0, r.m.StrandedLoads(async.StrandedLoaded))
		before := r.started.Load()
		async.Discover(r.w)
		assert.Equal(t, before, r.started.Load(), "a loaded voucher is not loaded again")
		assert.Zero(t, r.m.Stranded(), "no longer stranded")

		c.advance(pastRetention)
		retired, err := async.Retire(ctx, f.idleWriter(), vid)
		require.NoError(t, err)
		assert.True(t, retired, "retired once loaded")
	})
}

// TestStrandedLoadBacksOff: a stranded voucher whose loads keep failing is not loaded again at
// every discovery: the pause after a failure is the discovery interval, doubled after each
// failure up to a minute. A load that then succeeds ends the back-off.
func TestStrandedLoadBacksOff(t *testing.T) {
	t.Parallel()
	withFrozenClock(t, func(t *testing.T, f *fixture, c *frozenClock) {
		ctx := context.Background()
		vid := f.strandedVoucher()
		sale, users, _, _, _ := async.KeysOf(vid)
		r := f.reloadingWriter(async.NewLoader(f.hookedClient(&failsEveryLoad{users: users}), f.store, quiet))

		require.Equal(t, async.StrandedFailed, r.discovered(t), "the first discovery loads at once")
		for _, pause := range []time.Duration{1, 2, 4, 8, 16, 32, 60, 60} {
			pause *= time.Second
			c.advance(pause - time.Millisecond)
			n := r.started.Load()
			async.Discover(r.w)
			require.Equal(t, n, r.started.Load(), "no load before the pause of %s is over", pause)
			c.advance(time.Millisecond)
			require.Equal(t, async.StrandedFailed, r.discovered(t), "loaded again once the pause of %s is over", pause)
		}
		assert.Equal(t, 9.0, r.m.StrandedLoads(async.StrandedFailed))
		assert.True(t, f.registered(vid), "a voucher that exists stays registered")

		require.NoError(t, f.loader.Load(ctx, vid), "loaded by an order meanwhile")
		require.Equal(t, int64(1), f.rdb.Exists(ctx, sale).Val())
		c.advance(time.Minute)
		n := r.started.Load()
		async.Discover(r.w)
		assert.Equal(t, n, r.started.Load(), "a voucher no longer stranded is not loaded")
		assert.Zero(t, r.m.Stranded())
	})
}

// deleteVoucher deletes voucherID from the database, as an operator would.
func (f *fixture) deleteVoucher(voucherID int64) {
	f.t.Helper()
	require.NoError(f.t, f.db.Exec("DELETE FROM seckill_vouchers WHERE voucher_id = ?", voucherID).Error)
	require.NoError(f.t, f.db.Exec("DELETE FROM vouchers WHERE id = ?", voucherID).Error)
}

// TestStrandedVoucherNotInDatabaseRemoved: a stranded voucher the database no longer has can
// never be loaded, and stayed registered for ever, every lookup asking its orders hash. It has
// no order anywhere (none in the database, none in Redis), so discovery deletes its keys and
// takes it out of the registry, rather than loading it again and again.
func TestStrandedVoucherNotInDatabaseRemoved(t *testing.T) {
	t.Parallel()
	withFrozenClock(t, func(t *testing.T, f *fixture, c *frozenClock) {
		ctx := context.Background()
		vid := f.strandedVoucher()
		f.deleteVoucher(vid)
		r := f.reloadingWriter(f.loader)

		require.Equal(t, async.StrandedRemoved, r.discovered(t))
		assert.False(t, f.registered(vid), "out of the registry")
		assert.Zero(t, f.rdb.Exists(ctx, async.AllKeysOf(vid)...).Val(), "no key of the voucher left")
		ms, err := f.rdb.SMembers(ctx, async.LeavingKey).Result()
		require.NoError(t, err)
		assert.Empty(t, ms, "settled: not among the vouchers leaving the registry")
		assert.Equal(t, 1.0, r.m.StrandedLoads(async.StrandedRemoved))
		n := r.started.Load()
		c.advance(time.Minute)
		async.Discover(r.w)
		assert.Equal(t, n, r.started.Load(), "not loaded again")
		assert.Zero(t, r.m.Stranded())
	})
}

// TestStrandedVoucherNotInDatabaseKeepsOrders: a stranded voucher the database does not have
// whose orders hash still holds an order's status (a failed order, its dead letter not yet
// copied to the database) stays registered: a lookup of that order must find it, never answer
// 404. Its load is tried again after the back-off.
func TestStrandedVoucherNotInDatabaseKeepsOrders(t *testing.T) {
	t.Parallel()
	withFrozenClock(t, func(t *testing.T, f *fixture, c *frozenClock) {
		ctx := context.Background()
		vid := f.strandedVoucher()
		_, _, orders, _, _ := async.KeysOf(vid)
		const orderID = 987654321
		require.NoError(t, f.rdb.HSet(ctx, orders, orderID, "failed|7|1700000000000|refused").Err())
		f.deleteVoucher(vid)
		r := f.reloadingWriter(f.loader)

		require.Equal(t, async.StrandedFailed, r.discovered(t))
		assert.True(t, f.registered(vid), "kept registered")
		o, ok, err := f.statuses.Lookup(ctx, orderID)
		require.NoError(t, err)
		require.True(t, ok, "the failed order is still found")
		assert.True(t, o.Failed)
		n := r.started.Load()
		async.Discover(r.w)
		assert.Equal(t, n, r.started.Load(), "not loaded again before its pause")
		c.advance(time.Second)
		assert.Equal(t, async.StrandedFailed, r.discovered(t), "loaded again after its pause")
	})
}
