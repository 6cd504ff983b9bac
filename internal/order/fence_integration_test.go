//go:build integration

package order_test

import (
	"context"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// TestSQLStoreFenceWaitsForTheHolderInFlight: the order of holder A (token 1) has claimed the
// user's fence and inserted its order but not yet committed when the lock passes to B (token
// 2), whose order starts. B's first claim, committed on its own before B reads anything, must
// wait for A's transaction, which holds the row; B's transaction then begins after A's commit
// and sees A's order: already_ordered, not a duplicate that only the unique key stopped. (Had
// B taken its snapshot before A committed, it would not see A's order and would answer
// ErrDuplicate.) A is played by hand on a connection of its own; the test waits, by asking
// InnoDB (INNODB_TRX), until B is blocked on A's row before A commits.
func TestSQLStoreFenceWaitsForTheHolderInFlight(t *testing.T) {
	ctx := context.Background()
	db := testenv.Databases(t, database.Pool{MaxOpen: 8})["mysql"]
	s := order.NewSQLStore(db)
	vid := newVoucher(t, db, 10)
	fence := testenv.Unique("test/order:")
	const user = 42
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)

	a, err := sqlDB.Conn(ctx)
	require.NoError(t, err)
	defer a.Close()
	_, err = a.ExecContext(ctx, "START TRANSACTION")
	require.NoError(t, err)
	_, err = a.ExecContext(ctx, "INSERT INTO lock_fences (name, token, claims, claimed_at) VALUES (?, 1, 1, UTC_TIMESTAMP(3))", fence)
	require.NoError(t, err)
	o := newOrder(4200, user, vid)
	_, err = a.ExecContext(ctx, "INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
		o.ID, o.UserID, o.VoucherID, o.Status, o.CreatedAt, o.CreatedAt)
	require.NoError(t, err)

	errB := make(chan error, 1)
	go func() {
		errB <- s.Create(ctx, newOrder(4201, user, vid), order.Fence{Name: fence, Token: 2}, nil)
	}()
	require.Eventually(t, func() bool {
		var n int
		err := sqlDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
			"%"+fence+"%").Scan(&n)
		return err == nil && n == 1
		// InnoDB refreshes INNODB_TRX only when it was not read for 100 ms: polling faster
		// would read the same snapshot for ever.
	}, 10*time.Second, 200*time.Millisecond, "B's claim waits for A's row")
	_, err = a.ExecContext(ctx, "COMMIT")
	require.NoError(t, err)

	select {
	case err := <-errB:
		assert.ErrorIs(t, err, order.ErrAlreadyOrdered)
	case <-time.After(10 * time.Second):
		t.Fatal("B did not finish after A committed")
	}
	var token int64
	require.NoError(t, sqlDB.QueryRowContext(ctx, "SELECT token FROM lock_fences WHERE name = ?", fence).Scan(&token))
	assert.Equal(t, int64(2), token, "B's first claim committed on its own: any older holder still writing is fenced by it")
	_, orders := stockOf(t, db, vid)
	assert.Equal(t, int64(1), orders)
}

// TestSQLStoreFenceWithClientFoundRows: a DSN that sets clientFoundRows makes MySQL report a
// row that ON DUPLICATE KEY UPDATE left unchanged as one affected row. A refused claim changes
// nothing, so it would look admitted, and a stale holder would write. OpenMySQL must keep
// affected rows meaning changed rows whatever the DSN says.
func TestSQLStoreFenceWithClientFoundRows(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysqldriver.ParseDSN(testenv.MySQLDSN(t))
	require.NoError(t, err)
	cfg.ClientFoundRows = true
	db, err := database.OpenMySQL(ctx, cfg.FormatDSN(), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	s := order.NewSQLStore(db)
	vid := newVoucher(t, db, 10)
	fence := testenv.Unique("test/order:")
	require.NoError(t, s.Create(ctx, newOrder(1, 1, vid), order.Fence{Name: fence, Token: 5}, nil))
	err = s.Create(ctx, newOrder(2, 2, vid), order.Fence{Name: fence, Token: 4}, nil)
	assert.ErrorIs(t, err, order.ErrFenced, "a token below the row's")
	_, orders := stockOf(t, db, vid)
	assert.Equal(t, int64(1), orders, "a fenced order inserts nothing")
}
