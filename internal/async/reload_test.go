package async_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/migrations"
)

// TestReloadRestoresNoStatusOfWrittenOrder: the sale hash is lost while an order waits in the
// stream; the loader reads the stream (the order pending), then the database (no row yet).
// A writer then commits and acknowledges the order (its acknowledgement drops its pending
// status) before the loader restores the statuses of the orders it counted as pending. The
// loader must not bring back "pending" for an order that is now a row: nothing would ever
// delete it again, and GET /api/orders/{id}, which asks Redis first, would answer pending
// forever for a created order.
func TestReloadRestoresNoStatusOfWrittenOrder(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, e := inFlight(t, s, 5)
			ctx, id := context.Background(), e.OrderID
			sale, _, _, stream, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale).Err()) // the sale hash lost, the stream kept

			async.SetAfterBooks(f.loader, func(int64) {
				// Between the database's read and the restore: the writer writes the order.
				w := f.writer("w", nil)
				f.eventually("written and acknowledged", func() bool {
					n, err := f.rdb.XLen(ctx, stream).Result()
					_, row := f.rows(vid)[id]
					return err == nil && n == 0 && row
				})
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, w.Stop(sctx))
			})
			require.NoError(t, f.loader.Load(ctx, vid))

			p, ok, err := f.statuses.Lookup(ctx, id)
			require.NoError(t, err)
			assert.False(t, ok, "order %d is a row but Redis reports it %+v", id, p)
			assert.Zero(t, f.book(vid).Drift())
		})
	}
}

// TestReloadRestoresPendingStatus: with the sale and orders hashes lost and the stream kept, the
// reload gives the orders still waiting in the stream their pending status back.
func TestReloadRestoresPendingStatus(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, e := inFlight(t, s, 5)
			ctx, id := context.Background(), e.OrderID
			sale, users, orders, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale, users, orders).Err())
			require.NoError(t, f.loader.Load(ctx, vid))
			p, ok, err := f.statuses.Lookup(ctx, id)
			require.NoError(t, err)
			require.True(t, ok, "the waiting order's status restored")
			assert.False(t, p.Failed)
			assert.Equal(t, int64(1), p.UserID)
			assert.Equal(t, async.Book{VoucherID: vid, Loaded: true, Initial: 5, DBStock: 5, RedisStock: 4, Pending: 1}, f.book(vid))
		})
	}
}

// inFlight admits user 1's order of a voucher with stock and returns the fixture, the
// voucher and the order as a writer's batch would hold it, read from the stream.
func inFlight(t *testing.T, s store, stock int) (*fixture, int64, async.Entry) {
	t.Helper()
	f := newFixture(t, s, async.Config{})
	ctx := context.Background()
	vid := f.voucher(stock)
	id, err := f.svc.Place(ctx, 1, vid)
	require.NoError(t, err)
	_, _, _, stream, _ := async.KeysOf(vid)
	msgs, err := f.rdb.XRange(ctx, stream, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	return f, vid, async.Entry{StreamID: msgs[0].ID, OrderID: id, UserID: 1, VoucherID: vid, At: time.Now().UTC().Truncate(time.Millisecond)}
}

// heldCheck is the check a writer's batches of vid run before they commit. The writer is
// never started: the tests write their batches by hand, and a running writer could write
// the order first.
func heldCheck(f *fixture, vid int64) async.Held {
	cfg := f.cfg
	cfg.Consumer = "w"
	return async.HeldOf(async.NewWriter(f.rdb, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg), vid)
}

// restartEmpty drops every key of the voucher, as a Redis without persistence that restarted.
func restartEmpty(t *testing.T, rdb redis.UniversalClient, vid int64) {
	t.Helper()
	sale, users, orders, stream, dead := async.KeysOf(vid)
	require.NoError(t, rdb.Del(context.Background(), sale, users, orders, stream, dead).Err())
}

// TestBatchAfterReloadIsNotCommitted: a writer read an order, Redis restarted empty, and the
// first admission after it reloaded the voucher from the database before the writer's batch
// committed. The reload gave the order's unit and user back to Redis; committing the batch
// now would write an order Redis no longer counts (one unit sold twice, the user free to order
// again). The batch's held check finds the entry gone and the batch rolls back: the order was
// lost with Redis, as every order waiting in a Redis without persistence is, and the books
// still balance.
func TestBatchAfterReloadIsNotCommitted(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, e := inFlight(t, s, 5)
			ctx, cancel := context.WithTimeout(context.Background(), eventuallyBound)
			defer cancel()
			restartEmpty(t, f.rdb, vid)
			require.NoError(t, f.loader.Load(ctx, vid))

			_, err := f.store.Write(ctx, vid, []async.Entry{e}, heldCheck(f, vid))
			require.ErrorIs(t, err, async.ErrEntriesGone)
			assert.Empty(t, f.rows(vid), "the batch rolled back")
			assert.Equal(t, async.Book{VoucherID: vid, Loaded: true, Initial: 5, DBStock: 5, RedisStock: 5}, f.book(vid))
			_, err = f.svc.Place(ctx, 1, vid)
			assert.NoError(t, err, "the lost order's user may order again")
		})
	}
}

// TestReloadWaitsForBatchInCommit: a writer's batch passed its held check, and then Redis
// restarted empty and a reload began while the batch had not yet committed. The reload must
// read the database after that commit: read before it, it would give Redis the order's unit
// and leave its user free, and the books would drift by +1. Books takes the voucher's row
// first, which the batch holds until it commits, so the reload cannot finish before.
//
// The reload begins inside the batch's held check, so a Write that skips the check must fail
// the test, not leave it waiting for a reload that never began; every wait has ctx's deadline.
func TestReloadWaitsForBatchInCommit(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, e := inFlight(t, s, 5)
			ctx, cancel := context.WithTimeout(context.Background(), eventuallyBound)
			defer cancel()
			check := heldCheck(f, vid)

			reloading := false
			loaded := make(chan error, 1)
			held := func(ctx context.Context, es []async.Entry) error {
				if err := check(ctx, es); err != nil {
					return err
				}
				// Checked; now Redis restarts empty and the next admission reloads.
				restartEmpty(t, f.rdb, vid)
				reloading = true
				go func() { loaded <- f.loader.Load(ctx, vid) }()
				select {
				case err := <-loaded:
					t.Errorf("the reload finished (err %v) while a batch held the voucher's row: it read the database before the batch's commit", err)
				case <-time.After(300 * time.Millisecond):
				}
				return nil
			}
			outs, err := f.store.Write(ctx, vid, []async.Entry{e}, held)
			require.NoError(t, err)
			require.Equal(t, []async.Outcome{async.Written}, outs)
			require.True(t, reloading, "Write committed the batch without running its held check (so no reload raced the commit)")
			if !t.Failed() {
				select {
				case err := <-loaded:
					require.NoError(t, err, "the reload after the batch's commit")
				case <-ctx.Done():
					t.Fatalf("the reload did not return within %s", eventuallyBound)
				}
			}

			assert.Equal(t, async.Book{VoucherID: vid, Loaded: true, Initial: 5, DBStock: 4, RedisStock: 4, Orders: 1}, f.book(vid))
			got, has, err := f.statuses.OrderOf(ctx, 1, vid)
			require.NoError(t, err)
			assert.True(t, has && got == e.OrderID, "user 1 holds order %d (got %d, %v)", e.OrderID, got, has)
		})
	}
}

// TestLoadReadsTheOrdersWithoutTheRow: a load holds the voucher's row only until its snapshot
// of the books is taken, not while it reads the voucher's orders. While it reads them (a GORM
// callback at the orders' SELECT), another transaction takes the row within a second: a
// writer's batch, or another instance's load, is not made to wait for a read that for millions
// of orders outlasts the DSN's readTimeout (MySQL) or its own deadline (SQLite, whose write
// lock the load held), on which its wait fails.
func TestLoadReadsTheOrdersWithoutTheRow(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(10)
			f.orderRows(vid, 3)

			var reads atomic.Int32
			var taken error
			require.NoError(t, f.db.Callback().Row().Before("gorm:row").Register("test:take_row", func(tx *gorm.DB) {
				if !strings.Contains(tx.Statement.SQL.String(), "FROM voucher_orders WHERE voucher_id = ?") {
					return
				}
				reads.Add(1)
				tctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				taken = f.db.WithContext(tctx).Connection(func(c *gorm.DB) error {
					if f.db.Dialect == migrations.MySQL {
						if err := c.Exec("SET SESSION innodb_lock_wait_timeout = 1").Error; err != nil {
							return err
						}
					}
					return c.Exec("UPDATE seckill_vouchers SET stock = stock WHERE voucher_id = ?", vid).Error
				})
			}))

			require.NoError(t, f.loader.Load(ctx, vid))
			require.Equal(t, int32(1), reads.Load(), "the load read the orders once")
			assert.NoError(t, taken, "another transaction took the voucher's row while the load read its orders")
			f.loaded(vid, 10, 3)
		})
	}
}
