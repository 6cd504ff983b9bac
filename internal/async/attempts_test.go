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
// HINCRBY of the attempts hash, or the script that counts one), or its first run of script
// when that is set, until release is closed; held is closed when it holds it.
type countGate struct {
	hookBase
	script  string // a script's source: the gate holds it instead of a count
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
		if g.script != "" {
			counts = len(args) > 1 && (args[0] == "evalsha" && args[1] == redis.NewScript(g.script).Hash() ||
				args[0] == "eval" && args[1] == g.script)
		}
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
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 2})
			ctx := context.Background()
			vid := f.voucher(5)
			f.refusedOrder(vid, 7)
			_, _, _, _, dead := async.KeysOf(vid)
			entry := f.onlyEntry(vid)

			// Writer a on a client of its own, whose count the gate holds. Its claim idle is long:
			// it does not claim the entry back from b within the test.
			ra := redis.NewClient(&redis.Options{Addr: s.rdb.(*redis.Client).Options().Addr})
			t.Cleanup(func() { _ = ra.Close() })
			gate := &countGate{held: make(chan struct{}), release: make(chan struct{})}
			ra.AddHook(gate)
			cfg := f.cfg
			cfg.Consumer, cfg.ClaimIdle = "a", time.Minute
			a := async.NewWriter(ra, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg)
			a.Start()
			f.claimedMeanwhile(a, gate, vid, entry) // a's batch, and its count, are over

			n, err := f.rdb.HGet(ctx, async.AttemptsOf(vid), entry).Result()
			if err != redis.Nil {
				require.NoError(t, err)
				t.Errorf("the entry, b's, has %s refused attempts counted by a; want none", n)
			}
			assert.Equal(t, "b", f.pendingFor(vid, entry), "the entry is b's")
			deadN, err := f.rdb.XLen(ctx, dead).Result()
			require.NoError(t, err)
			assert.Zero(t, deadN, "dead-lettered")
		})
	}
}

// onlyEntry returns the id of the one entry voucherID's stream holds.
func (f *fixture) onlyEntry(voucherID int64) string {
	f.t.Helper()
	_, _, _, stream, _ := async.KeysOf(voucherID)
	entries, err := f.rdb.XRange(context.Background(), stream, "-", "+").Result()
	require.NoError(f.t, err)
	require.Len(f.t, entries, 1)
	return entries[0].ID
}

// claimedMeanwhile waits until gate holds writer a's command, has consumer b claim entry of
// voucherID meanwhile, releases the command and stops a: its batch is over.
func (f *fixture) claimedMeanwhile(a *async.Writer, gate *countGate, voucherID int64, entry string) {
	f.t.Helper()
	select {
	case <-gate.held:
	case <-time.After(eventuallyBound):
		f.t.Fatalf("writer a did not reach the held command within %s", eventuallyBound)
	}
	_, _, _, stream, _ := async.KeysOf(voucherID)
	claimed, err := f.rdb.XClaim(context.Background(), &redis.XClaimArgs{Stream: stream, Group: async.DefaultGroup, Consumer: "b",
		Messages: []string{entry}}).Result()
	require.NoError(f.t, err)
	require.Len(f.t, claimed, 1, "b claims the entry")
	close(gate.release)
	stopped(f.t, a)
}

// pendingFor returns the consumer that entry of voucherID is pending for; it must be pending.
func (f *fixture) pendingFor(voucherID int64, entry string) string {
	f.t.Helper()
	_, _, _, stream, _ := async.KeysOf(voucherID)
	p, err := f.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: stream, Group: async.DefaultGroup,
		Start: entry, End: entry, Count: 1}).Result()
	require.NoError(f.t, err)
	require.Len(f.t, p, 1, "the entry is still pending")
	return p[0].Consumer
}
