// Package migrations embeds the versioned SQL schema and applies it with goose.
//
// migrations/mysql serves MySQL 8 and MariaDB 10.11; migrations/sqlite is the same schema for
// the embedded store. Both are compiled into the binary, so `seckill migrate` needs no files.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
)

//go:embed mysql/*.sql sqlite/*.sql
var files embed.FS

// Dialect names the SQL dialect of a database.
type Dialect string

// The dialects that have migrations.
const (
	MySQL  Dialect = "mysql"
	SQLite Dialect = "sqlite"
)

// provider is goose's provider of dialect's migrations over db.
func provider(db *sql.DB, dialect Dialect) (*goose.Provider, error) {
	var gd goose.Dialect
	switch dialect {
	case MySQL:
		gd = goose.DialectMySQL
	case SQLite:
		gd = goose.DialectSQLite3
	default:
		return nil, fmt.Errorf("migrate: unknown dialect %q", dialect)
	}
	fsys, err := fs.Sub(files, string(dialect))
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(gd, db, fsys)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}

// ErrBehind is returned by Check when the database lacks a migration.
var ErrBehind = errors.New("migrate: schema behind the migrations")

// Check reports an error wrapping ErrBehind when db, whose schema goose created, lacks a
// migration of dialect, naming its version and the latest; a schema ahead (a newer release
// migrated it) passes. It takes no lock and changes nothing.
func Check(ctx context.Context, db *sql.DB, dialect Dialect) error {
	p, err := provider(db, dialect)
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("migrate: check: %w", err)
	}
	if !pending {
		return nil
	}
	current, latest, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("migrate: check: %w", err)
	}
	return fmt.Errorf("%w: at version %d, this binary needs %d", ErrBehind, current, latest)
}

// Up applies every migration of dialect not yet applied to db and returns how many it applied.
//
// On MySQL it takes two of db's connections: one holds the migration lock (GET_LOCK belongs to
// a session, so it pins a connection; see lockMySQL) while goose runs the migrations on
// another. A db limited to one connection would wait for ever for goose's, so Up raises that
// limit to two for the call and restores it after.
func Up(ctx context.Context, db *sql.DB, dialect Dialect) (int, error) {
	p, err := provider(db, dialect)
	if err != nil {
		return 0, err
	}
	if dialect == MySQL {
		if n := db.Stats().MaxOpenConnections; n == 1 {
			db.SetMaxOpenConns(2)
			defer db.SetMaxOpenConns(n)
		}
		unlock, err := lockMySQL(ctx, db)
		if err != nil {
			return 0, err
		}
		defer unlock()
	}
	res, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	return len(res), nil
}

// migrateLock names the MySQL/MariaDB user lock (GET_LOCK) that serialises `seckill migrate`
// runs against one server, and migrateLockWait bounds the wait for it. goose takes no lock
// of its own on MySQL: two runs at once (one per starting instance, say) both saw version 0,
// both ran 00001, and the second failed with "Table 'vouchers' already exists". The wait is
// the client's, not the server's: a GET_LOCK that does not wait, again every migrateLockPoll.
// A GET_LOCK that waits on the server outlasts a connection's read timeout shorter than its
// wait, and the driver gives up on it ("invalid connection"): one of the whole wait did with
// the default 5 s, and polls of a second each (MySQL's smallest wait) with a read timeout of a
// second (a CI run of 2026-12-06, the async start-up tests' DSN).
const (
	migrateLock     = "seckill.migrate"
	migrateLockWait = 60 * time.Second
	migrateLockPoll = 100 * time.Millisecond
)

// lockMySQL takes migrateLock on a connection of its own, held until the returned unlock.
func lockMySQL(ctx context.Context, db *sql.DB) (unlock func(), err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	deadline := time.Now().Add(migrateLockWait)
	for {
		var got sql.NullInt64
		err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", migrateLock).Scan(&got)
		if err == nil && got.Int64 == 1 {
			break
		}
		if err == nil && time.Now().Before(deadline) {
			select {
			case <-time.After(migrateLockPoll):
				continue
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		_ = conn.Close()
		if err == nil {
			err = fmt.Errorf("another migration held it for %s", migrateLockWait)
		}
		return nil, fmt.Errorf("migrate: lock %q: %w", migrateLock, err)
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", migrateLock)
		_ = conn.Close()
	}, nil
}
