package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/loopback"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestOpenStoresAllOrNothing: one real store without the other is refused, never half
// embedded.
func TestOpenStoresAllOrNothing(t *testing.T) {
	for _, cfg := range []app.StoresConfig{
		{MySQLDSN: "root:@tcp(127.0.0.1:1)/x"},
		{RedisAddr: "127.0.0.1:1"},
		{MySQLDSN: "root:@tcp(127.0.0.1:1)/x", DataDir: t.TempDir()},
		{RedisSentinel: app.RedisSentinel{Master: "seckill", Addrs: []string{"127.0.0.1:1"}}},
	} {
		_, err := app.OpenStores(context.Background(), cfg)
		assert.ErrorIs(t, err, app.ErrHalfEmbedded, "%+v", cfg)
	}
	_, err := app.OpenStores(context.Background(), app.StoresConfig{MySQLDSN: "root:@tcp(127.0.0.1:1)/x", RedisAddr: "127.0.0.1:1",
		RedisSentinel: app.RedisSentinel{Master: "seckill", Addrs: []string{"127.0.0.1:2"}}})
	assert.ErrorIs(t, err, app.ErrRedisTwice, "a Redis address and a Sentinel")
}

// TestNewEveryLockKind wires an instance with each guard over the embedded stores and asks
// it whether it is ready; the guards with a backend of their own add the check "lock". The
// ZooKeeper and etcd guards need a real server: integration builds only.
func TestNewEveryLockKind(t *testing.T) {
	ctx := context.Background()
	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir(), ZooKeeperAddrs: []string{testenv.ZooKeeperAddr()},
		EtcdEndpoints: []string{testenv.EtcdAddr()}})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.True(t, st.Embedded)
	require.NotNil(t, st.Mini)
	for kind := range app.LockKinds {
		if (kind == "zookeeper" || kind == "etcd") && !testenv.Integration {
			continue
		}
		t.Run(kind, func(t *testing.T) {
			// The default deadline: the wiring is under test, not the nodes' speed (with a
			// 1 s lease, RedLock's 125 ms a node failed to dial the embedded nodes on a
			// loaded CI machine).
			inst, err := app.New(ctx, discard, app.Config{Lock: kind}, st)
			if kind == "zookeeper" || kind == "etcd" {
				testenv.NeedLockServer(t, err)
			}
			require.NoError(t, err)
			checks := readyChecks(t, inst, http.StatusOK)
			ownBackend := kind == "redlock" || kind == "zookeeper" || kind == "etcd"
			assert.Equal(t, ownBackend, checks["lock"] != nil, "the check \"lock\" in %v", checks)
			_, err = order.ReadCounts(inst.Registry)
			assert.NoError(t, err, "the order counters are registered")
			assert.NotEmpty(t, inst.Process)
			assert.NoError(t, inst.Close())
		})
	}
	_, err = app.New(ctx, discard, app.Config{Lock: "zk"}, st)
	assert.ErrorContains(t, err, "unknown lock")
}

// readyChecks refreshes inst's readiness and returns /readyz's checks, wanting status code.
func readyChecks(t *testing.T, inst *app.Instance, code int) map[string]any {
	t.Helper()
	inst.Ready.Refresh(context.Background())
	w := httptest.NewRecorder()
	inst.Handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, code, w.Code, "readyz: %s", w.Body)
	var body struct{ Checks map[string]any }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	return body.Checks
}

// refusedBound bounds an answer that meets a refused connection and does not dial it again: far
// above the milliseconds that takes, far below go-redis's default of five dials 100 ms apart.
const refusedBound = 200 * time.Millisecond

// TestRedLockQuorum: an instance starts, and stays ready, while a quorum of RedLock's nodes
// answers; with fewer it refuses to start, naming the nodes, and reports "lock" not ready.
func TestRedLockQuorum(t *testing.T) {
	ctx := context.Background()
	nodes := make([]*miniredis.Miniredis, 5)
	addrs := make([]string, 5)
	for i := range nodes {
		// Below the ephemeral port range: node 3 restarts on its address after a while down,
		// when a kernel-chosen port may have gone to another test's client socket.
		nodes[i] = miniredis.NewMiniRedis()
		require.NoError(t, loopback.Start(nodes[i].StartAddr))
		t.Cleanup(nodes[i].Close)
		addrs[i] = nodes[i].Addr()
	}
	open := func() *app.Stores {
		st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir(), RedLockAddrs: addrs})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	}
	// A 2 s order deadline, so 500 ms a node: long enough for the nodes that are up to
	// answer on a loaded machine, and twice it (lock and unlock) far over refusedBound.
	cfg := app.Config{Lock: "redlock", Order: order.Config{LockTTL: 4 * time.Second, Timeout: 2 * time.Second}}

	nodes[3].Close()
	nodes[4].Close() // three of five: a quorum
	inst, err := app.New(ctx, discard, cfg, open())
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	assert.Equal(t, "ok", readyChecks(t, inst, http.StatusOK)["lock"])
	// An order takes the lock on the three nodes left without waiting on the two that are
	// gone: each refused dial counts as that node's refusal at once. With go-redis's default
	// of five dials 100 ms apart every order waited for the nodes' whole timeout (0.5 s
	// here), so the fastest of three orders staying far under it shows the one dial; the
	// fastest, so that one order slowed by a loaded machine does not fail the test.
	vid := newVoucher(t, inst, 10)
	fastest := time.Hour
	for i := range int64(3) {
		a := placeOrder(inst.Handler, vid, 1+i)
		assert.Equal(t, http.StatusCreated, a.status, "%+v", a)
		fastest = min(fastest, a.took)
		t.Logf("order %d with two nodes down: %d in %s", i+1, a.status, a.took.Round(time.Millisecond))
	}
	assert.Less(t, fastest, refusedBound, "the fastest order with two nodes down")

	nodes[2].Close() // two of five
	checks := readyChecks(t, inst, http.StatusServiceUnavailable)
	assert.Contains(t, checks["lock"], "2 of 5 nodes answer PING, a quorum is 3")
	assert.Equal(t, "ok", checks["redis"])

	_, err = app.New(ctx, discard, cfg, open())
	var be *app.LockBackendError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "redlock", be.Kind)
	assert.Zero(t, be.NodeTimeout, "nodes that refuse connections are down, not slower than the order deadline allows")
	assert.ErrorIs(t, err, lock.ErrNoQuorum)
	for _, a := range addrs[2:] {
		assert.Contains(t, err.Error(), a, "a node that did not answer")
	}

	require.NoError(t, nodes[2].Restart())
	assert.Equal(t, "ok", readyChecks(t, inst, http.StatusOK)["lock"], "back to a quorum")
}

// TestEmbeddedRedLockNodesShared: with the embedded stores and no RedLock nodes configured,
// every instance runs on the same five embedded Redis servers, so their RedLocks exclude
// each other.
func TestEmbeddedRedLockNodesShared(t *testing.T) {
	ctx := context.Background()
	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	a, err := st.RedLockAddrs()
	require.NoError(t, err)
	assert.Len(t, a, 5)
	b, err := st.RedLockAddrs()
	require.NoError(t, err)
	assert.Equal(t, a, b, "one set of nodes for every instance")
	for _, addr := range a {
		assert.NotEqual(t, st.Mini.Addr(), addr, "the RedLock nodes are not the stores' Redis")
	}

	real, err := app.OpenStores(ctx, app.StoresConfig{MySQLDSN: "root:@tcp(127.0.0.1:1)/x", RedisAddr: "127.0.0.1:1"})
	require.NoError(t, err)
	got, err := real.RedLockAddrs()
	require.NoError(t, err)
	assert.Equal(t, app.DefaultRedLockAddrs, got, "the real stores default to scripts/services.sh's nodes")
}

// TestFenceJanitor: with fencing on, an instance deletes the lock_fences rows that admitted no
// claim for the retention, at start, and keeps the others; a retention shorter than a minute
// or ten order deadlines is refused.
func TestFenceJanitor(t *testing.T) {
	ctx := context.Background()
	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	off, err := app.New(ctx, discard, app.Config{Lock: "redis", Fencing: app.FencingOff}, st)
	require.NoError(t, err)
	for name, at := range map[string]string{"redis/order:1": "2000-01-01 00:00:00.000", "redis/order:2": ""} {
		q := "INSERT INTO lock_fences (name, token, claims, claimed_at) VALUES (?, 1, 1, strftime('%Y-%m-%d %H:%M:%f', 'now'))"
		args := []any{name}
		if at != "" {
			q = "INSERT INTO lock_fences (name, token, claims, claimed_at) VALUES (?, 1, 1, ?)"
			args = append(args, at)
		}
		require.NoError(t, off.DB.Exec(q, args...).Error)
	}
	names := func() []string {
		var got []string
		require.NoError(t, off.DB.Raw("SELECT name FROM lock_fences ORDER BY name").Scan(&got).Error)
		return got
	}
	require.Len(t, names(), 2)

	inst, err := app.New(ctx, discard, app.Config{Lock: "redis", FenceRetention: time.Hour}, st)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(names()) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the row unclaimed since 2000 is deleted at start")
	assert.Equal(t, []string{"redis/order:2"}, names(), "the fresh row stays")
	require.NoError(t, inst.Close())
	require.NoError(t, off.Close())

	_, err = app.New(ctx, discard, app.Config{Lock: "redis", FenceRetention: 30 * time.Second}, st)
	assert.ErrorContains(t, err, "at least 1m0s", "under a minute")
	_, err = app.New(ctx, discard, app.Config{Lock: "redis", FenceRetention: 2 * time.Minute,
		Order: order.Config{LockTTL: time.Minute, Timeout: 30 * time.Second}}, st)
	assert.ErrorContains(t, err, "at least 5m0s", "under ten order deadlines")
}
