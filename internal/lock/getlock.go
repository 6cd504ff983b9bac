package lock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// maxGetLockName is the longest name MySQL 5.7+ accepts in GET_LOCK, in characters.
const maxGetLockName = 64

// getLockForever stands for "no wait limit" in GET_LOCK: a year, as MySQL's default
// lock_wait_timeout. (MySQL reads a negative timeout as infinite; MariaDB's documentation
// does not say so.)
const getLockForever = 365 * 24 * time.Hour

// MySQLGetLocks makes one process's MySQLGetLocks: MySQL's and MariaDB's own named locks,
// GET_LOCK(name, timeout) and RELEASE_LOCK(name), the design of libraries such as
// sanketplus/go-mysql-lock. Not for SQLite, which has no such functions.
//
// Where they differ from the table lock (MySQLLocks):
//
//   - Session-bound. The lock belongs to the connection that took it, not to a row: each
//     hold pins one connection of db's pool until the last Unlock. Holders and their
//     waiters count against db's MaxOpenConns, and a holder that needs another connection
//     for its own work (the order it writes) can starve the pool; size the pool for both,
//     or give the locks a *sql.DB of their own.
//   - No expiry. A GET_LOCK is held until it is released or its connection ends; the lease
//     arguments are ignored. A holder that hangs holds it for ever; one that crashes frees
//     it when the server notices the connection is gone (at once for a closed socket, after
//     wait_timeout or the TCP keepalive for a machine that vanished).
//   - Dropped on connection loss. The server releases the lock when the session ends, and
//     the holder is not told: it learns at its next statement on the pinned connection
//     (Unlock then returns ErrNotHeld), unless it asks in between.
//   - Reentrant per session, as MySQL 5.7+ and MariaDB 10.0.2+ count GET_LOCKs of one
//     session: here the session is the owner goroutine's, so the goroutine that took the
//     lock re-enters it, and it is released after as many RELEASE_LOCKs.
//   - No fencing token: GET_LOCK hands out nothing that grows with each grant.
//   - Names are server-wide, shared by every database on the server, and at most 64
//     characters in MySQL: longer names are replaced by their SHA-256 in hex.
type MySQLGetLocks struct {
	db      *sql.DB
	process string

	flavour atomic.Int32 // flavourUnknown until asked: does GET_LOCK wait a fraction of a second
	polled  func()       // the tests' hook, run before each polling GET_LOCK; nil outside tests
}

// NewMySQLGetLocks returns the MySQLGetLocks of process (NewProcessID() when empty) on db, a
// MySQL or MariaDB database.
func NewMySQLGetLocks(db *sql.DB, process string) *MySQLGetLocks {
	if process == "" {
		process = NewProcessID()
	}
	return &MySQLGetLocks{db: db, process: process}
}

// New returns the MySQLGetLock named name as a Lock.
func (s *MySQLGetLocks) New(name string) Lock { return s.GetLock(name) }

// GetLock returns the MySQLGetLock named name.
func (s *MySQLGetLocks) GetLock(name string) *MySQLGetLock {
	if utf8.RuneCountInString(name) > maxGetLockName {
		sum := sha256.Sum256([]byte(name))
		name = hex.EncodeToString(sum[:])
	}
	return &MySQLGetLock{s: s, name: name, sessions: map[string]*getLockSession{}}
}

// MySQLGetLock is one named GET_LOCK. Its owner is the calling goroutine, each with a
// connection of its own while it holds the lock.
type MySQLGetLock struct {
	s    *MySQLGetLocks
	name string

	mu       sync.Mutex
	sessions map[string]*getLockSession // by owner
}

// getLockSession is the connection an owner holds the lock on, and how many times.
type getLockSession struct {
	conn  *sql.Conn
	holds int
}

// Name returns the name passed to GET_LOCK.
func (l *MySQLGetLock) Name() string { return l.name }

// TryLock runs GET_LOCK(name, 0) on the calling goroutine's connection (a fresh one from
// the pool when it holds none), and keeps the connection while the lock is held. It
// reports false, nil when another session holds the lock. lease is ignored: a GET_LOCK
// does not expire.
func (l *MySQLGetLock) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	return l.get(ctx, 0)
}

// TryLockWait is TryLock that lets the server wait for the lock, no longer than ctx's
// deadline: GET_LOCK(name, t) with t at most a second, again until wait has passed, so that
// no answer comes later than the DSN's readTimeout (which must exceed a second). MariaDB
// waits a fraction of a second as asked; MySQL reads the timeout as whole seconds
// (GET_LOCK(name, 0.3) gives up at once on MySQL 9.7), so there the server waits whole
// seconds and the rest is polled with GET_LOCK(name, 0), every 5 ms at first and at most
// every 50 ms. It reports false, nil when wait runs out; wait == 0
// tries once, wait < 0 waits as long as ctx allows. Waiting for a connection of the pool
// (holders pin theirs) counts against wait, and one not had within it is an error. When ctx
// ends first the driver closes the connection, which ends the server's wait, and TryLockWait
// returns ctx's error.
func (l *MySQLGetLock) TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if wait < 0 {
		wait = getLockForever
	}
	if d, ok := ctx.Deadline(); ok {
		wait = max(min(wait, time.Until(d)), 0)
	}
	ok, err := l.get(ctx, wait)
	if err != nil && ctx.Err() != nil {
		return false, ctx.Err()
	}
	return ok, err
}

func (l *MySQLGetLock) get(ctx context.Context, wait time.Duration) (bool, error) {
	owner := owner(l.s.process)
	l.mu.Lock()
	sess := l.sessions[owner]
	l.mu.Unlock()
	fresh := sess == nil
	if fresh {
		// Holders pin their connections, so the pool may have none to give for as long as
		// they hold: the wait for one counts against the caller's wait.
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if wait > 0 {
			cctx, cancel = context.WithTimeout(ctx, wait)
		}
		start := time.Now()
		conn, err := l.s.db.Conn(cctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && cctx.Err() != nil {
				err = fmt.Errorf("no connection from the pool within the wait: %w", err)
			}
			return false, fmt.Errorf("get_lock %s: %w", l.name, err)
		}
		if wait > 0 {
			wait = max(wait-time.Since(start), 0)
		}
		sess = &getLockSession{conn: conn}
	}
	got, err := l.getWaiting(ctx, sess.conn, wait)
	switch {
	case err != nil || !got.Valid: // NULL: an error, or the session was killed
		if err == nil {
			err = fmt.Errorf("GET_LOCK answered NULL")
		}
		if fresh {
			discard(sess.conn)
		}
		return false, fmt.Errorf("get_lock %s: %w", l.name, err)
	case got.Int64 != 1:
		if fresh {
			_ = sess.conn.Close() // holds no lock: back to the pool
		}
		return false, nil
	}
	sess.holds++
	if fresh {
		l.mu.Lock()
		l.sessions[owner] = sess
		l.mu.Unlock()
	}
	return true, nil
}

// getLockStatementWait is the longest one GET_LOCK statement asks the server to wait. The
// driver reads every answer within the DSN's readTimeout (the service's is 5 s): a statement
// that waited longer on the server would end in a read timeout, an error and a lost
// connection, not in "not obtained". Longer waits are several statements; the DSN's
// readTimeout must exceed this and a round trip.
const getLockStatementWait = time.Second

// getWaiting runs GET_LOCK on conn until it answers other than 0 or wait has passed: each
// statement lets the server wait up to getLockStatementWait of what is left (MariaDB, or
// whole seconds on MySQL), and on MySQL a rest under a second is polled.
func (l *MySQLGetLock) getWaiting(ctx context.Context, conn *sql.Conn, wait time.Duration) (sql.NullInt64, error) {
	end := time.Now().Add(wait)
	fractions := wait > 0 && l.s.fractions(ctx, conn)
	// serverWait is the next statement's timeout argument, zero for a poll.
	serverWait := func() (any, bool) {
		d := min(max(time.Until(end), 0), getLockStatementWait)
		if fractions {
			return d.Seconds(), d > 0
		}
		return int64(d / time.Second), d >= time.Second
	}
	arg, _ := serverWait()
	var got sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", l.name, arg).Scan(&got)
	step := 5 * time.Millisecond
	for err == nil && got.Valid && got.Int64 == 0 {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		arg, waits := serverWait()
		if !waits {
			t := time.NewTimer(min(step, left))
			select {
			case <-ctx.Done():
				t.Stop()
				return got, ctx.Err()
			case <-t.C:
			}
			step = min(2*step, 50*time.Millisecond)
			if l.s.polled != nil {
				l.s.polled()
			}
		}
		err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", l.name, arg).Scan(&got)
	}
	return got, err
}

// fractions reports whether the server waits a fraction of a second in GET_LOCK: MariaDB
// does, MySQL does not. Asked once, on conn; until a VERSION() is answered it reports false,
// whose whole seconds and polling are right on either server.
func (s *MySQLGetLocks) fractions(ctx context.Context, conn *sql.Conn) bool {
	switch s.flavour.Load() {
	case flavourFractions:
		return true
	case flavourSeconds:
		return false
	}
	var version string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return false
	}
	f := int32(flavourSeconds)
	if strings.Contains(version, "MariaDB") {
		f = flavourFractions
	}
	s.flavour.Store(f)
	return f == flavourFractions
}

// The answers of MySQLGetLocks.flavour.
const (
	flavourUnknown = iota
	flavourFractions
	flavourSeconds
)

// Unlock runs RELEASE_LOCK(name) on the calling goroutine's connection and, after the last
// hold, gives the connection back to the pool. It returns an error wrapping ErrNotHeld when
// the calling goroutine holds no GET_LOCK of this name, or when its session no longer has it
// (the connection was lost or killed, and the server released the lock with the session).
func (l *MySQLGetLock) Unlock(ctx context.Context) error {
	owner := owner(l.s.process)
	l.mu.Lock()
	sess := l.sessions[owner]
	l.mu.Unlock()
	if sess == nil {
		return fmt.Errorf("release_lock %s: %w", l.name, ErrNotHeld)
	}
	var released sql.NullInt64
	err := sess.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", l.name).Scan(&released)
	if err == nil && released.Valid && released.Int64 == 1 {
		if sess.holds--; sess.holds == 0 {
			l.forget(owner)
			_ = sess.conn.Close()
		}
		return nil
	}
	// The session lost the lock (RELEASE_LOCK answered 0 or NULL), or the connection
	// failed, and with it, as far as this caller can tell, the session. Discard the
	// connection, so that nothing it may still hold goes back to the pool.
	l.forget(owner)
	discard(sess.conn)
	if err != nil {
		return fmt.Errorf("release_lock %s: connection lost (%w): %w", l.name, err, ErrNotHeld)
	}
	return fmt.Errorf("release_lock %s: the session no longer held it: %w", l.name, ErrNotHeld)
}

func (l *MySQLGetLock) forget(owner string) {
	l.mu.Lock()
	delete(l.sessions, owner)
	l.mu.Unlock()
}

// discard closes conn for good instead of returning it to the pool: the server ends its
// session and with it every GET_LOCK the session held.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
