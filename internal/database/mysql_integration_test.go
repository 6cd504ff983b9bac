//go:build integration

package database_test

import (
	"context"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// TestOpenMySQLForcesUTC opens MySQL with a DSN that asks for neither parseTime nor UTC:
// times must still scan into time.Time and come back as the instant written, in UTC.
func TestOpenMySQLForcesUTC(t *testing.T) {
	cfg, err := mysqldriver.ParseDSN(testenv.MySQLDSN(t))
	require.NoError(t, err)
	cfg.ParseTime = false
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	cfg.Loc = shanghai

	db, err := database.OpenMySQL(context.Background(), cfg.FormatDSN(), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.Equal(t, migrations.MySQL, db.Dialect)
	_, err = db.Migrate(context.Background())
	require.NoError(t, err)

	in := time.Date(2026, 11, 22, 8, 30, 0, 123_000_000, shanghai)
	require.NoError(t, db.Exec(insertOrder, 1, 1, 1, in, in).Error)
	var got time.Time
	require.NoError(t, db.Raw("SELECT created_at FROM voucher_orders WHERE id = 1").Scan(&got).Error)
	assert.True(t, got.Equal(in), "read %v, wrote %v", got, in)
	assert.Equal(t, time.UTC, got.Location())
	var stored string
	require.NoError(t, db.Raw("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f') FROM voucher_orders WHERE id = 1").Scan(&stored).Error)
	assert.Equal(t, "2026-11-22 00:30:00.123000", stored, "the column holds UTC")
}

// TestOpenMySQLForcesAutocommit: go-sql-driver passes a DSN parameter it does not know to the
// server as a session SET, so autocommit=0 in SECKILL_MYSQL_DSN (in any spelling) turns
// autocommit off on every connection. The stores run statements outside transactions (the
// voucher's INSERTs, the MySQL lock's UPDATEs, the order fence's claims): those would never
// commit, only hold their row locks on a connection back in the pool, until a later BEGIN on it
// committed them by the way. OpenMySQL must keep autocommit on whatever the DSN says.
func TestOpenMySQLForcesAutocommit(t *testing.T) {
	ctx := context.Background()
	for _, param := range []string{"autocommit=0", "autocommit=OFF", "AUTOCOMMIT=false", "@@session.autocommit=0"} {
		t.Run(param, func(t *testing.T) {
			dsn := testenv.MySQLDSN(t)
			db, err := database.OpenMySQL(ctx, dsn+"&"+param, database.Pool{MaxOpen: 1})
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			_, err = db.Migrate(ctx)
			require.NoError(t, err)
			var on int
			require.NoError(t, db.Raw("SELECT @@autocommit").Scan(&on).Error)
			assert.Equal(t, 1, on, "@@autocommit")

			now := time.Now().UTC()
			require.NoError(t, db.Exec(insertOrder, 1, 1, 1, now, now).Error)
			other, err := database.OpenMySQL(ctx, dsn, database.Pool{MaxOpen: 1})
			require.NoError(t, err)
			t.Cleanup(func() { _ = other.Close() })
			var n int
			require.NoError(t, other.Raw("SELECT COUNT(*) FROM voucher_orders").Scan(&n).Error)
			assert.Equal(t, 1, n, "rows another connection sees after an INSERT outside a transaction")
		})
	}
}
