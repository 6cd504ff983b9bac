//go:build integration

package database_test

import (
	"context"
	"database/sql"
	"errors"
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
// connection") or at its context's deadline (an order's). The server's wait must end about
// then too: left to InnoDB's innodb_lock_wait_timeout (50 s by default), it went on after the
// client had dropped the connection, one more server thread for every retry, so that a row
// held long enough used up max_connections. The session's timeout is a second here, a second
// before the client's bound (TestLockWaitTimeoutOfTheSession pins that arithmetic), so the
// statement is gone from the server within serverWaitBound of its start, and the answer the
// client got is MySQL's lock wait timeout (1205). On a machine so loaded that MySQL's thread
// ran more than that second late (CI's parallel -race suites, once, on Oracle's MySQL), the
// client's own bound came first: its error is then the client's, transient all the same, and
// only the server's end is judged.
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
			assert.True(t, database.IsTransient(err), "a lock wait timeout, or the client's own bound, is transient: %v", err)
			running := waitingForRow(t, other, start.Add(serverWaitBound))
			assert.Zero(t, running, "statements still waiting for the row on the server %s after the statement began (the client gave up after %s: %v)",
				serverWaitBound, gaveUp, err)
			var me *mysqldriver.MySQLError
			if errors.As(err, &me) {
				assert.Equal(t, uint16(1205), me.Number, "the server's own end of the wait")
			} else {
				t.Logf("the client's bound came first, after %s (%v): MySQL ran its second of waiting late on a loaded machine", gaveUp, err)
			}
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

// serverWaitBound is how soon after a statement began to wait for a row its wait must have
// ended on the server, when the session's innodb_lock_wait_timeout is a second: that second
// and a loaded machine's slack, far short of InnoDB's default 50 s.
const serverWaitBound = 5 * time.Second

// waitingForRow returns how many statements of the test's database still wait for the row on
// the server, asking other until none does or until is reached.
func waitingForRow(t *testing.T, other *sql.Conn, until time.Time) int {
	t.Helper()
	for {
		var running int
		require.NoError(t, other.QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO = ?", waitForRow).Scan(&running))
		if running == 0 || time.Now().After(until) {
			return running
		}
		time.Sleep(20 * time.Millisecond)
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
