package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"regexp"

	"github.com/go-sql-driver/mysql"
)

// safeDBName keeps the database name safe to splice into CREATE DATABASE (identifiers cannot
// be bound as parameters).
var safeDBName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

func runCreateDB(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("createdb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "go-sql-driver DSN naming the database to create")
	need := fs.Int("need-connections", 0, "warn when the server has fewer free connections than this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	name, err := createDatabase(ctx, *dsn)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database %s ready\n", name)
	if *need > 0 {
		free, max, err := freeConnections(ctx, *dsn)
		if err != nil {
			return err
		}
		if free < *need {
			fmt.Fprintf(stderr, "WARNING: the server has %d of max_connections=%d free, the cluster may open %d: "+
				"under load some orders will fail with 503 (Error 1040: Too many connections)\n", free, max, *need)
		}
	}
	return nil
}

// freeConnections reports how many more connections the server accepts, and its limit.
func freeConnections(ctx context.Context, dsn string) (free, max int, err error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return 0, 0, fmt.Errorf("createdb: %w", err)
	}
	defer db.Close()
	var name string
	var used int
	if err := db.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&max); err != nil {
		return 0, 0, fmt.Errorf("createdb: max_connections: %w", err)
	}
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &used); err != nil {
		return 0, 0, fmt.Errorf("createdb: threads connected: %w", err)
	}
	return max - used, max, nil
}

// createDatabase creates the database that dsn names, if missing, and returns its name.
func createDatabase(ctx context.Context, dsn string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("createdb: parse dsn: %w", err)
	}
	name := cfg.DBName
	if !safeDBName.MatchString(name) {
		return "", fmt.Errorf("createdb: database name %q: want letters, digits and _", name)
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", fmt.Errorf("createdb: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		return "", fmt.Errorf("createdb %s: %w", name, err)
	}
	return name, nil
}
