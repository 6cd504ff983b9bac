package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	gosqlite "github.com/glebarez/go-sqlite"
	"github.com/glebarez/sqlite"
)

// ErrWriteLockBusy reports that another connection held the embedded database's write lock
// for as long as the call could wait: until its context's deadline, or MaxSQLiteWriteWait
// without one.
var ErrWriteLockBusy = errors.New("database: the embedded database's write lock stayed taken")

// MaxSQLiteWriteWait bounds a wait for the embedded database's write lock when the call's
// context has no deadline (a migration, a background task). A deadline, earlier or later,
// bounds it instead: a storm's orders with a long deadline may queue that long for the one
// writer.
const MaxSQLiteWriteWait = 10 * time.Second

// sqliteBusy is SQLite's primary result code SQLITE_BUSY.
const sqliteBusy = 5

// sqliteConn is what the embedded driver's connections implement.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
}

// sqliteConnector opens the embedded database's connections, each one bounding its waits for
// the write lock by the caller's context.
type sqliteConnector struct{ dsn string }

// sqliteDriver is the driver glebarez/go-sqlite registers, with the functions registered on it.
var sqliteDriver driver.Driver = func() driver.Driver {
	db, _ := sql.Open(sqlite.DriverName, "") // opens no connection
	defer db.Close()
	return db.Driver()
}()

func (c sqliteConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := sqliteDriver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(sqliteConn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("sqlite driver connection %T lacks the context methods", conn)
	}
	return &boundedConn{sqliteConn: sc}, nil
}

func (c sqliteConnector) Driver() driver.Driver { return sqliteDriver }

// boundedConn sets SQLite's busy_timeout, before each call that may wait for the write lock,
// to what is left of the call's context: SQLite's wait for the lock (its busy handler) does not
// end with the context, and the driver's interrupt at the deadline takes effect only after it,
// so with one fixed busy_timeout an order waited the whole of it past its deadline.
// database/sql uses a connection from one goroutine at a time, so the setting stays the
// call's own.
type boundedConn struct {
	sqliteConn
}

// bound sets the connection's busy_timeout for a call under ctx and reports whether ctx's
// deadline, rather than MaxSQLiteWriteWait, is what bounds the wait.
func (c *boundedConn) bound(ctx context.Context) (byDeadline bool, err error) {
	wait := MaxSQLiteWriteWait
	if d, ok := ctx.Deadline(); ok {
		wait, byDeadline = time.Until(d), true
	}
	if wait <= 0 {
		return true, fmt.Errorf("%w: %w", ErrWriteLockBusy, context.DeadlineExceeded)
	}
	ms := (wait + time.Millisecond - 1) / time.Millisecond // rounded up: never 0, no wait at all
	_, err = c.sqliteConn.ExecContext(context.Background(), fmt.Sprintf("PRAGMA busy_timeout = %d", ms), nil)
	return byDeadline, err
}

// busy names a wait for the write lock that ended at its bound.
func busy(err error, byDeadline bool) error {
	var se *gosqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqliteBusy {
		return err
	}
	if byDeadline {
		return fmt.Errorf("%w: %w (%w)", ErrWriteLockBusy, context.DeadlineExceeded, err)
	}
	return fmt.Errorf("%w for %s: %w", ErrWriteLockBusy, MaxSQLiteWriteWait, err)
}

// within runs call, which may wait for the write lock, with the wait bounded by ctx.
func within[T any](c *boundedConn, ctx context.Context, call func() (T, error)) (T, error) {
	byDeadline, err := c.bound(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := call()
	return v, busy(err, byDeadline)
}

// BeginTx waits for the write lock: transactions begin IMMEDIATE (see OpenSQLite).
func (c *boundedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return within(c, ctx, func() (driver.Tx, error) { return c.sqliteConn.BeginTx(ctx, opts) })
}

// ExecContext waits for the write lock when it writes outside a transaction.
func (c *boundedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return within(c, ctx, func() (driver.Result, error) { return c.sqliteConn.ExecContext(ctx, query, args) })
}

// QueryContext waits for the write lock when it writes (INSERT … RETURNING).
func (c *boundedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return within(c, ctx, func() (driver.Rows, error) { return c.sqliteConn.QueryContext(ctx, query, args) })
}
