package lock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/migrations"
)

// Owner exposes owner to the external tests, which check the value a SimpleRedisLock writes.
var Owner = owner

// ExpireMySQLLock moves the expiry of name's row one second into the past on the database's
// clock, as if its holder had crashed a lease ago: the controlled expiry of the tests.
func ExpireMySQLLock(ctx context.Context, db *sql.DB, dialect migrations.Dialect, name string) error {
	past := map[migrations.Dialect]string{
		migrations.MySQL:  "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND",
		migrations.SQLite: "strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 seconds')",
	}[dialect]
	res, err := db.ExecContext(ctx, "UPDATE distributed_locks SET expires_at = "+past+" WHERE name = ?", name)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("expire %s: %d rows, %v", name, n, err)
	}
	return nil
}

// MySQLLockLeaseLeft returns how long name's row has left before it expires, on the
// database's clock: the controlled look at a lease that the tests compare with what a
// TryLock set.
func MySQLLockLeaseLeft(ctx context.Context, db *sql.DB, dialect migrations.Dialect, name string) (time.Duration, error) {
	left := map[migrations.Dialect]string{
		migrations.MySQL:  "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)",
		migrations.SQLite: "CAST(ROUND((julianday(expires_at) - julianday('now')) * 86400000000) AS INTEGER)",
	}[dialect]
	var us int64
	err := db.QueryRowContext(ctx, "SELECT "+left+" FROM distributed_locks WHERE name = ?", name).Scan(&us)
	return time.Duration(us) * time.Microsecond, err
}

// ErrGrantReplyLost is what LoseGrantReplies reports instead of a grant's answer.
var ErrGrantReplyLost = errors.New("read tcp: i/o timeout (the grant's reply was lost)")

// LoseGrantReplies makes the grant statement of s, each time armed is set, run on the
// database and then report ErrGrantReplyLost instead of its answer (and clears armed).
func LoseGrantReplies(s *MySQLLocks, armed *atomic.Bool) {
	stmts := *s.sql
	run := stmts.update
	stmts.update = func(ctx context.Context, db execer, query string, args ...any) (int64, bool, error) {
		v, ok, err := run(ctx, db, query, args...)
		if err == nil && query == stmts.grant && armed.CompareAndSwap(true, false) {
			return 0, false, ErrGrantReplyLost
		}
		return v, ok, err
	}
	s.sql = &stmts
}

// ErrGrantRefused is what RefuseGrants reports instead of running a grant.
var ErrGrantRefused = errors.New("write tcp: broken pipe (the grant never reached the database)")

// RefuseGrants makes the grant statement of s, each time armed is set, report ErrGrantRefused
// without reaching the database (and clears armed), as when the connection breaks before the
// statement is sent: the caller cannot tell it from a grant whose reply was lost.
func RefuseGrants(s *MySQLLocks, armed *atomic.Bool) {
	stmts := *s.sql
	run := stmts.update
	stmts.update = func(ctx context.Context, db execer, query string, args ...any) (int64, bool, error) {
		if query == stmts.grant && armed.CompareAndSwap(true, false) {
			return 0, false, ErrGrantRefused
		}
		return run(ctx, db, query, args...)
	}
	s.sql = &stmts
}

// PollGetLocks makes s wait in GET_LOCK as on MySQL (the server whole seconds, the rest
// polled), whatever the server, and run polled before each poll.
func PollGetLocks(s *MySQLGetLocks, polled func()) {
	s.flavour.Store(flavourSeconds)
	s.polled = polled
}

// WaitOverrun and CleanupTimeout are how far past its wait a TryLockWait may run: its last
// attempt, then the cleanup of an attempt that failed.
const WaitOverrun, CleanupTimeout = waitOverrun, cleanupTimeout

// HangStatements makes every grant and release of s, while hung is set, wait until its
// context ends, as on a database server that answers nothing (the driver gives up a
// statement when its context ends), and then report the context's error.
func HangStatements(s *MySQLLocks, hung *atomic.Bool) {
	stmts := *s.sql
	run := stmts.update
	stmts.update = func(ctx context.Context, db execer, query string, args ...any) (int64, bool, error) {
		if hung.Load() {
			<-ctx.Done()
			return 0, false, ctx.Err()
		}
		return run(ctx, db, query, args...)
	}
	s.sql = &stmts
}
