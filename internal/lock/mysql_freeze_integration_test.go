//go:build integration

package lock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
)

// TestMySQLLockWaitBoundedWhenMariaDBFreezes: a MariaDB of the test's own hangs (SIGSTOP)
// while a caller waits a second (TryLockWait, its ctx without a deadline) for a lock another
// process holds. TryLockWait must return within its wait, WaitOverrun and CleanupTimeout, with
// an error. Its attempt ran on the caller's ctx alone and waited for the DSN's read timeout
// (database.DefaultReadTimeout, 5 s, as the service opens its database), then the release
// after it half a second more.
func TestMySQLLockWaitBoundedWhenMariaDBFreezes(t *testing.T) {
	t.Parallel()
	srv := testenv.StartMariaDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := database.OpenMySQL(ctx, srv.CreateDatabase("seckill_lockfreeze"), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	raw, err := db.DB.DB()
	require.NoError(t, err)
	a := lock.NewMySQLLocks(raw, lock.SQLDialect(db.Dialect), "", lock.MySQLLockOptions{})
	b := lock.NewMySQLLocks(raw, lock.SQLDialect(db.Dialect), "", lock.MySQLLockOptions{})
	name := testenv.Unique("freeze-")
	mustTake(t, a.MySQLLock(name), time.Minute)

	srv.Freeze()
	t.Cleanup(srv.Thaw) // before the pool closes and the server is killed
	const wait = time.Second
	start := time.Now()
	ok, err := b.MySQLLock(name).TryLockWait(context.Background(), wait, time.Minute)
	took := time.Since(start)
	assert.False(t, ok)
	require.ErrorIs(t, err, context.DeadlineExceeded, "an attempt the frozen database did not answer")
	assert.Equal(t, 1, strings.Count(err.Error(), context.DeadlineExceeded.Error()), "the deadline said once: %v", err)
	const bound = wait + lock.WaitOverrun + lock.CleanupTimeout
	assert.LessOrEqual(t, took, bound+time.Second, "TryLockWait(%s) returned after %s (%v)", wait, took, err)
	t.Logf("returned %v, %v after %s", ok, err, took.Round(time.Millisecond))
}
