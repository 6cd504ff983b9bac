package async_test

import (
	"context"
	"errors"
	"fmt"
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

// admitCalls is a go-redis hook that records how many orders each call of the admission
// script carried (once answered), and holds each of the first len(entered) such calls before it
// reaches Redis until its release is closed (its entered is closed once it holds it): the
// other admissions of the voucher then queue behind it, deterministically. The script is
// loaded before (hooked), so that no EVALSHA is answered NOSCRIPT and sent again.
type admitCalls struct {
	sale    string
	entered []chan struct{}
	release []chan struct{}
	mu      sync.Mutex
	sent    int
	orders  []int
}

func newAdmitCalls(sale string, held int) *admitCalls {
	h := &admitCalls{sale: sale}
	for range held {
		h.entered = append(h.entered, make(chan struct{}))
		h.release = append(h.release, make(chan struct{}))
	}
	return h
}

// admission returns how many orders cmd carries when it is an admission call of the voucher.
func (h *admitCalls) admission(cmd redis.Cmder) (int, bool) {
	if n := cmd.Name(); n != "evalsha" && n != "eval" {
		return 0, false
	}
	args := cmd.Args()
	if len(args) < 8 || args[3] != h.sale {
		return 0, false
	}
	return (len(args) - 8) / 3, true // evalsha sha 4 KEYS×4 voucher, then (user, order id, deadline) per order
}

// before holds the admission calls to hold until their release.
func (h *admitCalls) before(cmd redis.Cmder) {
	if _, ok := h.admission(cmd); !ok {
		return
	}
	h.mu.Lock()
	n := h.sent
	h.sent++
	h.mu.Unlock()
	if n < len(h.entered) {
		close(h.entered[n])
		<-h.release[n]
	}
}

// after records an admission call Redis answered, but not an EVALSHA it answered NOSCRIPT
// (go-redis then sends the same call again as EVAL, which counts).
func (h *admitCalls) after(cmd redis.Cmder) {
	if n, ok := h.admission(cmd); ok && !noScript(cmd.Err()) {
		h.mu.Lock()
		h.orders = append(h.orders, n)
		h.mu.Unlock()
	}
}

// calls returns the orders of each admission call so far.
func (h *admitCalls) calls() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.orders...)
}

func (h *admitCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *admitCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.before(cmd)
		err := next(ctx, cmd)
		h.after(cmd)
		return err
	}
}

func (h *admitCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.before(c)
		}
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.after(c)
		}
		return err
	}
}

// placed is one Place's answer.
type placed struct {
	user, id int64
	err      error
}

// placeAll runs Place for each user concurrently and returns the answers in users' order.
func placeAll(ctx context.Context, svc *async.Service, voucherID int64, users ...int64) func() []placed {
	out := make([]placed, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := svc.Place(ctx, u, voucherID)
			out[i] = placed{user: u, id: id, err: err}
		}()
	}
	return func() []placed { wg.Wait(); return out }
}

// waitEntered waits until h holds its call n (from 0).
func waitEntered(t *testing.T, h *admitCalls, n int) {
	t.Helper()
	select {
	case <-h.entered[n]:
	case <-time.After(eventuallyBound):
		t.Fatalf("admission call %d was not sent", n+1)
	}
}

// heldWith starts user first's admission of voucherID on svc, whose client h hooks, waits
// until h holds its call, then starts the others' one at a time, each once the one before it
// queued behind that call, so that they queue in the order given.
func heldWith(t *testing.T, f *fixture, svc *async.Service, h *admitCalls, voucherID int64, first int64, others ...int64) (func() []placed, func() []placed) {
	t.Helper()
	ctx := context.Background()
	firstDone := placeAll(ctx, svc, voucherID, first)
	waitEntered(t, h, 0)
	dones := make([]func() []placed, len(others))
	for i, u := range others {
		dones[i] = placeAll(ctx, svc, voucherID, u)
		f.eventually("user "+strconv.FormatInt(u, 10)+" queues behind the first call", func() bool { return async.Queued(svc, voucherID) == i+1 })
	}
	return firstDone, func() []placed {
		var out []placed
		for _, d := range dones {
			out = append(out, d()...)
		}
		return out
	}
}

// hooked is a voucher of stock units loaded into Redis, and an admission service whose
// admission calls of it an admitCalls hook watches, holding the first held. Its admissions'
// deadline is long (30 s): the tests end the ones they mean to end themselves.
func hooked(t *testing.T, s store, cfg async.Config, stock, held int) (*fixture, int64, *admitCalls, *async.Service) {
	t.Helper()
	ctx := context.Background()
	cfg.Timeout = 30 * time.Second
	f := newFixture(t, s, cfg)
	vid := f.voucher(stock)
	require.NoError(t, f.loader.Load(ctx, vid))
	require.NoError(t, redis.NewScript(lua.AsyncAdmit).Load(ctx, f.rdb).Err())
	sale, _, _, _, _ := async.KeysOf(vid)
	h := newAdmitCalls(sale, held)
	return f, vid, h, f.hookedService(h)
}

// TestAdmissionsOfAVoucherShareACall: the admissions of a voucher that arrive while its call
// is under way are decided by one call of the script, each answered as if alone: a new user
// admitted with an id of its own, the same user twice in one call admitted once and the
// second answered already_ordered with the first's id, a user of an earlier call refused with
// that order's id, and the stock, once too short, answered sold_out; the stock taken is what
// was admitted, and the writer writes exactly those orders.
func TestAdmissionsOfAVoucherShareACall(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, h, svc := hooked(t, s, async.Config{}, 4, 1)
			ctx := context.Background()
			_, _, _, stream, _ := async.KeysOf(vid)

			// User 1's call is held; 2, 3, 3 again, 1 again, 4, 5 and 6 queue behind it.
			firstDone, rest := heldWith(t, f, svc, h, vid, 1, 2, 3, 3, 1, 4, 5, 6)
			close(h.release[0])
			first := firstDone()[0]
			require.NoError(t, first.err)
			answers := rest()

			assert.Equal(t, []int{1, 7}, h.calls(), "one call for the first, one for the seven behind it")
			admitted := map[int64]int64{first.id: 1}
			var soldOut, again int
			var threes []placed
			for _, a := range answers {
				var ao *order.AlreadyOrderedError
				switch {
				case a.err == nil:
					admitted[a.id] = a.user
				case errors.Is(a.err, order.ErrSoldOut):
					soldOut++
				case errors.As(a.err, &ao):
					again++
					if a.user == 1 {
						assert.Equal(t, first.id, a.id, "user 1's earlier order, from the earlier call")
					} else {
						threes = append(threes, a)
					}
				default:
					t.Fatalf("user %d: %v", a.user, a.err)
				}
			}
			require.Len(t, admitted, 4, "four units, four orders: users 1, 2, 3 and 4")
			assert.ElementsMatch(t, []int64{1, 2, 3, 4}, values(admitted))
			assert.Equal(t, 2, soldOut, "users 5 and 6 came after the last unit")
			assert.Equal(t, 2, again, "user 3's second order, user 1's second")
			require.Len(t, threes, 1)
			assert.Contains(t, admitted, threes[0].id, "user 3's second order is answered with the first's id")
			assert.Equal(t, int64(3), admitted[threes[0].id])

			n, err := f.rdb.XLen(ctx, stream).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(4), n, "one entry per admitted order")
			assert.Zero(t, f.book(vid).RedisStock)
			f.writer("w", nil)
			f.eventually("written", func() bool { return len(f.rows(vid)) == 4 })
			f.judge(vid, 4, admitted)
		})
	}
}

func values(m map[int64]int64) []int64 {
	out := make([]int64, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestAdmitBatchBoundsACall: the admissions queued behind a call go in calls of at most
// Config.AdmitBatch orders; with 1, each has a call of its own and none queues.
func TestAdmitBatchBoundsACall(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, h, svc := hooked(t, s, async.Config{AdmitBatch: 3}, 100, 1)
			ctx := context.Background()
			firstDone, rest := heldWith(t, f, svc, h, vid, 1, 2, 3, 4, 5, 6, 7, 8)
			close(h.release[0])
			for _, a := range append(firstDone(), rest()...) {
				require.NoError(t, a.err, "user %d", a.user)
			}
			assert.Equal(t, []int{1, 3, 3, 1}, h.calls())

			f.cfg.AdmitBatch = 1
			h1 := newAdmitCalls(h.sale, 0)
			one := f.hookedService(h1)
			for _, a := range placeAll(ctx, one, vid, 11, 12, 13, 14)() {
				require.NoError(t, a.err, "user %d", a.user)
			}
			assert.Equal(t, []int{1, 1, 1, 1}, h1.calls())
			assert.Zero(t, async.Queued(one, vid))
		})
	}
}

// TestQueuedAdmissionWithdrawn: an admission whose context ends (its caller gone, or its
// deadline) while it waits behind its voucher's call takes itself out of the queue and is
// answered unavailable without a call: nothing admitted for it, no unit taken, and the queue
// holds only admissions still waiting, so it stays within the instance's MaxInflight (before,
// a withdrawn admission stayed queued until the call came back, and any number of them could
// pile up behind a call that hung). The admission queued beside it is decided as usual, and the
// voucher leaves the service's queues.
func TestQueuedAdmissionWithdrawn(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		for _, how := range []string{"cancelled", "deadline"} {
			t.Run(s.name+"/"+how, func(t *testing.T) {
				f, vid, h, svc := hooked(t, s, async.Config{MaxInflight: 4}, 5, 1)
				ctx := context.Background()
				firstDone, rest := heldWith(t, f, svc, h, vid, 1, 2)

				// Ten admissions, one after another, each withdrawn while queued: with
				// MaxInflight 4, the queue never holds more than the two waiting.
				for u := int64(3); u <= 12; u++ {
					var late placed
					if how == "cancelled" {
						c, cancel := context.WithCancel(ctx)
						done := placeAll(c, svc, vid, u)
						f.eventually("the admission queues", func() bool { return async.Queued(svc, vid) == 2 })
						cancel()
						late = done()[0]
					} else {
						c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
						late = placeAll(c, svc, vid, u)()[0]
						cancel()
					}
					require.ErrorIs(t, late.err, order.ErrUnavailable, "user %d", u)
					assert.Equal(t, 1, async.Queued(svc, vid), "user %d left the queue", u)
				}

				close(h.release[0])
				require.NoError(t, firstDone()[0].err)
				require.NoError(t, rest()[0].err)
				assert.Equal(t, []int{1, 1}, h.calls(), "none of the withdrawn was sent")
				for u := int64(3); u <= 12; u++ {
					_, ok, err := f.statuses.OrderOf(ctx, u, vid)
					require.NoError(t, err)
					assert.False(t, ok, "user %d, answered 503, holds no order", u)
				}
				assert.Equal(t, int64(3), f.book(vid).RedisStock, "two units taken")
				assert.Zero(t, async.Queued(svc, vid))
			})
		}
	}
}

// TestAdmissionCancelledInFlight: an admission whose context ends while the call that carries
// it, with another admission, is on its way is settled as any call without an answer: its id
// voided before the call runs, so the call admits the other and not it; it is answered
// unavailable and holds no order, and only the other's unit is taken.
func TestAdmissionCancelledInFlight(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, h, svc := hooked(t, s, async.Config{}, 5, 2)
			ctx := context.Background()
			firstDone, rest := heldWith(t, f, svc, h, vid, 1, 2)
			c, cancel := context.WithCancel(ctx)
			lateDone := placeAll(c, svc, vid, 3)
			f.eventually("user 3 queues", func() bool { return async.Queued(svc, vid) == 2 })

			close(h.release[0]) // the first call returns; the next carries users 2 and 3 and is held
			require.NoError(t, firstDone()[0].err)
			waitEntered(t, h, 1)
			cancel()
			late := lateDone()[0]
			require.ErrorIs(t, late.err, order.ErrUnavailable)
			close(h.release[1])
			two := rest()[0]
			require.NoError(t, two.err)

			assert.Equal(t, []int{1, 2}, h.calls())
			_, ok, err := f.statuses.OrderOf(ctx, 3, vid)
			require.NoError(t, err)
			assert.False(t, ok, "user 3, answered 503, holds no order")
			assert.Equal(t, int64(3), f.book(vid).RedisStock, "the units of users 1 and 2")
			f.writer("w", nil)
			f.eventually("written", func() bool { return len(f.rows(vid)) == 2 })
			f.judge(vid, 5, map[int64]int64{firstDone()[0].id: 1, two.id: 2})
		})
	}
}

// TestAdmitScriptDecidesAsAlone runs async_admit.lua directly: a voided order id is refused
// (5) and takes nothing, the window closed answers every order 2, a missing sale hash answers
// {1} alone, and the stock written is the stock less the orders admitted. The window is read on
// Redis's clock: each case sets it around the time Redis gave just before (the script's own
// reading is at or after it), so a window that begins at that time is open and one that ends
// at it is closed, whatever the test process's clock says.
func TestAdmitScriptDecidesAsAlone(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			script := redis.NewScript(lua.AsyncAdmit)
			keys := []string{"seckill:{voucher:9}:sale", "seckill:{voucher:9}:users", "seckill:{voucher:9}:orders", "seckill:{voucher:9}:stream"}
			// run calls the script with (user, order id) pairs, none with a deadline, and returns
			// its decisions without Redis's time of the call that follows them.
			run := func(pairs ...any) []any {
				t.Helper()
				args := []any{9}
				for i := 0; i+1 < len(pairs); i += 2 {
					args = append(args, pairs[i], pairs[i+1], "")
				}
				res, err := script.Run(ctx, s.rdb, keys, args...).Slice()
				require.NoError(t, err)
				if len(res) > 1 {
					at, ok := res[len(res)-1].(string)
					require.True(t, ok, "Redis's time last: %v", res)
					_, err := strconv.ParseInt(at, 10, 64)
					require.NoError(t, err, "Redis's time last: %v", res)
					res = res[:len(res)-1]
				}
				return res
			}
			redisNow := func() int64 {
				t.Helper()
				now, err := s.rdb.Time(ctx).Result()
				require.NoError(t, err)
				return now.UnixMilli()
			}
			window := func(begin, end int64) {
				t.Helper()
				require.NoError(t, s.rdb.HSet(ctx, keys[0], "begin", begin, "end", end).Err())
			}
			assert.Equal(t, []any{int64(1)}, run(1, 101), "no sale hash: nothing decided")

			before := redisNow()
			require.NoError(t, s.rdb.HSet(ctx, keys[0], "stock", 3).Err())
			window(before, before+time.Hour.Milliseconds())
			require.NoError(t, s.rdb.HSet(ctx, keys[2], "102", "void").Err())
			assert.Equal(t, []any{int64(0), "101", int64(5), "", int64(0), "103", int64(3), "101"},
				run(1, 101, 2, 102, 3, 103, 1, 104), "a window that began at Redis's time is open")
			after := redisNow()
			stock, err := s.rdb.HGet(ctx, keys[0], "stock").Int()
			require.NoError(t, err)
			assert.Equal(t, 1, stock)

			end := redisNow()
			window(end-time.Hour.Milliseconds(), end)
			assert.Equal(t, []any{int64(2), "", int64(2), ""}, run(5, 105, 6, 106), "a window that ended at Redis's time is closed")
			later := redisNow()
			window(later+time.Hour.Milliseconds(), later+2*time.Hour.Milliseconds())
			assert.Equal(t, []any{int64(2), ""}, run(5, 105), "a window that begins later is not open yet")
			window(redisNow(), redisNow()+time.Hour.Milliseconds())
			assert.Equal(t, []any{int64(0), "107", int64(4), ""}, run(7, 107, 8, 108))
			users, err := s.rdb.HGetAll(ctx, keys[1]).Result()
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"1": "101", "3": "103", "7": "107"}, users)
			entries, err := s.rdb.XRange(ctx, keys[3], "-", "+").Result()
			require.NoError(t, err)
			var ids []string
			for _, e := range entries {
				ids = append(ids, e.Values["order"].(string))
			}
			assert.Equal(t, []string{"101", "103", "107"}, ids, "one entry per admitted order, in order")
			// The admission's time, in its status and its entry, is Redis's at the call.
			st, err := s.rdb.HGet(ctx, keys[2], "103").Result()
			require.NoError(t, err)
			var user, at int64
			_, err = fmt.Sscanf(st, "pending|%d|%d", &user, &at)
			require.NoError(t, err, "status %q", st)
			assert.Equal(t, int64(3), user)
			assert.True(t, at >= before && at <= after, "admitted at %d, Redis's time was %d before the call and %d after", at, before, after)
			assert.Equal(t, strconv.FormatInt(at, 10), entries[1].Values["at"])
			stock, err = s.rdb.HGet(ctx, keys[0], "stock").Int()
			require.NoError(t, err)
			assert.Zero(t, stock)
		})
	}
}

// TestAdmitScriptRefusesALateCall: an order whose deadline, on Redis's clock, has passed when
// the script runs is answered 6 and admits nothing (no unit, no user, no entry): the call waited
// in Redis (hung, its socket holding the call) past the moment its caller may have answered
// 503. An order of the same call whose deadline is ahead, or that has none, is decided as
// usual; the answer ends with Redis's time of the call.
func TestAdmitScriptRefusesALateCall(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			keys := []string{"seckill:{voucher:8}:sale", "seckill:{voucher:8}:users", "seckill:{voucher:8}:orders", "seckill:{voucher:8}:stream"}
			now, err := s.rdb.Time(ctx).Result()
			require.NoError(t, err)
			before := now.UnixMilli()
			require.NoError(t, s.rdb.HSet(ctx, keys[0], "stock", 5, "begin", before-time.Hour.Milliseconds(), "end", before+time.Hour.Milliseconds()).Err())
			res, err := redis.NewScript(lua.AsyncAdmit).Run(ctx, s.rdb, keys, 8,
				1, 101, strconv.FormatInt(before-1, 10), // past, on Redis's clock
				2, 102, strconv.FormatInt(before+time.Minute.Milliseconds(), 10),
				3, 103, "").Slice()
			require.NoError(t, err)
			require.Len(t, res, 7)
			assert.Equal(t, []any{int64(6), "", int64(0), "102", int64(0), "103"}, res[:6])
			at, err := strconv.ParseInt(res[6].(string), 10, 64)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, at, before, "Redis's time of the call")
			stock, err := s.rdb.HGet(ctx, keys[0], "stock").Int()
			require.NoError(t, err)
			assert.Equal(t, 3, stock, "no unit for the late order")
			users, err := s.rdb.HGetAll(ctx, keys[1]).Result()
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"2": "102", "3": "103"}, users)
			n, err := s.rdb.XLen(ctx, keys[3]).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(2), n)
			known, err := s.rdb.HExists(ctx, keys[2], "101").Result()
			require.NoError(t, err)
			assert.False(t, known, "the late order left no trace")
		})
	}
}
