package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLDSN creates a fresh database on the real MariaDB/MySQL at SECKILL_TEST_MYSQL_DSN
// (default root with no password at 127.0.0.1:3306), drops it when t ends, and returns a DSN
// for it. It fails t when the server does not answer; call it only in integration builds.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	base := Getenv("SECKILL_TEST_MYSQL_DSN", "root:@tcp(127.0.0.1:3306)/")
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("SECKILL_TEST_MYSQL_DSN %q: %v", base, err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open MySQL: %v", err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		t.Fatal(pingFailure(cfg, err))
	}
	name := Unique("seckill_test_")
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.Exec("DROP DATABASE IF EXISTS " + name)
	})
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg.FormatDSN()
}

// pingFailure says why the server at SECKILL_TEST_MYSQL_DSN did not answer the ping: it denied
// the user access (1045, or 1698 from a MariaDB whose root logs in only over the socket), it
// answered with another error, or it could not be reached at all.
func pingFailure(cfg *mysql.Config, err error) string {
	where := fmt.Sprintf("real MySQL/MariaDB at %s (SECKILL_TEST_MYSQL_DSN)", cfg.Addr)
	var myErr *mysql.MySQLError
	switch {
	case errors.As(err, &myErr) && (myErr.Number == 1045 || myErr.Number == 1698):
		return fmt.Sprintf("%s: access denied for user %q: %v\n"+
			"Create a test user with the SQL in README.md (Quick start, \"A MySQL/MariaDB user\") and set "+
			"SECKILL_TEST_MYSQL_DSN='seckill:seckill@tcp(127.0.0.1:3306)/'", where, cfg.User, err)
	case errors.As(err, &myErr):
		return fmt.Sprintf("%s answered with an error: %v", where, err)
	default:
		return fmt.Sprintf("%s unreachable: %v", where, err)
	}
}
