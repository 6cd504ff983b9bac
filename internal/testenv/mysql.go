package testenv

import (
	"context"
	"database/sql"
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
		t.Fatalf("real MySQL/MariaDB at %s (SECKILL_TEST_MYSQL_DSN) unreachable: %v", cfg.Addr, err)
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
