package app

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// TestTokensMatchTheLocks: LockKind.Tokens says true exactly for the guards whose locks are
// lock.Fenced, which is what fencing relies on. ZooKeeper and etcd need real servers:
// integration only.
func TestTokensMatchTheLocks(t *testing.T) {
	ctx := context.Background()
	st, err := OpenStores(ctx, StoresConfig{DataDir: t.TempDir(), ZooKeeperAddrs: []string{testenv.ZooKeeperAddr()},
		EtcdEndpoints: []string{testenv.EtcdAddr()}})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	db, err := st.OpenDB(ctx, database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)
	rdb := st.OpenRedis(8, 0)
	t.Cleanup(func() { _ = rdb.Close() })
	for name, kind := range LockKinds {
		if (name == "zookeeper" || name == "etcd") && !testenv.Integration {
			continue
		}
		t.Run(name, func(t *testing.T) {
			// Bounded as app.New bounds it: an etcd or ZooKeeper that does not answer fails
			// the subtest (NeedLockServer says how to start one) instead of hanging it.
			lctx, cancel := context.WithTimeout(ctx, LockConnectTimeout)
			defer cancel()
			g, err := kind.New(LockEnv{Ctx: lctx, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: rdb, RedisPool: 8,
				DB: sqlDB, Dialect: db.Dialect, Process: lock.NewProcessID(), OrderTimeout: order.DefaultTimeout, Stores: st})
			testenv.NeedLockServer(t, err)
			require.NoError(t, err)
			if g.Close != nil {
				t.Cleanup(func() { _ = g.Close() })
			}
			_, fenced := g.Locks.New("order:1").(lock.Fenced)
			assert.Equal(t, fenced, kind.Tokens, "Tokens of %s", name)
			on, err := Fences(name, FencingAuto)
			require.NoError(t, err)
			assert.Equal(t, fenced, on, "auto fences exactly the guards with tokens")
			_, err = Fences(name, FencingOn)
			assert.Equal(t, fenced, err == nil, "on is refused for a guard without tokens: %v", err)
		})
	}
}

// TestRedisGuardCountsGrantsOnlyWhenFenced: the redis guard's locks count their grants (the
// token and its counter, a MULTI/EXEC) only when the orders are fenced; with fencing off a
// lock is a bare SET NX PX and hands out no token.
func TestRedisGuardCountsGrantsOnlyWhenFenced(t *testing.T) {
	ctx := context.Background()
	srv := testenv.EmbeddedRedis(t)
	for _, fencing := range []bool{true, false} {
		g, err := LockKinds["redis"].New(LockEnv{Ctx: ctx, Redis: srv.Client, Process: lock.NewProcessID(), Fencing: fencing})
		require.NoError(t, err)
		l := g.Locks.New(testenv.Unique("order:"))
		ok, err := l.TryLock(ctx, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		token := l.(lock.Fenced).Token()
		if fencing {
			assert.Positive(t, token, "fencing on: the grant's token")
		} else {
			assert.Zero(t, token, "fencing off: no token")
		}
		require.NoError(t, l.Unlock(ctx))
	}
}

// TestFenceRetentionCheckedOnlyWhenFenced: the retention's floors (a minute, ten order
// deadlines) hold only where the orders are fenced. Fencing off, a lock without tokens
// (redlock, local, none) or the asynchronous mode write no fence row, and a start is not
// refused for a retention that nothing uses: before, each of them was.
func TestFenceRetentionCheckedOnlyWhenFenced(t *testing.T) {
	long := order.Config{LockTTL: 30 * time.Second, Timeout: 10 * time.Second} // floor: 100 s
	for _, tt := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"redis, auto", Config{Lock: "redis", Order: long, FenceRetention: time.Minute}, "must be at least 1m40s"},
		{"redis, on", Config{Lock: "redis", Fencing: FencingOn, Order: long, FenceRetention: time.Minute}, "must be at least 1m40s"},
		{"redis, on, under a minute", Config{Lock: "redis", Fencing: FencingOn, FenceRetention: 30 * time.Second}, "must be at least 1m0s"},
		{"redis, off", Config{Lock: "redis", Fencing: FencingOff, Order: long, FenceRetention: time.Minute}, ""},
		{"redis, off, under a minute", Config{Lock: "redis", Fencing: FencingOff, FenceRetention: 30 * time.Second}, ""},
		{"redlock, auto", Config{Lock: "redlock", Order: long, FenceRetention: time.Minute}, ""},
		{"none, auto", Config{Lock: "none", Order: long, FenceRetention: time.Minute}, ""},
		{"async, redis, auto", Config{Lock: "redis", OrderMode: ModeAsync, Order: long, FenceRetention: time.Minute}, ""},
		{"async, redis, on", Config{Lock: "redis", Fencing: FencingOn, OrderMode: ModeAsync, Order: long, FenceRetention: time.Minute}, ""},
		// The default retention, a day, under ten deadlines of 3 h: was refused unfenced too.
		{"redis, off, deadline of 3h", Config{Lock: "redis", Fencing: FencingOff,
			Order: order.Config{LockTTL: 4 * time.Hour, Timeout: 3 * time.Hour}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.cfg.EffectiveFenceRetention()
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			want := tt.cfg.FenceRetention
			if want == 0 {
				want = DefaultFenceRetention
			}
			assert.Equal(t, want, r)
			o, err := tt.cfg.OrderConfig()
			require.NoError(t, err)
			assert.False(t, o.Fencing, "no retention check, so no fencing either")
		})
	}
}

// TestAsyncOrderConfigHoldsNoLockRule: the asynchronous mode takes no per-user lock, so
// OrderConfig holds its orders to none of the lock's rules (a deadline inside the lease or
// RedLock's validity, fencing on only with a lock that hands out tokens, the simulated work
// inside the deadline), each of which still refuses the same configuration in the synchronous
// mode; an unknown fencing mode and a negative bound are refused in both. Before, every async
// configuration here but the last two was refused.
func TestAsyncOrderConfigHoldsNoLockRule(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cfg      Config
		syncErr  string
		asyncErr string
	}{
		{"deadline past the lease", Config{Lock: "redis", Fencing: FencingOff, Order: order.Config{LockTTL: 200 * time.Millisecond, Timeout: 2 * time.Second}},
			"must be shorter than the lock TTL", ""},
		{"redlock lease within its drift allowance", Config{Lock: "redlock", Order: order.Config{LockTTL: 2 * time.Millisecond}},
			"nothing after its drift allowance", ""},
		{"redlock deadline past the validity", Config{Lock: "redlock", Order: order.Config{LockTTL: 10 * time.Second, Timeout: 9950 * time.Millisecond}},
			"must be shorter than 9.898s", ""},
		{"fencing on with redlock", Config{Lock: "redlock", Fencing: FencingOn}, "hands out no fencing token", ""},
		{"fencing on with no lock", Config{Lock: "none", Fencing: FencingOn}, "hands out no fencing token", ""},
		{"work past the deadline", Config{Lock: "redis", Order: order.Config{ProcessingDelay: 2 * time.Second}}, "order delay 2s must be shorter", ""},
		{"unknown fencing mode", Config{Lock: "redis", Fencing: "yes"}, `fencing "yes"`, `fencing "yes"`},
		{"negative bound", Config{Lock: "redis", Order: order.Config{MaxInflight: -1}}, "must not be negative", "must not be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.OrderConfig()
			assert.ErrorContains(t, err, tt.syncErr, "sync")
			a := tt.cfg
			a.OrderMode = ModeAsync
			o, err := a.OrderConfig()
			if tt.asyncErr != "" {
				assert.ErrorContains(t, err, tt.asyncErr, "async")
				return
			}
			require.NoError(t, err, "async")
			assert.False(t, o.Fencing, "async: nothing to fence")
			assert.Equal(t, tt.cfg.Order.EffectiveTimeout(), o.EffectiveTimeout(), "async: the admissions' deadline as set (or its default)")
		})
	}
}
