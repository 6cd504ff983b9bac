package lock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// renewals returns a channel receiving every watchdog renewal result of p.
func renewals(p proc) <-chan bool {
	ch := make(chan bool, 100)
	p.c.hooks.renewed = func(_ string, ok bool) {
		select {
		case ch <- ok:
		default:
		}
	}
	return ch
}

// Leases for the watchdog tests. The embedded server's clock moves only when a test moves
// it, so its lease can be short; on a real server the lease runs out in real time, and a
// renewal that comes late loses the lock, so the lease leaves two thirds of itself (1 s) for
// a watchdog delayed by a loaded machine.
const (
	embeddedWatchdogLease = 600 * time.Millisecond
	realWatchdogLease     = 1500 * time.Millisecond
)

func watchdogLeaseFor(srv testenv.Redis) time.Duration {
	if srv.Mini != nil {
		return embeddedWatchdogLease
	}
	return realWatchdogLease
}

func TestWatchdogKeepsALongHolder(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		lease := watchdogLeaseFor(srv)
		a := newProc(t, srv, Options{WatchdogLease: lease})
		b := newProc(t, srv, Options{})
		renewed := renewals(a)
		name := testenv.Unique("keep-")
		la := k.make(a, name)
		take(t, la, -1)
		start := time.Now()

		// Hold for several leases. The embedded server's clock stands still, so after each
		// renewal the test moves it on by two thirds of a lease (nine renewals: six leases);
		// the real one ages by itself, and the test takes renewals until two leases have passed.
		for i := 0; ; i++ {
			if srv.Mini != nil && i == 9 || srv.Mini == nil && time.Since(start) > 2*lease {
				break
			}
			select {
			case ok := <-renewed:
				require.True(t, ok, "renewal %d failed", i+1)
			case <-time.After(10 * time.Second):
				t.Fatalf("no renewal %d", i+1)
			}
			if srv.Mini != nil {
				// Renewals that came while this goroutine lagged (a loaded machine) each
				// reset the lease already: take them all before the one move, or two moves
				// would land between two renewals and age the key past its lease.
				for drained := false; !drained; {
					select {
					case ok := <-renewed:
						require.True(t, ok, "a renewal after renewal %d failed", i+1)
					default:
						drained = true
					}
				}
				srv.Mini.FastForward(2 * lease / 3)
			}
		}
		ok, err := k.make(b, name).TryLockWait(ctx, 0, time.Second)
		require.NoError(t, err)
		assert.False(t, ok, "another process took the lock from a renewed holder")
		select {
		case <-la.Lost():
			t.Fatal("hold reported lost while renewed")
		default:
		}
		require.NoError(t, la.Unlock(ctx))
	})
}

func TestWatchdogStoppedLosesWithinOneLease(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		lease := watchdogLeaseFor(srv)
		a := newProc(t, srv, Options{WatchdogLease: lease})
		b := newProc(t, srv, Options{})
		name := testenv.Unique("die-")
		la := k.make(a, name)
		take(t, la, -1)
		key := la.Key()
		lost := la.Lost()

		require.NoError(t, a.c.Close()) // the process dies: no more renewals, no unlock
		select {
		case <-lost:
		default:
			t.Fatal("Close did not report the hold lost")
		}
		ttl, err := srv.Client.PTTL(ctx, key).Result()
		require.NoError(t, err)
		require.LessOrEqual(t, ttl, lease, "remaining lease after death: got %v, want <= %v", ttl, lease)

		lb := k.make(b, name)
		// On the real server the remaining lease is at least two thirds of it (1 s): the
		// first attempt finds the lock still held however slow the machine.
		ok, err := tryAfterLease(ctx, srv, lb, lease, 10*time.Second)
		if srv.Mini == nil {
			assert.Positive(t, b.c.Stats().WakesByTimer, "woken by the lease running out")
		}
		require.NoError(t, err)
		assert.True(t, ok, "lock not free one lease after its holder died")
		require.NoError(t, lb.Unlock(ctx))
	})
}

func TestWatchdogReportsALockGone(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		a := newProc(t, srv, Options{WatchdogLease: 300 * time.Millisecond})
		la := k.make(a, testenv.Unique("gone-"))
		take(t, la, -1)

		require.NoError(t, srv.Client.Del(ctx, la.Key()).Err())
		select {
		case <-la.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("deleted lock not reported lost")
		}
		assert.ErrorIs(t, la.Unlock(ctx), ErrNotHeld)
	})
}

func TestWatchdogMaxHold(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		a := newProc(t, srv, Options{WatchdogLease: 300 * time.Millisecond, MaxHold: 200 * time.Millisecond})
		la := k.make(a, testenv.Unique("maxhold-"))
		take(t, la, -1)
		select {
		case <-la.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("hold past MaxHold not reported lost")
		}
		_ = la.Unlock(ctx) // may or may not have expired yet
	})
}

func TestFixedLeaseRunsOut(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		a := newProc(t, srv, Options{})
		la := k.make(a, testenv.Unique("fixed-"))
		take(t, la, 100*time.Millisecond)
		key := la.Key()
		if srv.Mini != nil {
			srv.Mini.FastForward(100 * time.Millisecond)
		} else {
			eventually(t, "the lease to run out", func() bool { return srv.Client.Exists(ctx, key).Val() == 0 })
		}
		select {
		case <-la.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("hold whose lease ran out not reported lost")
		}
		a.c.holds.mu.Lock()
		left := len(a.c.holds.m)
		a.c.holds.mu.Unlock()
		assert.Zero(t, left, "holds kept after the lease ran out")
		err := la.Unlock(ctx)
		assert.ErrorIs(t, err, ErrNotHeld, "unlock after the lease ran out")
		if k.name == "localremote" {
			assert.ErrorIs(t, err, ErrLockLost, "integrity error")
		}
		// The local state is clean: the same goroutine can take the lock again.
		ok, err := la.TryLockWait(ctx, 0, time.Second)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, la.Unlock(ctx))
	})
}

// TestOptionsRenewed: Options.Renewed hears each renewal of the lock's key, on the
// watchdog's goroutine, which waits for it; a renewal on its way when the lock is released is
// not reported.
func TestOptionsRenewed(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	type renewal struct {
		key string
		ok  bool
		err error
	}
	heard, proceed := make(chan renewal), make(chan struct{})
	a := newProc(t, srv, Options{Renewed: func(key string, ok bool, err error) {
		heard <- renewal{key, ok, err}
		<-proceed
	}})
	l := a.c.ReentrantLock(testenv.Unique("renewed-"))
	ok, err := l.TryLock(testCtx(t), embeddedWatchdogLease)
	require.NoError(t, err)
	require.True(t, ok)
	for i := range 2 {
		select {
		case r := <-heard:
			assert.Equal(t, renewal{key: l.Key(), ok: true}, r, "renewal %d", i+1)
		case <-time.After(10 * time.Second):
			t.Fatalf("renewal %d not reported", i+1)
		}
		if i == 0 {
			proceed <- struct{}{}
		}
	}
	// The watchdog waits in Renewed: release the lock, then let it go on. Close returns once
	// the watchdog has ended; it must report nothing more before that.
	require.NoError(t, l.Unlock(testCtx(t)))
	proceed <- struct{}{}
	closed := make(chan error, 1)
	go func() { closed <- a.c.Close() }()
	select {
	case r := <-heard:
		t.Fatalf("renewal reported after the release: %+v", r)
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return: the watchdog did not end")
	}
}

// TestFailedUnlockStopsTheWatchdog: the last Unlock of a watched hold fails before its script
// reaches Redis (a connection error, a context already ended). The holder is done with the
// lock, so its watchdog must stop and the lock expire within one lease, as Redisson's
// unlock cancels the renewal whatever its outcome; a watchdog that went on renewing would
// keep the lock for a goroutine that has moved on, until the Client closes.
func TestFailedUnlockStopsTheWatchdog(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		lease := watchdogLeaseFor(srv)
		var drop atomic.Bool
		pa, b := newHookedProc(t, srv, dropNextScript(&drop), Options{WatchdogLease: lease}), newProc(t, srv, Options{})
		a := pa.c
		name := testenv.Unique("failedunlock-")
		la := k.make(pa, name)
		take(t, la, -1)

		drop.Store(true)
		require.ErrorIs(t, la.Unlock(ctx), errScriptReplyLost, "the release never reaches Redis")
		require.False(t, drop.Load())
		if k.name != "localremote" {
			if h := a.holds.get(la.Key(), owner(a.opts.Process)); h != nil {
				t.Errorf("hold after its failed last Unlock: got one (count %d), want none: its watchdog renews on", h.count)
			}
		}

		lb := k.make(b, name)
		ok, err := tryAfterLease(ctx, srv, lb, lease, 5*time.Second)
		require.NoError(t, err)
		assert.True(t, ok, "lock not free one lease after its holder's last Unlock failed")
		if ok {
			require.NoError(t, lb.Unlock(ctx))
		}
	})
}

// tryAfterLease tries l once a lease of the given length, set now and never renewed, has run
// out: on the embedded server the test moves its clock on by the lease and tries once; on a
// real one nobody publishes a release, so l waits, sleeping for the PTTL it was told, up to
// the lease and margin more.
func tryAfterLease(ctx context.Context, srv testenv.Redis, l waitLock, lease, margin time.Duration) (bool, error) {
	if srv.Mini != nil {
		srv.Mini.FastForward(lease)
		return l.TryLockWait(ctx, 0, time.Second)
	}
	return l.TryLockWait(ctx, lease+margin, time.Second)
}
