package order_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/voucher"
)

func databases(t *testing.T) map[string]*database.DB {
	return testenv.Databases(t, database.Pool{MaxOpen: 16})
}

func newVoucher(t *testing.T, db *database.DB, stock int) int64 {
	t.Helper()
	v, err := voucher.NewStore(db.DB).Create(context.Background(), voucher.Voucher{
		Title: "v", Stock: stock, BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour),
	})
	require.NoError(t, err)
	return v.ID
}

func stockOf(t *testing.T, db *database.DB, voucherID int64) (stock int, orders int64) {
	t.Helper()
	v, err := voucher.NewStore(db.DB).Get(context.Background(), voucherID)
	require.NoError(t, err)
	require.NoError(t, db.Table("voucher_orders").Where("voucher_id = ?", voucherID).Count(&orders).Error)
	return v.Stock, orders
}

func newOrder(id, user, voucherID int64) order.Order {
	return order.Order{ID: id, UserID: user, VoucherID: voucherID, Status: order.StatusUnpaid, CreatedAt: time.Now().UTC()}
}

func TestSQLStoreCreate(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := order.NewSQLStore(db)
			vid := newVoucher(t, db, 2)
			require.NoError(t, s.Create(ctx, newOrder(1, 10, vid), order.Fence{}, nil))
			assert.ErrorIs(t, s.Create(ctx, newOrder(2, 10, vid), order.Fence{}, nil), order.ErrAlreadyOrdered)
			require.NoError(t, s.Create(ctx, newOrder(3, 11, vid), order.Fence{}, nil))
			assert.ErrorIs(t, s.Create(ctx, newOrder(4, 12, vid), order.Fence{}, nil), order.ErrSoldOut)
			stock, orders := stockOf(t, db, vid)
			assert.Equal(t, 0, stock)
			assert.Equal(t, int64(2), orders)
		})
	}
}

// TestSQLStoreReads: an order reads back by its id and by its user and voucher, as created;
// a missing one is ErrNotFound.
func TestSQLStoreReads(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := order.NewSQLStore(db)
			vid := newVoucher(t, db, 2)
			o := newOrder(1<<62+5, 1<<62+10, vid) // ids beyond 2^53 and 2^32, as the generator makes them
			o.CreatedAt = time.Date(2026, 11, 22, 8, 0, 0, 123e6, time.UTC)
			require.NoError(t, s.Create(ctx, o, order.Fence{}, nil))

			got, err := s.Get(ctx, o.ID)
			require.NoError(t, err)
			assert.Equal(t, o, got)
			got, err = s.GetByUser(ctx, o.UserID, vid)
			require.NoError(t, err)
			assert.Equal(t, o, got)

			_, err = s.Get(ctx, o.ID+1)
			assert.ErrorIs(t, err, order.ErrNotFound)
			_, err = s.GetByUser(ctx, o.UserID, vid+1)
			assert.ErrorIs(t, err, order.ErrNotFound)
			_, err = s.GetByUser(ctx, o.UserID+1, vid)
			assert.ErrorIs(t, err, order.ErrNotFound)
		})
	}
}

// TestSQLStoreDuplicateRollsBack drives the race the lock exists to prevent, step by step:
// A begins (no order yet), B places the same user's order completely, A writes. The unique
// key refuses A's insert, A takes no stock, and A learns that the order it collided with
// committed while it ran (ErrDuplicate), not before (ErrAlreadyOrdered).
func TestSQLStoreDuplicateRollsBack(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := order.NewSQLStore(db)
			vid := newVoucher(t, db, 5)
			var errB error
			err := s.Create(ctx, newOrder(1, 10, vid), order.Fence{}, func(context.Context) error {
				errB = s.Create(ctx, newOrder(2, 10, vid), order.Fence{}, nil)
				return nil
			})
			require.NoError(t, errB, "B")
			assert.ErrorIs(t, err, order.ErrDuplicate, "A")
			stock, orders := stockOf(t, db, vid)
			assert.Equal(t, 4, stock, "A's decrement rolled back")
			assert.Equal(t, int64(1), orders)
		})
	}
}

// TestSQLStoreFailedProcessLosesNothing: an error inside the critical section leaves no
// order and no stock taken.
func TestSQLStoreFailedProcessLosesNothing(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			vid := newVoucher(t, db, 5)
			err := order.NewSQLStore(db).Create(context.Background(), newOrder(1, 10, vid), order.Fence{}, func(context.Context) error {
				return context.DeadlineExceeded
			})
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			stock, orders := stockOf(t, db, vid)
			assert.Equal(t, 5, stock)
			assert.Zero(t, orders)
		})
	}
}

// TestSQLStoreNeverOversells: many users at once against a small stock.
func TestSQLStoreNeverOversells(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			s := order.NewSQLStore(db)
			const stock, users = 10, 60
			vid := newVoucher(t, db, stock)
			var wg sync.WaitGroup
			errs := make([]error, users)
			for u := range users {
				wg.Go(func() {
					errs[u] = s.Create(context.Background(), newOrder(int64(100+u), int64(u+1), vid), order.Fence{}, nil)
				})
			}
			wg.Wait()
			created := 0
			for _, err := range errs {
				if err == nil {
					created++
					continue
				}
				assert.ErrorIs(t, err, order.ErrSoldOut)
			}
			left, orders := stockOf(t, db, vid)
			assert.Equal(t, stock, created)
			assert.Equal(t, 0, left)
			assert.Equal(t, int64(stock), orders)
		})
	}
}

// TestSQLStoreRefusalLeavesNoOpenTransaction: on a pool of one connection, an order refused
// after its insert (sold out) and one whose context ends inside the transaction leave the
// connection without an open transaction. MySQL's next BEGIN would otherwise commit the
// refused order implicitly, and a connection kept by a dead order would starve the pool.
func TestSQLStoreRefusalLeavesNoOpenTransaction(t *testing.T) {
	for name, db := range testenv.Databases(t, database.Pool{MaxOpen: 1}) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := order.NewSQLStore(db)
			empty, next := newVoucher(t, db, 0), newVoucher(t, db, 5)
			require.ErrorIs(t, s.Create(ctx, newOrder(1, 10, empty), order.Fence{}, nil), order.ErrSoldOut)

			cctx, ccancel := context.WithCancel(ctx)
			err := s.Create(cctx, newOrder(2, 11, next), order.Fence{}, func(context.Context) error {
				ccancel() // the client went away inside the critical section
				return cctx.Err()
			})
			require.ErrorIs(t, err, context.Canceled)

			require.NoError(t, s.Create(ctx, newOrder(3, 12, next), order.Fence{}, nil), "the pool's one connection is usable")
			_, orders := stockOf(t, db, empty)
			assert.Zero(t, orders, "the sold-out order stayed rolled back")
			stock, orders := stockOf(t, db, next)
			assert.Equal(t, 4, stock)
			assert.Equal(t, int64(1), orders)
		})
	}
}
