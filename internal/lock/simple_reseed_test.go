package lock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// afterNextTx runs then once, right after the next MULTI/EXEC the client sends has been
// answered, before the caller sees the answer: what the server does between two round trips
// of one caller.
type afterNextTx struct {
	armed *atomic.Bool
	then  func()
}

func (afterNextTx) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (afterNextTx) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h afterNextTx) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		// Not the pipeline that readies a new connection (CLIENT SETINFO).
		if len(cmds) > 0 && cmds[0].Name() == "multi" && h.armed.CompareAndSwap(true, false) {
			h.then()
		}
		return err
	}
}

// TestSimpleGrantOutlivesALateReseed: a name's first grant (no grant counter yet, or Redis
// lost it) takes its token in a second round trip, fence_reseed.lua. When the grant's lease
// ran out before that script ran (an instance starved for longer than the lease, or a test
// Redis fast-forwarded meanwhile), TryLock reported false, nil, "another owner holds it",
// although nobody did: the service answered a user's very first order order_in_progress.
// Nobody holds it, so the script takes the lock again with a whole lease and the grant
// stands, its expiry counted from then; only another owner's hold, taken after the lease ran
// out, makes it fail.
func TestSimpleGrantOutlivesALateReseed(t *testing.T) {
	const lease = time.Minute
	for _, srv := range testenv.RedisServers(t) {
		for _, tc := range []struct {
			name  string
			taken bool // another owner takes the lock once the lease ran out
		}{{"free", false}, {"taken", true}} {
			t.Run(srv.Name+"/"+tc.name, func(t *testing.T) {
				ctx := testCtx(t)
				s := srv
				if s.Mini != nil {
					s = testenv.EmbeddedRedis(t) // FastForward ages this test's keys alone
				}
				name := testenv.Unique("reseed-late-")
				key := keyPrefix + name
				t.Cleanup(func() { s.Client.Del(context.Background(), key, fenceKey(key)) })
				var armed atomic.Bool
				var lapsed time.Time // before the reseed script, which takes the lock again, ran
				lapse := func() {
					lapsed = time.Now()
					if s.Mini != nil {
						s.Mini.FastForward(lease)
					} else {
						s.Client.Del(ctx, key) // what the key's expiry does
					}
					if tc.taken {
						s.Client.Set(ctx, key, "another-owner", lease)
					}
				}
				rdb := redis.NewClient(&redis.Options{Addr: s.Client.Options().Addr})
				rdb.AddHook(afterNextTx{armed: &armed, then: lapse})
				t.Cleanup(func() { _ = rdb.Close() })
				l := NewSimpleRedisLocks(rdb, NewProcessID(), SimpleRedisOptions{}).New(name).(*SimpleRedisLock)

				armed.Store(true)
				ok, err := l.TryLock(ctx, lease)
				require.NoError(t, err)
				require.False(t, armed.Load(), "the lease ran out between the MULTI and the reseed")
				if tc.taken {
					assert.False(t, ok, "another owner holds the lock")
					assert.Zero(t, l.Token())
					assert.Equal(t, "another-owner", s.Client.Get(ctx, key).Val(), "its hold is untouched")
					return
				}
				require.True(t, ok, "nobody held the lock: the grant takes it again instead of reporting it busy")
				assert.Greater(t, l.Token(), int64(fenceFloor), "a token from the reseeded counter")
				ttl := s.Client.PTTL(ctx, key).Val()
				assert.Greater(t, ttl, time.Duration(0), "the lock lives on a lease of its own")
				assert.LessOrEqual(t, ttl, lease)
				// The bound a failed Unlock's background retries keep to: not before the lease
				// taken again ends, else the owner's next TryLock finds its own key busy.
				assert.False(t, l.expires.Before(lapsed.Add(lease)), "the hold's expiry counts from the lease taken again")
				other := NewSimpleRedisLocks(s.Client, NewProcessID(), SimpleRedisOptions{}).New(name)
				ok, err = other.TryLock(ctx, lease)
				require.NoError(t, err)
				assert.False(t, ok, "another process finds the lock held")
				require.NoError(t, l.Unlock(ctx), "the key holds the grant's owner value")
			})
		}
	}
}
