package async_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/voucher"
	"github.com/seckill/seckill/migrations"
)

// TestOrdersOfAVoucherReadTheIndexAlone asks each database's planner how it reads every order
// of a voucher (a load, reconcile): from uk_user_voucher alone, a covering index ("Using index"
// on MySQL, "COVERING INDEX" on SQLite), never looking a row up, over vouchers with orders.
func TestOrdersOfAVoucherReadTheIndexAlone(t *testing.T) {
	t.Parallel()
	for name, db := range testenv.Databases(t, database.Pool{}) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := async.NewStore(db)
			var vid int64
			for v := range 3 {
				created, err := voucher.NewService(voucher.NewStore(db.DB)).Create(ctx, voucher.Voucher{Title: "c", Stock: 1000,
					BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour)})
				require.NoError(t, err)
				vid = created.ID
				es := make([]async.Entry, 200)
				for i := range es {
					es[i] = async.Entry{OrderID: int64(v*1000 + i + 1), UserID: int64(i + 1), VoucherID: vid, At: time.Now()}
				}
				_, err = st.Write(ctx, vid, es, nil)
				require.NoError(t, err)
			}

			if db.Dialect == migrations.SQLite {
				var plan []struct{ Detail string }
				require.NoError(t, db.Raw("EXPLAIN QUERY PLAN "+async.OrdersOfVoucher, vid).Scan(&plan).Error)
				require.Len(t, plan, 1)
				assert.Contains(t, plan[0].Detail, "COVERING INDEX", "the plan")
				return
			}
			require.NoError(t, db.Exec("ANALYZE TABLE voucher_orders").Error)
			var plan []struct {
				Key   string
				Extra string
			}
			// MySQL 9 explains as a tree by default; the traditional table is what both print.
			explain := "EXPLAIN "
			var version string
			require.NoError(t, db.Raw("SELECT VERSION()").Scan(&version).Error)
			if !strings.Contains(version, "MariaDB") {
				explain = "EXPLAIN FORMAT=TRADITIONAL "
			}
			require.NoError(t, db.Raw(explain+async.OrdersOfVoucher, vid).Scan(&plan).Error)
			require.Len(t, plan, 1)
			assert.Equal(t, "uk_user_voucher", plan[0].Key, "the index read")
			assert.True(t, strings.Contains(plan[0].Extra, "Using index"), "got Extra %q, want Using index: the rows are looked up", plan[0].Extra)
		})
	}
}
