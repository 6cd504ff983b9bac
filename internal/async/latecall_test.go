package async_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/scripts/lua"
)

// errOutOfReach is what lostSettle answers for the calls it keeps from Redis.
var errOutOfReach = errors.New("i/o timeout (test: Redis out of reach)")

// lostSettle is a go-redis hook for Redis out of reach during an admission: the first
// admission script of a voucher (its sale key among the arguments) and the first lose settling
// calls after it fail at once without reaching Redis, as calls do on their I/O timeout. The
// held admission runs on Redis, on another client, when the test says: the call that waited in
// Redis's socket.
type lostSettle struct {
	sale  string
	other redis.UniversalClient
	lose  int
	// ranLost: the settling calls kept from the caller run on Redis first, and only their
	// answers are lost (a Redis that stalled past the call's timeout, then ran it).
	ranLost bool

	mu       sync.Mutex
	held     []any // the admission's arguments, once intercepted
	settles  int   // settling calls seen after the admission
	settleAt []time.Time
}

// keep reports whether cmd is kept from Redis: the first admission, or one of the first lose
// settling calls.
func (h *lostSettle) keep(cmd redis.Cmder) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if admissionOf(cmd, h.sale) {
		if h.held == nil {
			h.held = append([]any{}, cmd.Args()...)
			return true
		}
		return false
	}
	if h.held == nil || connectionSetup(cmd) {
		return false
	}
	if n := cmd.Name(); n == "evalsha" || n == "eval" { // the settling script: the only other call
		h.settles++
		h.settleAt = append(h.settleAt, time.Now())
		if h.settles > h.lose {
			return false
		}
		if h.ranLost {
			// The script's keys and arguments follow its sha or text, as run does with the admission's.
			_ = h.other.Do(context.Background(), append([]any{"eval", lua.AsyncSettle}, cmd.Args()[2:]...)...).Err()
		}
		return true
	}
	return false
}

// run runs the held admission on Redis and returns its answer.
func (h *lostSettle) run(ctx context.Context, t *testing.T) []any {
	t.Helper()
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	require.NotNil(t, held, "the admission was sent")
	res, err := h.other.Do(ctx, append([]any{"eval", lua.AsyncAdmit}, held[2:]...)...).Slice()
	require.NoError(t, err)
	return res
}

func (h *lostSettle) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lostSettle) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.keep(cmd) {
			cmd.SetErr(errOutOfReach)
			return errOutOfReach
		}
		return next(ctx, cmd)
	}
}

func (h *lostSettle) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if h.keep(c) {
				for _, c := range cmds {
					c.SetErr(errOutOfReach)
				}
				return errOutOfReach
			}
		}
		return next(ctx, cmds)
	}
}

// TestSettlingCallWhoseAnswerWasLostStaysUnadmitted: an admission whose call failed without
// reaching Redis (or was refused, sold out, its answer lost) is settled: the first settling
// call runs on Redis and voids the order id, but its answer is lost (Redis stalled past the
// call's timeout, then ran it), so the admission waits for its deadline and settles again.
// That second call found the id in the orders hash, 'void', took it for an order's status, and
// answered admitted: a 202 with an order id that nothing admitted, no unit taken, no user
// recorded, that a lookup answers 404 for ever.
func TestSettlingCallWhoseAnswerWasLostStaysUnadmitted(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, s, async.Config{Timeout: 300 * time.Millisecond})
			vid := f.voucher(5)
			require.NoError(t, f.loader.Load(ctx, vid))
			sale, _, _, stream, _ := async.KeysOf(vid)
			hook := &lostSettle{sale: sale, other: f.rdb, lose: 1, ranLost: true}
			svc := f.hookedService(hook)

			id, err := svc.Place(ctx, 2, vid)
			assert.ErrorIs(t, err, order.ErrUnavailable, "got order %d answered admitted, want 503: nothing admitted it", id)
			assert.Equal(t, 2, hook.settles, "settled again at the deadline")
			_, ok, err := f.statuses.OrderOf(ctx, 2, vid)
			require.NoError(t, err)
			assert.False(t, ok, "user 2 holds no order")
			n, err := f.rdb.XLen(ctx, stream).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "nothing to write")
			assert.Equal(t, int64(5), f.book(vid).RedisStock, "no unit taken")

			res := hook.run(ctx, t)
			require.Len(t, res, 3)
			assert.Equal(t, int64(5), res[0], "the call, run late, finds its id void and admits nothing")
		})
	}
}

// TestAdmissionOutOfReachIsSettledAtItsDeadline: an admission whose call fails before its
// deadline (Redis's I/O timeout, a second, is shorter than the default two) and whose settling
// call fails too may still be run by Redis: the call may wait in its socket. Before, the order
// was answered 503 at once, and the call, run while the deadline had not passed, admitted it
// (TestFrozenRedisAsync in internal/app saw every such order of a frozen Redis admitted). Now
// the admission waits for its deadline and settles again: a call that ran before the deadline
// is found and the order answered admitted; when that settling call fails as well, the order is
// answered 503, and the call, run after the deadline, is refused by the script (the deadline
// travels with it, on Redis's clock): the 503 stays true.
func TestAdmissionOutOfReachIsSettledAtItsDeadline(t *testing.T) {
	t.Parallel()
	// Long enough that the held call, run right after the first settling call, runs before it
	// however slow the machine (-race, a busy CI); the "after" runs wait it out.
	const deadline = 1500 * time.Millisecond
	for _, s := range stores(t) {
		for _, when := range []string{"before the deadline", "after the deadline"} {
			t.Run(s.name+"/"+when, func(t *testing.T) {
				ctx := context.Background()
				f := newFixture(t, s, async.Config{Timeout: deadline})
				vid := f.voucher(5)
				require.NoError(t, f.loader.Load(ctx, vid))
				sale, _, _, stream, _ := async.KeysOf(vid)
				hook := &lostSettle{sale: sale, other: f.rdb, lose: 1}
				if when == "after the deadline" {
					hook.lose = 2 // out of reach at the deadline too
				}
				// A new service: its first call reads Redis's clock before it is sent (TIME), so that
				// it carries its deadline too.
				svc := f.hookedService(hook)

				type placed struct {
					id  int64
					err error
					at  time.Time
				}
				done := make(chan placed, 1)
				start := time.Now()
				go func() {
					id, err := svc.Place(ctx, 2, vid)
					done <- placed{id, err, time.Now()}
				}()
				waitFor := func(what string, cond func() bool) {
					t.Helper()
					for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
						require.True(t, time.Now().Before(end), "waiting for %s", what)
					}
				}
				waitFor("the first settling call", func() bool {
					hook.mu.Lock()
					defer hook.mu.Unlock()
					return hook.settles >= 1
				})

				if when == "before the deadline" {
					res := hook.run(ctx, t)
					require.Len(t, res, 3)
					assert.Equal(t, int64(0), res[0], "Redis ran the call before the deadline: admitted")
					p := <-done
					require.NoError(t, p.err, "found by the settling call at the deadline: answered admitted")
					assert.Equal(t, strconv.FormatInt(p.id, 10), res[1])
					assert.GreaterOrEqual(t, p.at.Sub(start), deadline, "settled again once the deadline had passed")
					assert.Equal(t, order.StatePending, f.state(2, p.id))
					return
				}
				p := <-done
				require.ErrorIs(t, p.err, order.ErrUnavailable, "neither settling call reached Redis")
				assert.GreaterOrEqual(t, p.at.Sub(start), deadline, "answered once the deadline had passed")
				assert.Equal(t, 2, hook.settles, "settled again at the deadline")
				res := hook.run(ctx, t)
				require.Len(t, res, 3)
				assert.Equal(t, int64(6), res[0], "run after the deadline: refused, nothing admitted")
				_, ok, err := f.statuses.OrderOf(ctx, 2, vid)
				require.NoError(t, err)
				assert.False(t, ok, "user 2, answered 503, holds no order")
				n, err := f.rdb.XLen(ctx, stream).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "nothing to write")
				assert.Equal(t, int64(5), f.book(vid).RedisStock, "no unit taken")
			})
		}
	}
}
