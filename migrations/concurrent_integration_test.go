//go:build integration

package migrations_test

import (
	"context"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// TestUpConcurrentMySQL: `seckill migrate` run by several processes at once against a new
// database (one per instance starting) all succeed, and the schema is applied once. goose
// takes no lock on MySQL: every run but the first failed with "Table 'vouchers' already
// exists" (exit 1), or on a later version's ALTER.
func TestUpConcurrentMySQL(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	const runs = 4
	applied := make([]int, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		db, err := database.OpenMySQL(context.Background(), dsn, database.Pool{MaxOpen: 2})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		wg.Go(func() { applied[i], errs[i] = db.Migrate(context.Background()) })
	}
	wg.Wait()
	total := 0
	for i := range runs {
		assert.NoError(t, errs[i], "run %d", i)
		total += applied[i]
	}
	assert.Equal(t, len(migrationFiles(t, migrations.MySQL)), total, "each migration applied once across the runs: %v", applied)
	db, err := database.OpenMySQL(context.Background(), dsn, database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)
	assert.Equal(t, wantSchema, mysqlSchema(t, sqlDB))
	n, err := migrations.Up(context.Background(), sqlDB, migrations.MySQL)
	assert.NoError(t, err)
	assert.Zero(t, n, "up to date")
}

// TestUpWaitsForTheLockBeyondReadTimeout: a migration that finds the migration lock held waits
// for it (up to a minute), whatever the connection's read timeout: one GET_LOCK that waited
// longer than readTimeout was cut off by the driver ("invalid connection") and the run failed
// while the other migration was still within its minute. The lock is held here for twice the
// read timeout, then released; a read timeout under a second failed when the wait was made of
// GET_LOCKs of a second each (MySQL's smallest wait). The schema is applied before, on a
// connection without the short read timeout, so that the wait is all the run does that could
// outlast it: a migration's DDL on a busy Oracle MySQL took longer than 500 ms on its own in a
// CI run, and a statement slower than the DSN's read timeout fails whatever the lock does.
func TestUpWaitsForTheLockBeyondReadTimeout(t *testing.T) {
	for _, readTimeout := range []time.Duration{2 * time.Second, 900 * time.Millisecond} {
		t.Run(readTimeout.String(), func(t *testing.T) { upWaitsForTheLock(t, readTimeout) })
	}
}

func upWaitsForTheLock(t *testing.T, readTimeout time.Duration) {
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	first, err := database.OpenMySQL(ctx, dsn, database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Close() })
	applied, err := first.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, len(migrationFiles(t, migrations.MySQL)), applied, "the schema applied before the wait")

	cfg, err := mysqldriver.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.ReadTimeout = readTimeout
	db, err := database.OpenMySQL(ctx, cfg.FormatDSN(), database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)

	holder, err := sqlDB.Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	var got int64
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT GET_LOCK('seckill.migrate', 30)").Scan(&got))
	require.Equal(t, int64(1), got, "take the migration lock")
	released := time.AfterFunc(2*cfg.ReadTimeout, func() {
		_, _ = holder.ExecContext(ctx, "DO RELEASE_LOCK('seckill.migrate')")
	})
	defer released.Stop()

	start := time.Now()
	n, err := migrations.Up(ctx, sqlDB, migrations.MySQL)
	require.NoError(t, err, "the run waits for the lock")
	assert.Zero(t, n, "up to date")
	assert.GreaterOrEqual(t, time.Since(start), readTimeout, "the run waited for the lock past the read timeout")
}

// TestUpMySQLPoolOfOne: Up on MySQL holds the migration lock (GET_LOCK, which belongs to a
// session) on a connection of its own while goose runs the migrations on another, so a pool
// limited to one connection would wait for ever for goose's. Up raises that limit to two for
// the call and restores it.
func TestUpMySQLPoolOfOne(t *testing.T) {
	db, err := database.OpenMySQL(context.Background(), testenv.MySQLDSN(t), database.Pool{MaxOpen: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)
	// A bound on a hang, far above what the migrations take.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := migrations.Up(ctx, sqlDB, migrations.MySQL)
	require.NoError(t, err)
	assert.Equal(t, len(migrationFiles(t, migrations.MySQL)), n)
	assert.Equal(t, 1, sqlDB.Stats().MaxOpenConnections, "the pool's limit after Up")
}
