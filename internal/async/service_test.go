package async_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// TestAdmission: admitted until the stock is gone, then sold out; a user's second request
// learns the first order's id, also once sold out, and takes no unit (the duplicate check
// comes before the decrement, so the stock never goes below zero).
func TestAdmission(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(3)
			ids := map[int64]int64{}
			for user := int64(1); user <= 3; user++ {
				id, err := f.svc.Place(ctx, user, vid)
				require.NoError(t, err)
				ids[user] = id
			}
			_, err := f.svc.Place(ctx, 4, vid)
			assert.ErrorIs(t, err, order.ErrSoldOut)
			again, err := f.svc.Place(ctx, 2, vid)
			assert.ErrorIs(t, err, order.ErrAlreadyOrdered)
			assert.Equal(t, ids[2], again, "the earlier order's id")
			var ao *order.AlreadyOrderedError
			if assert.ErrorAs(t, err, &ao, "the 409 carries the order id") {
				assert.Equal(t, ids[2], ao.OrderID)
			}
			b := f.book(vid)
			assert.Equal(t, async.Book{VoucherID: vid, Loaded: true, Initial: 3, DBStock: 3, RedisStock: 0, Pending: 3}, b)

			for user, id := range ids {
				p, ok, err := f.statuses.Lookup(ctx, id)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, user, p.UserID)
				assert.Equal(t, vid, p.VoucherID)
				assert.False(t, p.Failed)
				sum, ok, err := async.OrderPending{Statuses: f.statuses}.Lookup(ctx, id)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, order.Summary{ID: id, UserID: user, VoucherID: vid, State: order.StatePending, CreatedAt: p.CreatedAt}, sum)
				got, ok, err := f.statuses.OrderOf(ctx, user, vid)
				require.NoError(t, err)
				assert.True(t, ok)
				assert.Equal(t, id, got)
			}
		})
	}
}

func TestAdmissionRefusals(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(2)
			_, err := f.svc.Place(ctx, 1, vid+100)
			assert.ErrorIs(t, err, voucher.ErrNotFound)

			// The window is read on Redis's clock, not on the instance's: instances whose clocks
			// run two hours behind and ahead refuse a sale that has not begun and one that has
			// ended, and admit to the one on sale, as an instance on time does.
			now := time.Now()
			notYet := f.voucherWindow(1, now.Add(time.Hour), now.Add(2*time.Hour))
			over := f.voucherWindow(1, now.Add(-2*time.Hour), now.Add(-time.Hour))
			for i, skew := range []time.Duration{0, -2 * time.Hour, 2 * time.Hour} {
				g := newFixture(t, s, async.Config{Now: func() time.Time { return time.Now().Add(skew) }})
				_, err = g.svc.Place(ctx, 1, notYet)
				assert.ErrorIs(t, err, order.ErrSaleNotActive, "clock %s off: a sale not begun", skew)
				_, err = g.svc.Place(ctx, 1, over)
				assert.ErrorIs(t, err, order.ErrSaleNotActive, "clock %s off: a sale ended", skew)
				if skew != 0 {
					_, err = g.svc.Place(ctx, int64(10+i), vid)
					assert.NoError(t, err, "clock %s off: the sale on", skew)
				}
			}
			for _, v := range []int64{notYet, over} {
				assert.Equal(t, int64(1), f.book(v).RedisStock, "refusals take nothing")
			}
			assert.Zero(t, f.book(vid).RedisStock, "the skewed instances took a unit each")

			empty := f.voucher(0)
			_, err = f.svc.Place(ctx, 1, empty)
			assert.ErrorIs(t, err, order.ErrSoldOut)
		})
	}
}

// TestWriteStorm: many goroutines, many users each asking several times, two writers: every
// admitted order becomes exactly one row with its id, user and voucher, and the books agree.
func TestWriteStorm(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			// A generous deadline: the embedded Redis runs each script in a fresh Lua state, one at a
			// time, and is slow under -race with hundreds of requests at once.
			f := newFixture(t, s, async.Config{Batch: 16, Timeout: 30 * time.Second})
			const stock, users, perUser = 50, 120, 3
			vid := f.voucher(stock)
			f.writer("a", nil)
			f.writer("b", nil)
			var mu sync.Mutex
			admitted := map[int64]int64{} // order id → user
			byUser := map[int64]int64{}
			var wg sync.WaitGroup
			for u := int64(1); u <= users; u++ {
				for range perUser {
					wg.Go(func() {
						id, err := f.svc.Place(context.Background(), u, vid)
						switch {
						case err == nil:
							mu.Lock()
							admitted[id] = u
							if prev, ok := byUser[u]; ok {
								t.Errorf("user %d admitted twice: %d and %d", u, prev, id)
							}
							byUser[u] = id
							mu.Unlock()
						case errors.Is(err, order.ErrAlreadyOrdered), errors.Is(err, order.ErrSoldOut):
						default:
							t.Errorf("place: %v", err)
						}
					})
				}
			}
			wg.Wait()
			// The last sender forgets its voucher once it finds its queue empty, after answering.
			f.eventually("no admission queue left behind", func() bool { return async.Queues(f.svc) == 0 })
			require.Len(t, admitted, stock)
			f.eventually("every admitted order written", func() bool { return len(f.rows(vid)) == stock })
			assert.Equal(t, admitted, f.rows(vid), "rows are exactly the admitted orders")
			// Pending reaches 0 at the commit; the acknowledgement, which takes the orders out
			// of the pending hash that Lookup reads, follows it and empties the stream.
			f.eventually("the stream drained", func() bool {
				n, err := f.statuses.Backlog(context.Background(), vid)
				return err == nil && n == 0 && f.book(vid).Pending == 0
			})
			b := f.book(vid)
			assert.Zero(t, b.Drift(), "books %+v", b)
			assert.Equal(t, int64(0), b.DBStock)
			for id := range admitted {
				_, ok, err := f.statuses.Lookup(context.Background(), id)
				require.NoError(t, err)
				assert.False(t, ok, "order %d still pending in Redis after its write", id)
			}
			_, _, _, stream, _ := async.KeysOf(vid)
			n, err := f.rdb.XLen(context.Background(), stream).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "acknowledged entries are deleted: the stream stays bounded")
		})
	}
}

// TestLargeBatchAcknowledged: a batch larger than what the acknowledgement script hands one
// command (it takes the ids in chunks) is acknowledged and forgotten whole: nothing stays in
// the stream, pending in the group or in the orders hash.
func TestLargeBatchAcknowledged(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			const n = 750 // two chunks of the ack script's 500 (1,234 took 26 s of the 20 s bound under a loaded CI run with -race)
			// One writer, nothing to claim: a claim idle above what this batch may take with
			// -race on a loaded machine (seconds), which the batch's deadline stays below.
			f := newFixture(t, s, async.Config{Batch: n, ClaimIdle: time.Minute})
			vid := f.voucher(n)
			ids := f.place(vid, 1, n) // all in the stream before a writer reads: one batch
			var batches []int
			var mu sync.Mutex
			f.writer("one", func(w *async.Writer) {
				async.SetBeforeAck(w, func(_ int64, es []async.Entry) bool {
					mu.Lock()
					batches = append(batches, len(es))
					mu.Unlock()
					return true
				})
			})
			f.eventually("every order written", func() bool { return len(f.rows(vid)) == n })
			_, _, orders, stream, _ := async.KeysOf(vid)
			ctx := context.Background()
			f.eventually("the stream emptied", func() bool {
				l, err := f.rdb.XLen(ctx, stream).Result()
				return err == nil && l == 0
			})
			mu.Lock()
			assert.Equal(t, []int{n}, batches, "one batch of every order")
			mu.Unlock()
			p, err := f.rdb.XPending(ctx, stream, async.DefaultGroup).Result()
			require.NoError(t, err)
			assert.Zero(t, p.Count, "nothing left pending in the group")
			left, err := f.rdb.HLen(ctx, orders).Result()
			require.NoError(t, err)
			assert.Zero(t, left, "no order left pending in the orders hash")
			assert.Equal(t, ids, f.rows(vid))
			assert.Zero(t, f.book(vid).Drift())
		})
	}
}

// TestRedeliveryIdempotent: a writer commits and dies before its acknowledgement; another
// writer claims the entries and finds them written: acknowledged, no second row, no second
// stock decrement.
func TestRedeliveryIdempotent(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			vid := f.voucher(5)
			var once sync.Once
			committed := make(chan []async.Entry, 1)
			crashed := f.writer("crashes-after-commit", func(w *async.Writer) {
				async.SetBeforeAck(w, func(_ int64, es []async.Entry) bool {
					once.Do(func() { committed <- es })
					return false
				})
			})
			ids := f.place(vid, 1, 3)
			var es []async.Entry
			select {
			case es = <-committed:
			case <-time.After(20 * time.Second):
				t.Fatal("the first writer committed nothing")
			}
			require.NotEmpty(t, es)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, crashed.Stop(ctx))
			f.writer("survivor", nil)
			f.eventually("the survivor drained the stream", func() bool { return f.book(vid).Pending == 0 && len(f.rows(vid)) == 3 })
			_, _, _, stream, _ := async.KeysOf(vid)
			f.eventually("the entries acknowledged and deleted", func() bool {
				n, err := f.rdb.XLen(context.Background(), stream).Result()
				return err == nil && n == 0
			})
			assert.Equal(t, ids, f.rows(vid))
			b := f.book(vid)
			assert.Equal(t, int64(2), b.DBStock, "one decrement per order")
			assert.Zero(t, b.Drift(), "books %+v", b)
		})
	}
}

// TestDeadLetter: an order the database refuses every time (its user already has another
// order row there) is dead-lettered after MaxAttempts, its unit goes back, its user may order
// again, and its status reads failed with the reason.
func TestDeadLetter(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 3})
			ctx := context.Background()
			vid := f.voucher(5)
			id := f.refusedOrder(vid, 7)
			other, err := f.svc.Place(ctx, 8, vid)
			require.NoError(t, err)
			f.writer("w", nil)
			_, _, _, _, dead := async.KeysOf(vid)
			f.eventually("dead-lettered", func() bool {
				n, err := f.rdb.XLen(ctx, dead).Result()
				return err == nil && n == 1
			})
			f.eventually("the other order written", func() bool { _, ok := f.rows(vid)[other]; return ok })
			p, ok, err := f.statuses.Lookup(ctx, id)
			require.NoError(t, err)
			require.True(t, ok)
			assert.True(t, p.Failed)
			assert.Contains(t, p.Reason, "another order")
			sum, ok, err := async.OrderPending{Statuses: f.statuses}.Lookup(ctx, id)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, order.StateFailed, sum.State)
			assert.Equal(t, p.Reason, sum.Reason)
			_, held, err := f.statuses.OrderOf(ctx, 7, vid)
			require.NoError(t, err)
			assert.False(t, held, "the failed order's user is released")
			msgs, err := f.rdb.XRange(ctx, dead, "-", "+").Result()
			require.NoError(t, err)
			assert.Equal(t, strconv.FormatInt(id, 10), msgs[0].Values["order"])
			assert.Equal(t, "returned", msgs[0].Values["unit"], "a conflict's unit is free")
			b := f.book(vid)
			assert.Equal(t, int64(4), b.RedisStock, "the failed order's unit is back")
			assert.Zero(t, b.Drift(), "books %+v", b)
		})
	}
}

// TestReload: Redis loses a voucher's keys while orders are pending (their stream kept), or
// restarts empty after they were written: the reload sells no unit twice and lets no user
// order twice.
func TestReload(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(10)
			f.place(vid, 1, 4)
			w := f.writer("w", nil)
			f.eventually("written", func() bool { return len(f.rows(vid)) == 4 })
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, w.Stop(sctx))
			f.place(vid, 5, 7) // pending: no writer runs
			sale, users, _, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale, users).Err())
			b := f.book(vid)
			require.False(t, b.Loaded)

			_, err := f.svc.Place(ctx, 6, vid) // reloads first
			assert.ErrorIs(t, err, order.ErrAlreadyOrdered, "a pending order's user")
			_, err = f.svc.Place(ctx, 2, vid)
			assert.ErrorIs(t, err, order.ErrAlreadyOrdered, "a written order's user")
			b = f.book(vid)
			assert.Equal(t, async.Book{VoucherID: vid, Loaded: true, Initial: 10, DBStock: 6, RedisStock: 3, Pending: 3, Orders: 4}, b)
			for u := int64(100); u < 110; u++ {
				_, _ = f.svc.Place(ctx, u, vid)
			}
			assert.Zero(t, f.book(vid).RedisStock)
			f.writer("w2", nil)
			f.eventually("all written", func() bool { return len(f.rows(vid)) == 10 })
			assert.Zero(t, f.book(vid).Drift())
		})
	}
}

// TestDeadLetterDuringReload: an order is dead-lettered after the loader counted it as
// pending and before it creates the sale hash. The dead letter finds no sale hash to give its
// unit back to, so the load must: otherwise the unit is never sold again (a drift of -1) and
// the failed order's user, restored by the loader, is locked out.
func TestDeadLetterDuringReload(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 1})
			ctx := context.Background()
			vid := f.voucher(5)
			require.NoError(t, f.loader.Load(ctx, vid))
			// The database refuses this order: MySQL's stock is short, which Redis does not know.
			id, err := f.svc.Place(ctx, 7, vid)
			require.NoError(t, err)
			require.NoError(t, f.db.Exec("UPDATE seckill_vouchers SET stock = 0 WHERE voucher_id = ?", vid).Error)
			sale, users, _, _, dead := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale, users).Err())

			async.SetBeforeCreate(f.loader, func(int64) {
				f.writer("w", nil)
				f.eventually("dead-lettered while the sale hash is missing", func() bool {
					n, err := f.rdb.XLen(ctx, dead).Result()
					return err == nil && n == 1
				})
			})
			require.NoError(t, f.loader.Load(ctx, vid))

			p, ok, err := f.statuses.Lookup(ctx, id)
			require.NoError(t, err)
			require.True(t, ok)
			require.True(t, p.Failed, "the order was dead-lettered")
			_, held, err := f.statuses.OrderOf(ctx, 7, vid)
			require.NoError(t, err)
			assert.False(t, held, "the failed order's user is released")
			b := f.book(vid)
			assert.Equal(t, async.Book{VoucherID: vid, Loaded: true, Initial: 0, DBStock: 0, RedisStock: 0}, b)
			assert.Zero(t, b.Drift(), "books %+v", b)
		})
	}
}

// TestCrashBeforeCommit: a consumer of the group reads entries and dies before writing them
// (it never acknowledges). Reading only new entries (">") would leave them pending forever;
// the surviving writer claims them once idle past ClaimIdle and writes them.
func TestCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(5)
			admitted := f.place(vid, 1, 4)
			_, _, _, stream, _ := async.KeysOf(vid)
			f.crashed(vid, 4)
			statuses := async.NewStatuses(f.rdb, f.store)
			backlog, err := statuses.Backlog(ctx, vid)
			require.NoError(t, err)
			assert.Equal(t, int64(4), backlog, "read but not written: still in the backlog")
			f.writer("survivor", nil)
			f.eventually("claimed and written", func() bool { return len(f.rows(vid)) == 4 })
			f.eventually("the backlog empty", func() bool {
				n, err := statuses.Backlog(ctx, vid)
				return err == nil && n == 0
			})
			assert.Equal(t, admitted, f.rows(vid))
			f.eventually("acknowledged", func() bool {
				p, err := f.rdb.XPending(ctx, stream, async.DefaultGroup).Result()
				return err == nil && p.Count == 0
			})
		})
	}
}

// TestReconcileDrift: the books catch a unit lost or sold twice.
func TestReconcileDrift(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(5)
			_, err := f.svc.Place(ctx, 1, vid)
			require.NoError(t, err)
			assert.Zero(t, f.book(vid).Drift())
			sale, _, _, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.HIncrBy(ctx, sale, "stock", 1).Err()) // a unit that would sell twice
			b, err := async.ReconcileSettled(ctx, f.rdb, f.store, vid, 3)
			require.NoError(t, err)
			assert.Equal(t, int64(1), b.Drift(), "books %+v", b)
			require.NoError(t, f.rdb.HIncrBy(ctx, sale, "stock", -2).Err()) // a unit lost
			assert.Equal(t, int64(-1), f.book(vid).Drift())
		})
	}
}

// blockingIDs hands out ids only after release is closed, and signals each caller on entered.
type blockingIDs struct {
	next    atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func (b *blockingIDs) Next(ctx context.Context) (int64, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
		return b.next.Add(1), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// TestAdmissionBound: with MaxInflight admissions in progress (held in the id generator, as a
// hung Redis would hold them), the next one is refused at once with ErrOverloaded, having
// tried nothing, and counted; once they end, admissions go through again.
func TestAdmissionBound(t *testing.T) {
	t.Parallel()
	s := stores(t)[0]
	f := newFixture(t, s, async.Config{})
	vid := f.voucher(10)
	ids := &blockingIDs{entered: make(chan struct{}, 4), release: make(chan struct{})}
	metrics := async.NewMetrics(prometheus.NewRegistry())
	svc := async.NewService(s.rdb, ids, f.loader, metrics, quiet, async.Config{MaxInflight: 2})
	ctx := context.Background()

	errs := make(chan error, 2)
	for user := int64(1); user <= 2; user++ {
		go func() {
			_, err := svc.Place(ctx, user, vid)
			errs <- err
		}()
	}
	for range 2 {
		select {
		case <-ids.entered:
		case <-time.After(5 * time.Second):
			t.Fatal("the first two admissions did not start")
		}
	}
	_, err := svc.Place(ctx, 3, vid)
	assert.ErrorIs(t, err, order.ErrOverloaded)
	assert.Empty(t, ids.entered, "the refused admission reached the id generator")
	assert.Equal(t, 1.0, metrics.Admissions(order.ResultOverloaded))

	close(ids.release)
	for range 2 {
		require.NoError(t, <-errs)
	}
	_, err = svc.Place(ctx, 3, vid)
	require.NoError(t, err, "the bound did not reopen")
	_, err = svc.Place(ctx, 4, vid)
	require.NoError(t, err)
}
