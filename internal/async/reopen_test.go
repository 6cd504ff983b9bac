package async_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
)

// atCommand is a go-redis hook that runs do once, at the first command named cmd that the
// client it hooks sends: before Redis receives it, or after Redis answered it (after). It
// puts another client's work at one chosen point of a sequence of calls, without timing.
type atCommand struct {
	hookBase
	cmd   string
	after bool
	do    func()
	done  atomic.Bool
}

func (h *atCommand) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		at := cmd.Name() == h.cmd && !h.done.Load()
		if at && !h.after {
			h.done.Store(true)
			h.do()
		}
		err := next(ctx, cmd)
		if at && h.after {
			h.done.Store(true)
			h.do()
		}
		return err
	}
}

// hookedWriter is a writer of the fixture's config, never started, on a client of its own
// that hooks watch: the fixture's client, which the reopening uses, is not hooked.
func (f *fixture) hookedWriter(hooks ...redis.Hook) *async.Writer {
	f.t.Helper()
	return async.NewWriter(f.hookedClient(hooks...), f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, f.cfg)
}

// hookedClient is a client of the fixture's Redis of its own, which hooks watch; closed when
// the test ends.
func (f *fixture) hookedClient(hooks ...redis.Hook) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: f.rdb.(*redis.Client).Options().Addr})
	f.t.Cleanup(func() { _ = rdb.Close() })
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	return rdb
}

// hookedService is an admission service of the fixture's config and loader on a client of
// its own that hooks watch (the order ids come from the fixture's client).
func (f *fixture) hookedService(hooks ...redis.Hook) *async.Service {
	return async.NewService(f.hookedClient(hooks...), idgen.New(f.rdb, "order"), f.loader,
		async.NewMetrics(prometheus.NewRegistry()), quiet, f.cfg)
}

// backlog is how many entries voucherID's stream holds: admitted orders not yet written and
// acknowledged.
func (f *fixture) backlog(voucherID int64) int64 {
	f.t.Helper()
	_, _, _, stream, _ := async.KeysOf(voucherID)
	n, err := f.rdb.XLen(context.Background(), stream).Result()
	require.NoError(f.t, err)
	return n
}

// state is what GET /api/orders/{id} answers userID of orderID: the order service asking
// Redis first, the database second.
func (f *fixture) state(userID, orderID int64) order.State {
	f.t.Helper()
	svc := order.NewService(nil, order.NewSQLStore(f.db), nil, nil, order.NewMetrics(prometheus.NewRegistry()), quiet,
		order.Config{Pending: async.OrderPending{Statuses: f.statuses}})
	sum, err := svc.Get(context.Background(), userID, orderID)
	require.NoError(f.t, err, "order %d of user %d", orderID, userID)
	return sum.State
}

// retiredSale is a voucher whose two orders, of users 1 and 2, are written and whose sale is
// then over for the retention (c moved on): the next retirement retires it. It returns the
// voucher and its orders (order id → user).
func (f *fixture) retiredSale(c *clock) (int64, map[int64]int64) {
	f.t.Helper()
	vid := f.voucher(5)
	bought := f.place(vid, 1, 2)
	w := f.writer("w", nil)
	f.eventually("written and acknowledged", func() bool { return len(f.rows(vid)) == 2 && f.backlog(vid) == 0 })
	stopped(f.t, w)
	c.advance(pastRetention)
	return vid, bought
}

// reopen reopens voucherID's sale as docs/async.md tells an operator to: its end moved an
// hour past c's now in the database, its sale hash deleted. The admission of user 3 that
// follows finds no sale hash and reloads the voucher, which registers it. It returns that
// order (order id → user).
func (f *fixture) reopen(c *clock, voucherID int64) map[int64]int64 {
	f.t.Helper()
	require.NoError(f.t, f.db.Exec("UPDATE seckill_vouchers SET end_time = ? WHERE voucher_id = ?",
		c.now().Add(time.Hour).UTC(), voucherID).Error)
	sale, _, _, _, _ := async.KeysOf(voucherID)
	require.NoError(f.t, f.rdb.Del(context.Background(), sale).Err())
	return f.place(voucherID, 3, 3)
}

// readAgain checks a reopened sale: in the registry; its earlier buyers (bought) and the
// buyer at its reopening (reopened) answered their own orders, no second one; an order of user
// 4 admitted; every order written by a writer, once per user, those since the reopening
// answered created; and, over for the retention again, the sale retired and out of the
// registry.
func (f *fixture) readAgain(c *clock, voucherID int64, bought, reopened map[int64]int64) {
	t := f.t
	t.Helper()
	ctx := context.Background()
	require.True(t, f.registered(voucherID), "the reopened sale is in the registry")
	for _, orders := range []map[int64]int64{bought, reopened} {
		for id, u := range orders {
			got, err := f.svc.Place(ctx, u, voucherID)
			assert.ErrorIs(t, err, order.ErrAlreadyOrdered, "user %d", u)
			assert.Equal(t, id, got, "user %d's order", u)
		}
	}
	since := map[int64]int64{}
	for _, orders := range []map[int64]int64{reopened, f.place(voucherID, 4, 4)} {
		for id, u := range orders {
			since[id] = u
		}
	}

	w := f.writer("w2", nil)
	f.eventually("the orders of the reopened sale written", func() bool { return len(f.rows(voucherID)) == 4 })
	users := map[int64]int64{}
	for id, u := range f.rows(voucherID) {
		users[u]++
		if _, ok := since[id]; ok {
			f.eventually("answered created", func() bool { return f.state(u, id) == order.StateCreated })
		}
	}
	assert.Equal(t, map[int64]int64{1: 1, 2: 1, 3: 1, 4: 1}, users, "rows per user")
	f.eventually("acknowledged", func() bool { return f.backlog(voucherID) == 0 })
	stopped(t, w)

	c.advance(pastRetention)
	retired, err := async.Retire(ctx, f.idleWriter(), voucherID)
	require.NoError(t, err)
	assert.True(t, retired, "the reopened sale, over for the retention, retired")
	assert.False(t, f.registered(voucherID), "and out of the registry")
	assert.Zero(t, f.rdb.SCard(ctx, async.LeavingKey).Val(), "none left among the vouchers leaving it")
}

// TestReopenDuringRetirement: an operator reopens a sale (moves its end in the database and
// deletes its sale hash; the next admission reloads it and registers it) while a writer
// retires it, at each point of the retirement's last step: the voucher leaves the registry
// (SREM) and is put back if its sale hash lost the retired mark meanwhile. Whatever the
// point, the reopened sale ends in the registry and its stream is read, and nobody orders
// twice (readAgain). Reopened between the retirement script and the SREM, the reload's
// registration comes before the SREM, and only the put-back registers the voucher again. A
// sale never reopened leaves the registry.
func TestReopenDuringRetirement(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cmd  string // the retirement's command the reopening comes at; "" for none
		// after puts the reopening after cmd's answer instead of before cmd.
		after bool
		// retired is what the retirement reports: it retired the voucher.
		retired bool
	}{
		{name: "before the script", cmd: "evalsha"},
		{name: "between the script and the SREM", cmd: "srem"},
		{name: "between the SREM and the put-back check", cmd: "hexists"},
		{name: "after the put-back check", cmd: "hexists", after: true, retired: true},
		{name: "never", retired: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
				vid, bought := f.retiredSale(c)
				var reopened map[int64]int64
				hook := &atCommand{cmd: tc.cmd, after: tc.after, do: func() { reopened = f.reopen(c, vid) }}
				retired, err := async.Retire(context.Background(), f.hookedWriter(hook), vid)
				require.NoError(t, err)
				require.Equal(t, tc.cmd != "", hook.done.Load(), "the reopening ran at %q", tc.cmd)
				assert.Equal(t, tc.retired, retired, "retired")
				if tc.cmd == "" {
					assert.False(t, f.registered(vid), "a retired sale leaves the registry")
					return
				}
				f.readAgain(c, vid, bought, reopened)
			})
		})
	}
}

// TestPutBackOutlivesTheRetirementContext: a retirement's context ends (the writer stops, or
// the copy of many dead letters used up its deadline) just after the voucher left the registry
// (SREM), and the sale was reopened before that SREM. The check and the put-back that
// follow ran on that context, failed, and left the reopened sale out of the registry, where no
// writer reads its stream and no discovery retires it again: its orders stayed pending until
// an instance restarted. Once begun, the last step runs whole.
func TestPutBackOutlivesTheRetirementContext(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		vid, bought := f.retiredSale(c)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var reopened map[int64]int64
		w := f.hookedWriter(&atCommand{cmd: "srem", do: func() { reopened = f.reopen(c, vid) }},
			&atCommand{cmd: "srem", after: true, do: cancel})
		retired, err := async.Retire(ctx, w, vid)
		require.NoError(t, err, "the check and the put-back after the context ended")
		assert.False(t, retired, "reopened")
		f.readAgain(c, vid, bought, reopened)
	})
}

// TestLookupWhileAReopenedSaleIsOutOfTheRegistry: a sale reopened just before a retirement's
// SREM is out of the registry from that SREM until the put-back registers it again (the next
// discovery's, when the put-back failed). A lookup asks the orders hashes of the registered
// vouchers only: an order admitted since the reopening, pending, was answered 404 in that
// window, an order its buyer was told was placed reported as not existing. A voucher leaving
// the registry is in a second set, which lookups read with the registry in one step, until it
// is settled, back in the registry or retired.
func TestLookupWhileAReopenedSaleIsOutOfTheRegistry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fail map[string]int // how many times each command fails, from the SREM on
	}{
		{name: "between the SREM and the put-back"},
		{name: "the put-back failed", fail: map[string]int{"sadd": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
				vid, bought := f.retiredSale(c)
				var reopened map[int64]int64
				lookUp := func() {
					for id, u := range reopened {
						assert.Equal(t, order.StatePending, f.state(u, id), "order %d, admitted since the reopening", id)
					}
				}
				hooks := []redis.Hook{&atCommand{cmd: "srem", do: func() { reopened = f.reopen(c, vid) }},
					&atCommand{cmd: "hexists", do: lookUp}}
				if tc.fail != nil {
					hooks = append(hooks, &failing{cmds: maps.Clone(tc.fail), from: "srem"})
				}
				w := f.hookedWriter(hooks...)
				_, err := async.Retire(context.Background(), w, vid)
				if tc.fail != nil {
					require.ErrorIs(t, err, errInjected)
					require.False(t, f.registered(vid), "out of the registry after the failed put-back")
					lookUp()
					async.Discover(w)
				} else {
					require.NoError(t, err)
				}
				stopped(t, w)
				f.readAgain(c, vid, bought, reopened)
			})
		})
	}
}

// errInjected is the failure failing gives its commands.
var errInjected = errors.New("injected redis failure")

// failing is a go-redis hook that fails the next cmds[name] commands named name, from the
// first command named from on (from "" : from the first command): before Redis receives them
// (not applied), or after Redis applied them (sent: the reply lost, as in a timeout).
type failing struct {
	hookBase
	cmds map[string]int
	sent bool
	from string
	mu   sync.Mutex
}

func (h *failing) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		if cmd.Name() == h.from {
			h.from = ""
		}
		at := h.from == "" && h.cmds[cmd.Name()] > 0
		if at {
			h.cmds[cmd.Name()]--
		}
		h.mu.Unlock()
		if !at {
			return next(ctx, cmd)
		}
		if h.sent {
			_ = next(ctx, cmd)
		}
		cmd.SetErr(errInjected)
		return errInjected
	}
}

// TestPutBackFailsAndDiscoveryPutsItBack: a sale reopened just before a retirement's SREM, and
// the step after that SREM fails (Redis answers an error or nothing): the reopened sale was
// out of the registry, where no writer reads its stream and no discovery, which reads the
// registry, tries it again, its orders pending until an instance restarted. The writer
// remembers the voucher and its next discovery checks it again: reopened, it goes back into
// the registry and its orders are written. A put-back that fails in discovery is tried at the
// next.
func TestPutBackFailsAndDiscoveryPutsItBack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fail map[string]int // how many times each command fails, from the SREM on
		sent bool           // the failing commands reach Redis, their replies are lost
		// rounds is how many discoveries the put-back takes.
		rounds int
	}{
		{name: "the put-back", fail: map[string]int{"sadd": 1}, rounds: 1},
		{name: "the check and the put-back", fail: map[string]int{"hexists": 1, "sadd": 1}, rounds: 1},
		{name: "the SREM's reply", fail: map[string]int{"srem": 1}, sent: true, rounds: 1},
		{name: "the put-back, then at discovery", fail: map[string]int{"sadd": 2}, rounds: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
				vid, bought := f.retiredSale(c)
				var reopened map[int64]int64
				fail := &failing{cmds: maps.Clone(tc.fail), sent: tc.sent, from: "srem"}
				w := f.hookedWriter(&atCommand{cmd: "srem", do: func() { reopened = f.reopen(c, vid) }}, fail)
				retired, err := async.Retire(context.Background(), w, vid)
				require.ErrorIs(t, err, errInjected)
				assert.False(t, retired, "reopened")
				require.False(t, f.registered(vid), "out of the registry after the failed step")

				for range tc.rounds - 1 {
					async.Discover(w)
					require.False(t, f.registered(vid), "out of the registry after a failed put-back")
				}
				async.Discover(w)
				stopped(t, w)
				for cmd, n := range fail.cmds {
					require.Zero(t, n, "%s failed as often as told", cmd)
				}
				f.readAgain(c, vid, bought, reopened)
			})
		})
	}
}

// TestTwoRetirementsOfAReopenedSale: every instance's discovery retires a finished voucher,
// so two writers retire it at once (one retires it, the other finds it retired already), and
// the sale is reopened meanwhile. The first writer puts the reopened voucher back into the
// registry and takes it out of the vouchers leaving it, while the second has marked it
// leaving and not yet taken it out of the registry; the second's SREM then took the voucher
// out of both sets, and a lookup of the order admitted since the reopening, pending, was
// answered 404 until the second's put-back (until its next discovery when that failed).
func TestTwoRetirementsOfAReopenedSale(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		vid, bought := f.retiredSale(c)
		var reopened map[int64]int64
		first := f.hookedWriter(&atCommand{cmd: "srem", do: func() { reopened = f.reopen(c, vid) }})
		lookUp := func() {
			for id, u := range reopened {
				assert.Equal(t, order.StatePending, f.state(u, id), "order %d, admitted since the reopening", id)
			}
		}
		// The second has marked the voucher leaving; the first retires it whole before the
		// second's SREM; a lookup comes before the second's put-back check.
		second := f.hookedWriter(&atCommand{cmd: "srem", do: func() {
			_, err := async.Retire(context.Background(), first, vid)
			require.NoError(t, err)
		}}, &atCommand{cmd: "hexists", do: lookUp})
		_, err := async.Retire(context.Background(), second, vid)
		require.NoError(t, err)
		require.NotNil(t, reopened, "the sale was reopened during the first retirement")
		lookUp()
		f.readAgain(c, vid, bought, reopened)
	})
}
