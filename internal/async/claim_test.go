package async_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
)

// streamReads is a go-redis hook that records, on a writer's client, its reads of the
// streams in order: for an XAUTOCLAIM, how many entries it claimed; for an XREADGROUP, -1.
type streamReads struct {
	hookBase
	mu    sync.Mutex
	reads []int
}

func (h *streamReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		defer h.mu.Unlock()
		switch c := cmd.(type) {
		case *redis.XAutoClaimCmd:
			msgs, _ := c.Val()
			h.reads = append(h.reads, len(msgs))
		case *redis.XStreamSliceCmd:
			h.reads = append(h.reads, -1)
		}
		return err
	}
}

// TestClaimTakesEveryIdlePageAtOnce: a consumer died holding more entries than the survivor's
// batch (another instance's larger SECKILL_STREAM_BATCH, two instances dead, or the survivor's
// batches halved after a slow database). A claim takes a batch of them; the rest are as idle,
// and waiting ClaimIdle/2 for each next page would hold the last of them for pages × ClaimIdle/2
// instead of one claim idle. A claim that filled its batch is followed at once by another.
func TestClaimTakesEveryIdlePageAtOnce(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			// A claim idle of seconds: the survivor's batches take far less than the
			// ClaimIdle/2 after which it would claim again anyway.
			f := newFixture(t, s, async.Config{Batch: 2, ClaimIdle: 3 * time.Second})
			ctx := context.Background()
			vid := f.voucher(5)
			admitted := f.place(vid, 1, 5)
			f.crashed(vid, 5)

			rw := redis.NewClient(&redis.Options{Addr: s.rdb.(*redis.Client).Options().Addr})
			t.Cleanup(func() { _ = rw.Close() })
			reads := &streamReads{}
			rw.AddHook(reads)
			cfg := f.cfg
			cfg.Consumer = "survivor"
			w := async.NewWriter(rw, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg)
			w.Start()
			f.eventually("claimed and written", func() bool { return len(f.rows(vid)) == 5 })
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, w.Stop(sctx))
			assert.Equal(t, admitted, f.rows(vid))

			reads.mu.Lock()
			defer reads.mu.Unlock()
			var claims []int // the claims that took entries, and what followed each full one
			for i, n := range reads.reads {
				if n <= 0 {
					continue
				}
				claims = append(claims, n)
				if n == 2 && i+1 < len(reads.reads) && reads.reads[i+1] < 0 {
					t.Errorf("a claim filled its batch of 2, and the writer read new entries next instead of claiming again; reads: %v",
						reads.reads)
				}
			}
			assert.Equal(t, []int{2, 2, 1}, claims, "claimed pages; reads: %v", reads.reads)
		})
	}
}

// TestClaimScansPastEntriesInProgress: a consumer died holding orders that sit, in the group's
// pending entries, behind more than ten times a claim's count of entries another writer is
// still working on (kept fresh, as each delivery of a batch does). Redis's XAUTOCLAIM looks at
// no more than ten times its count of pending entries a call and answers where to go on from;
// a claim that always started from the first pending entry saw only the entries in progress,
// never the dead consumer's, and its orders stayed pending for as long as the others did.
// (The embedded Redis scans every pending entry in one call: there the test shows the claim
// works, and only the real Redis shows the scan's limit.)
func TestClaimScansPastEntriesInProgress(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			// Batches of 2: a claim looks at 20 pending entries; 21 are in progress before the
			// dead consumer's.
			f := newFixture(t, s, async.Config{Batch: 2, ClaimIdle: 2 * time.Second})
			ctx := context.Background()
			vid := f.voucher(30)
			f.place(vid, 1, 21)
			f.crashed(vid, 21) // read by a writer still at work on them (refreshed below)
			dead := f.place(vid, 22, 26)
			_, _, _, stream, _ := async.KeysOf(vid)
			res, err := f.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: async.DefaultGroup, Consumer: "dead",
				Streams: []string{stream, ">"}, Count: 10, Block: -1}).Result()
			require.NoError(t, err)
			require.Len(t, res[0].Messages, 5, "the dead consumer holds the last five")
			busy := make([]string, 0, 21)
			pending, err := f.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: async.DefaultGroup,
				Consumer: "crashed", Start: "-", End: "+", Count: 100}).Result()
			require.NoError(t, err)
			for _, p := range pending {
				busy = append(busy, p.ID)
			}
			require.Len(t, busy, 21)

			// The busy consumer's entries stay fresh: each is delivered again (its idle time
			// restarted) far more often than the claim idle.
			stop := make(chan struct{})
			refreshed := make(chan struct{})
			go func() {
				defer close(refreshed)
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						_ = f.rdb.XClaimJustID(ctx, &redis.XClaimArgs{Stream: stream, Group: async.DefaultGroup,
							Consumer: "crashed", MinIdle: 0, Messages: busy}).Err()
					}
				}
			}()
			defer func() { close(stop); <-refreshed }()

			cfg := f.cfg
			cfg.Consumer = "survivor"
			w := async.NewWriter(f.rdb, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg)
			w.Start()
			defer func() {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				assert.NoError(t, w.Stop(sctx))
			}()
			f.eventually("the dead consumer's orders claimed and written", func() bool { return len(f.rows(vid)) == 5 })
			assert.Equal(t, dead, f.rows(vid), "the dead consumer's orders, none of those in progress")
		})
	}
}
