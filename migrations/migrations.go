// Package migrations embeds the versioned SQL schema and applies it with goose.
//
// migrations/mysql serves MySQL 8 and MariaDB 10.11; migrations/sqlite is the same schema for
// the embedded store. Both are compiled into the binary, so `seckill migrate` needs no files.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

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

// Up applies every migration of dialect not yet applied to db and returns how many it applied.
func Up(ctx context.Context, db *sql.DB, dialect Dialect) (int, error) {
	var gd goose.Dialect
	switch dialect {
	case MySQL:
		gd = goose.DialectMySQL
	case SQLite:
		gd = goose.DialectSQLite3
	default:
		return 0, fmt.Errorf("migrate: unknown dialect %q", dialect)
	}
	fsys, err := fs.Sub(files, string(dialect))
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(gd, db, fsys)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	return len(res), nil
}
