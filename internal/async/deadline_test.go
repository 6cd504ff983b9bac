package async_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/scripts/lua"
)

// batchDeadlines is a go-redis hook that sees, on a writer's client, when entries are
// delivered (an XREADGROUP or XAUTOCLAIM that returned some) and the deadline of each held
// check, which a batch runs inside its transaction, with the batch's context.
type batchDeadlines struct {
	mu        sync.Mutex
	delivered time.Time       // the reply of the last delivery with entries
	spans     []time.Duration // per held check: its deadline less the delivery before it
}

var heldSHA = redis.NewScript(lua.AsyncHeld).Hash()

func (*batchDeadlines) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*batchDeadlines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *batchDeadlines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && (args[0] == "evalsha" && args[1] == heldSHA || args[0] == "eval" && args[1] == lua.AsyncHeld) {
			h.mu.Lock()
			if d, ok := ctx.Deadline(); ok && !h.delivered.IsZero() {
				h.spans = append(h.spans, d.Sub(h.delivered))
			}
			h.mu.Unlock()
		}
		err := next(ctx, cmd)
		if deliveredEntries(cmd) {
			h.mu.Lock()
			h.delivered = time.Now()
			h.mu.Unlock()
		}
		return err
	}
}

func deliveredEntries(cmd redis.Cmder) bool {
	switch c := cmd.(type) {
	case *redis.XStreamSliceCmd:
		for _, s := range c.Val() {
			if len(s.Messages) > 0 {
				return true
			}
		}
	case *redis.XAutoClaimCmd:
		msgs, _ := c.Val()
		return len(msgs) > 0
	}
	return false
}

// TestBatchDeadlineBelowClaimIdle: a batch must be given up before its entries have idled
// ClaimIdle, when another writer may claim them and write them again. With a ClaimIdle under
// 4 s, ClaimIdle/2 + 2 s from the batch's start was longer than ClaimIdle.
func TestBatchDeadlineBelowClaimIdle(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			const claimIdle = 2 * time.Second
			// A linger of a quarter of it, which the deadline must count too.
			f := newFixture(t, s, async.Config{ClaimIdle: claimIdle, Linger: claimIdle / 4})
			h := &batchDeadlines{}
			f.rdb.AddHook(h)
			vid := f.voucher(5)
			f.writer("w", nil)
			f.place(vid, 1, 3)
			f.eventually("written", func() bool { return len(f.rows(vid)) == 3 })
			h.mu.Lock()
			defer h.mu.Unlock()
			require.NotEmpty(t, h.spans, "no batch checked its entries")
			for _, span := range h.spans {
				assert.Less(t, span, claimIdle, "a batch's deadline, from its entries' delivery")
			}
		})
	}
}
