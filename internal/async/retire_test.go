package async_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// pastRetention is how far a test moves its clock to put a sale that ends within the hour
// past the default retention (an hour after the end).
const pastRetention = 3 * time.Hour

// clock is a test's clock of the sale windows and the retention: the real time, moved on by
// what the test advanced it.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// commandCounter counts the commands sent through the client it hooks, those of a pipeline
// one by one, and the round trips (a pipeline is one). The handshake of a new connection
// (HELLO, CLIENT SETINFO) is not counted: when the pool opens one is not the caller's work.
type commandCounter struct {
	hookBase
	cmds, trips atomic.Int64
}

func handshake(cmd redis.Cmder) bool { return cmd.Name() == "hello" || cmd.Name() == "client" }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			c.cmds.Add(1)
			c.trips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if !handshake(cmd) {
				n++
			}
		}
		if n > 0 {
			c.cmds.Add(int64(n))
			c.trips.Add(1)
		}
		return next(ctx, cmds)
	}
}

// withClock runs body on each pair of stores (see stores) with a fixture of cfg whose clock
// of the sale windows and the retention is c, which body moves.
func withClock(t *testing.T, cfg async.Config, body func(t *testing.T, f *fixture, c *clock)) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			c := &clock{}
			cfg := cfg
			cfg.Now = c.now
			body(t, newFixture(t, s, cfg), c)
		})
	}
}

// idleWriter is a writer of the fixture's config that is never started: the tests run its
// discovery and retirement themselves.
func (f *fixture) idleWriter() *async.Writer {
	return async.NewWriter(f.rdb, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, f.cfg)
}

// voucherAt creates a seckill voucher with stock whose sale runs from begin to end.
func (f *fixture) voucherAt(stock int, begin, end time.Time) int64 {
	f.t.Helper()
	v, err := voucher.NewService(voucher.NewStore(f.db.DB)).Create(context.Background(), voucher.Voucher{Title: "t", Stock: stock,
		BeginTime: begin, EndTime: end})
	require.NoError(f.t, err)
	return v.ID
}

// registered reports whether voucherID is in the writers' and lookups' registry.
func (f *fixture) registered(voucherID int64) bool {
	f.t.Helper()
	ok, err := async.Registered(context.Background(), f.rdb, voucherID)
	require.NoError(f.t, err)
	return ok
}

// keysLeft is how many of voucherID's keys other than the sale hash exist.
func (f *fixture) keysLeft(voucherID int64) int64 {
	f.t.Helper()
	n, err := f.rdb.Exists(context.Background(), async.AllKeysOf(voucherID)[1:]...).Result()
	require.NoError(f.t, err)
	return n
}

// stopped stops w now (its cleanup stops it again, which is harmless).
func stopped(t *testing.T, w *async.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.Stop(ctx))
}

// TestLookupAsksRecentSalesOnly: GET /api/orders/{id} asked the orders hash of every voucher
// ever loaded, one HGET each, on every request. Once their sales are over for the retention
// the writer retires them: a lookup's Redis work is again what it was before those sales,
// however many there were.
func TestLookupAsksRecentSalesOnly(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		// The lookups' own client, so that the writer's commands are not counted.
		lrdb := redis.NewClient(&redis.Options{Addr: f.rdb.(*redis.Client).Options().Addr})
		t.Cleanup(func() { _ = lrdb.Close() })
		counter := &commandCounter{}
		lrdb.AddHook(counter)
		statuses := async.NewStatuses(lrdb, f.store)
		lookupCost := func() int64 {
			t.Helper()
			before := counter.cmds.Load()
			_, ok, err := statuses.Lookup(ctx, 1) // an id nobody was given
			require.NoError(t, err)
			require.False(t, ok)
			return counter.cmds.Load() - before
		}
		// A sale that is still on when the others are past their retention.
		live := f.voucherAt(1, time.Now().Add(-time.Hour), time.Now().Add(2*pastRetention))
		require.NoError(t, f.loader.Load(ctx, live))
		base := lookupCost()

		const sales = 20
		old := make([]int64, sales)
		for i := range old {
			old[i] = f.voucher(1)
			require.NoError(t, f.loader.Load(ctx, old[i]))
		}
		require.Equal(t, base+sales, lookupCost(), "each registered voucher costs a lookup one HGET")

		c.advance(pastRetention)
		f.writer("w", nil)
		cost := lookupCost()
		for deadline := time.Now().Add(eventuallyBound); cost != base && time.Now().Before(deadline); cost = lookupCost() {
			time.Sleep(20 * time.Millisecond)
		}
		assert.Equal(t, base, cost, "a lookup's Redis commands once the %d sales are over for the retention, against before them", sales)
		assert.True(t, f.registered(live), "the sale on is not retired")
		for _, id := range old {
			assert.False(t, f.registered(id), "voucher %d retired", id)
			assert.Zero(t, f.keysLeft(id), "voucher %d: its keys but the sale hash deleted", id)
		}
	})
}

// TestDiscoveryRoundTripsDoNotGrow: a writer's discovery, every second, read each finished
// voucher's sale hash and stream one call at a time, all under one 2 s timeout: with enough
// of them it ran out, and started loops for old vouchers. It reads them in one pipeline.
func TestDiscoveryRoundTripsDoNotGrow(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		counter := &commandCounter{}
		f.rdb.AddHook(counter)
		var w *async.Writer
		trips := func() int64 {
			t.Helper()
			before := counter.trips.Load()
			async.Discover(w)
			return counter.trips.Load() - before
		}
		require.NoError(t, f.loader.Load(ctx, f.voucher(1)))
		c.advance(2 * time.Hour) // over, within a retention of a day
		w = async.NewWriter(f.rdb, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet,
			async.Config{Now: c.now, Retention: 24 * time.Hour, Consumer: "w"})
		one := trips()
		for range 30 {
			require.NoError(t, f.loader.Load(ctx, f.voucherAt(1, c.now().Add(-3*time.Hour), c.now().Add(-2*time.Hour))))
		}
		assert.Equal(t, one, trips(), "round trips of a discovery with 31 finished vouchers against 1")
	})
}

// TestDiscoveryReadsPastARefusedKey: one voucher whose stream key Redis refuses to read as a
// stream (a key of another type) leaves that voucher's state unknown, and the discovery still
// starts the loops of the others.
func TestDiscoveryReadsPastARefusedKey(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		broken, on := f.voucher(1), f.voucher(1)
		require.NoError(t, f.loader.Load(ctx, broken))
		require.NoError(t, f.loader.Load(ctx, on))
		_, _, _, stream, _ := async.KeysOf(broken)
		require.NoError(t, f.rdb.Set(ctx, stream, "not a stream", 0).Err())
		w := f.idleWriter()
		t.Cleanup(func() { stopped(t, w) })
		async.Discover(w)
		_, _, _, onStream, _ := async.KeysOf(on)
		f.eventually("the loop of the voucher on sale started (it creates the group)", func() bool {
			groups, err := f.rdb.XInfoGroups(ctx, onStream).Result()
			return err == nil && len(groups) == 1
		})
	})
}

// TestRetiredVoucherAnswersFailedOrders: once a voucher is retired, its Redis keys but the
// sale hash are gone, and a failed order of it is still answered failed, from the database,
// also when the record written at its dead letter is missing (the retirement copies the dead
// letters first); the books still reconcile, with the kept unit counted in the database.
func TestRetiredVoucherAnswersFailedOrders(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{MaxAttempts: 1}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid := f.voucher(3)
		require.NoError(t, f.loader.Load(ctx, vid))
		f.sellBehind(vid, 99)
		admitted := f.place(vid, 1, 3)
		w := f.writer("w", nil)
		require.Equal(t, []any{"kept"}, f.deadLetters(vid, 1))
		f.eventually("the others written", func() bool { return len(f.rows(vid)) == 3 })
		stopped(t, w)
		var failed int64
		for id := range admitted {
			if p, ok, err := f.statuses.Lookup(ctx, id); err == nil && ok && p.Failed {
				failed = id
			}
		}
		require.NotZero(t, failed)
		before, ok, err := f.store.Failed(ctx, failed)
		require.NoError(t, err)
		require.True(t, ok, "recorded in the database when it was dead-lettered")
		require.NoError(t, f.db.Exec("DELETE FROM async_failed_orders").Error) // as if that record had failed

		c.advance(pastRetention)
		retired, err := async.Retire(ctx, f.idleWriter(), vid)
		require.NoError(t, err)
		require.True(t, retired)
		assert.False(t, f.registered(vid))
		assert.Zero(t, f.keysLeft(vid), "users, orders, streams, attempts deleted")

		pending := async.OrderPending{Statuses: f.statuses}
		for id, u := range admitted {
			_, ok, err := pending.Lookup(ctx, id)
			require.NoError(t, err)
			assert.False(t, ok, "order %d: Redis no longer knows it", id)
			if id != failed {
				continue // a row: the database answers it
			}
			sum, ok, err := pending.Failed(ctx, id)
			require.NoError(t, err)
			require.True(t, ok, "the failed order is still known")
			assert.Equal(t, order.Summary{ID: id, UserID: u, VoucherID: vid, State: order.StateFailed,
				Reason: before.Reason, CreatedAt: before.At}, sum)
		}
		b := f.book(vid)
		assert.True(t, b.Retired)
		assert.Equal(t, int64(1), b.Kept, "the kept unit, counted in the database")
		assert.Zero(t, b.Drift(), "books %+v", b)

		again, err := async.Retire(ctx, f.idleWriter(), vid)
		require.NoError(t, err)
		assert.False(t, again, "retired once")
		assert.False(t, f.registered(vid), "a second retirement does not register it again")
	})
}

// TestRetireKeepsAVoucherWithOrdersPending: a sale over for longer than the retention whose
// stream still holds orders (delivered to a writer that died) is not retired, and its orders
// stay pending to a lookup; once a writer wrote them it is. A sale over for less than the
// retention is not retired either.
func TestRetireKeepsAVoucherWithOrdersPending(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid := f.voucher(5)
		admitted := f.place(vid, 1, 3)
		f.crashed(vid, 3)

		c.advance(time.Hour + 30*time.Minute) // over for half an hour: within the retention
		retired, err := async.Retire(ctx, f.idleWriter(), vid)
		require.NoError(t, err)
		assert.False(t, retired, "within the retention")

		c.advance(pastRetention)
		retired, err = async.Retire(ctx, f.idleWriter(), vid)
		require.NoError(t, err)
		assert.False(t, retired, "orders pending in the stream")
		assert.True(t, f.registered(vid), "still read by the writers")
		assert.Equal(t, int64(3), f.keysLeft(vid), "the users, orders and stream kept (no dead letter, no attempt yet)")
		for id := range admitted {
			p, ok, err := f.statuses.Lookup(ctx, id)
			require.NoError(t, err)
			assert.True(t, ok && !p.Failed, "order %d still pending", id)
		}

		f.writer("survivor", nil)
		f.eventually("claimed and written", func() bool { return len(f.rows(vid)) == 3 })
		f.eventually("retired once written", func() bool { return !f.registered(vid) })
		assert.Zero(t, f.keysLeft(vid))
		for id := range admitted {
			_, ok, err := f.statuses.Lookup(ctx, id)
			require.NoError(t, err)
			assert.False(t, ok, "order %d is a row", id)
		}
	})
}

// TestDeadLetterAfterTheCopyKeepsTheVoucher: a dead letter that comes between the copy of the
// dead letters to the database and the deletion of the keys would be lost with them: the
// retirement script counts the dead letters and keeps the voucher; the next retirement copies
// it.
func TestDeadLetterAfterTheCopyKeepsTheVoucher(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid := f.voucher(1)
		require.NoError(t, f.loader.Load(ctx, vid))
		c.advance(pastRetention)
		_, _, _, _, dead := async.KeysOf(vid)
		w := f.idleWriter()
		at := time.UnixMilli(c.now().UnixMilli()).UTC()
		async.SetBeforeRetire(w, func(int64) {
			async.SetBeforeRetire(w, nil)
			require.NoError(t, f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: dead, Values: []any{"order", "42", "user", "7",
				"voucher", vid, "at", at.UnixMilli(), "entry", "1-1", "reason", "refused", "unit", "returned"}}).Err())
		})
		retired, err := async.Retire(ctx, w, vid)
		require.NoError(t, err)
		assert.False(t, retired, "a dead letter the copy missed")
		assert.True(t, f.registered(vid))

		retired, err = async.Retire(ctx, w, vid)
		require.NoError(t, err)
		require.True(t, retired)
		p, ok, err := f.statuses.Lookup(ctx, 42)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, async.PendingOrder{ID: 42, UserID: 7, VoucherID: vid, Failed: true, Reason: "refused", CreatedAt: at},
			p, "answered from the database")
	})
}

// TestRetireRacesLookupsAndOtherWriters: four writers retire one voucher at once while
// lookups run: exactly one retires it, it leaves the registry for good, and every lookup in
// between answers the failed order failed (from Redis, or from the database once Redis's copy
// is gone) and none of the written orders pending.
func TestRetireRacesLookupsAndOtherWriters(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{MaxAttempts: 1}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid := f.voucher(5)
		failed := f.refusedOrder(vid, 1)
		written := f.place(vid, 2, 4)
		w := f.writer("w", nil)
		f.deadLetters(vid, 1)
		f.eventually("the others written", func() bool { return len(f.rows(vid)) == 4 }) // with user 1's own
		stopped(t, w)
		// As if the record written at the dead letter had failed: the retirement's copy is
		// what the lookups find once Redis's copy is gone.
		require.NoError(t, f.db.Exec("DELETE FROM async_failed_orders").Error)
		c.advance(pastRetention)

		start := make(chan struct{})
		var retirers, lookups sync.WaitGroup
		var retiredBy atomic.Int64
		for range 4 {
			retirers.Go(func() {
				<-start
				ok, err := async.Retire(ctx, f.idleWriter(), vid)
				assert.NoError(t, err)
				if ok {
					retiredBy.Add(1)
				}
			})
		}
		done := make(chan struct{})
		for range 8 {
			lookups.Go(func() {
				<-start
				for n := 0; ; n++ {
					select {
					case <-done:
						if n > 0 {
							return
						}
					default:
					}
					p, ok, err := f.statuses.Lookup(ctx, failed)
					if !assert.NoError(t, err) || !assert.True(t, ok && p.Failed, "the failed order answered %+v, %v", p, ok) {
						return
					}
					for id := range written {
						_, ok, err := f.statuses.Lookup(ctx, id)
						if !assert.NoError(t, err) || !assert.False(t, ok, "written order %d answered by Redis", id) {
							return
						}
					}
				}
			})
		}
		close(start)
		retirers.Wait()
		close(done)
		lookups.Wait()
		assert.Equal(t, int64(1), retiredBy.Load(), "retired by exactly one writer")
		assert.False(t, f.registered(vid))
		assert.Zero(t, f.keysLeft(vid))
	})
}

// TestReopenedSaleKeepsOneOrderPerUser: a retired voucher whose sale is reopened (its end
// moved in the database and its sale hash deleted, as docs/async.md says) is loaded with the
// users of its rows: its buyers cannot order again, and the writers read it again.
func TestReopenedSaleKeepsOneOrderPerUser(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid := f.voucher(5)
		admitted := f.place(vid, 1, 2)
		f.writer("w", nil)
		f.eventually("written", func() bool { return len(f.rows(vid)) == 2 })
		f.endSale(vid)
		c.advance(pastRetention)
		f.eventually("retired", func() bool { return !f.registered(vid) })
		_, err := f.svc.Place(ctx, 1, vid)
		require.ErrorIs(t, err, order.ErrSaleNotActive, "the kept sale hash refuses an order after the sale")

		f.reopen(c, vid) // a new buyer's admission reloads it
		for id, u := range admitted {
			got, err := f.svc.Place(ctx, u, vid)
			require.ErrorIs(t, err, order.ErrAlreadyOrdered, "user %d", u)
			assert.Equal(t, id, got)
		}
		assert.True(t, f.registered(vid), "read by the writers again")
	})
}

// endSale ends voucherID's sale now, in the database and in its sale hash on Redis's clock
// (which decides the window of an admission), as an operator who ends a sale early does.
func (f *fixture) endSale(voucherID int64) {
	f.t.Helper()
	ctx := context.Background()
	now, err := f.rdb.Time(ctx).Result()
	require.NoError(f.t, err)
	_, err = voucher.NewStore(f.db.DB).EndSales(ctx, []int64{voucherID}, now)
	require.NoError(f.t, err)
	sale, _, _, _, _ := async.KeysOf(voucherID)
	require.NoError(f.t, f.rdb.HSet(ctx, sale, "end", now.UnixMilli()).Err())
}

// afterGroupCreation is a go-redis hook that, once armed, closes done after the first command
// its client sent that creates the consumer group (XGROUP, or a script, which a writer runs
// for nothing else once its voucher's stream is empty) has been answered.
type afterGroupCreation struct {
	hookBase
	armed atomic.Bool
	fired atomic.Bool
	done  chan struct{}
}

func (h *afterGroupCreation) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		switch cmd.Name() {
		case "xgroup", "evalsha", "eval":
			if h.armed.Load() && h.fired.CompareAndSwap(false, true) {
				close(h.done)
			}
		}
		return err
	}
}

// TestWriterDoesNotRecreateARetiredStream: a writer's loop still reads a voucher's stream when
// another writer retires the voucher (whose clock puts the sale past the retention first), and
// the retirement deletes the stream with its consumer group. The loop's next read found no
// group and created it again, with MKSTREAM: an empty stream and group of a retired voucher,
// out of the registry, that nothing deleted again. The group is now created only while the
// sale hash is not marked retired, in one step; the loop of a retired voucher ends (a reopened
// sale, its mark gone, is read again).
func TestWriterDoesNotRecreateARetiredStream(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(5)
			f.place(vid, 1, 1)
			_, _, _, stream, _ := async.KeysOf(vid)

			hook := &afterGroupCreation{done: make(chan struct{})}
			reading := f.hookedWriter(hook)
			reading.Start()
			t.Cleanup(func() { stopped(t, reading) })
			f.eventually("the order written", func() bool { return len(f.rows(vid)) == 1 && f.backlog(vid) == 0 })

			later := f.cfg
			later.Now = func() time.Time { return time.Now().Add(pastRetention) }
			retiring := async.NewWriter(f.rdb, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, later)
			hook.armed.Store(true)
			retired, err := async.Retire(ctx, retiring, vid)
			require.NoError(t, err)
			require.True(t, retired)

			select {
			case <-hook.done:
			case <-time.After(eventuallyBound):
				t.Fatal("the reading writer did not come back to its group")
			}
			assert.Zero(t, f.rdb.Exists(ctx, stream).Val(), "the retired voucher's stream is not created again")
			assert.Zero(t, f.keysLeft(vid), "no key of the retired voucher but its sale hash")
		})
	}
}
