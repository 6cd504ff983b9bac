package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// sqlDB is one migrated database under test.
type sqlDB struct {
	name    string
	db      *sql.DB
	dialect migrations.Dialect
}

// eachDB runs f, in parallel, on the embedded SQLite and, in integration builds, on the real
// MariaDB/MySQL, each freshly migrated.
func eachDB(t *testing.T, f func(t *testing.T, d sqlDB)) {
	t.Helper()
	for name, db := range testenv.Databases(t, database.Pool{}) {
		raw, err := db.DB.DB()
		require.NoError(t, err)
		d := sqlDB{name: name, db: raw, dialect: db.Dialect}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, d)
		})
	}
}

// dbCtx bounds a test's database work.
func dbCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitingLock is a lock that can also wait for itself.
type waitingLock interface {
	lock.Lock
	TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error)
}

// checkExcludes lets goroutines (each with the lock lockOf(g) gives it) take, hold and
// release the lock rounds times each, all at once, and fails t unless every round got the
// lock and no two holders were ever inside together. Each holder runs hold inside and then
// pauses a millisecond, so that a second holder let in would be caught there.
func checkExcludes(t *testing.T, ctx context.Context, goroutines, rounds int, lockOf func(g int) waitingLock, hold func(l waitingLock)) {
	t.Helper()
	var (
		inside, most, grants atomic.Int32
		wg                   sync.WaitGroup
	)
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			l := lockOf(g)
			<-start
			for range rounds {
				ok, err := l.TryLockWait(ctx, 15*time.Second, 15*time.Second)
				if !assert.NoError(t, err) || !assert.True(t, ok, "wait ran out") {
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				hold(l)
				time.Sleep(time.Millisecond)
				grants.Add(1)
				inside.Add(-1)
				assert.NoError(t, l.Unlock(ctx))
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, int32(goroutines*rounds), grants.Load(), "grants")
	assert.Equal(t, int32(1), most.Load(), "most holders inside at once")
}

// twoProcesses returns the MySQLLocks of two processes on one database.
func twoProcesses(d sqlDB) (a, b *lock.MySQLLocks) {
	return lock.NewMySQLLocks(d.db, lock.SQLDialect(d.dialect), lock.NewProcessID(), lock.MySQLLockOptions{}),
		lock.NewMySQLLocks(d.db, lock.SQLDialect(d.dialect), lock.NewProcessID(), lock.MySQLLockOptions{})
}

// tryOnce makes one TryLock on l from a goroutine of its own: another request of the same
// process, hence another owner.
func tryOnce(ctx context.Context, l lock.Lock, lease time.Duration) (bool, error) {
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result)
	go func() {
		ok, err := l.TryLock(ctx, lease)
		done <- result{ok, err}
	}()
	r := <-done
	return r.ok, r.err
}

// unlockElsewhere calls l.Unlock from a goroutine of its own.
func unlockElsewhere(ctx context.Context, l lock.Lock) error {
	done := make(chan error)
	go func() { done <- l.Unlock(ctx) }()
	return <-done
}

func mustTake(t *testing.T, l *lock.MySQLLock, lease time.Duration) int64 {
	t.Helper()
	ok, err := l.TryLock(context.Background(), lease)
	require.NoError(t, err)
	require.True(t, ok, "lock %s not free", l.Name())
	return l.Token()
}

func TestMySQLLockExcludes(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		// Shorter pauses than the defaults keep the test quick.
		opts := lock.MySQLLockOptions{RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond}
		a := lock.NewMySQLLocks(d.db, lock.SQLDialect(d.dialect), lock.NewProcessID(), opts)
		b := lock.NewMySQLLocks(d.db, lock.SQLDialect(d.dialect), lock.NewProcessID(), opts)
		name := testenv.Unique("excl-")
		var (
			mu     sync.Mutex // guards tokens, appended inside the critical section
			tokens []int64
		)
		checkExcludes(t, ctx, 8, 4,
			func(g int) waitingLock { return []*lock.MySQLLocks{a, b}[g%2].MySQLLock(name) },
			func(l waitingLock) {
				token := l.(lock.Fenced).Token()
				var version int64
				assert.NoError(t, d.db.QueryRowContext(ctx, "SELECT version FROM distributed_locks WHERE name = ?", name).Scan(&version))
				assert.Equal(t, token, version, "the row's version while held")
				mu.Lock()
				tokens = append(tokens, token)
				mu.Unlock()
			})
		for i := 1; i < len(tokens); i++ {
			assert.Greater(t, tokens[i], tokens[i-1], "token of grant %d", i)
		}
	})
}

func TestMySQLLockOnlyOwnerUnlocks(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		a, b := twoProcesses(d)
		name := testenv.Unique("owner-")
		holder := a.MySQLLock(name)
		mustTake(t, holder, time.Minute)

		tests := []struct {
			name   string
			unlock func() error
		}{
			{"same lock, another goroutine", func() error { return unlockElsewhere(ctx, holder) }},
			{"same process, another goroutine", func() error { return unlockElsewhere(ctx, a.New(name)) }},
			{"another process", func() error { return b.New(name).Unlock(ctx) }},
			{"a name never locked", func() error { return a.New(name + "-none").Unlock(ctx) }},
		}
		for _, tt := range tests {
			err := tt.unlock()
			assert.ErrorIs(t, err, lock.ErrNotHeld, tt.name)
		}
		ok, err := b.New(name).TryLock(ctx, time.Minute)
		require.NoError(t, err)
		assert.False(t, ok, "the holder's lock survived the others' Unlock")
		require.NoError(t, holder.Unlock(ctx))
		ok, err = b.New(name).TryLock(ctx, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok, "free after the owner's Unlock")
	})
}

func TestMySQLLockReentry(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		a, b := twoProcesses(d)
		name := testenv.Unique("reentry-")
		l := a.MySQLLock(name)
		const depth = 3
		first := mustTake(t, l, time.Minute)
		for i := 1; i < depth; i++ {
			got := mustTake(t, l, time.Minute)
			assert.Equal(t, first, got, "re-entry %d keeps the token", i)
		}
		other := b.MySQLLock(name)
		for i := depth; i > 0; i-- {
			ok, err := other.TryLock(ctx, time.Minute)
			require.NoError(t, err)
			require.False(t, ok, "taken by another process with %d holds left", i)
			require.NoError(t, l.Unlock(ctx), "unlock with %d holds", i)
		}
		assert.Zero(t, l.Token(), "token after the last Unlock")
		assert.ErrorIs(t, l.Unlock(ctx), lock.ErrNotHeld, "one Unlock too many")
		got := mustTake(t, other, time.Minute)
		assert.Equal(t, first+1, got, "the next grant's token")
	})
}

// TestMySQLLockReentryNeverShortens: a re-entry may lengthen the row's lease, never shorten
// it, as ReentrantLock's: the outer hold (its watchdog, or its fixed lease's timer) counts on
// the lease it set, and a re-entry with a second's lease inside a minute's hold would let
// another owner take the row after the second, two holders.
func TestMySQLLockReentryNeverShortens(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		a, b := twoProcesses(d)
		name := testenv.Unique("reshort-")
		l := a.MySQLLock(name)
		left := func() time.Duration {
			t.Helper()
			got, err := lock.MySQLLockLeaseLeft(ctx, d.db, d.dialect, name)
			require.NoError(t, err)
			return got
		}
		token := mustTake(t, l, time.Minute)
		assert.Equal(t, token, mustTake(t, l, time.Millisecond), "a re-entry keeps the token")
		assert.Greater(t, left(), 50*time.Second, "lease left after a re-entry with a millisecond's lease, inside a minute's hold")
		ok, err := tryOnce(ctx, b.New(name), time.Minute)
		require.NoError(t, err)
		assert.False(t, ok, "another owner took the row of a minute's hold after a re-entry with a millisecond's lease")
		assert.Equal(t, token, mustTake(t, l, time.Hour), "a re-entry keeps the token")
		assert.Greater(t, left(), 59*time.Minute, "lease left after a re-entry with an hour's lease")

		// A re-entry of the owner's own expired row (nobody took it over) counts from now.
		require.NoError(t, lock.ExpireMySQLLock(ctx, d.db, d.dialect, name))
		assert.Equal(t, token, mustTake(t, l, time.Minute), "re-entry of the owner's expired row keeps the token")
		assert.Greater(t, left(), 50*time.Second, "lease left after re-entering the expired row")
		for range 4 {
			require.NoError(t, l.Unlock(ctx))
		}
		assert.Greater(t, mustTake(t, l, time.Second), token, "the next grant's token")
		// The released row's expiry was a minute away; SQLite's julianday reads times to
		// some tens of microseconds, hence no closer bound than that.
		assert.Less(t, left(), 10*time.Second, "a new grant's lease is its own, not the released row's")
	})
}

// TestMySQLLockExpiredTakeover is the crashed holder: it never unlocks, and its row is taken
// over only once it has expired.
func TestMySQLLockExpiredTakeover(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		a, b := twoProcesses(d)
		name := testenv.Unique("crash-")
		crashed := a.MySQLLock(name)
		first := mustTake(t, crashed, time.Second)

		next := b.MySQLLock(name)
		ok, err := next.TryLock(ctx, time.Minute)
		require.NoError(t, err)
		require.False(t, ok, "taken over before it expired")

		require.NoError(t, lock.ExpireMySQLLock(ctx, d.db, d.dialect, name))
		got := mustTake(t, next, time.Minute)
		assert.Equal(t, first+1, got, "the takeover's token")

		err = crashed.Unlock(ctx)
		require.ErrorIs(t, err, lock.ErrNotHeld, "the old holder's Unlock")
		ok, err = a.New(name).TryLock(ctx, time.Minute)
		require.NoError(t, err)
		assert.False(t, ok, "the old holder's Unlock released the new holder's lock")
		require.NoError(t, next.Unlock(ctx))
	})
}

// TestMySQLLockTakeoverIsAtomic races many goroutines of two processes for one expired row,
// round after round: exactly one takes it each time.
func TestMySQLLockTakeoverIsAtomic(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		procs := []*lock.MySQLLocks{}
		for range 2 {
			procs = append(procs, lock.NewMySQLLocks(d.db, lock.SQLDialect(d.dialect), lock.NewProcessID(), lock.MySQLLockOptions{}))
		}
		name := testenv.Unique("takeover-")
		token := mustTake(t, procs[0].MySQLLock(name), time.Minute)
		const goroutines, rounds = 16, 3
		for round := range rounds {
			require.NoError(t, lock.ExpireMySQLLock(ctx, d.db, d.dialect, name))
			var (
				wg      sync.WaitGroup
				winners atomic.Int32
				won     atomic.Int64
			)
			start := make(chan struct{})
			for g := range goroutines {
				wg.Go(func() {
					l := procs[g%2].MySQLLock(name)
					<-start
					ok, err := l.TryLock(ctx, time.Minute)
					assert.NoError(t, err)
					if ok {
						winners.Add(1)
						won.Store(l.Token())
					}
				})
			}
			close(start)
			wg.Wait()
			require.Equal(t, int32(1), winners.Load(), "round %d: goroutines that took the expired row", round)
			assert.Equal(t, token+1, won.Load(), "round %d: the winner's token", round)
			token = won.Load()
		}
	})
}

// TestMySQLLockTokenGrows follows one name through every kind of grant: first insert,
// re-entry, release and take, takeover of an expired row.
func TestMySQLLockTokenGrows(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		a, b := twoProcesses(d)
		name := testenv.Unique("token-")
		la, lb := a.MySQLLock(name), b.MySQLLock(name)
		var got []int64
		step := func(what string, f func()) {
			f()
			got = append(got, la.Token()+lb.Token()) // one of them holds
			t.Logf("%s: token %d", what, got[len(got)-1])
		}
		step("first grant (insert)", func() { mustTake(t, la, time.Minute) })
		step("re-entry", func() { mustTake(t, la, time.Minute) })
		step("release, then another process", func() {
			require.NoError(t, la.Unlock(ctx))
			require.NoError(t, la.Unlock(ctx))
			mustTake(t, lb, time.Minute)
		})
		step("takeover of the expired row", func() {
			require.NoError(t, lock.ExpireMySQLLock(ctx, d.db, d.dialect, name))
			mustTake(t, la, time.Minute)
			require.ErrorIs(t, lb.Unlock(ctx), lock.ErrNotHeld)
		})
		step("release, then the same owner again", func() {
			require.NoError(t, la.Unlock(ctx))
			mustTake(t, la, time.Minute)
		})
		assert.Equal(t, []int64{1, 1, 2, 3, 4}, got, "tokens")
	})
}

// TestMySQLLockLostGrantReleased: a grant that took the row but whose answer was lost. TryLock
// returns the error and gives the row back, so that another owner takes it at once instead
// of after the lease (a minute here). TestMySQLLockFailedReentryGivesBackOnlyItsOwn has the
// re-entries.
func TestMySQLLockLostGrantReleased(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		var armed atomic.Bool
		lossy := lock.NewMySQLLocks(d.db, lock.SQLDialect(d.dialect), "", lock.MySQLLockOptions{})
		lock.LoseGrantReplies(lossy, &armed)
		other := lock.NewMySQLLocks(d.db, lock.SQLDialect(d.dialect), "", lock.MySQLLockOptions{})
		name := testenv.Unique("lost-")
		first := lossy.MySQLLock(name) // the row exists from here on: the next TryLock is a grant
		ok, err := first.TryLock(ctx, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, first.Unlock(ctx))

		armed.Store(true)
		l := lossy.MySQLLock(name)
		ok, err = l.TryLock(ctx, time.Minute)
		require.ErrorIs(t, err, lock.ErrGrantReplyLost)
		require.False(t, armed.Load(), "the grant ran")
		assert.False(t, ok)
		o := other.MySQLLock(name)
		ok, err = o.TryLock(ctx, time.Minute)
		require.NoError(t, err)
		require.True(t, ok, "another owner takes the row at once: the lost grant was given back")
		require.NoError(t, o.Unlock(ctx))
	})
}

// TestMySQLLockFailedReentryGivesBackOnlyItsOwn: a goroutine that holds the row tries it again,
// through the same MySQLLock or through a second one (a caller that calls New per use), and
// the attempt fails: its grant never reached the database, or it ran and its answer was lost.
// The caller cannot tell which, so the cleanup must give back the hold of a grant that ran and
// nothing else: the hold from before stays (another owner cannot take the row), its token
// with it, and its one Unlock frees the row (no hold is left over to wait out the lease). The
// cleanup used to trust the MySQLLock's token to tell a re-entry: through a second lock it
// released the first hold after a grant that never ran, freeing the row under its holder, and
// through the same lock it kept the hold of a grant that ran, which outlived the last Unlock.
func TestMySQLLockFailedReentryGivesBackOnlyItsOwn(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		tests := []struct {
			name    string
			fail    func(*lock.MySQLLocks, *atomic.Bool)
			want    error
			another bool // retry through a second MySQLLock of the same goroutine
		}{
			{"same lock, grant never ran", lock.RefuseGrants, lock.ErrGrantRefused, false},
			{"same lock, reply lost", lock.LoseGrantReplies, lock.ErrGrantReplyLost, false},
			{"another lock, grant never ran", lock.RefuseGrants, lock.ErrGrantRefused, true},
			{"another lock, reply lost", lock.LoseGrantReplies, lock.ErrGrantReplyLost, true},
		}
		for _, tt := range tests {
			var armed atomic.Bool
			procA, procB := twoProcesses(d)
			tt.fail(procA, &armed)
			name := testenv.Unique("refail-")
			holder := procA.MySQLLock(name)
			token := mustTake(t, holder, time.Minute)

			again := holder
			if tt.another {
				again = procA.MySQLLock(name)
			}
			armed.Store(true)
			ok, err := again.TryLock(ctx, time.Minute)
			require.ErrorIs(t, err, tt.want, tt.name)
			require.False(t, armed.Load(), "%s: the hook fired", tt.name)
			assert.False(t, ok, tt.name)

			other := procB.New(name)
			ok, err = other.TryLock(ctx, time.Minute)
			require.NoError(t, err, tt.name)
			assert.False(t, ok, "%s: another owner took the row the holder still holds", tt.name)
			assert.Equal(t, token, holder.Token(), "%s: the holder's token", tt.name)
			require.NoError(t, holder.Unlock(ctx), tt.name)
			ok, err = other.TryLock(ctx, time.Minute)
			require.NoError(t, err, tt.name)
			assert.True(t, ok, "%s: the holder's one Unlock left the row held: a hold of the failed attempt outlived it", tt.name)
		}
	})
}

func TestMySQLLockTryLockWait(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		a, b := twoProcesses(d)
		name := testenv.Unique("wait-")
		holder := a.MySQLLock(name)
		mustTake(t, holder, time.Minute)
		waiter := b.MySQLLock(name)

		const wait = 150 * time.Millisecond
		start := time.Now()
		ok, err := waiter.TryLockWait(ctx, wait, time.Minute)
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.False(t, ok, "held elsewhere")
		assert.GreaterOrEqual(t, elapsed, wait, "gave up before its wait")
		assert.Less(t, elapsed, wait+2*time.Second, "waited far past its wait")

		short, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		ok, err = waiter.TryLockWait(short, -1, time.Minute)
		assert.False(t, ok)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "wait < 0 ends with ctx")

		// A waiter ends with the lock once the holder releases it, whether its first attempt
		// comes before the release or after; TestRetry covers the retries themselves.
		got := make(chan error, 1)
		go func() {
			ok, err := waiter.TryLockWait(ctx, 10*time.Second, time.Minute)
			if err == nil && !ok {
				err = errors.New("wait ran out")
			}
			got <- err
		}()
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-got)
		assert.NotZero(t, waiter.Token())
	})
}

func TestMySQLLockRejects(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		ctx := dbCtx(t)
		a, _ := twoProcesses(d)
		tests := []struct {
			name  string
			lock  string
			lease time.Duration
			want  string
		}{
			{"lease under a millisecond", "short", time.Millisecond - 1, lock.ErrInvalidTTL.Error()},
			{"name too long", strings.Repeat("n", 256), time.Second, "longer than 255 bytes"},
		}
		for _, tt := range tests {
			ok, err := a.New(tt.lock).TryLock(ctx, tt.lease)
			assert.False(t, ok, tt.name)
			assert.ErrorContains(t, err, tt.want, tt.name)
		}
	})
}

func TestMySQLLocksUnknownDialect(t *testing.T) {
	assert.PanicsWithValue(t, `lock: NewMySQLLocks: no statements for dialect "postgres"`, func() {
		lock.NewMySQLLocks(nil, "postgres", "", lock.MySQLLockOptions{})
	})
}

// TestMySQLLockWaitBoundedWhenTheDatabaseHangs: a caller waits (TryLockWait, its ctx without
// a deadline) for a lock another process holds, and the database answers nothing. Its
// attempt must not outlast the wait by more than WaitOverrun, nor the release of what that
// attempt may have taken by more than CleanupTimeout, as for the Redis locks. The attempts
// ran on the caller's ctx alone, and waited as long as the driver's read timeout, or for ever.
func TestMySQLLockWaitBoundedWhenTheDatabaseHangs(t *testing.T) {
	eachDB(t, func(t *testing.T, d sqlDB) {
		a, b := twoProcesses(d)
		name := testenv.Unique("hang-")
		mustTake(t, a.MySQLLock(name), time.Minute)
		var hung atomic.Bool
		lock.HangStatements(b, &hung)
		noDeadline, cancel := context.WithCancel(context.Background())
		defer cancel() // ends a hung attempt when the test has failed
		hung.Store(true)

		const wait = 300 * time.Millisecond
		type result struct {
			ok   bool
			err  error
			took time.Duration
		}
		done := make(chan result, 1)
		go func() {
			start := time.Now()
			ok, err := b.MySQLLock(name).TryLockWait(noDeadline, wait, time.Minute)
			done <- result{ok, err, time.Since(start)}
		}()
		const bound = wait + lock.WaitOverrun + lock.CleanupTimeout
		select {
		case r := <-done:
			assert.False(t, r.ok)
			require.ErrorIs(t, r.err, context.DeadlineExceeded, "an attempt the database did not answer")
			assert.Equal(t, 1, strings.Count(r.err.Error(), context.DeadlineExceeded.Error()), "the deadline said once: %v", r.err)
			assert.LessOrEqual(t, r.took, bound+2*time.Second, "TryLockWait(%s) returned after %s (%v)", wait, r.took, r.err)
		case <-time.After(10 * time.Second):
			cancel()
			<-done
			t.Fatalf("TryLockWait(%s) had not returned 10s after it began, the database hanging", wait)
		}
	})
}
