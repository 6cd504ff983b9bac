//go:build integration

package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
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
