package async_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
)

// beforeRestore is a go-redis hook that runs f, with the pipeline's number (1 for the first)
// and context, before each pipeline of HSETs the client sends, and the pipeline only if f
// returns nil: a load restores each page's users in one such pipeline. It does nothing once
// off (a client outlives the test that hooked it).
type beforeRestore struct {
	hookBase
	n   atomic.Int32
	off atomic.Bool
	f   func(ctx context.Context, n int) error
}

func (h *beforeRestore) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *beforeRestore) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.off.Load() || len(cmds) == 0 || cmds[0].Name() != "hset" {
			return next(ctx, cmds) // a connection's handshake
		}
		if err := h.f(ctx, int(h.n.Add(1))); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// TestLoadIsBoundedByItsProgress: a load's bound follows its work. A voucher with 10 orders
// loads in pages of 2, each page's restore delayed: a load whose pages each end within the
// step bound completes although the whole takes longer than a step (one fixed deadline of a
// step, as the load had before, cut it: a voucher with millions of orders never loaded); one
// whose restore stops answering fails within a step of its last page, with ErrLoadStalled;
// one that goes on, each page within a step, but slower than its bound per order fails with
// ErrLoadTooSlow. A load that fails creates no sale hash.
func TestLoadIsBoundedByItsProgress(t *testing.T) {
	t.Parallel()
	const (
		step   = 2 * time.Second
		delay  = 600 * time.Millisecond // per page: 5 pages take 3 s, more than a step
		orders = 10
		page   = 2
	)
	cases := []struct {
		name     string
		perOrder time.Duration
		stallAt  int // the page whose restore never answers; 0 for none
		want     error
	}{
		{name: "progressing", perOrder: time.Second},
		{name: "stalled", perOrder: time.Second, stallAt: 3, want: async.ErrLoadStalled},
		// The whole's bound after page k is 2 s + 0.1 s·k, and page k ends 0.6 s·k in at
		// the earliest: page 4 (2.4 s) cannot end before the bound of page 3 (2.3 s).
		{name: "too slow", perOrder: 50 * time.Millisecond, want: async.ErrLoadTooSlow},
	}
	for _, s := range stores(t) {
		for _, c := range cases {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				f := newFixture(t, s, async.Config{})
				ctx := context.Background()
				vid := f.voucher(100)
				f.orderRows(vid, orders)
				async.SetLoadBounds(f.loader, step, c.perOrder, page)
				var stalled atomic.Int64 // when the stalled restore began, unix ns
				hook := &beforeRestore{f: func(ctx context.Context, n int) error {
					if n == c.stallAt {
						stalled.Store(time.Now().UnixNano())
						<-ctx.Done()
						return ctx.Err()
					}
					time.Sleep(delay)
					return nil
				}}
				f.rdb.AddHook(hook)
				t.Cleanup(func() { hook.off.Store(true) })

				began := time.Now()
				err := f.loader.Load(ctx, vid)
				took := time.Since(began)
				t.Logf("took %s: %v", took.Round(time.Millisecond), err)
				if c.want == nil {
					require.NoError(t, err)
					assert.Greater(t, took, step, "the load took longer than one step")
					f.loaded(vid, 100, orders)
					return
				}
				require.ErrorIs(t, err, c.want)
				sale, _, _, _, _ := async.KeysOf(vid)
				if c.stallAt > 0 {
					since := time.Since(time.Unix(0, stalled.Load()))
					assert.Less(t, since, step+time.Second, "failed within a step of its last progress")
				} else {
					assert.Less(t, took, step+orders*c.perOrder+time.Second, "failed within the whole's bound")
				}
				n, err := f.rdb.Exists(ctx, sale).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "no sale hash")
			})
		}
	}
}
