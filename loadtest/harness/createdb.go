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
	if err := fs.Parse(args); err != nil {
		return err
	}
	name, err := createDatabase(ctx, *dsn)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database %s ready\n", name)
	return nil
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
