package order_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/voucher"
)

// counter hands out order ids 1, 2, 3, …
type counter struct{ n atomic.Int64 }

func (c *counter) Next(context.Context) (int64, error) { return c.n.Add(1), nil }

// TestSaleWindowOnTheDatabasesClock: the synchronous mode judges the sale window on the
// database's clock, which every instance shares, not on the instance's. Instances whose clocks
// run two hours behind and ahead refuse a sale that has not begun and one that has ended, and
// sell in the one on sale, as an instance on time does; refused orders take no stock. On the
// instance's own clock the one behind would refuse the sale on and sell in the ended one, and
// the one ahead would sell in the sale not begun and refuse the one on. Each check is made on a
// voucher just read and on the cached one. The orders sold are dated on the database's clock.
func TestSaleWindowOnTheDatabasesClock(t *testing.T) {
	for name, db := range testenv.Databases(t, database.Pool{}) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			vouchers := voucher.NewService(voucher.NewStore(db.DB))
			window := func(stock int, begin, end time.Time) int64 {
				v, err := vouchers.Create(ctx, voucher.Voucher{Title: "w", Stock: stock, BeginTime: begin, EndTime: end})
				require.NoError(t, err)
				return v.ID
			}
			now := time.Now()
			notYet := window(1, now.Add(time.Hour), now.Add(2*time.Hour))
			over := window(1, now.Add(-2*time.Hour), now.Add(-time.Hour))
			on := window(3, now.Add(-time.Minute), now.Add(time.Hour))
			ids := &counter{}
			for i, skew := range []time.Duration{0, -2 * time.Hour, 2 * time.Hour} {
				svc := order.NewService(vouchers, order.NewSQLStore(db), lock.NewLocalLocks(), ids, order.NewMetrics(prometheus.NewRegistry()),
					slog.New(slog.NewTextHandler(io.Discard, nil)), order.Config{LockTTL: 5 * time.Second,
						Now: func() time.Time { return time.Now().Add(skew) }})
				user := int64(10 + i)
				for range 2 { // the second time from the instance's cache of the voucher
					_, err := svc.Place(ctx, user, notYet)
					assert.ErrorIs(t, err, order.ErrSaleNotActive, "clock %s off: a sale not begun", skew)
					_, err = svc.Place(ctx, user, over)
					assert.ErrorIs(t, err, order.ErrSaleNotActive, "clock %s off: a sale ended", skew)
				}
				id, err := svc.Place(ctx, user, on)
				assert.NoError(t, err, "clock %s off: the sale on", skew)
				// Dated on the database's clock too, not two hours off.
				if got, err := svc.Get(ctx, user, id); assert.NoError(t, err) {
					assert.WithinDuration(t, time.Now(), got.CreatedAt, time.Minute, "clock %s off: the order's createdAt", skew)
				}
				// Again, from the cache: the sale is still on (the cached check passes), and
				// the user's order is found.
				_, err = svc.Place(ctx, user, on)
				assert.ErrorIs(t, err, order.ErrAlreadyOrdered, "clock %s off: the sale on, the voucher cached", skew)
			}
			for _, v := range []int64{notYet, over} {
				stock, orders := stockOf(t, db, v)
				assert.Equal(t, 1, stock, "refusals take nothing")
				assert.Zero(t, orders)
			}
			stock, orders := stockOf(t, db, on)
			assert.Zero(t, stock, "each instance sold one")
			assert.EqualValues(t, 3, orders)
		})
	}
}
