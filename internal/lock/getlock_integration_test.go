//go:build integration

package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
)

// getLockDB opens a fresh database on the real MariaDB/MySQL. GET_LOCK names are
// server-wide, so the tests also draw unique names.
func getLockDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := database.OpenMySQL(context.Background(), testenv.MySQLDSN(t), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	raw, err := db.DB.DB()
	require.NoError(t, err)
	return raw
}

func TestGetLockExcludes(t *testing.T) {
	db := getLockDB(t)
	ctx := dbCtx(t)
	procs := []*lock.MySQLGetLocks{lock.NewMySQLGetLocks(db, lock.NewProcessID()), lock.NewMySQLGetLocks(db, lock.NewProcessID())}
	name := testenv.Unique("getlock-excl-")
	checkExcludes(t, ctx, 8, 4,
		func(g int) waitingLock { return procs[g%2].GetLock(name) },
		func(waitingLock) {})
}

func TestGetLockReentryAndRelease(t *testing.T) {
	db := getLockDB(t)
	ctx := dbCtx(t)
	a, b := lock.NewMySQLGetLocks(db, ""), lock.NewMySQLGetLocks(db, "")
	name := testenv.Unique("getlock-re-")
	l := a.GetLock(name)
	const depth = 2
	for i := range depth {
		ok, err := l.TryLock(ctx, 0)
		require.NoError(t, err)
		require.True(t, ok, "hold %d", i+1)
	}
	assert.ErrorIs(t, unlockElsewhere(ctx, l), lock.ErrNotHeld, "another goroutine's Unlock")
	for i := depth; i > 0; i-- {
		ok, err := tryOnce(ctx, b.New(name), 0)
		require.NoError(t, err)
		require.False(t, ok, "taken by another process with %d holds left", i)
		ok, err = tryOnce(ctx, l, 0)
		require.NoError(t, err)
		require.False(t, ok, "taken by another goroutine of the holder's process with %d holds left", i)
		require.NoError(t, l.Unlock(ctx), "unlock with %d holds", i)
	}
	assert.ErrorIs(t, l.Unlock(ctx), lock.ErrNotHeld, "one Unlock too many")
	other := b.GetLock(name)
	ok, err := other.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok, "free after the last Unlock")
	require.NoError(t, other.Unlock(ctx))
}

func TestGetLockTryLockWait(t *testing.T) {
	db := getLockDB(t)
	ctx := dbCtx(t)
	a, b := lock.NewMySQLGetLocks(db, ""), lock.NewMySQLGetLocks(db, "")
	name := testenv.Unique("getlock-wait-")
	holder := a.GetLock(name)
	ok, err := holder.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	waiter := b.GetLock(name)

	const wait = 300 * time.Millisecond
	start := time.Now()
	ok, err = waiter.TryLockWait(ctx, wait, 0)
	elapsed := time.Since(start)
	require.NoError(t, err)
	assert.False(t, ok, "held elsewhere")
	assert.GreaterOrEqual(t, elapsed, wait-10*time.Millisecond, "gave up before its wait (the server's clock)")
	assert.Less(t, elapsed, wait+2*time.Second, "waited far past its wait")

	short, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ok, err = waiter.TryLockWait(short, -1, 0)
	assert.False(t, ok)
	if err != nil { // the server's wait, bounded by ctx's deadline, may end just before ctx
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	}
	require.NoError(t, holder.Unlock(ctx))
}

// TestGetLockPolledRemainder runs the wait as on MySQL, which reads GET_LOCK's timeout as
// whole seconds: a 400 ms wait is all polled. The holder releases just before the first poll
// (the hook), and that poll takes the lock.
func TestGetLockPolledRemainder(t *testing.T) {
	db := getLockDB(t)
	ctx := dbCtx(t)
	a, b := lock.NewMySQLGetLocks(db, ""), lock.NewMySQLGetLocks(db, "")
	name := testenv.Unique("getlock-poll-")
	release := holdElsewhere(ctx, t, a, name)

	var polls atomic.Int32
	lock.PollGetLocks(b, func() {
		if polls.Add(1) == 1 {
			require.NoError(t, release())
		}
	})
	waiter := b.GetLock(name)
	ok, err := waiter.TryLockWait(ctx, 900*time.Millisecond, 0) // under a second: the polling path
	require.NoError(t, err)
	require.True(t, ok, "the lock was free at the first poll")
	assert.Equal(t, int32(1), polls.Load(), "taken at the first poll, after the release")
	require.NoError(t, waiter.Unlock(ctx))
}

// TestGetLockFreedWithItsConnection kills the holder's connection, as a crash or a network
// drop would end its session: the server frees the lock, and the holder learns only at its
// Unlock.
func TestGetLockFreedWithItsConnection(t *testing.T) {
	db := getLockDB(t)
	ctx := dbCtx(t)
	a, b := lock.NewMySQLGetLocks(db, ""), lock.NewMySQLGetLocks(db, "")
	name := testenv.Unique("getlock-kill-") + strings.Repeat("x", 80) // hashed: over 64 characters
	holder := a.GetLock(name)
	require.Len(t, holder.Name(), 64)
	ok, err := holder.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)

	var conn sql.NullInt64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", holder.Name()).Scan(&conn))
	require.True(t, conn.Valid, "IS_USED_LOCK: nobody holds it")
	_, err = db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", conn.Int64)) // not preparable on every server
	require.NoError(t, err)

	next := b.GetLock(name)
	ok, err = next.TryLockWait(ctx, 10*time.Second, 0) // the server wakes it when the killed session ends
	require.NoError(t, err)
	require.True(t, ok, "still held after its connection was killed")
	assert.ErrorIs(t, holder.Unlock(ctx), lock.ErrNotHeld, "the killed holder's Unlock")
	require.NoError(t, next.Unlock(ctx))
}

// TestGetLockWaitBoundsThePoolWait: every holder pins a connection, so the pool can be empty
// when a waiter comes, here held by the holder of another name. TryLockWait must still end
// when its wait runs out, not wait for a connection as long as its context allows.
func TestGetLockWaitBoundsThePoolWait(t *testing.T) {
	db := getLockDB(t)
	db.SetMaxOpenConns(1)
	ctx := dbCtx(t)
	a, b := lock.NewMySQLGetLocks(db, ""), lock.NewMySQLGetLocks(db, "")
	// The holder of another name pins the pool's only connection.
	release := holdElsewhere(ctx, t, a, testenv.Unique("getlock-pool-other-"))
	defer func() { require.NoError(t, release()) }()

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	ok, err := b.GetLock(testenv.Unique("getlock-pool-")).TryLockWait(wctx, 300*time.Millisecond, 0)
	elapsed := time.Since(start)
	assert.False(t, ok)
	assert.Less(t, elapsed, 2*time.Second, "a 300ms wait took %s (until its context ended: %v)", elapsed, err)
	assert.NoError(t, wctx.Err(), "the wait ran out before the context")
}

// holdElsewhere takes name with locks on a goroutine of its own (a GET_LOCK belongs to its
// goroutine's session) and returns once it holds it; release unlocks it there.
func holdElsewhere(ctx context.Context, t *testing.T, locks *lock.MySQLGetLocks, name string) (release func() error) {
	t.Helper()
	rel, released := make(chan struct{}), make(chan error)
	go func() {
		holder := locks.GetLock(name)
		ok, err := holder.TryLock(ctx, 0)
		if err == nil && !ok {
			err = errors.New("holder: not acquired")
		}
		released <- err
		<-rel
		released <- holder.Unlock(ctx)
	}()
	require.NoError(t, <-released)
	return func() error { close(rel); return <-released }
}

// TestGetLockWaitLongerThanTheReadTimeout: a wait longer than the DSN's readTimeout (2 s
// here; the service's is 5 s) must run out as a wait does, false, nil, on MariaDB (the server
// waits fractions of a second) and as on MySQL (whole seconds, the rest polled). The server
// waited all of it in one GET_LOCK, and the driver gave up reading its answer at the read
// timeout: an error ("invalid connection") and a discarded connection, a second and a half
// before the wait was over.
func TestGetLockWaitLongerThanTheReadTimeout(t *testing.T) {
	t.Parallel()
	for _, flavour := range []string{"server", "seconds"} {
		t.Run(flavour, func(t *testing.T) {
			cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
			require.NoError(t, err)
			cfg.ReadTimeout = 2 * time.Second
			opened, err := database.OpenMySQL(context.Background(), cfg.FormatDSN(), database.Pool{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = opened.Close() })
			db, err := opened.DB.DB()
			require.NoError(t, err)
			ctx := dbCtx(t)
			a, b := lock.NewMySQLGetLocks(db, ""), lock.NewMySQLGetLocks(db, "")
			if flavour == "seconds" {
				lock.PollGetLocks(b, func() {})
			}
			name := testenv.Unique("getlock-long-")
			release := holdElsewhere(ctx, t, a, name)
			defer func() { require.NoError(t, release()) }()

			const wait = 3500 * time.Millisecond
			ok, err := b.GetLock(name).TryLockWait(ctx, wait, 0)
			require.NoError(t, err, "a %s wait with a %s read timeout", wait, cfg.ReadTimeout)
			assert.False(t, ok, "held elsewhere")
		})
	}
}
