//go:build integration

package database_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
)

// waitForRow is the statement each test below makes wait for a row another transaction holds.
const waitForRow = "UPDATE lockwait SET n = n + 1 WHERE id = 1"

// TestServerEndsARowWaitTheClientGaveUp: a statement waits for a row another transaction
// holds, and its client gives up, at the DSN's readTimeout (go-sql-driver's "invalid
// connection") or at its context's deadline (an order's). The server's wait must end by then
// too: left to InnoDB's innodb_lock_wait_timeout (50 s by default), it went on after the
// client had dropped the connection, one more server thread for every retry, so that a row
// held long enough used up max_connections. Once the client's call returned, the statement
// is no longer running on the server, and it ended with MySQL's lock wait timeout (1205).
func TestServerEndsARowWaitTheClientGaveUp(t *testing.T) {
	for _, tt := range []struct {
		name     string
		dsn      string        // parameters of the service's DSN
		pool     database.Pool // its LockWait
		deadline time.Duration // the caller's context; zero: none
	}{
		{"readTimeout", "readTimeout=2s", database.Pool{}, 0},
		{"deadline", "readTimeout=5s", database.Pool{LockWait: 2 * time.Second}, 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := testenv.MySQLDSN(t)
			other := holdRow(t, dsn)
			db, err := database.OpenMySQL(ctx, dsn+"&"+tt.dsn, tt.pool)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })

			sctx := ctx
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				sctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			start := time.Now()
			err = db.WithContext(sctx).Exec(waitForRow).Error
			gaveUp := time.Since(start)
			require.Error(t, err, "the row is held")
			var running int
			require.NoError(t, other.QueryRowContext(ctx,
				"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO = ?", waitForRow).Scan(&running))
			assert.Zero(t, running, "statements still waiting for the row on the server after the client gave up (after %s: %v)", gaveUp, err)
			var me *mysqldriver.MySQLError
			if assert.ErrorAs(t, err, &me, "the server's own end of the wait") {
				assert.Equal(t, uint16(1205), me.Number)
			}
			assert.True(t, database.IsTransient(err), "a lock wait timeout is transient")
		})
	}
}

// TestLockWaitTimeoutOfTheSession: the innodb_lock_wait_timeout each connection gets, and
// that one set in the DSN is kept.
func TestLockWaitTimeoutOfTheSession(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	for _, tt := range []struct {
		params string
		pool   database.Pool
		want   int
	}{
		{"", database.Pool{}, 4},
		{"readTimeout=30s", database.Pool{}, 29},
		{"readTimeout=30s", database.Pool{LockWait: 2 * time.Second}, 1},
		{"readTimeout=30s", database.Pool{LockWait: 4500 * time.Millisecond}, 3},
		{"readTimeout=1500ms", database.Pool{}, 1},
		{"innodb_lock_wait_timeout=7", database.Pool{LockWait: 2 * time.Second}, 7},
	} {
		db, err := database.OpenMySQL(ctx, dsn+"&"+tt.params, tt.pool)
		require.NoError(t, err)
		var got int
		require.NoError(t, db.Raw("SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&got).Error)
		_ = db.Close()
		assert.Equal(t, tt.want, got, "%s, %+v", tt.params, tt.pool)
	}
}

// holdRow creates the table lockwait with the row id 1 in dsn's database and takes the row
// in a transaction that stays open until t ends. It returns another connection, free.
func holdRow(t *testing.T, dsn string) *sql.Conn {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.ExecContext(ctx, "CREATE TABLE lockwait (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO lockwait VALUES (1, 0)")
	require.NoError(t, err)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	_, err = tx.ExecContext(ctx, waitForRow)
	require.NoError(t, err)
	other, err := db.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	return other
}
