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
	hookBase
	mu        sync.Mutex
	delivered time.Time       // the reply of the last delivery with entries
	spans     []time.Duration // per held check: its deadline less the delivery before it
}

var heldSHA = redis.NewScript(lua.AsyncHeld).Hash()

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

// slowBatches is a go-redis hook that makes every batch of more than one entry outlast its
// deadline: its held check, which runs inside the batch's transaction, answers only when the
// batch's context ends. It sends the size of each batch checked.
type slowBatches struct {
	hookBase
	sizes chan int
}

func (h *slowBatches) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 4 || !(args[0] == "evalsha" && args[1] == heldSHA || args[0] == "eval" && args[1] == lua.AsyncHeld) {
			return next(ctx, cmd)
		}
		n := len(args) - 4 // evalsha sha numkeys stream id...
		select {
		case h.sizes <- n:
		default:
		}
		if n > 1 {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

// TestBatchPastItsDeadlineIsSplit: a batch that cannot commit within its deadline (below
// ClaimIdle) is rolled back; read again whole it would miss the deadline again, for ever, its
// orders pending without bound and never counted as refused. The writer must retry it
// smaller until it commits.
func TestBatchPastItsDeadlineIsSplit(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{Batch: 4, Linger: -1})
			h := &slowBatches{sizes: make(chan int, 64)}
			f.rdb.AddHook(h)
			vid := f.voucher(5)
			f.place(vid, 1, 4)
			f.writer("w", nil)
			first := <-h.sizes
			require.Equal(t, 4, first, "the first batch")
			for i := 0; ; i++ {
				n := <-h.sizes
				if n < first {
					break
				}
				require.Less(t, i, 3, "a batch of %d that misses its deadline was read again whole %d times", first, i+1)
			}
			f.eventually("written", func() bool { return len(f.rows(vid)) == 4 })
			b := f.book(vid)
			assert.Zero(t, b.Pending, "pending after the orders were written")
		})
	}
}
