package async_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/scripts/lua"
)

// countGate is a go-redis hook that holds a writer's first count of a refused attempt (an
// HINCRBY of the attempts hash, or the script that counts one) until release is closed; held
// is closed when it holds it.
type countGate struct {
	hookBase
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

var attemptSHA = redis.NewScript(lua.AsyncAttempt).Hash()

func (g *countGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		counts := len(args) > 1 && (args[0] == "hincrby" && strings.HasSuffix(args[1].(string), "attempts") ||
			args[0] == "evalsha" && args[1] == attemptSHA || args[0] == "eval" && args[1] == lua.AsyncAttempt)
		first := false
		if counts {
			g.once.Do(func() { first = true })
		}
		if first {
			close(g.held)
			<-g.release
		}
		return next(ctx, cmd)
	}
}

// TestRefusalOfAnEntryClaimedMeanwhileIsNotCounted: writer a's write of an order is refused,
// and before a's count of that refusal reaches Redis another consumer, b, claims the entry (a
// stalled past the claim idle, or its command was slow on the way). The count is of the
// owner's attempts: a's refusal must not count towards b's MaxAttempts (b would dead-letter
// the order after fewer attempts of its own), nor stay behind in the attempts hash.
func TestRefusalOfAnEntryClaimedMeanwhileIsNotCounted(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 2})
			ctx := context.Background()
			vid := f.voucher(5)
			f.refusedOrder(vid, 7)
			_, _, _, stream, dead := async.KeysOf(vid)
			entries, err := f.rdb.XRange(ctx, stream, "-", "+").Result()
			require.NoError(t, err)
			require.Len(t, entries, 1)
			entry := entries[0].ID

			// Writer a on a client of its own, whose count the gate holds. Its claim idle is long:
			// it does not claim the entry back from b within the test.
			ra := redis.NewClient(&redis.Options{Addr: s.rdb.(*redis.Client).Options().Addr})
			t.Cleanup(func() { _ = ra.Close() })
			gate := &countGate{held: make(chan struct{}), release: make(chan struct{})}
			ra.AddHook(gate)
			cfg := f.cfg
			cfg.Consumer, cfg.ClaimIdle = "a", time.Minute
			a := async.NewWriter(ra, f.store, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg)
			a.Start()
			select {
			case <-gate.held:
			case <-time.After(eventuallyBound):
				t.Fatalf("writer a did not count a refusal within %s", eventuallyBound)
			}
			claimed, err := f.rdb.XClaim(ctx, &redis.XClaimArgs{Stream: stream, Group: async.DefaultGroup, Consumer: "b",
				Messages: []string{entry}}).Result()
			require.NoError(t, err)
			require.Len(t, claimed, 1, "b claims the entry")
			close(gate.release)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, a.Stop(sctx)) // a's batch, and its count, are over

			n, err := f.rdb.HGet(ctx, async.AttemptsOf(vid), entry).Result()
			if err != redis.Nil {
				require.NoError(t, err)
				t.Errorf("the entry, b's, has %s refused attempts counted by a; want none", n)
			}
			p, err := f.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: async.DefaultGroup,
				Start: entry, End: entry, Count: 1}).Result()
			require.NoError(t, err)
			require.Len(t, p, 1, "the entry is still pending")
			assert.Equal(t, "b", p[0].Consumer)
			deadN, err := f.rdb.XLen(ctx, dead).Result()
			require.NoError(t, err)
			assert.Zero(t, deadN, "dead-lettered")
		})
	}
}
