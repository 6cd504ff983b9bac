//go:build integration

package database_test

import (
	"context"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// TestOpenMySQLForcesUTC opens MySQL with a DSN that asks for neither parseTime nor UTC:
// times must still scan into time.Time and come back as the instant written, in UTC.
func TestOpenMySQLForcesUTC(t *testing.T) {
	cfg, err := mysqldriver.ParseDSN(testenv.MySQLDSN(t))
	require.NoError(t, err)
	cfg.ParseTime = false
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	cfg.Loc = shanghai

	db, err := database.OpenMySQL(context.Background(), cfg.FormatDSN(), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.Equal(t, migrations.MySQL, db.Dialect)
	_, err = db.Migrate(context.Background())
	require.NoError(t, err)

	in := time.Date(2026, 11, 22, 8, 30, 0, 123_000_000, shanghai)
	require.NoError(t, db.Exec(insertOrder, 1, 1, 1, in, in).Error)
	var got time.Time
	require.NoError(t, db.Raw("SELECT created_at FROM voucher_orders WHERE id = 1").Scan(&got).Error)
	assert.True(t, got.Equal(in), "read %v, wrote %v", got, in)
	assert.Equal(t, time.UTC, got.Location())
	var stored string
	require.NoError(t, db.Raw("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f') FROM voucher_orders WHERE id = 1").Scan(&stored).Error)
	assert.Equal(t, "2026-11-22 00:30:00.123000", stored, "the column holds UTC")
}
