package lock

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// TestFairLockIgnoresAStaleHandover replays a handover that reaches its waiter late: one
// goroutine is handed the lock, takes it (as it does when its refresh comes before the
// message), releases it, and waits again; only then does the first handover's message (or
// its releaser's local wake-up) arrive. It names the same owner, since the owner is the
// process and goroutine, yet it hands over nothing now: the waiter must go on waiting and
// take the lock only when it is really handed to it.
func TestFairLockIgnoresAStaleHandover(t *testing.T) {
	for _, via := range []string{"message", "local"} {
		t.Run(via, func(t *testing.T) {
			srv := testenv.EmbeddedRedis(t)
			ctx := testCtx(t)
			a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
			name := testenv.Unique("stale-")
			holder := a.c.FairLock(name)
			channel := channelOf(holder)
			// The test listens on the channel too, to keep the first handover's message.
			ps := srv.Client.Subscribe(ctx, channel)
			defer ps.Close()
			_, err := ps.Receive(ctx)
			require.NoError(t, err)
			sleeping := make(chan struct{}, 10)
			b.c.hooks.waiting = func(string) { sleeping <- struct{}{} }

			type result struct {
				ok  bool
				err error
			}
			results := make(chan result)
			next := make(chan struct{})
			// First wait: a real handover from process a.
			take(t, holder, 30*time.Second)
			go func() { // the waiter of process b: two waits by one goroutine
				l := b.c.FairLock(name)
				for range 2 {
					ok, err := l.TryLockWait(ctx, -1, 30*time.Second)
					if err == nil && ok {
						err = l.Unlock(ctx)
					}
					results <- result{ok, err}
					<-next
				}
			}()

			<-sleeping
			require.NoError(t, holder.Unlock(ctx))
			r := <-results
			require.NoError(t, r.err)
			require.True(t, r.ok)
			msg, err := ps.ReceiveMessage(ctx)
			require.NoError(t, err)
			handedTo, _, _ := strings.Cut(msg.Payload, " ")

			// Second wait, behind process a again; then the first handover arrives late.
			take(t, holder, 30*time.Second)
			next <- struct{}{}
			<-sleeping
			switch via {
			case "message":
				b.c.sub.deliver(channel, msg.Payload)
			case "local":
				b.c.sub.wakeLocal(channel, handedTo, time.Now())
			}
			// Wake every waiter as a reconnect does: a waiter that ignored the stale
			// handover tries again, finds the lock held, and sleeps again.
			b.c.sub.wakeAll()
			select {
			case r := <-results:
				t.Fatalf("waiter returned %v, %v while process a held the lock: a stale handover woke it", r.ok, r.err)
			case <-sleeping:
			}
			held, err := srv.Client.HExists(ctx, holder.Key(), owner(a.c.Process())).Result()
			require.NoError(t, err)
			assert.True(t, held, "process a lost the lock")

			require.NoError(t, holder.Unlock(ctx))
			r = <-results
			require.NoError(t, r.err)
			assert.True(t, r.ok, "the waiter did not get the lock handed to it")
			next <- struct{}{}
		})
	}
}

// TestFairHandoverAsTheWaitRunsOut: a FairLock waiter with a lease shorter than its wait
// queues, and its wait runs out while it subscribes to the lock's channel (the test holds it
// between its first attempt and its SUBSCRIBE). Meanwhile the holder hands the lock to it,
// and the message goes unheard (nothing of the waiter's process listens yet). The waiter
// finds the lock its own when it withdraws and keeps it; the lease the handover set in Redis
// is whole (the embedded server's clock stands still), so its hold must not be reported lost.
// It counted the lease from its first attempt, a wait ago: the fixed lease's timer closed
// Lost() at once, and the watchdog's first renewal got a deadline already past and reported
// the hold lost.
func TestFairHandoverAsTheWaitRunsOut(t *testing.T) {
	const lease, wait = time.Second, 1500 * time.Millisecond // room for a loaded machine before the first renewal
	for _, tc := range []struct {
		name  string
		opts  Options
		lease time.Duration
	}{
		{"fixed", Options{}, lease},
		{"watchdog", Options{WatchdogLease: lease}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testenv.EmbeddedRedis(t)
			ctx := testCtx(t)
			require.NoError(t, fairLockScript.Load(ctx, srv.Client).Err()) // no EVAL fallback below
			var armed atomic.Bool
			attempted, gate := make(chan struct{}), make(chan struct{})
			held := hook(func(next redis.ProcessHook) redis.ProcessHook {
				return func(ctx context.Context, cmd redis.Cmder) error {
					err := next(ctx, cmd)
					if args := cmd.Args(); cmd.Name() == "evalsha" && args[1] == fairLockScript.Hash() && armed.CompareAndSwap(true, false) {
						close(attempted)
						<-gate
					}
					return err
				}
			})
			a, b := newProc(t, srv, Options{}), newHookedProc(t, srv, held, tc.opts)
			name := testenv.Unique("fairwaitend-")
			holder := a.c.FairLock(name)
			take(t, holder, 30*time.Second)
			renewed := make(chan bool, 1)
			b.c.hooks.renewed = func(_ string, ok bool) {
				select {
				case renewed <- ok:
				default:
				}
			}

			type result struct {
				ok, lostOpen bool
				err          error
			}
			results, done := make(chan result, 1), make(chan struct{})
			armed.Store(true)
			go func() {
				l := b.c.FairLock(name)
				ok, err := l.TryLockWait(ctx, wait, tc.lease)
				r := result{ok: ok, err: err}
				select {
				case <-l.Lost():
				default:
					r.lostOpen = true
				}
				results <- r
				if ok {
					<-done
					_ = l.Unlock(ctx)
				}
			}()
			defer close(done)

			<-attempted                            // queued, not yet subscribed
			require.NoError(t, holder.Unlock(ctx)) // hands the lock to the waiter, unheard
			time.Sleep(wait)                       // the wait has run out
			close(gate)

			r := <-results
			require.NoError(t, r.err)
			require.True(t, r.ok, "the waiter let go of the lock handed to it")
			ttl, err := srv.Client.PTTL(ctx, holder.Key()).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, time.Duration(0), "the key is gone in Redis")
			if tc.lease > 0 {
				assert.True(t, r.lostOpen, "Lost() closed at once while the key lives %s more in Redis", ttl)
				return
			}
			select {
			case ok := <-renewed:
				assert.True(t, ok, "the first renewal failed while the key lives %s more in Redis", ttl)
			case <-time.After(10 * lease):
				t.Fatal("no renewal")
			}
		})
	}
}
