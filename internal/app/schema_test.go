package app_test

import (
	"context"
	"fmt"
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
	// The latest migration's record undone, as goose sees a database migrated by the previous
	// release (the schema itself does not matter to the check: goose's version table does).
	var latest int64
	require.NoError(t, db.Raw("SELECT MAX(version_id) FROM goose_db_version").Scan(&latest).Error)
	require.Greater(t, latest, int64(1))
	require.NoError(t, db.Exec("DELETE FROM goose_db_version WHERE version_id = ?", latest).Error)
	require.NoError(t, db.Close())

	inst, err := app.New(ctx, discard, app.Config{Lock: "redis"}, st)
	if err == nil {
		_ = inst.Close()
	}
	require.Error(t, err, "an instance started on a schema at version %d of %d", latest-1, latest)
	assert.ErrorContains(t, err, "seckill migrate")
	assert.ErrorContains(t, err, fmt.Sprintf("at version %d, this binary needs %d", latest-1, latest))
}
