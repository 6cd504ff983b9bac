package lock

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// SQLDialect names the SQL dialect of the database a MySQLLock's table lives in.
type SQLDialect string

// The dialects MySQLLocks speak: MySQL / MariaDB, and SQLite (the embedded database).
// Their values are the migrations package's dialect names, so a database.DB's Dialect
// converts with SQLDialect(db.Dialect).
const (
	DialectMySQL  SQLDialect = "mysql"
	DialectSQLite SQLDialect = "sqlite"
)

// lockStatements are the MySQLLock's statements in one SQL dialect, and how that dialect
// hands back a value from an UPDATE.
type lockStatements struct {
	// grant takes the row of a name (arg 7) for an owner (args 1-3, 5 and 8) when it is
	// free, expired or already the owner's, for a lease (arg 4, as lease formats it), and
	// marks it with the attempt (arg 6); it answers the row's version, grown by one unless
	// the owner re-entered. A re-entry keeps the row's expiry when that is later than the
	// lease from now, as ReentrantLock's script does: the outer hold counts on the lease it
	// set.
	grant string
	// insert creates a name's row (arg 1) held once by an owner (arg 2) for a lease (arg 3),
	// at version 1, marked with the attempt (arg 4).
	insert string
	// release takes one hold off the row of a name (arg 1) if an owner (arg 2) holds it,
	// freeing the row at zero; it answers the holds left. An attempt (arg 3) other than 0
	// narrows it to a row that still carries that attempt: the attempt's grant ran, and no
	// later one of the owner's did.
	release string
	// lease formats a lease as the statements' lease argument.
	lease func(time.Duration) any
	// lockRow locks the row of a name (arg 1), when it has one, without waiting for another
	// transaction that keeps it locked: it fails at once where a statement would wait
	// innodb_lock_wait_timeout, an error isRowBusy reports. Empty where the database locks no
	// rows (SQLite: its statements wait for the database's write lock, see isRowBusy).
	lockRow string
	// update runs grant or release and returns the value it answers, or false when it
	// matched no row.
	update func(ctx context.Context, db execer, query string, args ...any) (int64, bool, error)
	// isDuplicate reports whether insert failed because the row exists.
	isDuplicate func(error) bool
	// isRowBusy reports whether a statement failed because another transaction kept its row
	// locked, until the database ended the statement's wait for it or, for lockRow, at once:
	// it was rolled back, took nothing, and the database answered.
	isRowBusy func(error) bool
}

// execer runs the statements: a *sql.DB, or the *sql.Tx of a grant that does not wait.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// lockSQL holds the statements of each dialect.
//
// In the grant statement the CASEs that read owner come before the assignment to owner, and
// expires_at reads only itself and owner: MySQL assigns left to right and lets later
// expressions see earlier assignments, SQLite (and MariaDB's SIMULTANEOUS_ASSIGNMENT mode)
// let every expression see the old row; in this order both read the old owner and the old
// expiry. The CASE in expires_at keeps a re-entry from shortening the lease; a row that
// changes owner gets the lease from now, whatever a released row's expires_at still says. Every UPDATE changes at least one column of the row
// it matches (version or holds), so its affected-row count is the matched count whether or
// not the DSN sets clientFoundRows.
var lockSQL = map[SQLDialect]*lockStatements{
	// MySQL and MariaDB. No RETURNING on UPDATE, so the value comes back through
	// LAST_INSERT_ID(expr), which sets the statement's insert id, read from the OK packet
	// with no second round trip.
	DialectMySQL: {
		grant: `UPDATE distributed_locks SET
	version = LAST_INSERT_ID(CASE WHEN owner = ? THEN version ELSE version + 1 END),
	holds = CASE WHEN owner = ? THEN holds + 1 ELSE 1 END,
	expires_at = GREATEST(CASE WHEN owner = ? THEN expires_at ELSE UTC_TIMESTAMP(6) END,
		UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND),
	owner = ?,
	attempt = ?
WHERE name = ? AND (owner = ? OR owner = '' OR expires_at < UTC_TIMESTAMP(6))`,
		insert: `INSERT INTO distributed_locks (name, owner, holds, version, expires_at, attempt)
VALUES (?, ?, 1, 1, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)`,
		release: `UPDATE distributed_locks SET
	owner = CASE WHEN holds > 1 THEN owner ELSE '' END,
	holds = LAST_INSERT_ID(holds - 1)
WHERE name = ? AND owner = ? AND ? IN (0, attempt)`,
		// NOWAIT: MariaDB 10.3 and MySQL 8.0 on.
		lockRow: `SELECT 1 FROM distributed_locks WHERE name = ? FOR UPDATE NOWAIT`,
		lease:   func(d time.Duration) any { return d.Microseconds() },
		update: func(ctx context.Context, db execer, query string, args ...any) (int64, bool, error) {
			res, err := db.ExecContext(ctx, query, args...)
			if err != nil {
				return 0, false, err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return 0, false, err
			}
			v, err := res.LastInsertId()
			return v, err == nil, err
		},
		isDuplicate: func(err error) bool {
			var me *mysql.MySQLError
			return errors.As(err, &me) && me.Number == 1062 // ER_DUP_ENTRY
		},
		isRowBusy: func(err error) bool {
			var me *mysql.MySQLError
			// ER_LOCK_WAIT_TIMEOUT: innodb_lock_wait_timeout ran out, or MariaDB's NOWAIT;
			// ER_LOCK_NOWAIT: MySQL's NOWAIT.
			return errors.As(err, &me) && (me.Number == 1205 || me.Number == 3572)
		},
	},
	// SQLite: one writer at a time, so every statement is atomic; UPDATE … RETURNING
	// answers the value. Times are text in strftime's fixed format, so text order is time
	// order; 'now' is fixed for the whole statement.
	DialectSQLite: {
		grant: `UPDATE distributed_locks SET
	version = CASE WHEN owner = ? THEN version ELSE version + 1 END,
	holds = CASE WHEN owner = ? THEN holds + 1 ELSE 1 END,
	expires_at = max(CASE WHEN owner = ? THEN expires_at ELSE '' END,
		strftime('%Y-%m-%d %H:%M:%f', 'now', ?)),
	owner = ?,
	attempt = ?
WHERE name = ? AND (owner = ? OR owner = '' OR expires_at < strftime('%Y-%m-%d %H:%M:%f', 'now'))
RETURNING version`,
		insert: `INSERT INTO distributed_locks (name, owner, holds, version, expires_at, attempt)
VALUES (?, ?, 1, 1, strftime('%Y-%m-%d %H:%M:%f', 'now', ?), ?)
ON CONFLICT (name) DO NOTHING`,
		release: `UPDATE distributed_locks SET
	owner = CASE WHEN holds > 1 THEN owner ELSE '' END,
	holds = holds - 1
WHERE name = ? AND owner = ? AND ? IN (0, attempt)
RETURNING holds`,
		lease: func(d time.Duration) any { // a strftime modifier: "+1.500000 seconds"
			return "+" + strconv.FormatFloat(d.Seconds(), 'f', 6, 64) + " seconds"
		},
		update: func(ctx context.Context, db execer, query string, args ...any) (int64, bool, error) {
			var v int64
			err := db.QueryRowContext(ctx, query, args...).Scan(&v)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, false, nil
			}
			return v, err == nil, err
		},
		isDuplicate: func(error) bool { return false }, // ON CONFLICT DO NOTHING: no row inserted
		// SQLite locks the whole database, not a row: a write lock another connection keeps
		// ends the call at its deadline (database.ErrWriteLockBusy), an error.
		isRowBusy: func(error) bool { return false },
	},
}
