package lock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// TestFairHandoverCarriesToken: a FairLock waiter that is handed the lock (woken by the
// releaser's handover, locally or by message) must get a fencing token above the previous
// holder's, not 0. On a real Redis the tokens are clock-based (above 10^15), which Lua's
// string concatenation would print in exponent form; the handover must still name its waiter
// (a first version of this fix lost every handover that way until the lease ran out, which
// TestMutualExclusion/real/fair caught).
func TestFairHandoverCarriesToken(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		for _, sameProcess := range []bool{true, false} {
			name := srv.Name + "/" + map[bool]string{true: "local", false: "message"}[sameProcess]
			t.Run(name, func(t *testing.T) { fairHandoverToken(t, srv, sameProcess) })
		}
	}
}

func fairHandoverToken(t *testing.T, srv testenv.Redis, sameProcess bool) {
	if srv.Mini != nil {
		srv = testenv.EmbeddedRedis(t)
	}
	ctx := testCtx(t)
	a := newProc(t, srv, Options{})
	b := a
	if !sameProcess {
		b = newProc(t, srv, Options{})
	}
	lockName := testenv.Unique("handtok-")
	holder := a.c.FairLock(lockName)
	take(t, holder, 30*time.Second)
	first := holder.Token()
	require.Positive(t, first)
	sleeping := make(chan struct{}, 10)
	b.c.hooks.waiting = func(string) { sleeping <- struct{}{} }
	type res struct {
		ok    bool
		err   error
		token int64
	}
	done := make(chan res, 1)
	go func() {
		l := b.c.FairLock(lockName)
		ok, err := l.TryLockWait(ctx, -1, 30*time.Second)
		r := res{ok, err, l.Token()}
		if ok {
			_ = l.Unlock(ctx)
		}
		done <- r
	}()
	<-sleeping
	require.NoError(t, holder.Unlock(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.True(t, r.ok)
	require.Greater(t, r.token, first, "the handed-over holder's token")
}

// partitionReadTimeout is go-redis's default ReadTimeout: across a real partition, a command
// whose context has no deadline (the subscriber's reconnect, say) fails after it.
const partitionReadTimeout = 3 * time.Second

// errPartitioned is the error of a command that partitionReadTimeout ended.
var errPartitioned = errors.New("partitioned: i/o timeout")

// partitionHook makes every command of one client wait for its context to end while cut is
// set, or for partitionReadTimeout, as a real partition's read timeout would end it: the
// client can no longer reach Redis, others still can (a network partition). Without that
// bound, a command on a context without a deadline waited for ever, holding the go-redis
// PubSub's mutex, and the client's Close waited on it until the test binary timed out.
func partitionHook(cut *atomic.Bool) hook {
	return func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if cut.Load() {
				t := time.NewTimer(partitionReadTimeout)
				defer t.Stop()
				err := errPartitioned
				select {
				case <-ctx.Done():
					err = ctx.Err()
				case <-t.C:
				}
				cmd.SetErr(err)
				return err
			}
			return next(ctx, cmd)
		}
	}
}

// TestPartitionHookEndsUnboundedCommands: a command on a context without a deadline, cut off
// by partitionHook, fails after partitionReadTimeout instead of hanging.
func TestPartitionHookEndsUnboundedCommands(t *testing.T) {
	t.Parallel()
	var cut atomic.Bool
	cut.Store(true)
	process := partitionHook(&cut)(func(context.Context, redis.Cmder) error {
		t.Error("a cut-off command reached Redis")
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- process(context.Background(), redis.NewStatusCmd(context.Background(), "ping")) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, errPartitioned)
	case <-time.After(3 * partitionReadTimeout):
		t.Fatal("a cut-off command on a context without a deadline never returned")
	}
}

// TestWatchdogReportsLossByTheLeaseEnd: a watchdog holder is cut off from Redis right
// after its grant, while other processes still reach it. Its lease in Redis runs out a lease
// after the grant, and another owner may take the lock then; Lost() must be closed by then.
// The watchdog gave each renewal the whole interval to answer and only checked the time
// after it failed, so it reported the loss up to a third of a lease late (with the default
// 30 s lease, 10 s in which two owners held the lock).
func TestWatchdogReportsLossByTheLeaseEnd(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	var cut atomic.Bool
	c := newHookedProc(t, srv, partitionHook(&cut), Options{}).c

	const lease = 3 * time.Second // renewals every second
	l := c.ReentrantLock(testenv.Unique("partition-"))
	sent := time.Now()
	ok, err := l.TryLock(context.Background(), lease)
	require.NoError(t, err)
	require.True(t, ok)
	cut.Store(true)

	select {
	case <-l.Lost():
		// Reported lost about when the lease may have run out in Redis. The old watchdog
		// was a whole renewal interval (lease/3, 1 s) late; half of that is the bound,
		// which leaves a loaded machine's scheduling delays room.
		late := time.Since(sent) - lease
		assert.Less(t, late, lease/6, "Lost() closed %s after the lease ran out", late)
	case <-time.After(5 * lease):
		t.Fatal("hold never reported lost")
	}
}

// TestReentryNeverShortensTheLease: a goroutine holds a lock with the watchdog and
// re-enters it with a short fixed lease (a helper it calls uses TryLockWait(ctx, 0, 100ms)).
// The re-entry must not cut the watched hold's lease in Redis: else the lock expires 100 ms
// later, another process takes it, and the holder, whose watchdog renews only every lease/3,
// still believes it holds the lock, Lost() open.
func TestReentryNeverShortensTheLease(t *testing.T) {
	for _, k := range kinds[:2] { // the hash locks: LocalRemoteLock re-enters locally
		t.Run(k.name, func(t *testing.T) {
			srv := testenv.EmbeddedRedis(t)
			ctx := testCtx(t)
			a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
			name := testenv.Unique("reenter-")
			la := k.make(a, name)
			ok, err := la.TryLock(ctx, 30*time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = la.TryLockWait(ctx, 0, 100*time.Millisecond)
			require.NoError(t, err)
			require.True(t, ok, "re-entry")
			srv.Mini.FastForward(200 * time.Millisecond)
			ok, err = k.make(b, name).TryLock(ctx, 30*time.Second)
			require.NoError(t, err)
			if ok {
				select {
				case <-la.Lost():
				default:
					t.Fatal("another process took the lock while its holder's Lost() was open")
				}
			}
		})
	}
}

// slowReplyHook delays the answer of the next script call once armed, after Redis ran it:
// the lease it set runs while the answer is on its way (FastForward ages the embedded Redis
// by as much).
func slowReplyHook(armed *atomic.Bool, mini interface{ FastForward(time.Duration) }, delay time.Duration) hook {
	return func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			err := next(ctx, cmd)
			if err == nil && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && armed.CompareAndSwap(true, false) {
				time.Sleep(delay)
				mini.FastForward(delay)
			}
			return err
		}
	}
}

// slowReplyProcs returns two processes on an embedded Redis of their own: slow, whose next
// script call after armed is set answers delay late (slowReplyHook), and other.
func slowReplyProcs(t *testing.T, delay time.Duration) (slow, other proc, armed *atomic.Bool) {
	srv := testenv.EmbeddedRedis(t)
	armed = new(atomic.Bool)
	slow = newHookedProc(t, srv, slowReplyHook(armed, srv.Mini, delay), Options{})
	return slow, newProc(t, srv, Options{}), armed
}

// TestFixedLeaseCountsFromTheRequest: a fixed lease starts when Redis runs the grant,
// before its answer comes back. The hold's timer started only at the answer, so a slow
// answer left Lost() open while the lease had run out and another process held the lock.
func TestFixedLeaseCountsFromTheRequest(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := testCtx(t)
			const lease = 300 * time.Millisecond
			a, b, armed := slowReplyProcs(t, lease)
			name := testenv.Unique("slowreply-")
			la := k.make(a, name)
			armed.Store(true)
			ok, err := la.TryLockWait(ctx, 0, lease)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = k.make(b, name).TryLock(ctx, 30*time.Second)
			require.NoError(t, err)
			require.True(t, ok, "the lease has run out in Redis")
			select {
			case <-la.Lost():
			default:
				t.Fatal("another process holds the lock while its first holder's Lost() is open")
			}
		})
	}
}

// TestGrantDuringCloseIsLost: a lock granted while its Client closes gets no watchdog (whose
// start would race with Close's wait for the watchdogs) and is reported lost at once, as
// Close reports every hold it stops renewing.
func TestGrantDuringCloseIsLost(t *testing.T) {
	p := newProc(t, testenv.EmbeddedRedis(t), Options{})
	require.NoError(t, p.c.Close())
	h := p.c.holds.begin("lock:{grant-during-close}:reentrant", "me", 1)
	p.c.watch(h, "lock:{grant-during-close}:reentrant", time.Second, time.Second/3, time.Now().Add(time.Second),
		func(context.Context, time.Duration) (bool, error) { return true, nil })
	select {
	case <-h.lost:
	default:
		t.Fatal("a hold granted after Close is not reported lost")
	}
}

// TestFairHandoverWatchdogCountsFromTheGrant: a FairLock waiter with the watchdog is handed
// the lock with the shorter grant lease (WaiterTimeout, 1 s here, against the 30 s watchdog
// lease), and its first renewal finds Redis cut off. The lease in Redis runs out a grant
// lease after the handover, so that renewal may wait only until then, and Lost() must close
// by then. The watchdog took the whole watchdog lease for its first deadline: the renewal
// waited a renewal interval (10 s), and Lost() stayed open up to 30 s while another owner
// could hold the lock.
func TestFairHandoverWatchdogCountsFromTheGrant(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	ctx := testCtx(t)
	const grantLease = time.Second
	var cut atomic.Bool
	renewWait := make(chan time.Duration, 1) // how long the first renewal may wait for its answer
	watched := hook(func(next redis.ProcessHook) redis.ProcessHook {
		cutOff := partitionHook(&cut)(next)
		return func(ctx context.Context, cmd redis.Cmder) error {
			if args := cmd.Args(); cmd.Name() == "evalsha" && len(args) > 1 && args[1] == renewScript.Hash() {
				dl, _ := ctx.Deadline()
				select {
				case renewWait <- time.Until(dl):
				default:
				}
				cut.Store(true)
			}
			return cutOff(ctx, cmd)
		}
	})
	cw := newHookedProc(t, srv, watched, Options{WaiterTimeout: grantLease}).c // watchdog lease: the default 30 s
	a := newProc(t, srv, Options{})
	name := testenv.Unique("fairgrant-")
	holder := a.c.FairLock(name)
	take(t, holder, 30*time.Second)

	sleeping := make(chan struct{}, 1)
	cw.hooks.waiting = func(string) {
		select {
		case sleeping <- struct{}{}:
		default:
		}
	}
	taken, lost := make(chan error, 1), make(chan struct{})
	go func() {
		l := cw.FairLock(name)
		ok, err := l.TryLockWait(ctx, -1, -1)
		if err == nil && !ok {
			err = errors.New("not taken")
		}
		taken <- err
		if err == nil {
			<-l.Lost()
			close(lost)
		}
	}()
	<-sleeping
	require.NoError(t, holder.Unlock(ctx)) // hands the lock over with the 1 s grant lease
	require.NoError(t, <-taken)
	require.LessOrEqual(t, <-renewWait, grantLease,
		"the first renewal after a handover with a %s lease may wait longer than that lease", grantLease)
	select {
	case <-lost:
	case <-time.After(10 * grantLease):
		t.Fatal("the handed-over holder, cut off from Redis, was never reported lost")
	}
}

// TestLocalHandoffCountsFromTheRemoteLease: a LocalRemoteLock's holder hands the lock to the
// next goroutine of its process without releasing the remote key, extending the key with the
// next holder's fixed lease; the extension's answer comes back a lease later (the key has
// run out in Redis meanwhile). The next holder's timer must count from that extension, so
// Lost() is closed when another process takes the lock. The timer started a whole lease
// when the next holder started, and Lost() stayed open.
func TestLocalHandoffCountsFromTheRemoteLease(t *testing.T) {
	ctx := testCtx(t)
	const lease = 500 * time.Millisecond
	a, b, armed := slowReplyProcs(t, lease)
	name := testenv.Unique("handoff-")
	first := a.r.Obtain(name)
	take(t, first, lease) // no longer than the next's: the extension never shortens the key

	next := queueLocally(t, ctx, a, name, lease)
	armed.Store(true)
	require.NoError(t, first.Unlock(ctx)) // the handoff's extension answers a lease late
	next.holds(t)
	ok, err := b.r.Obtain(name).TryLock(ctx, 30*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "the remote lease has run out in Redis")
	require.False(t, next.lostOpen(), "another process holds the lock while the goroutine handed it locally has Lost() open")
}

// queuedGoroutine is a goroutine waiting behind the holder for a LocalRemoteLock of its
// process (see queueLocally).
type queuedGoroutine struct {
	taken chan error    // its TryLockWait's outcome
	check chan struct{} // closed: look at Lost() and unlock
	open  chan bool     // whether Lost() was open
}

// queueLocally starts a goroutine of p that waits for the LocalRemoteLock name with a fixed
// lease, and returns once it is queued locally behind the holder.
func queueLocally(t *testing.T, ctx context.Context, p proc, name string, lease time.Duration) *queuedGoroutine {
	t.Helper()
	g := &queuedGoroutine{taken: make(chan error, 1), check: make(chan struct{}), open: make(chan bool, 1)}
	go g.hold(ctx, p.r.Obtain(name), lease, func() {})
	eventually(t, "a goroutine queued locally", func() bool {
		e := p.r.lookup(name)
		if e == nil {
			return false
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.waiters) == 1
	})
	return g
}

// hold is the goroutine's body: it waits for l with a fixed lease, calls took if it took it,
// reports the outcome, and, when checked, whether Lost() was open; then it unlocks.
func (g *queuedGoroutine) hold(ctx context.Context, l waitLock, lease time.Duration, took func()) {
	ok, err := l.TryLockWait(ctx, -1, lease)
	if err == nil && !ok {
		err = errors.New("not taken")
	}
	if err == nil {
		took()
	}
	g.taken <- err
	if err != nil {
		return
	}
	<-g.check
	select {
	case <-l.Lost():
		g.open <- false
	default:
		g.open <- true
	}
	_ = l.Unlock(ctx) // ErrNotHeld (ErrLockLost) when it was lost
}

// requireLostIfTaken tries other, the same lock in another process, and fails t if it takes
// the lock while the goroutine, which holds it, has Lost() open.
func (g *queuedGoroutine) requireLostIfTaken(t *testing.T, ctx context.Context, other waitLock) {
	t.Helper()
	ok, err := other.TryLock(ctx, 30*time.Second)
	require.NoError(t, err)
	if open := g.lostOpen(); ok && open {
		t.Fatal("another process holds the lock while the goroutine that was handed it has Lost() open")
	}
}

// holds fails t unless the goroutine took the lock.
func (g *queuedGoroutine) holds(t *testing.T) {
	t.Helper()
	require.NoError(t, <-g.taken)
}

// lostOpen reports whether the goroutine, holding the lock, still had Lost() open; it then
// unlocks.
func (g *queuedGoroutine) lostOpen() bool {
	close(g.check)
	return <-g.open
}

// TestLocalHandoffWaitsForTheRenewalInFlight: a LocalRemoteLock holder's watchdog (a short
// lease) is renewing the remote key when the holder unlocks and hands the lock to a goroutine
// that waits with a long fixed lease. The renewal must not land after the handoff's
// extension: it would cut the key's lease back to the watchdog's, and the key would expire
// under the next holder, whose timer counts on the extension. The hook holds the renewal back
// until the extension has run; a correct handoff waits for the renewal instead, and the hook
// lets it go after a second.
func TestLocalHandoffWaitsForTheRenewalInFlight(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	ctx := testCtx(t)
	const watchLease, fixedLease = 300 * time.Millisecond, 30 * time.Second
	require.NoError(t, registryExtendScript.Load(ctx, srv.Client).Err()) // no EVAL fallback below
	var renewHeld, extensionRan atomic.Bool
	renewing, renewed, extended := make(chan struct{}), make(chan struct{}), make(chan struct{})
	held := hook(func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			args := cmd.Args()
			if cmd.Name() != "evalsha" || len(args) != 6 || args[1] != registryExtendScript.Hash() {
				return next(ctx, cmd)
			}
			switch args[5] {
			case watchLease.Milliseconds():
				if renewHeld.CompareAndSwap(false, true) {
					close(renewing)
					select {
					case <-extended:
					case <-time.After(time.Second):
					}
					defer close(renewed)
				}
			case fixedLease.Milliseconds():
				err := next(ctx, cmd)
				if extensionRan.CompareAndSwap(false, true) {
					close(extended)
				}
				return err
			}
			return next(ctx, cmd)
		}
	})
	a := newHookedProc(t, srv, held, Options{})
	b := newProc(t, srv, Options{})
	name := testenv.Unique("renewflight-")
	first := a.r.Obtain(name)
	ok, err := first.TryLock(ctx, watchLease)
	require.NoError(t, err)
	require.True(t, ok)

	next := queueLocally(t, ctx, a, name, fixedLease)
	<-renewing
	require.NoError(t, first.Unlock(ctx)) // hands over, extending the key to fixedLease
	next.holds(t)
	<-renewed // landed, before the extension or after it
	srv.Mini.FastForward(2 * watchLease)
	next.requireLostIfTaken(t, ctx, b.r.Obtain(name))
}

// TestFairHandoverCountsFromTheRelease: a FairLock waiter with a fixed lease is handed the
// lock, and the handover reaches it a lease late (its message, or the wake-up of a releaser
// of its process, waited while the waiter was not scheduled): the lease the handover set in
// Redis has run out by then. The new holder must not count a whole lease from when it heard:
// if another process can take the lock, its Lost() must be closed. It timed the lease from
// the wake-up, and Lost() stayed open a lease after the key had expired.
func TestFairHandoverCountsFromTheRelease(t *testing.T) {
	const lease = 300 * time.Millisecond
	forEachHandover(t, lease, func(t *testing.T, ctx context.Context, srv testenv.Redis, holder *namedFairLock, waiter *asleepWaiter) {
		require.NoError(t, holder.Unlock(ctx)) // hands the lock over with lease
		waiter.woken(t)
		time.Sleep(lease) // the waiter hears of it a lease late, as Redis sees it
		srv.Mini.FastForward(lease)
		waiter.resume()
		waiter.holds(t)
		waiter.requireLostIfTaken(t, ctx, newProc(t, srv, Options{}).c.FairLock(holder.name))
	})
}

// TestFairHandoverKeepsItsLease: the other side of TestFairHandoverCountsFromTheRelease. A
// waiter whose last attempt was long ago (the holder worked for most of the waiter's lease)
// is handed the lock at once; its deadline must still be a whole lease after the release,
// not what is left of a lease counted from its last attempt (which would report a healthy
// hold lost early). A local wake-up says when the release was sent; a message does not, and
// the waiter confirms the handover with Redis.
func TestFairHandoverKeepsItsLease(t *testing.T) {
	const lease = 300 * time.Millisecond
	forEachHandover(t, lease, func(t *testing.T, ctx context.Context, _ testenv.Redis, holder *namedFairLock, waiter *asleepWaiter) {
		waiter.resume() // asleep until the handover
		time.Sleep(2 * lease / 3)

		released := time.Now()
		require.NoError(t, holder.Unlock(ctx))
		waiter.holds(t)
		expires := <-waiter.expires
		assert.False(t, expires.Before(released.Add(lease)),
			"the handed-over holder's lease ends %s after the release, want %s (zero: lost at once)", expires.Sub(released), lease)
		waiter.lostOpen()
	})
}

// forEachHandover runs f, for a handover by wake-up ("local") and by message, on an embedded
// Redis of its own where a process holds a FairLock (holder, with a 30 s lease) and a
// waiter for it with lease is asleep (see fairWaiter): a goroutine of the holder's process,
// or of another.
func forEachHandover(t *testing.T, lease time.Duration, f func(t *testing.T, ctx context.Context, srv testenv.Redis, holder *namedFairLock, waiter *asleepWaiter)) {
	for _, via := range []string{"local", "message"} {
		t.Run(via, func(t *testing.T) {
			ctx := testCtx(t)
			srv, holder, waiter := fairHandover(t, ctx, via, lease)
			f(t, ctx, srv, holder, waiter)
		})
	}
}

func fairHandover(t *testing.T, ctx context.Context, via string, lease time.Duration) (testenv.Redis, *namedFairLock, *asleepWaiter) {
	t.Helper()
	srv := testenv.EmbeddedRedis(t)
	a := newProc(t, srv, Options{})
	w := a
	if via == "message" {
		w = newProc(t, srv, Options{})
	}
	name := testenv.Unique("fairhandover-")
	holder := &namedFairLock{FairLock: a.c.FairLock(name), name: name}
	take(t, holder, 30*time.Second)
	return srv, holder, fairWaiter(t, ctx, w, name, lease)
}

// namedFairLock is a FairLock with its name.
type namedFairLock struct {
	*FairLock
	name string
}

// asleepWaiter is a goroutine waiting for a FairLock with a fixed lease (see fairWaiter).
type asleepWaiter struct {
	queuedGoroutine
	w       *waiter        // its waiter on the subscription
	gate    chan struct{}  // closed: go on from the sleep's start
	expires chan time.Time // when its hold's lease timer runs out
}

// fairWaiter starts a goroutine of p that waits for the FairLock name with a fixed lease, and
// returns once it has queued and is about to sleep. It sleeps only when resumed: a wake-up
// that comes before waits for resume, as if the goroutine were not scheduled.
func fairWaiter(t *testing.T, ctx context.Context, p proc, name string, lease time.Duration) *asleepWaiter {
	t.Helper()
	g := &asleepWaiter{
		queuedGoroutine: queuedGoroutine{taken: make(chan error, 1), check: make(chan struct{}), open: make(chan bool, 1)},
		gate:            make(chan struct{}), expires: make(chan time.Time, 1),
	}
	l := p.c.FairLock(name)
	var once atomic.Bool
	asleep := make(chan *waiter, 1)
	p.c.hooks.waiting = func(channel string) {
		if channel == l.channel && once.CompareAndSwap(false, true) {
			p.c.sub.mu.Lock()
			ws := p.c.sub.chans[channel].waiters
			asleep <- ws[len(ws)-1]
			p.c.sub.mu.Unlock()
			<-g.gate
		}
	}
	go g.hold(ctx, l, lease, func() {
		var expires time.Time // zero: reported lost already
		if h := l.c.holds.get(l.key, owner(p.c.Process())); h != nil {
			expires = h.expires
		}
		g.expires <- expires
	})
	select {
	case g.w = <-asleep:
	case err := <-g.taken:
		t.Fatalf("the waiter returned (%v) before it slept", err)
	}
	return g
}

// woken waits until the goroutine has a wake-up pending.
func (g *asleepWaiter) woken(t *testing.T) {
	t.Helper()
	eventually(t, "the handover's wake-up", func() bool { return len(g.w.wake) == 1 })
}

// resume lets the goroutine sleep, or take the wake-up that came meanwhile.
func (g *asleepWaiter) resume() { close(g.gate) }
