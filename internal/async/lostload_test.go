package async_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// TestRedisLostDuringALoad: Redis restarts empty (or loses the voucher's keys) while a load
// runs, after the loader read the stream and before it created the sale hash. The load
// counted the orders it had read there as pending and created the sale hash with the
// database's stock less them, and mapped their users to them: but those orders were lost with
// the stream and no writer writes them. Their units were never sold again (the books drifted
// by one per order, an under-sale), and their users were refused already_ordered with an
// order that answers 404. The load now finds that Redis lost what it read, creates nothing,
// and the next load starts from what Redis holds.
func TestRedisLostDuringALoad(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(3)
			lost := f.place(vid, 1, 2) // pending: no writer runs
			sale, _, _, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale).Err(), "the sale hash deleted: the next admission reloads it")

			async.SetAfterBooks(f.loader, func(int64) {
				// Redis restarts empty: the voucher's keys and the registry are gone.
				require.NoError(t, f.rdb.Del(ctx, append(async.AllKeysOf(vid), async.RegistryKey)...).Err())
			})
			require.ErrorIs(t, f.loader.Load(ctx, vid), async.ErrLoadLost)
			async.SetAfterBooks(f.loader, nil)
			require.NoError(t, f.loader.Load(ctx, vid), "the next load, from what Redis holds")

			b := f.book(vid)
			assert.Equal(t, int64(3), b.RedisStock, "every unit for sale: the lost orders took none the database counts")
			assert.Zero(t, b.Drift(), "books %+v", b)
			for id, u := range lost {
				o, ok, err := f.statuses.OrderOf(ctx, u, vid)
				require.NoError(t, err)
				assert.False(t, ok, "user %d holds no order: %d was lost (it holds %d)", u, id, o)
			}
			admitted := f.place(vid, 1, 3)
			f.writer("w", nil)
			f.eventually("the orders since written", func() bool { return len(f.rows(vid)) == 3 })
			f.judge(vid, 3, admitted)
		})
	}
}

// atLoadScript is a go-redis hook that fails the first async_load.lua call its client sends,
// before Redis receives it: a load that dies at its last step.
type atLoadScript struct {
	hookBase
	users string // the voucher's users hash: the script's second key
	done  bool
}

func (h *atLoadScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if h.done || (cmd.Name() != "evalsha" && cmd.Name() != "eval") || len(args) < 5 || args[4] != h.users {
			return next(ctx, cmd)
		}
		h.done = true
		cmd.SetErr(errInjected)
		return errInjected
	}
}

// TestLoadThatDiesAtItsLastStep: a load registers the voucher and then fails to create its
// sale hash (its script's call fails). The voucher is left registered without a sale hash, and
// the orders hash keeps the load's token (its field 'load'). Neither harms: a writer still
// writes the orders pending in the stream (a unit it dead-letters goes back to no sale hash,
// and the load counts it), an admission finds no sale hash and loads the voucher again, and
// that load completes it from the books as they are then, reusing the token, which no creation
// has invalidated since, and deleting it. Nothing is sold twice. Nothing reads the field but
// the loads: a lookup asks the orders hash for an order id, and a retirement deletes the hash.
func TestLoadThatDiesAtItsLastStep(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(3)
			admitted := f.place(vid, 1, 2) // pending: no writer runs yet
			sale, users, orders, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale).Err(), "the sale hash deleted: the next admission reloads it")

			dies := async.NewLoader(f.hookedClient(&atLoadScript{users: users}), f.store, quiet)
			require.ErrorIs(t, dies.Load(ctx, vid), errInjected)
			require.True(t, f.registered(vid), "registered before the creation")
			require.Zero(t, f.rdb.Exists(ctx, sale).Val(), "no sale hash")
			require.True(t, f.rdb.HExists(ctx, orders, "load").Val(), "the load's token left")

			f.writer("w", nil)
			f.eventually("the pending orders written without a sale hash", func() bool { return len(f.rows(vid)) == 2 && f.backlog(vid) == 0 })
			for id, u := range f.place(vid, 3, 3) {
				admitted[id] = u
			}
			assert.False(t, f.rdb.HExists(ctx, orders, "load").Val(), "the creation deleted the token")
			_, err := f.svc.Place(ctx, 4, vid)
			require.ErrorIs(t, err, order.ErrSoldOut, "the units of the orders written are not sold again")
			f.eventually("the order since written", func() bool { return len(f.rows(vid)) == 3 })
			f.judge(vid, 3, admitted)
		})
	}
}

// strandedVoucher is a voucher whose sale ended an hour ago, registered without a sale hash by
// a load that failed at its last step.
func (f *fixture) strandedVoucher() int64 {
	f.t.Helper()
	vid := f.voucherAt(3, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	_, users, _, _, _ := async.KeysOf(vid)
	dies := async.NewLoader(f.hookedClient(&atLoadScript{users: users}), f.store, quiet)
	require.ErrorIs(f.t, dies.Load(context.Background(), vid), errInjected)
	require.True(f.t, f.registered(vid), "registered without a sale hash")
	return vid
}

// TestStrandedVoucherLoadedAtStart: a load that died at its last step left its voucher
// registered without a sale hash, and no order came after it (its sale ended). No admission
// loads it again, and an instance's start loaded only the vouchers on sale: each writer kept a
// loop reading its stream for ever (a sale without a sale hash never reads as finished), and
// it was never retired (a retirement needs the sale hash), every lookup asking its orders
// hash. The start now also loads the registered vouchers Redis holds no sale hash of; once
// loaded, an ended sale is retired as any other.
func TestStrandedVoucherLoadedAtStart(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid := f.strandedVoucher()
		sale, _, _, _, _ := async.KeysOf(vid)

		require.NoError(t, f.loader.LoadOnSale(ctx, time.Now()))
		require.Equal(t, int64(1), f.rdb.Exists(ctx, sale).Val(), "loaded at start")
		c.advance(pastRetention)
		retired, err := async.Retire(ctx, f.idleWriter(), vid)
		require.NoError(t, err)
		assert.True(t, retired, "retired once loaded")
	})
}

// TestStrandedVoucherHasNoLoop: a load that failed after it registered a voucher whose sale
// is over leaves it registered without a sale hash, which no order loads again (an instance's
// start, or a writer's discovery with a loader, TestDiscoveryLoadsStrandedVoucher, does).
// Meanwhile every writer's discovery started a loop for it, which read its empty stream for
// ever, as a voucher without a sale hash never read as finished. A discovery now starts none,
// counts the voucher in MetricStranded and logs it; once loaded, it is counted no more.
func TestStrandedVoucherHasNoLoop(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid := f.strandedVoucher()

		m := async.NewMetrics(prometheus.NewRegistry())
		w := async.NewWriter(f.rdb, f.store, nil, m, quiet, f.cfg)
		t.Cleanup(func() { stopped(t, w) })
		async.Discover(w)
		assert.False(t, async.Running(w, vid), "no loop reads the stranded voucher's empty stream")
		assert.Equal(t, 1.0, m.Stranded(), "counted stranded")

		require.NoError(t, f.loader.LoadOnSale(ctx, time.Now()))
		async.Discover(w)
		assert.Zero(t, m.Stranded(), "loaded: no longer stranded")
	})
}
