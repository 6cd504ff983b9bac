package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// fenceStores are the stores the experiment runs on: the embedded ones always, the real
// MariaDB and Redis (migrated by `seckill migrate`) in integration builds.
func fenceStores(t *testing.T) map[string]*app.Stores {
	t.Helper()
	ctx := context.Background()
	zk, etcd := []string{testenv.ZooKeeperAddr()}, []string{testenv.EtcdAddr()}
	embedded, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir(), ZooKeeperAddrs: zk, EtcdEndpoints: etcd})
	require.NoError(t, err)
	t.Cleanup(embedded.Close)
	stores := map[string]*app.Stores{"embedded": embedded}
	if testenv.Integration {
		dsn := testenv.MySQLDSN(t)
		redisAddr := testenv.Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379")
		env := map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_REDIS_ADDR": redisAddr}
		require.NoError(t, run(ctx, []string{"seckill", "migrate"}, func(k string) string { return env[k] }, io.Discard, io.Discard))
		real, err := app.OpenStores(ctx, app.StoresConfig{MySQLDSN: dsn, RedisAddr: redisAddr, ZooKeeperAddrs: zk, EtcdEndpoints: etcd})
		require.NoError(t, err)
		t.Cleanup(real.Close)
		stores["real"] = real
	}
	return stores
}

// TestFencingStopsStaleWriters is the fencing proof: two instances, every order's lease runs
// out mid-order while a second request of the same user is granted the lock (see
// fenceUser). Unfenced, each user's stale writer pushes a duplicate at the unique key;
// fenced, every stale writer is refused with 409 lock_expired, counted as fenced, and no
// duplicate reaches the database. Exact counts: the rendezvous leaves nothing to chance.
func TestFencingStopsStaleWriters(t *testing.T) {
	const users = 6
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	guards := []string{"redis", "mysql"}
	if testenv.Integration {
		// The real ZooKeeper and etcd (scripts/services.sh), for both stores: the trial
		// expires the first instance's session, or revokes its lease, mid-order.
		guards = append(guards, "zookeeper", "etcd")
	}
	for name, st := range fenceStores(t) {
		for _, guard := range guards {
			if ranInMakeTest(name, guard) {
				continue
			}
			for _, fencing := range []bool{false, true} {
				t.Run(name+"/"+guard+map[bool]string{true: "/on", false: "/off"}[fencing], func(t *testing.T) {
					r, err := runFenceTrial(context.Background(), log, app.Config{AdminToken: "secret"}, st,
						fenceTrial{guard: guard, fencing: fencing, users: users})
					require.NoError(t, err)
					assert.Equal(t, int64(users), r.rows, "one order stored per user")
					assert.Equal(t, users, r.codes["created"], "answers %v", r.codes)
					assert.Equal(t, float64(users), r.counts.Orders[order.ResultCreated])
					if fencing {
						assert.Zero(t, r.dupByDB(), "no duplicate reaches the database")
						assert.Equal(t, float64(users), r.fenced(), "every stale writer fenced")
						assert.Equal(t, users, r.codes["lock_expired"], "answers %v", r.codes)
					} else {
						assert.Equal(t, float64(users), r.dupByDB(), "every stale writer's duplicate reaches the unique key")
						assert.Zero(t, r.fenced())
						assert.Equal(t, users, r.codes["already_ordered"], "answers %v", r.codes)
					}
					assert.True(t, r.shown(), r.verdict())
				})
			}
		}
	}
}
