package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/database"
)

// TestNewRefusesASchemaBehindTheMigrations: an instance refuses a database whose schema lacks
// a migration of this binary, as it refuses one without the schema. The check used to be one
// table's existence, so a database left at an earlier version (a new binary started before
// `seckill migrate`) was served: without migration 00004's CHECK (stock >= 0) the order's
// stock update no longer stops a sold-out voucher, and with fencing off MariaDB sold 5 units
// of a voucher of stock 2 (stock -3).
func TestNewRefusesASchemaBehindTheMigrations(t *testing.T) {
	ctx := context.Background()
	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	db, err := st.OpenDB(ctx, database.Pool{MaxOpen: 1})
	require.NoError(t, err)
	// The latest migration (00007) undone, as a database migrated by the previous release is.
	require.NoError(t, db.Exec("DROP TABLE async_failed_orders").Error)
	require.NoError(t, db.Exec("DELETE FROM goose_db_version WHERE version_id = 7").Error)
	require.NoError(t, db.Close())

	inst, err := app.New(ctx, discard, app.Config{Lock: "redis"}, st)
	if err == nil {
		_ = inst.Close()
	}
	require.Error(t, err, "an instance started on a schema at version 6 of 7")
	assert.ErrorContains(t, err, "seckill migrate")
	assert.ErrorContains(t, err, "version 6")
}
