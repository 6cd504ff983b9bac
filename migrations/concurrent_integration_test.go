//go:build integration

package migrations_test

import (
	"context"
	"sync"
	"testing"

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
	assert.Equal(t, 5, total, "each migration applied once across the runs: %v", applied)
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
