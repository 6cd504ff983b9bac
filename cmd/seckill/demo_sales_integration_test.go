//go:build integration

package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
)

// realStores is a migrated database of the test's own on the real MariaDB, a redis-server of
// its own, and the environment of a subcommand over them.
func realStores(t *testing.T) (*database.DB, *testenv.RedisProcess, func(string) string) {
	t.Helper()
	ctx := context.Background()
	rs := testenv.StartRedisServer(t)
	env := map[string]string{"SECKILL_MYSQL_DSN": testenv.MySQLDSN(t), "SECKILL_REDIS_ADDR": rs.Addr}
	getenv := func(k string) string { return env[k] }
	require.NoError(t, run(ctx, []string{"seckill", "migrate"}, getenv, io.Discard, io.Discard))
	db, err := database.OpenMySQL(ctx, env["SECKILL_MYSQL_DSN"], database.Pool{MaxOpen: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db, rs, getenv
}

// demoVouchers is how many vouchers db holds, and those on sale now as the asynchronous
// mode's start finds them (async.Store.OnSale, what it loads into Redis).
func demoVouchers(t *testing.T, db *database.DB) (n int64, onSale []int64) {
	t.Helper()
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM seckill_vouchers").Scan(&n).Error)
	onSale, err := async.NewStore(db).OnSale(context.Background(), time.Now())
	require.NoError(t, err)
	return n, onSale
}

// TestDemoEndsItsSales: `seckill demo` on a real MariaDB ends the sales of the vouchers it
// created, a storm's (the synchronous and the asynchronous mode's) and a fencing trial's, so
// that an asynchronous instance started on the database later loads none of them into Redis;
// before, they stayed on sale for an hour.
func TestDemoEndsItsSales(t *testing.T) {
	db, _, getenv := realStores(t)
	var out bytes.Buffer
	err := run(context.Background(), []string{"seckill", "demo", "-users", "4", "-per-user", "2", "-stock", "3",
		"-guards", "redis," + asyncRow, "-fence-guards", "redis", "-fence-users", "2"}, getenv, &out, io.Discard)
	require.NoError(t, err, out.String())
	n, onSale := demoVouchers(t, db)
	assert.Equal(t, int64(4), n, "a voucher per storm and per fencing trial (off, on)")
	assert.Empty(t, onSale, "the demo's vouchers are still on sale")
}

// TestInterruptedDemoEndsItsSale: a demo interrupted (its context cancelled, as Ctrl-C does)
// once its first voucher exists ends that voucher's sale too.
func TestInterruptedDemoEndsItsSale(t *testing.T) {
	db, _, getenv := realStores(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	was := testHookVoucherCreated
	t.Cleanup(func() { testHookVoucherCreated = was })
	testHookVoucherCreated = func(int64) { cancel() }
	var out bytes.Buffer
	err := run(ctx, []string{"seckill", "demo", "-users", "4", "-per-user", "2", "-stock", "3", "-guards", "redis", "-fence-guards", ""},
		getenv, &out, io.Discard)
	require.ErrorIs(t, err, context.Canceled, out.String())
	n, onSale := demoVouchers(t, db)
	assert.Equal(t, int64(1), n, "the interrupted storm's voucher")
	assert.Empty(t, onSale, "the interrupted demo's voucher is still on sale")
}
