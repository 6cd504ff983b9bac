//go:build integration

package lock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
)

// TestMySQLLockRowKeptLockedIsNotObtained: on a real MariaDB, another connection's transaction
// keeps the lock's row locked (SELECT … FOR UPDATE) past InnoDB's wait for it, which
// OpenMySQL sets a second inside the caller's deadline (1 s here). TryLock and TryLockWait
// report false, nil, as for a row another owner holds: the database answered, the lock was
// someone else's for as long as the attempt could wait. Before, the wait's end (MySQL's error
// 1205) was an error, and an order answered 503 unavailable instead of 409 order_in_progress.
// Once the transaction ends the lock is free: the attempts left no hold behind.
func TestMySQLLockRowKeptLockedIsNotObtained(t *testing.T) {
	ctx := dbCtx(t)
	db := testenv.Databases(t, database.Pool{LockWait: 2 * time.Second})["mysql"]
	var wait int
	require.NoError(t, db.Raw("SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&wait).Error)
	require.Equal(t, 1, wait, "InnoDB's wait for a row lock, in seconds")
	raw, err := db.DB.DB()
	require.NoError(t, err)
	locks := lock.NewMySQLLocks(raw, lock.DialectMySQL, "", lock.MySQLLockOptions{})
	name := testenv.Unique("rowbusy-")
	l := locks.MySQLLock(name)
	mustTake(t, l, time.Minute) // the name's row exists, free again below
	require.NoError(t, l.Unlock(ctx))

	tx, err := raw.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var owner string
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT owner FROM distributed_locks WHERE name = ? FOR UPDATE", name).Scan(&owner))
	require.Empty(t, owner, "the row is free; only the transaction keeps it")

	ok, err := tryOnce(ctx, locks.New(name), time.Minute)
	require.NoError(t, err, "TryLock: InnoDB's wait ran out while another transaction kept the row")
	assert.False(t, ok, "TryLock")
	// A wait that ends while InnoDB's is under way: the attempt's answer comes within the
	// wait's half second of overrun, then the wait has run out. (An attempt begun so late in
	// the wait that InnoDB's second outlasts that overrun is cut short there: an error, as for
	// a database that does not answer.)
	other := locks.MySQLLock(name)
	ok, err = other.TryLockWait(ctx, 900*time.Millisecond, time.Minute)
	require.NoError(t, err, "TryLockWait")
	assert.False(t, ok, "TryLockWait")
	assert.Zero(t, other.Token(), "no grant")

	require.NoError(t, tx.Rollback())
	ok, err = tryOnce(ctx, locks.New(name), time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "free once the transaction ended")
}
