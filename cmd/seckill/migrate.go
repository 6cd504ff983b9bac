package main

import (
	"context"
	"fmt"
	"io"

	"github.com/seckill/seckill/internal/database"
)

// runMigrate applies the embedded migrations to SECKILL_MYSQL_DSN.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig("migrate", args, getenv, stderr, nil)
	if err != nil {
		return err
	}
	if cfg.mysqlDSN == "" {
		return fmt.Errorf("migrate: set SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDR (or -mysql-dsn and -redis-addr); the embedded database migrates itself")
	}
	// Two connections: migrations.Up holds its lock on one and migrates on the other.
	db, err := database.OpenMySQL(ctx, cfg.mysqlDSN, database.Pool{MaxOpen: 2})
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrate: applied %d migration(s); schema up to date\n", n)
	return nil
}
