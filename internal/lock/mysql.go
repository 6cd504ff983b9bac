package lock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Defaults for MySQLLockOptions fields left zero.
const (
	// DefaultMySQLRetryDelay is the mean first pause between two attempts of
	// MySQLLock.TryLockWait.
	DefaultMySQLRetryDelay = 10 * time.Millisecond
	// DefaultMySQLMaxRetryDelay caps the mean pause as it doubles.
	DefaultMySQLMaxRetryDelay = 200 * time.Millisecond
)

// maxMySQLLockName is the longest lock name, in bytes, that the table's name column holds.
const maxMySQLLockName = 255

// MySQLLockOptions configures MySQLLocks. The zero value is usable.
type MySQLLockOptions struct {
	// RetryDelay is the mean first pause of TryLockWait between two attempts; each further
	// pause doubles, up to MaxRetryDelay, and each is drawn uniformly from [d/2, 3d/2) so
	// that waiters that failed together do not poll together. DefaultMySQLRetryDelay when
	// zero or negative.
	RetryDelay time.Duration
	// MaxRetryDelay caps the mean pause. DefaultMySQLMaxRetryDelay when zero or negative.
	MaxRetryDelay time.Duration
}

// MySQLLocks makes one process's MySQLLocks: the database lock of the classic articles, a
// table (distributed_locks, created by the migrations) with a unique index on the lock name,
// where the owner that writes the name's row holds the lock. It runs on MySQL, MariaDB and
// the embedded SQLite, and it fixes the four weaknesses the articles list for the
// bare table:
//
//   - Owner. The row records the owner, process id + "-" + goroutine id as in hmdp's
//     SimpleRedisLock, so that only the owner releases it, and the owner may take it again
//     (reentrancy): a hold count goes up with each TryLock and down with each Unlock.
//   - Expiry. The row records when it expires. A holder that crashed leaves its row behind;
//     once the row has expired the next owner takes it over with one conditional UPDATE
//     (… WHERE name = ? AND expires_at < now), which the database runs atomically: of many
//     contenders for an expired row exactly one matches it. The row is never deleted and
//     inserted again, which would let two contenders each delete the other's fresh row.
//   - Blocking. TryLockWait polls with jittered, doubling pauses, bounded by its wait and
//     its context.
//   - Fencing. The row's version grows by one with every grant of the name (not with
//     re-entry) and is the holder's fencing token (Token), in Kleppmann's sense: storage
//     that remembers the highest token it has seen can refuse the writes of a holder whose
//     lease ran out while it was paused. That is why a released row stays, owner emptied,
//     instead of being deleted: a fresh row would start counting at 1 again. The table
//     keeps one row per name ever used.
//
// Every time is the database's: expires_at is written and compared with the database
// server's clock in the same statement (UTC_TIMESTAMP(6) on MySQL, strftime('%f', 'now') on
// SQLite), never with the clock of the process that asks. Instances whose clocks disagree
// still agree on whether a row has expired; only a jump of the database server's own clock
// moves every expiry with it. UTC rather than NOW(6) because NOW follows each session's
// time_zone, and two sessions with different zones would disagree. SQLite's clock has
// millisecond resolution, MySQL's microsecond.
//
// Availability is the database's: the lock is as available as the primary it writes to, and
// a failover to an asynchronous replica that had not received the latest grant can grant
// the name again, as a Redis failover can. The fencing token does not make that survivable
// here: the replica counts on from the version it had, so the second grant repeats the lost
// grant's token, and the order write's fence (internal/order, lock_fences) accepts a token
// equal to the last it accepted, since that is how it lets one grant write twice (a re-entry,
// LocalRemoteLock's local handoff). Both holders then pass the fence; the unique key on
// (user, voucher) is what stops the second order. Storage that told grants apart (a grant
// identity beside the token) would let only one write; this one does not.
//
// Tested on MariaDB 10.11, MySQL 9.7 (make test-mysql) and SQLite; the MySQL statements use
// only what MySQL 8 documents too (LAST_INSERT_ID(expr) in an UPDATE, UTC_TIMESTAMP(6),
// INTERVAL … MICROSECOND), but no MySQL 8 server was at hand to run them.
type MySQLLocks struct {
	db       *sql.DB
	sql      *lockStatements
	process  string
	retry    time.Duration
	maxRetry time.Duration
}

// NewMySQLLocks returns the MySQLLocks of process (NewProcessID() when empty) on db, whose
// SQL dialect is dialect and whose migrations have been applied. It panics on a dialect it
// has no statements for.
func NewMySQLLocks(db *sql.DB, dialect SQLDialect, process string, opts MySQLLockOptions) *MySQLLocks {
	stmts, ok := lockSQL[dialect]
	if !ok {
		panic(fmt.Sprintf("lock: NewMySQLLocks: no statements for dialect %q", dialect))
	}
	if process == "" {
		process = NewProcessID()
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultMySQLRetryDelay
	}
	if opts.MaxRetryDelay <= 0 {
		opts.MaxRetryDelay = DefaultMySQLMaxRetryDelay
	}
	return &MySQLLocks{db: db, sql: stmts, process: process, retry: opts.RetryDelay, maxRetry: max(opts.MaxRetryDelay, opts.RetryDelay)}
}

// New returns the MySQLLock named name as a Lock.
func (s *MySQLLocks) New(name string) Lock { return s.MySQLLock(name) }

// MySQLLock returns the lock named name: the row of distributed_locks whose name is name.
func (s *MySQLLocks) MySQLLock(name string) *MySQLLock {
	return &MySQLLock{s: s, name: name}
}

// MySQLLock is one named lock of a MySQLLocks. Like SimpleRedisLock, its owner is the
// calling goroutine: the goroutine that took it is the one that re-enters and releases it.
// Take one MySQLLock per holder (New is cheap): Token reports the grant that this MySQLLock
// made last, whichever goroutine asked. The holds themselves are the goroutine's, whichever
// of its MySQLLocks took them: it re-enters through a second MySQLLock of the name, and each
// Unlock gives up one hold.
type MySQLLock struct {
	s     *MySQLLocks
	name  string
	token atomic.Int64
}

// Name returns the lock's name, the key of its row.
func (l *MySQLLock) Name() string { return l.name }

// Token returns the fencing token of the current hold: the row's version when this lock was
// granted, which is larger than that of every earlier grant of the name and stays the same
// while the owner re-enters. It is 0 before the first grant, and after an Unlock that gave
// up the last hold or returned ErrNotHeld.
func (l *MySQLLock) Token() int64 { return l.token.Load() }

// TryLock tries once, and never waits. It takes the row when it is free, expired, or
// already the calling goroutine's (then the hold count goes up and the token stays), and
// sets its expiry to lease from now on the database's clock, except that a re-entry never
// shortens it (as ReentrantLock's: the outer hold counts on the lease it set, and a shorter
// one would let another owner in while it still works); it inserts the row when the name
// has none. It reports false, nil when another owner holds an unexpired row, and also when
// another transaction kept the row locked until the database ended this attempt's wait for
// it (MySQL's error 1205, after innodb_lock_wait_timeout, which database.OpenMySQL sets a
// second inside the caller's deadline): the database answered, the statement was rolled back
// and took nothing, and the lock was someone else's for as long as the attempt could wait,
// which is contention, as the other backends report it, not a failure of the database. It
// returns ErrInvalidTTL for a lease under a millisecond. An attempt that fails (an error, ctx
// ending mid-statement) may or may not have run: its statement may have taken or re-entered
// the row with only the answer lost, or never reached the database. TryLock then gives back
// the hold that attempt made, if it made one, and none other, at once, on a context of its
// own bounded by half a second, and returns the attempt's error: a hold the caller had
// before, through this MySQLLock or another of the same goroutine, stays as it was. If that
// release fails too, the attempt's hold lasts until the row expires.
func (l *MySQLLock) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	return l.try(ctx, lease, l.s.grant)
}

// grantFunc takes a name's row for an owner, as MySQLLocks.grant does.
type grantFunc func(ctx context.Context, name, owner string, lease time.Duration, attempt int64) (int64, bool, error)

// try is TryLock, taking an existing row with grant.
func (l *MySQLLock) try(ctx context.Context, lease time.Duration, grant grantFunc) (bool, error) {
	if lease < time.Millisecond {
		return false, fmt.Errorf("lock %s: %w", l.name, ErrInvalidTTL)
	}
	if len(l.name) > maxMySQLLockName {
		return false, fmt.Errorf("lock %s: name longer than %d bytes", l.name, maxMySQLLockName)
	}
	owner := owner(l.s.process)
	// The row carries the attempt that last took or re-entered it, so that the release
	// after a failed attempt can tell a hold this attempt made from one the owner already
	// had: the token says only what this MySQLLock holds, not what the goroutine holds
	// through another, and whether a statement whose answer was lost ever ran is known only
	// to the row.
	attempt := newAttempt()
	version, ok, err := grant(ctx, l.name, owner, lease, attempt)
	if err == nil && !ok {
		// No row to take: either the name has none yet, or another owner holds it. An
		// INSERT tells which; when another contender inserted the row in between, it may
		// also have released it already, so take it again.
		var inserted bool
		inserted, err = l.s.insert(ctx, l.name, owner, lease, attempt)
		switch {
		case err != nil:
		case inserted:
			version, ok = 1, true
		default:
			version, ok, err = grant(ctx, l.name, owner, lease, attempt)
		}
	}
	if err != nil && l.s.sql.isRowBusy(err) {
		// Rolled back, and no earlier statement of this attempt took the row: nothing to
		// give back (a release would only wait for the same row lock).
		return false, nil
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_, _, _ = l.s.release(cctx, l.name, owner, attempt)
		cancel()
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			// The driver may report a statement cut short by ctx in its own words (SQLite:
			// "interrupted (9)"); the caller's contract is ctx's error. One that reports
			// ctx's error already keeps it as it is, said once.
			err = fmt.Errorf("%w (%v)", ctxErr, err)
		}
		return false, fmt.Errorf("lock %s: %w", l.name, err)
	}
	if ok {
		l.token.Store(version)
	}
	return ok, nil
}

// TryLockWait tries, and while another owner holds the lock tries again after a pause:
// RetryDelay on average at first, doubling up to MaxRetryDelay, each drawn from [d/2, 3d/2).
// It stops when it has the lock, when wait runs out (false, nil) or when ctx ends (ctx's
// error), and returns at once the error of an attempt that failed. wait == 0 tries once, as
// TryLock; wait < 0 waits as long as ctx allows.
//
// With wait != 0 the pauses do all the waiting: an attempt never waits for the row's lock. It
// locks the row first, in a transaction of its own, with FOR UPDATE NOWAIT (four round trips
// where TryLock makes one), and a row that another transaction keeps locked is not obtained
// at once, as a row another owner holds, and tried again after the pause. So a wait that runs
// out while another owner keeps the lock, by its row or by its row's lock, reports false,
// nil, wherever InnoDB's innodb_lock_wait_timeout would have ended an attempt begun near the
// wait's end. With wait > 0 every attempt ends half a second after the wait at the latest, as
// the Redis locks' do: a database that does not answer holds the caller for wait, that half
// second and the release after a failed attempt (another half second) at most, whatever ctx
// and the driver's timeouts; such an attempt is an error. The one statement NOWAIT cannot
// bound is a name's first INSERT, which waits while another transaction that inserted the same
// name, or locked the gap where it goes, stays open; cut short by that bound, it is an error
// too.
func (l *MySQLLock) TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error) {
	actx, cancel := waitBound(ctx, time.Now(), wait)
	defer cancel()
	grant := l.s.grantNoWait
	if wait == 0 {
		grant = l.s.grant
	}
	ok, err := retry(ctx, wait, backoff(l.s.retry, l.s.maxRetry), nil, func() (bool, error) {
		return l.try(actx, lease, grant)
	})
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		err = fmt.Errorf("%w (no answer within the wait and %s)", err, waitOverrun)
	}
	return ok, err
}

// Unlock gives up one hold of the calling goroutine: the hold count goes down, and at zero
// the row is freed (owner emptied, version kept). It returns an error wrapping ErrNotHeld
// when the row is not the caller's: it expired and another owner took it over, the name
// has no row, or the caller is not the goroutine that took it. A row that expired but that
// nobody has taken over is still the owner's, and Unlock releases it.
func (l *MySQLLock) Unlock(ctx context.Context) error {
	left, ok, err := l.s.release(ctx, l.name, owner(l.s.process), anyAttempt)
	if err != nil {
		return fmt.Errorf("unlock %s: %w", l.name, err)
	}
	if !ok {
		l.token.Store(0)
		return fmt.Errorf("unlock %s: %w", l.name, ErrNotHeld)
	}
	if left == 0 {
		l.token.Store(0)
	}
	return nil
}

// anyAttempt is the attempt that release takes for "whichever attempt took the row";
// newAttempt never returns it, and rows from before the attempt column carry it.
const anyAttempt int64 = 0

// newAttempt returns a number that marks one TryLock's statements: random, so that no
// earlier TryLock of the same owner, in this process or an earlier run of it, marked a row
// with it (a collision is one chance in 2^63), and never anyAttempt.
func newAttempt() int64 { return rand.Int64N(math.MaxInt64) + 1 }

// grant runs the take-over UPDATE, marking the row with attempt, and returns the row's
// version when it took the row.
func (s *MySQLLocks) grant(ctx context.Context, name, owner string, lease time.Duration, attempt int64) (int64, bool, error) {
	return s.grantOn(ctx, s.db, name, owner, lease, attempt)
}

// grantOn is grant on db, the pool or a transaction.
func (s *MySQLLocks) grantOn(ctx context.Context, db execer, name, owner string, lease time.Duration, attempt int64) (int64, bool, error) {
	return s.sql.update(ctx, db, s.sql.grant, owner, owner, owner, s.sql.lease(lease), owner, attempt, name, owner)
}

// grantNoWait is grant that never waits for the row's lock (TryLockWait's attempts): in a
// transaction, lockRow locks the row first and fails at once (isRowBusy) when another
// transaction keeps it locked; the UPDATE then finds the row locked by its own transaction.
// A name without a row matches nothing, as with grant, and the transaction ends at once, its
// lock on the absent name's gap with it, before the caller inserts the row. Where the
// database locks no rows it is grant.
func (s *MySQLLocks) grantNoWait(ctx context.Context, name, owner string, lease time.Duration, attempt int64) (int64, bool, error) {
	if s.sql.lockRow == "" {
		return s.grant(ctx, name, owner, lease, attempt)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	var one int
	err = tx.QueryRowContext(ctx, s.sql.lockRow, name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, tx.Rollback()
	}
	var version int64
	var ok bool
	if err == nil {
		version, ok, err = s.grantOn(ctx, tx, name, owner, lease, attempt)
	}
	if err != nil {
		_ = tx.Rollback()
		return 0, false, err
	}
	return version, ok, tx.Commit()
}

// insert creates the name's row, held by owner and marked with attempt, and reports false
// when the row exists.
func (s *MySQLLocks) insert(ctx context.Context, name, owner string, lease time.Duration, attempt int64) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.sql.insert, name, owner, s.sql.lease(lease), attempt)
	if s.sql.isDuplicate(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// release runs the release UPDATE and returns the holds owner has left. With an attempt
// other than anyAttempt it releases only a row that attempt took or re-entered last.
func (s *MySQLLocks) release(ctx context.Context, name, owner string, attempt int64) (int64, bool, error) {
	return s.sql.update(ctx, s.db, s.sql.release, name, owner, attempt)
}
