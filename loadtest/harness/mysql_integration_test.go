//go:build integration

package main

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// migratedDB returns a fresh, migrated database on the real MariaDB/MySQL.
func migratedDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", testenv.MySQLDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = migrations.Up(context.Background(), db, migrations.MySQL)
	require.NoError(t, err)
	return db
}

func TestCreateDatabase(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(testenv.Getenv("SECKILL_TEST_MYSQL_DSN", "root:@tcp(127.0.0.1:3306)/"))
	require.NoError(t, err)
	cfg.DBName = testenv.Unique("seckill_test_lt_")
	dsn := cfg.FormatDSN()
	t.Cleanup(func() {
		c := *cfg
		c.DBName = ""
		if db, err := sql.Open("mysql", c.FormatDSN()); err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + cfg.DBName)
			_ = db.Close()
		}
	})

	for i := range 2 { // the second call finds it and succeeds
		name, err := createDatabase(ctx, dsn)
		require.NoError(t, err, "call %d", i+1)
		assert.Equal(t, cfg.DBName, name)
	}
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.PingContext(ctx), "the created database must accept connections")
}

func TestDBFacts(t *testing.T) {
	ctx := context.Background()
	db := migratedDB(t)
	a, err := baselineVoucher(ctx, db)
	require.NoError(t, err)
	b, err := baselineVoucher(ctx, db)
	require.NoError(t, err)
	// Initial stock as a k6 setup() would have recorded it; the real rows start at 1<<30.
	_, err = db.ExecContext(ctx, "UPDATE seckill_vouchers SET stock = 10 WHERE voucher_id = ?", a)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "UPDATE seckill_vouchers SET stock = 3 WHERE voucher_id = ?", b)
	require.NoError(t, err)

	var orders []k6Order
	place := func(user, voucher int64) {
		id := baselineIDs.next()
		require.NoError(t, placeOrder(ctx, db, user, voucher, id, 0))
		orders = append(orders, k6Order{ID: strconv.FormatInt(id, 10), User: user, Voucher: voucher})
	}
	for u := int64(1); u <= 4; u++ {
		place(u, a)
	}
	for u := int64(1); u <= 3; u++ {
		place(u, b)
	}
	// The database refuses what the service would refuse.
	err = placeOrder(ctx, db, 1, a, baselineIDs.next(), 0)
	require.ErrorIs(t, err, errBaselineRefused, "second order of user 1")
	err = placeOrder(ctx, db, 9, b, baselineIDs.next(), 0)
	require.ErrorIs(t, err, errBaselineRefused, "voucher b is sold out")

	k6Seen := append([]k6Order(nil), orders[1:]...)                         // orders[0] never reached k6
	k6Seen = append(k6Seen, k6Order{ID: "12345", User: 7, Voucher: a})      // not in the database
	k6Seen = append(k6Seen, k6Order{ID: orders[2].ID, User: 8, Voucher: a}) // someone else's id
	vouchers := []k6Voucher{{Scenario: "storm", ID: a, Stock: 10}, {Scenario: "sellout", ID: b, Stock: 3}}

	var f facts
	require.NoError(t, dbFacts(ctx, db, vouchers, k6Seen, &f))
	assert.Equal(t, []voucherFacts{
		{k6Voucher: vouchers[0], StockLeft: 6, Orders: 4},
		{k6Voucher: vouchers[1], StockLeft: 0, Orders: 3},
	}, f.Vouchers)
	assert.True(t, f.UniqueKey)
	assert.Zero(t, f.DuplicateGroups)
	assert.Equal(t, 8, f.Orders201)
	assert.Equal(t, 1, f.Missing201)
	assert.Equal(t, 1, f.WrongOwner201)
	assert.Equal(t, int64(1), f.Unanswered, "orders[0] was committed but not logged by k6")

	// Without the unique key, a duplicate row is possible, and the verifier must see both.
	_, err = db.ExecContext(ctx, "ALTER TABLE voucher_orders DROP INDEX uk_user_voucher")
	require.NoError(t, err)
	now := time.Now().UTC()
	_, err = db.ExecContext(ctx, "INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, 2, ?, 1, ?, ?)",
		baselineIDs.next(), a, now, now)
	require.NoError(t, err)
	f = facts{}
	require.NoError(t, dbFacts(ctx, db, vouchers, orders, &f))
	assert.False(t, f.UniqueKey)
	assert.Equal(t, int64(1), f.DuplicateGroups)
}

func TestMeasureBaseline(t *testing.T) {
	ctx := context.Background()
	db := migratedDB(t)
	r, err := measureBaseline(ctx, db, 4, 500*time.Millisecond, time.Millisecond)
	require.NoError(t, err)
	require.Positive(t, r.Orders)
	assert.Equal(t, 4, r.Workers)
	assert.InDelta(t, float64(r.Orders)/r.DurationSec, r.OrdersPerSec, 1e-9)
	assert.LessOrEqual(t, r.P50Ms, r.P95Ms)
	assert.LessOrEqual(t, r.P95Ms, r.P99Ms)

	// Every counted order is committed, and only those: rows and stock agree with the count.
	var rows, taken int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM voucher_orders").Scan(&rows))
	require.NoError(t, db.QueryRowContext(ctx, "SELECT (1<<30) - stock FROM seckill_vouchers").Scan(&taken))
	assert.Equal(t, r.Orders, rows, "rows: got %d, want %d", rows, r.Orders)
	assert.Equal(t, r.Orders, taken, "stock taken: got %d, want %d", taken, r.Orders)
}
