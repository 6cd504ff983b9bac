//go:build integration

package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// TestNewRefusesAnUnmigratedDatabase: real stores are migrated by `seckill migrate` only,
// and an instance over a database without the schema says so at start.
func TestNewRefusesAnUnmigratedDatabase(t *testing.T) {
	st, err := app.OpenStores(context.Background(), app.StoresConfig{
		MySQLDSN:  testenv.MySQLDSN(t),
		RedisAddr: testenv.Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379"),
	})
	require.NoError(t, err)
	_, err = app.New(context.Background(), discard, app.Config{Lock: "redis"}, st)
	assert.ErrorContains(t, err, "seckill migrate")
}

// TestLockWaitWithinTheDeadlines: InnoDB's wait for a row lock on the instance's connections
// ends a second before the deadline of whoever waits for it, an order's (2 s by default) or,
// in the asynchronous mode, a writer's batch (4.5 s with the default claim idle), in whole
// seconds; it was InnoDB's 50 s, on after the order or batch had given up.
func TestLockWaitWithinTheDeadlines(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		cfg  app.Config
		want int
	}{
		{"sync", app.Config{Lock: "redis"}, 1},
		{"sync 4s", app.Config{Lock: "redis", Order: order.Config{Timeout: 4 * time.Second}}, 3},
		{"async", app.Config{Lock: "redis", OrderMode: app.ModeAsync}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn := testenv.MySQLDSN(t)
			db, err := database.OpenMySQL(ctx, dsn, database.Pool{MaxOpen: 1})
			require.NoError(t, err)
			_, err = db.Migrate(ctx)
			_ = db.Close()
			require.NoError(t, err)
			st, err := app.OpenStores(ctx, app.StoresConfig{
				MySQLDSN:  dsn,
				RedisAddr: testenv.Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379"),
			})
			require.NoError(t, err)
			inst, err := app.New(ctx, discard, tt.cfg, st)
			require.NoError(t, err)
			defer inst.Close()
			var got int
			require.NoError(t, inst.DB.Raw("SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&got).Error)
			assert.Equal(t, tt.want, got)
		})
	}
}
