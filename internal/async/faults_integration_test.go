//go:build integration

package async_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// dbOutage is how long TestDatabaseUnreachable keeps MariaDB unreachable: the fault the
// asynchronous mode is specified against, "MariaDB unreachable for 10 s mid-sale (orders wait
// in the stream and are written afterwards)". It outlasts every bound of the writer's
// database calls (a batch's deadline, nine tenths of ClaimIdle; the DSN's readTimeout, 5 s;
// DBDownBound, 1 s here), so the orders wait through many failed batches, not one.
const dbOutage = 10 * time.Second

// TestDatabaseUnreachable: the writer's MariaDB (one of the test's own) hangs mid-sale for
// dbOutage. Admission goes on in Redis; the orders admitted during the outage all wait in the
// stream, none written nor dead-lettered, and the writer's gauges show them waiting; the
// writer reports not ready once the database has been out of reach past DBDownBound; when it
// answers again every order is written, once, and the load test's verdict holds.
func TestDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	maria := testenv.StartMariaDB(t)
	db, err := database.OpenMySQL(ctx, maria.CreateDatabase("seckill_async_down"), database.Pool{MaxOpen: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	f := newFixture(t, store{name: "real", rdb: testenv.StartRedisServer(t).Client(), db: db},
		async.Config{DBDownBound: time.Second, ClaimIdle: time.Second})
	vid := f.voucher(10)
	w := f.writer("w", nil)
	admitted := map[int64]int64{}
	place := func(users ...int64) {
		for _, u := range users {
			id, err := f.svc.Place(ctx, u, vid)
			require.NoError(t, err)
			admitted[id] = u
		}
	}
	backlog := func() int64 {
		n, err := f.statuses.Backlog(ctx, vid)
		require.NoError(t, err)
		return n
	}
	place(1, 2, 3)
	f.eventually("the first orders written and acknowledged", func() bool { return len(f.rows(vid)) == 3 && backlog() == 0 })

	maria.Freeze()
	frozen := time.Now()
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			maria.Thaw()
		}
	})
	place(4, 5, 6, 7) // admission needs only Redis
	f.eventually("the writer reports the database out of reach", func() bool { return w.Ready(ctx) != nil })
	require.Less(t, time.Since(frozen), dbOutage, "the writer noticed within the outage")
	place(8, 9) // admitted while the writer fails batch after batch
	// The outage's length is the fault itself, not a wait for something to happen.
	time.Sleep(time.Until(frozen.Add(dbOutage)))
	assert.Equal(t, int64(6), backlog(), "at the outage's end every order admitted during it waits in the stream")
	// The gauges say so too: an operator's view of the outage. They are read before each
	// round's database ping, which now waits out its bound, so about every two seconds.
	_, gaugeBacklog, oldest := async.Gauges(w)
	assert.Equal(t, float64(6), gaugeBacklog, "the backlog gauge at the outage's end")
	assert.Greater(t, oldest, dbOutage/2, "the oldest-pending gauge at the outage's end: the first of them was admitted as it began")
	assert.Error(t, w.Ready(ctx), "still not ready at the outage's end")
	maria.Thaw()
	thawed = true
	t.Logf("MariaDB unreachable for %s", time.Since(frozen).Round(time.Millisecond))
	f.eventually("the waiting orders written", func() bool { return len(f.rows(vid)) == 9 })
	f.eventually("the writer ready again", func() bool { return w.Ready(ctx) == nil })
	assert.Equal(t, admitted, f.rows(vid))
	f.eventually("drained", func() bool { return f.book(vid).Pending == 0 })
	b := f.book(vid)
	assert.Zero(t, b.Drift(), "books %+v", b)
	assert.Equal(t, int64(1), b.DBStock)
	f.judge(vid, 10, admitted)
}

// TestRedisRestartedEmpty: a real redis-server is killed after orders were written and comes
// back empty. The next admission reloads the voucher from the database: the users who
// ordered are refused, and only the units the database still has are sold.
func TestRedisRestartedEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.StartRedisServer(t)
	f := newFixture(t, store{name: "real", rdb: srv.Client(), db: testenv.Databases(t, database.Pool{MaxOpen: 4})["mysql"]}, async.Config{})
	vid := f.voucher(10)
	f.writer("w", nil)
	admitted := f.place(vid, 1, 6)
	f.eventually("written", func() bool { return len(f.rows(vid)) == 6 })
	f.eventually("acknowledged", func() bool { return f.book(vid).Pending == 0 })

	srv.Restart()
	for u := int64(1); u <= 6; u++ {
		_, err := f.svc.Place(ctx, u, vid)
		assert.ErrorIs(t, err, order.ErrAlreadyOrdered, "user %d ordered before the restart", u)
	}
	var mu sync.Mutex
	second := 0
	var wg sync.WaitGroup
	for u := int64(100); u < 140; u++ {
		wg.Go(func() {
			id, err := f.svc.Place(ctx, u, vid)
			if err == nil {
				mu.Lock()
				second++
				admitted[id] = u
				mu.Unlock()
			} else if !assert.ErrorIs(t, err, order.ErrSoldOut) {
				return
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 4, second, "only the 4 units left in the database are sold again")
	f.eventually("all 10 written by the writer, which recreated its group", func() bool { return len(f.rows(vid)) == 10 })
	f.eventually("drained", func() bool { return f.book(vid).Pending == 0 })
	b := f.book(vid)
	assert.Zero(t, b.Drift(), "books %+v", b)
	assert.Equal(t, int64(0), b.DBStock)
	f.judge(vid, 10, admitted)
}

// TestRedisCluster: the admission, load, acknowledgement and dead-letter scripts on a real
// three-master Redis Cluster (scripts/redis-cluster.sh): every key of a voucher is passed in
// KEYS and shares its hash tag, so nothing is refused CROSSSLOT; vouchers land on different
// masters.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	ports := clusterPorts(t)
	dir := filepath.Join(t.TempDir(), "cluster")
	env := append(os.Environ(), "REDIS_CLUSTER_PORTS="+strings.Join(ports, " "), "REDIS_CLUSTER_DIR="+dir)
	script := filepath.Join(repoRoot(t), "scripts", "redis-cluster.sh")
	up := exec.Command(script, "up")
	up.Env = env
	out, err := up.CombinedOutput()
	t.Cleanup(func() {
		down := exec.Command(script, "down")
		down.Env = env
		_ = down.Run()
	})
	require.NoError(t, err, "scripts/redis-cluster.sh up: %s", out)
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, "127.0.0.1:"+p)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })

	ctx := context.Background()
	f := newFixture(t, store{name: "cluster", rdb: rdb, db: testenv.Databases(t, database.Pool{MaxOpen: 4})["mysql"]}, async.Config{MaxAttempts: 2})
	var vids []int64
	masters := map[string]bool{}
	for range 6 {
		vid := f.voucher(5)
		vids = append(vids, vid)
		sale, _, _, _, _ := async.KeysOf(vid)
		slot, err := rdb.ClusterKeySlot(ctx, sale).Result()
		require.NoError(t, err)
		masters[masterOf(t, rdb, slot)] = true
	}
	require.Greater(t, len(masters), 1, "the vouchers should spread over masters")
	registry, err := rdb.ClusterKeySlot(ctx, async.RegistryKey).Result()
	require.NoError(t, err)
	leaving, err := rdb.ClusterKeySlot(ctx, async.LeavingKey).Result()
	require.NoError(t, err)
	require.Equal(t, registry, leaving, "a lookup reads the registry and the vouchers leaving it in one SUNION")
	f.writer("a", nil)
	f.writer("b", nil)
	admitted := map[int64]map[int64]int64{}
	for _, vid := range vids {
		admitted[vid] = map[int64]int64{}
		for u := int64(1); u <= 7; u++ {
			id, err := f.svc.Place(ctx, u, vid)
			if u > 5 {
				require.ErrorIs(t, err, order.ErrSoldOut)
				continue
			}
			require.NoError(t, err)
			admitted[vid][id] = u
			p, ok, err := f.statuses.Lookup(ctx, id)
			require.NoError(t, err)
			if ok {
				assert.Equal(t, u, p.UserID)
			}
		}
		again, err := f.svc.Place(ctx, 1, vid)
		require.ErrorIs(t, err, order.ErrAlreadyOrdered)
		require.Contains(t, admitted[vid], again)
	}
	for _, vid := range vids {
		f.eventually("voucher "+strconv.FormatInt(vid, 10)+" written", func() bool { return len(f.rows(vid)) == 5 })
		assert.Equal(t, admitted[vid], f.rows(vid))
		f.eventually("drained", func() bool { return f.book(vid).Pending == 0 })
		assert.Zero(t, f.book(vid).Drift())
	}

	// The dead-letter script on the cluster: an order whose user has another row.
	vid := f.voucher(3)
	require.NoError(t, f.loader.Load(ctx, vid))
	require.NoError(t, f.db.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)",
		1, 9, vid, time.Now().UTC(), time.Now().UTC()).Error)
	failed, err := f.svc.Place(ctx, 9, vid)
	require.NoError(t, err)
	_, _, _, stream, dead := async.KeysOf(vid)
	f.eventually("dead-lettered on the cluster", func() bool { n, err := rdb.XLen(ctx, dead).Result(); return err == nil && n == 1 })
	assert.Equal(t, int64(3), f.book(vid).RedisStock)

	// The retirement script on the cluster, once the sale is over for the retention.
	f.eventually("the stream empty", func() bool { n, err := rdb.XLen(ctx, stream).Result(); return err == nil && n == 0 })
	f.cfg.Now = func() time.Time { return time.Now().Add(pastRetention) }
	retired, err := async.Retire(ctx, f.idleWriter(), vid)
	require.NoError(t, err)
	require.True(t, retired, "retired on the cluster")
	p, ok, err := f.statuses.Lookup(ctx, failed)
	require.NoError(t, err)
	assert.True(t, ok && p.Failed && p.UserID == 9, "the failed order answered after the retirement: %+v", p)
}

// clusterPorts are three free ports, from SECKILL_TEST_REDIS_CLUSTER_PORTS (default
// 16710-16712).
func clusterPorts(t *testing.T) []string {
	ports := strings.Fields(testenv.Getenv("SECKILL_TEST_REDIS_CLUSTER_PORTS", "16710 16711 16712"))
	require.Len(t, ports, 3, "SECKILL_TEST_REDIS_CLUSTER_PORTS")
	return ports
}

// masterOf returns the node ID of the master serving slot (CLUSTER SHARDS, Redis 7.0 and later).
func masterOf(t *testing.T, rdb *redis.ClusterClient, slot int64) string {
	shards, err := rdb.ClusterShards(context.Background()).Result()
	require.NoError(t, err)
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				for _, n := range sh.Nodes {
					if n.Role == "master" {
						return n.ID
					}
				}
			}
		}
	}
	t.Fatalf("no master for slot %d", slot)
	return ""
}

// repoRoot is the module root, two directories up from this package.
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Join(wd, "..", "..")
}
