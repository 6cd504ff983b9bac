package verdict

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/voucher"
	"github.com/seckill/seckill/migrations"
)

// dropUniqueKey removes uk_user_voucher, so that a duplicate row can be written.
func dropUniqueKey(t *testing.T, db *database.DB) {
	t.Helper()
	stmts := []string{"ALTER TABLE voucher_orders DROP INDEX uk_user_voucher"}
	if db.Dialect == migrations.SQLite { // a table constraint: copy the table without it
		stmts = []string{"CREATE TABLE voucher_orders_copy AS SELECT * FROM voucher_orders",
			"DROP TABLE voucher_orders", "ALTER TABLE voucher_orders_copy RENAME TO voucher_orders"}
	}
	for _, s := range stmts {
		require.NoError(t, db.Exec(s).Error, s)
	}
}

func TestReadDB(t *testing.T) {
	for name, db := range testenv.Databases(t, database.Pool{}) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			vouchers := voucher.NewStore(db.DB)
			orders := order.NewSQLStore(db)
			now := time.Now().UTC()
			newVoucher := func(stock int) int64 {
				v, err := vouchers.Create(ctx, voucher.Voucher{Title: "t", Stock: stock, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)})
				require.NoError(t, err)
				return v.ID
			}
			a, b := newVoucher(10), newVoucher(3)
			var placed []Answered
			nextID := now.Unix() << 32
			place := func(user, voucherID int64) {
				nextID++
				o := order.Order{ID: nextID, UserID: user, VoucherID: voucherID, Status: order.StatusUnpaid, CreatedAt: now}
				require.NoError(t, orders.Create(ctx, o, order.Fence{}, nil))
				placed = append(placed, Answered{ID: strconv.FormatInt(nextID, 10), User: user, Voucher: voucherID})
			}
			for u := int64(1); u <= 4; u++ {
				place(u, a)
			}
			for u := int64(1); u <= 3; u++ {
				place(u, b)
			}

			seen := append([]Answered(nil), placed[1:]...)                       // placed[0] never reached the client
			seen = append(seen, Answered{ID: "12345", User: 7, Voucher: a})      // not in the database
			seen = append(seen, Answered{ID: placed[2].ID, User: 8, Voucher: a}) // someone else's id
			run := []Voucher{{Scenario: "storm", ID: a, Stock: 10}, {Scenario: "sellout", ID: b, Stock: 3}}

			var f Facts
			require.NoError(t, ReadDB(ctx, db, run, seen, &f))
			assert.Equal(t, []Voucher{
				{Scenario: "storm", ID: a, Stock: 10, StockLeft: 6, Orders: 4, Answered: 5},
				{Scenario: "sellout", ID: b, Stock: 3, StockLeft: 0, Orders: 3, Answered: 3},
			}, f.Vouchers)
			assert.True(t, f.UniqueKey)
			assert.Zero(t, f.DuplicateGroups)
			assert.Equal(t, 8, f.Orders201)
			assert.Equal(t, 1, f.Missing201)
			assert.Equal(t, 1, f.WrongOwner201)
			assert.Equal(t, int64(1), f.Unanswered, "placed[0] was committed but not seen by the client")

			// Without the unique key, a duplicate row is possible, and the verdict must see both.
			dropUniqueKey(t, db)
			require.NoError(t, db.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, 2, ?, 1, ?, ?)",
				nextID+1, a, now, now).Error)
			f = Facts{}
			require.NoError(t, ReadDB(ctx, db, run, placed, &f))
			assert.False(t, f.UniqueKey)
			assert.Equal(t, int64(1), f.DuplicateGroups)
		})
	}
}
