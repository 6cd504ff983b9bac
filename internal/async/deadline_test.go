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
// check, which a batch runs inside its transaction, with the batch's context. A delivery counts
// from when its request was sent: Redis stamps the delivery, and starts the idle time that
// XAUTOCLAIM reads, before it replies. The first delivery's reply is held back slowReply, as
// on a slow network or from a busy Redis.
type batchDeadlines struct {
	hookBase
	slowReply time.Duration
	mu        sync.Mutex
	slowed    bool
	sent      map[string]time.Time // per entry id: when its latest delivery was sent
	spans     []time.Duration      // per held check: its deadline less its entries' first delivery
}

var heldSHA = redis.NewScript(lua.AsyncHeld).Hash()

func isHeldCheck(args []any) bool {
	return len(args) > 1 && (args[0] == "evalsha" && args[1] == heldSHA || args[0] == "eval" && args[1] == lua.AsyncHeld)
}

func (h *batchDeadlines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); isHeldCheck(args) {
			h.mu.Lock()
			var first time.Time
			for _, id := range args[4:] { // evalsha sha numkeys stream id...
				if at, ok := h.sent[id.(string)]; ok && (first.IsZero() || at.Before(first)) {
					first = at
				}
			}
			if d, ok := ctx.Deadline(); ok && !first.IsZero() {
				h.spans = append(h.spans, d.Sub(first))
			}
			h.mu.Unlock()
		}
		sent := time.Now()
		err := next(ctx, cmd)
		if ids := deliveredEntries(cmd); len(ids) > 0 {
			h.mu.Lock()
			for _, id := range ids {
				h.sent[id] = sent
			}
			slow := !h.slowed
			h.slowed = true
			h.mu.Unlock()
			if slow {
				time.Sleep(h.slowReply) // the slow reply itself, not a wait for something else
			}
		}
		return err
	}
}

// deliveredEntries returns the ids of the entries cmd delivered.
func deliveredEntries(cmd redis.Cmder) []string {
	var msgs []redis.XMessage
	switch c := cmd.(type) {
	case *redis.XStreamSliceCmd:
		for _, s := range c.Val() {
			msgs = append(msgs, s.Messages...)
		}
	case *redis.XAutoClaimCmd:
		msgs, _ = c.Val()
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// TestBatchDeadlineBelowClaimIdle: a batch must be given up before its entries have idled
// ClaimIdle, when another writer may claim them and write them again, whichever read delivered
// them (new entries, this consumer's own pending ones, or a claim of another's). With a
// ClaimIdle under 4 s, ClaimIdle/2 + 2 s from the batch's start was longer than ClaimIdle; and
// the deadline counted from the delivery's reply, not from its request, so a reply that came
// late (here 1.5 s) pushed it past ClaimIdle by as much.
func TestBatchDeadlineBelowClaimIdle(t *testing.T) {
	t.Parallel()
	const claimIdle = 4 * time.Second
	for _, s := range stores(t) {
		for _, c := range []struct {
			name string
			// before, unless "", reads the entries as that consumer before the writer starts
			before string
		}{{"new entries", ""}, {"own pending", "w"}, {"claimed", "crashed"}} {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				// A linger of an eighth of it, which the deadline must count too.
				f := newFixture(t, s, async.Config{ClaimIdle: claimIdle, Linger: claimIdle / 8})
				ctx := context.Background()
				vid := f.voucher(5)
				if c.before != "" {
					f.place(vid, 1, 3)
					_, _, _, stream, _ := async.KeysOf(vid)
					require.NoError(t, f.rdb.XGroupCreateMkStream(ctx, stream, async.DefaultGroup, "0").Err())
					res, err := f.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: async.DefaultGroup, Consumer: c.before,
						Streams: []string{stream, ">"}, Count: 10, Block: -1}).Result()
					require.NoError(t, err)
					require.Len(t, res[0].Messages, 3)
				}
				h := &batchDeadlines{slowReply: 1500 * time.Millisecond, sent: map[string]time.Time{}}
				f.rdb.AddHook(h)
				f.writer("w", nil)
				if c.before == "" {
					f.place(vid, 1, 3)
				}
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
		if len(args) < 4 || !isHeldCheck(args) {
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
	t.Parallel()
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
