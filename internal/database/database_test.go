package database_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// databases returns the embedded SQLite database (unless testenv.RealOnly) and, in integration builds, a fresh database
// on the real MariaDB/MySQL, both migrated.
func databases(t *testing.T) []*database.DB {
	t.Helper()
	ctx := context.Background()
	var dbs []*database.DB
	if !testenv.RealOnly() {
		sqlite, err := database.OpenSQLite(ctx, t.TempDir(), database.Pool{})
		require.NoError(t, err)
		dbs = append(dbs, sqlite)
	}
	if testenv.Integration {
		mysql, err := database.OpenMySQL(ctx, testenv.MySQLDSN(t), database.Pool{MaxOpen: 4, MaxIdle: 2})
		require.NoError(t, err)
		dbs = append(dbs, mysql)
	}
	for _, db := range dbs {
		t.Cleanup(func() { _ = db.Close() })
		n, err := db.Migrate(ctx)
		require.NoError(t, err)
		require.Positive(t, n, "migrations applied")
	}
	return dbs
}

const insertOrder = "INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)"

// TestIsUniqueViolation provokes real errors on each database and checks that only a
// duplicate (user_id, voucher_id) counts as a violation of uk_user_voucher.
func TestIsUniqueViolation(t *testing.T) {
	for _, db := range databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			now := time.Now().UTC()
			insert := func(id, user, voucherID int64) error {
				return db.Exec(insertOrder, id, user, voucherID, now, now).Error
			}
			require.NoError(t, insert(1, 10, 20))

			tests := []struct {
				name string
				err  error
				want bool
			}{
				{"duplicate user and voucher", insert(2, 10, 20), true},
				{"duplicate, wrapped", wrap(insert(3, 10, 20)), true},
				{"duplicate primary key", insert(1, 11, 20), false},
				{"not null", db.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (4, NULL, 20, 1, ?, ?)", now, now).Error, false},
				{"no such table", db.Exec("INSERT INTO no_such_table (id) VALUES (1)").Error, false},
				{"syntax", db.Exec("INSERT INTO").Error, false},
				{"nil", nil, false},
				{"other error", errors.New("connection refused"), false},
			}
			for _, tt := range tests {
				if tt.name != "nil" && tt.name != "other error" {
					require.Error(t, tt.err, "%s: the statement must fail", tt.name)
				}
				got := database.IsUniqueViolation(tt.err, "uk_user_voucher", "voucher_orders.user_id", "voucher_orders.voucher_id")
				assert.Equal(t, tt.want, got, "%s: IsUniqueViolation(%v)", tt.name, tt.err)
			}
			var n int64
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM voucher_orders").Scan(&n).Error)
			assert.Equal(t, int64(1), n, "rows after the refused inserts")
		})
	}
}

// TestStockNeverNegative: the schema refuses stock below zero on each database, and only that
// refusal counts as a violation of ck_seckill_vouchers_stock.
func TestStockNeverNegative(t *testing.T) {
	for _, db := range databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			now := time.Now().UTC()
			require.NoError(t, db.Exec("INSERT INTO vouchers (id, title, created_at, updated_at) VALUES (1, 't', ?, ?)", now, now).Error)
			require.NoError(t, db.Exec("INSERT INTO seckill_vouchers (voucher_id, stock, begin_time, end_time, created_at, updated_at) VALUES (1, 1, ?, ?, ?, ?)", now, now, now, now).Error)
			take := func() error {
				return db.Exec("UPDATE seckill_vouchers SET stock = stock - 1 WHERE voucher_id = 1").Error
			}
			require.NoError(t, take(), "the last unit")
			err := take()
			require.Error(t, err, "below zero")
			assert.True(t, database.IsCheckViolation(wrap(err), "ck_seckill_vouchers_stock"), "IsCheckViolation(%v)", err)
			assert.False(t, database.IsCheckViolation(err, "ck_other"), "another constraint's name")
			assert.False(t, database.IsCheckViolation(db.Exec("INSERT INTO").Error, "ck_seckill_vouchers_stock"), "a syntax error")
			assert.False(t, database.IsCheckViolation(nil, "ck_seckill_vouchers_stock"))
			var stock int
			require.NoError(t, db.Raw("SELECT stock FROM seckill_vouchers WHERE voucher_id = 1").Scan(&stock).Error)
			assert.Zero(t, stock)
		})
	}
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("insert order: %w", err)
}

func TestMigrateIdempotent(t *testing.T) {
	for _, db := range databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			n, err := db.Migrate(context.Background())
			require.NoError(t, err)
			assert.Zero(t, n, "second Migrate applied migrations again")
			require.NoError(t, db.Ping(context.Background()))
		})
	}
}

// TestTimesUTC checks that a time written in any zone reads back as the same instant in UTC,
// to the millisecond, on both databases.
func TestTimesUTC(t *testing.T) {
	in := time.Date(2026, 11, 22, 8, 30, 0, 123_000_000, time.FixedZone("CST", 8*3600))
	for _, db := range databases(t) {
		t.Run(string(db.Dialect), func(t *testing.T) {
			require.NoError(t, db.Exec(insertOrder, 1, 1, 1, in, in).Error)
			var got time.Time
			require.NoError(t, db.Raw("SELECT created_at FROM voucher_orders WHERE id = 1").Scan(&got).Error)
			assert.True(t, got.Equal(in), "read %v, wrote %v", got, in)
			assert.Equal(t, "2026-11-22T00:30:00.123Z", got.UTC().Format(time.RFC3339Nano))
		})
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	_, err := database.OpenSQLite(ctx, filepath.Join(t.TempDir(), "missing", "dir"), database.Pool{})
	assert.Error(t, err, "SQLite in a directory that does not exist")

	_, err = database.OpenMySQL(ctx, "not a dsn", database.Pool{})
	assert.ErrorContains(t, err, "bad DSN")

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Port 1 on the loopback: nothing listens, the dial is refused at once.
	_, err = database.OpenMySQL(ctx, "root:@tcp(127.0.0.1:1)/x?timeout=2s", database.Pool{})
	assert.Error(t, err, "MySQL that does not answer")
}

func TestClose(t *testing.T) {
	db, err := database.OpenSQLite(context.Background(), t.TempDir(), database.Pool{})
	require.NoError(t, err)
	require.Equal(t, migrations.SQLite, db.Dialect)
	require.NoError(t, db.Close())
	assert.Error(t, db.Ping(context.Background()), "Ping after Close")
}
