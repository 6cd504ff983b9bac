// Package database opens the SQL store behind the service: MySQL/MariaDB through GORM's
// MySQL driver, or the embedded SQLite database used when no DSN is configured.
package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckill/seckill/migrations"
)

// DB is an open database and the dialect its migrations are written in.
type DB struct {
	*gorm.DB
	Dialect migrations.Dialect
}

// Pool sizes the connection pool of one service instance.
type Pool struct {
	MaxOpen int
	MaxIdle int
	// LockWait, on MySQL, is the shortest deadline of the callers that wait for a row lock
	// (an order's, a writer's batch): InnoDB's wait for one then ends before it too (see
	// lockWaitSeconds). Zero: the readTimeout alone bounds it.
	LockWait time.Duration
}

// The network timeouts OpenMySQL gives a DSN that sets none of its own: a dial, and each read
// or write on a connection. They are the backstop for a call whose context has no deadline;
// an order's own deadline is shorter. Raise them in the DSN for a statement that may run
// longer (a large migration).
const (
	DefaultDialTimeout  = 2 * time.Second // DSN timeout
	DefaultReadTimeout  = 5 * time.Second // DSN readTimeout
	DefaultWriteTimeout = 5 * time.Second // DSN writeTimeout
)

// OpenMySQL connects to MySQL or MariaDB with a go-sql-driver DSN. It forces parseTime and
// UTC so that times round-trip unchanged whatever the DSN says about them, and
// interpolateParams, so that a statement with arguments is one round trip instead of two
// (without it the driver prepares each one anew, executes it and closes it); the driver then
// escapes the arguments itself, which it refuses for the few multibyte character sets where
// that is unsafe (the schema is utf8mb4). It allows multiStatements, so that the order's
// stock update and its COMMIT go to the server in one round trip (order.SQLStore); every
// statement still takes its arguments through placeholders. It turns clientFoundRows off:
// the order's fence claim (INSERT … ON DUPLICATE KEY UPDATE) tells a refused token by zero
// affected rows, and with clientFoundRows MySQL counts the unchanged row as one. It sets
// autocommit on for every connection (see forceAutocommit). It also sets the
// DSN's timeout, readTimeout and writeTimeout to DefaultDialTimeout, DefaultReadTimeout and
// DefaultWriteTimeout where it leaves them unset: without them a frozen server holds a
// call, and its connection, until the kernel gives up on the TCP connection. ctx bounds the
// open, the first connection's handshake included.
//
// Each connection's innodb_lock_wait_timeout is lockWaitSeconds(readTimeout, pool.LockWait)
// unless the DSN sets it: a client that gives up on a statement waiting for a row lock (the
// readTimeout, or its context) closes the connection, but the server goes on waiting, for
// InnoDB's 50 s by default, holding a thread, a connection and the statement's own locks; a
// retry adds another. Bounded so, the wait ends with MySQL's error 1205 instead, before the
// driver gives up.
func OpenMySQL(ctx context.Context, dsn string, pool Pool) (*DB, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	withLockWait(cfg, pool.LockWait)
	connector, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open mysql: bad DSN: %w", err)
	}
	sqlDB := sql.OpenDB(connector)
	// Connect under ctx before gorm.Open: GORM's MySQL dialector asks the server's version
	// (SELECT VERSION()) with context.Background, so on a server that hangs the open waited
	// for the DSN's readTimeout whatever ctx's deadline. Its query now runs on the connection
	// this ping leaves idle in the pool.
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	g, err := gorm.Open(mysql.New(mysql.Config{Conn: sqlDB, DSNConfig: cfg}), gormConfig())
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	return finish(ctx, &DB{DB: g, Dialect: migrations.MySQL}, pool)
}

// mysqlConfig is dsn parsed, with what OpenMySQL forces and the default timeouts applied.
func mysqlConfig(dsn string) (*mysqldriver.Config, error) {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("bad DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.MultiStatements = true
	cfg.ClientFoundRows = false
	forceAutocommit(cfg)
	if err := checkTimeouts(cfg); err != nil {
		return nil, fmt.Errorf("bad DSN: %w", err)
	}
	withDefaultTimeouts(cfg)
	return cfg, nil
}

// OpenSQLite opens (creating if needed) the embedded database file seckill.db in dir.
//
// SQLite admits one writer at a time. Transactions begin IMMEDIATE, taking the write lock up
// front and queueing for it, because a deferred transaction that has read cannot write after
// another one commits (SQLITE_BUSY_SNAPSHOT) and would fail instead of waiting. A call waits
// for the write lock until its context's deadline (MaxSQLiteWriteWait without one), then fails
// with ErrWriteLockBusy (see boundedConn). WAL lets readers run beside the writer.
func OpenSQLite(ctx context.Context, dir string, pool Pool) (*DB, error) {
	dsn := "file:" + filepath.Join(dir, "seckill.db") +
		"?_pragma=busy_timeout(" + strconv.FormatInt(MaxSQLiteWriteWait.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	sqlDB := sql.OpenDB(sqliteConnector{dsn: dsn})
	g, err := gorm.Open(sqlite.Dialector{DSN: dsn, Conn: sqlDB}, gormConfig())
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	return finish(ctx, &DB{DB: g, Dialect: migrations.SQLite}, pool)
}

// forceAutocommit makes every connection SET autocommit=1, in place of any setting of
// autocommit among the DSN's parameters (go-sql-driver sends a parameter it does not know as a
// session SET, so autocommit=0, AUTOCOMMIT=OFF or @@session.autocommit=0 would turn it off)
// and of a server whose default is off. The stores run statements outside transactions (the
// MySQL lock's INSERTs and UPDATEs, an order fence's first claim, the pruning of old fences);
// with autocommit off those never commit: they hold their row locks on a connection back in the pool, invisible to every
// other connection, until a later BEGIN on it commits them by the way.
func forceAutocommit(cfg *mysqldriver.Config) {
	for k := range cfg.Params {
		if strings.HasSuffix(strings.ToLower(k), "autocommit") {
			delete(cfg.Params, k)
		}
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["autocommit"] = "1"
}

// checkTimeouts refuses a negative network timeout: go-sql-driver applies only a positive
// one, so timeout=-1s or readTimeout=-1s would turn the bound off (a frozen server then holds
// a call and its connection until the kernel gives up on the TCP connection), and being
// non-zero it would not get the default either.
func checkTimeouts(cfg *mysqldriver.Config) error {
	for _, t := range []struct {
		name   string
		d, def time.Duration
	}{
		{"timeout", cfg.Timeout, DefaultDialTimeout},
		{"readTimeout", cfg.ReadTimeout, DefaultReadTimeout},
		{"writeTimeout", cfg.WriteTimeout, DefaultWriteTimeout},
	} {
		if t.d < 0 {
			return fmt.Errorf("%s=%s: a negative timeout is no timeout at all; want a positive duration, or leave it out for %s",
				t.name, t.d, t.def)
		}
	}
	return nil
}

// Timeouts are the network timeouts of a connection OpenMySQL opens: the DSN's timeout,
// readTimeout and writeTimeout.
type Timeouts struct {
	Dial, Read, Write time.Duration
}

// MySQLTimeouts returns the network timeouts OpenMySQL gives a connection to dsn: the DSN's
// own, and the defaults where it sets none. A caller that reports a hung server says with it
// which bound struck (go-sql-driver's error after a read timeout is only "invalid
// connection"). It refuses what OpenMySQL refuses: a bad DSN, a negative timeout.
func MySQLTimeouts(dsn string) (Timeouts, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return Timeouts{}, err
	}
	return Timeouts{Dial: cfg.Timeout, Read: cfg.ReadTimeout, Write: cfg.WriteTimeout}, nil
}

// lockWaitMargin is how much shorter than the readTimeout and the callers' deadline InnoDB's
// wait for a row lock is, so that its 1205 reaches the caller before the caller gives up.
const lockWaitMargin = time.Second

// lockWaitSeconds is the innodb_lock_wait_timeout OpenMySQL gives a connection whose DSN has
// readTimeout read, for callers whose deadlines are at most deadline (zero: none): the shorter
// of the two less lockWaitMargin, in whole seconds rounded down, 1 at least (the variable's
// unit and minimum).
func lockWaitSeconds(read, deadline time.Duration) int64 {
	d := read
	if deadline > 0 && deadline < d {
		d = deadline
	}
	return max(1, int64((d-lockWaitMargin)/time.Second))
}

// withLockWait sets the session's innodb_lock_wait_timeout to lockWaitSeconds unless the DSN
// sets it itself (in any spelling go-sql-driver passes on as a SET).
func withLockWait(cfg *mysqldriver.Config, deadline time.Duration) {
	for k := range cfg.Params {
		if strings.HasSuffix(strings.ToLower(k), "innodb_lock_wait_timeout") {
			return
		}
	}
	cfg.Params["innodb_lock_wait_timeout"] = strconv.FormatInt(lockWaitSeconds(cfg.ReadTimeout, deadline), 10)
}

// withDefaultTimeouts sets the network timeouts cfg leaves at zero (none).
func withDefaultTimeouts(cfg *mysqldriver.Config) {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultDialTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
}

func gormConfig() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Discard,
		NowFunc:                func() time.Time { return time.Now().UTC() },
		SkipDefaultTransaction: true,
	}
}

func finish(ctx context.Context, db *DB, pool Pool) (*DB, error) {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return nil, err
	}
	if pool.MaxOpen > 0 {
		sqlDB.SetMaxOpenConns(pool.MaxOpen)
	}
	if pool.MaxIdle > 0 {
		sqlDB.SetMaxIdleConns(pool.MaxIdle)
	}
	sqlDB.SetConnMaxLifetime(5 * time.Minute)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open %s: %w", db.Dialect, err)
	}
	return db, nil
}

// Migrate applies the embedded migrations of the database's dialect.
func (db *DB) Migrate(ctx context.Context) (int, error) {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return 0, err
	}
	return migrations.Up(ctx, sqlDB, db.Dialect)
}

// CheckMigrated reports an error wrapping migrations.ErrBehind when the database lacks one of
// the embedded migrations of its dialect.
func (db *DB) CheckMigrated(ctx context.Context) error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return migrations.Check(ctx, sqlDB, db.Dialect)
}

// Ping reports whether the database answers.
func (db *DB) Ping(ctx context.Context) error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// Close closes the connection pool.
func (db *DB) Close() error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// IsCheckViolation reports whether err is a violation of the CHECK constraint named
// constraint: MariaDB's error 4025, MySQL's 3819, or SQLite's CHECK constraint error, each
// naming it.
func IsCheckViolation(err error, constraint string) bool {
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return (me.Number == 4025 || me.Number == 3819) && strings.Contains(me.Message, constraint)
	}
	return err != nil && strings.Contains(err.Error(), "CHECK constraint failed") && strings.Contains(err.Error(), constraint)
}

// serverStateErrors are the MySQL and MariaDB errors that come of the server's state, not of
// the statement: the same statement passes once the state is over.
var serverStateErrors = map[uint16]bool{
	1021: true, // ER_DISK_FULL
	1040: true, // ER_CON_COUNT_ERROR: too many connections
	1053: true, // ER_SERVER_SHUTDOWN: shutdown in progress
	1114: true, // ER_RECORD_FILE_FULL: the table is full (its tablespace cannot grow)
	1203: true, // ER_TOO_MANY_USER_CONNECTIONS: max_user_connections
	1290: true, // ER_OPTION_PREVENTS_STATEMENT: --read-only, --super-read-only
	1317: true, // ER_QUERY_INTERRUPTED: KILL QUERY
	1836: true, // ER_READ_ONLY_MODE
	1927: true, // MariaDB's ER_CONNECTION_KILLED
	1969: true, // MariaDB's ER_STATEMENT_TIMEOUT: max_statement_time
	3024: true, // MySQL's ER_QUERY_TIMEOUT: max_execution_time
}

// refusingEveryWrite are the serverStateErrors that refuse every write, or every new
// connection, whatever the statement and whatever the rows it waits for: not a statement
// killed (1317, 1927) or past a time limit (1969, 3024), which a wait for one row another
// transaction holds ends in too when an operator set such a limit below the lock wait.
var refusingEveryWrite = map[uint16]bool{1021: true, 1040: true, 1053: true, 1114: true, 1203: true, 1290: true, 1836: true}

// RefusesEveryWrite reports whether err says the server refuses every write, or every new
// connection, for a while: read-only (a failover), out of connections, shutting down, a full
// disk or table.
func RefusesEveryWrite(err error) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && refusingEveryWrite[me.Number]
}

// IsDeadlock reports whether err is MySQL's error 1213: InnoDB chose this transaction as the
// victim of a deadlock and rolled it back.
func IsDeadlock(err error) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// IsTransient reports whether err, a statement's failure, says nothing against the statement
// itself, so that it may pass when tried again: InnoDB ended its wait for a row lock (MySQL's
// error 1205) or chose it as a deadlock's victim (1213); the server refused every write or
// every new connection for a while, whatever the statement (serverStateErrors: read-only
// during a failover, out of connections, shutting down, the statement killed or past a
// server's time limit, the disk full); the connection failed, or the driver gave up on it
// after the DSN's readTimeout (go-sql-driver's "invalid connection"), as it does while a
// statement waits for a row another transaction holds; the embedded database's write lock
// stayed taken (ErrWriteLockBusy); the call's context ended. Any other error the server
// answered with (a constraint, a CHECK) is not transient.
func IsTransient(err error) bool {
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1205 || IsDeadlock(err) || serverStateErrors[me.Number]
	}
	var ne net.Error
	return errors.Is(err, mysqldriver.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.As(err, &ne) || errors.Is(err, ErrWriteLockBusy) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// IsUniqueViolation reports whether err is a violation of the unique key named key: MySQL
// error 1062 naming the key, or SQLite's UNIQUE constraint error naming the key's columns.
func IsUniqueViolation(err error, key string, columns ...string) bool {
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062 && strings.Contains(me.Message, key)
	}
	if err == nil || !strings.Contains(err.Error(), "UNIQUE constraint failed") {
		return false
	}
	for _, c := range columns {
		if !strings.Contains(err.Error(), c) {
			return false
		}
	}
	return true
}
