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
