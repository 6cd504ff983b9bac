//go:build integration

package lock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
)

// rowBusyLocks opens MySQLLocks on a real MariaDB whose InnoDB wait for a row lock is a
// second, as OpenMySQL sets it for callers whose deadline is 2 s.
func rowBusyLocks(t *testing.T) (*sql.DB, *lock.MySQLLocks) {
	t.Helper()
	db := testenv.Databases(t, database.Pool{LockWait: 2 * time.Second})["mysql"]
	var wait int
	require.NoError(t, db.Raw("SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&wait).Error)
	require.Equal(t, 1, wait, "InnoDB's wait for a row lock, in seconds")
	raw, err := db.DB.DB()
	require.NoError(t, err)
	return raw, lock.NewMySQLLocks(raw, lock.DialectMySQL, "", lock.MySQLLockOptions{})
}

// keepRowLocked gives name a free row and returns another connection's transaction that
// keeps that row locked (SELECT … FOR UPDATE) until it ends.
func keepRowLocked(ctx context.Context, t *testing.T, raw *sql.DB, locks *lock.MySQLLocks, name string) *sql.Tx {
	t.Helper()
	l := locks.MySQLLock(name)
	mustTake(t, l, time.Minute)
	require.NoError(t, l.Unlock(ctx))
	tx, err := raw.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	var owner string
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT owner FROM distributed_locks WHERE name = ? FOR UPDATE", name).Scan(&owner))
	require.Empty(t, owner, "the row is free; only the transaction keeps it")
	return tx
}

// TestMySQLLockRowKeptLockedIsNotObtained: on a real MariaDB, another connection's transaction
// keeps the lock's row locked (SELECT … FOR UPDATE) past InnoDB's wait for it, which
// OpenMySQL sets a second inside the caller's deadline (1 s here). TryLock reports false,
// nil, as for a row another owner holds: the database answered, the lock was someone else's
// for as long as the attempt could wait. Before, the wait's end (MySQL's error 1205) was an
// error, and an order answered 503 unavailable instead of 409 order_in_progress. Once the
// transaction ends the lock is free: the attempt left no hold behind.
func TestMySQLLockRowKeptLockedIsNotObtained(t *testing.T) {
	ctx := dbCtx(t)
	raw, locks := rowBusyLocks(t)
	name := testenv.Unique("rowbusy-")
	tx := keepRowLocked(ctx, t, raw, locks, name)

	ok, err := tryOnce(ctx, locks.New(name), time.Minute)
	require.NoError(t, err, "TryLock: InnoDB's wait ran out while another transaction kept the row")
	assert.False(t, ok, "TryLock")

	require.NoError(t, tx.Rollback())
	ok, err = tryOnce(ctx, locks.New(name), time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "free once the transaction ended")
}

// TestMySQLLockWaitForARowKeptLockedIsNotObtained: another connection's transaction keeps the
// lock's row locked for longer than the whole wait, InnoDB's wait for it a second. However the
// wait's end falls against that second, TryLockWait reports false, nil by then, and took no
// hold. Before, its attempts waited in InnoDB, and one begun less than InnoDB's second before
// the wait's bound (the wait and WaitOverrun) was cut there while InnoDB still waited, an
// error as from a database that does not answer: the 300 ms wait's first attempt, the longer
// waits' second, begun as InnoDB ended the first.
func TestMySQLLockWaitForARowKeptLockedIsNotObtained(t *testing.T) {
	t.Parallel()
	ctx := dbCtx(t)
	raw, locks := rowBusyLocks(t)
	for _, wait := range []time.Duration{300 * time.Millisecond, 1200 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(wait.String(), func(t *testing.T) {
			name := testenv.Unique("rowwait-")
			tx := keepRowLocked(ctx, t, raw, locks, name)

			l := locks.MySQLLock(name)
			start := time.Now()
			ok, err := l.TryLockWait(ctx, wait, time.Minute)
			took := time.Since(start)
			require.NoError(t, err, "TryLockWait(%s), another transaction keeping the row, after %s", wait, took)
			assert.False(t, ok)
			assert.Zero(t, l.Token(), "no grant")
			assert.Less(t, took, wait+lock.WaitOverrun, "TryLockWait(%s) returned after %s", wait, took)

			require.NoError(t, tx.Rollback())
			ok, err = tryOnce(ctx, locks.New(name), time.Minute)
			require.NoError(t, err)
			assert.True(t, ok, "free once the transaction ended: the wait left no hold")
		})
	}
}
