package lock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

func TestWaiterWokenByPublish(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
		name := testenv.Unique("wake-")
		la, lb := k.make(a, name), k.make(b, name)
		// A long lease: a waiter woken by its lease timer would wait 30 s.
		take(t, la, 30*time.Second)

		type result struct {
			ok     bool
			err    error
			waited time.Duration
		}
		done := make(chan result)
		sleeping := make(chan struct{}, 10)
		b.c.hooks.waiting = func(string) { sleeping <- struct{}{} }
		var released atomic.Int64 // UnixNano of the release
		go func() {
			ok, err := lb.TryLockWait(ctx, 20*time.Second, 30*time.Second)
			waited := time.Since(time.Unix(0, released.Load()))
			if ok {
				err = lb.Unlock(ctx)
			}
			done <- result{ok, err, waited}
		}()
		<-sleeping // subscribed, tried again, and about to sleep
		released.Store(time.Now().UnixNano())
		require.NoError(t, la.Unlock(ctx))
		r := <-done
		require.NoError(t, r.err)
		require.True(t, r.ok, "waiter did not get the lock")
		st := b.c.Stats()
		assert.Equal(t, uint64(1), st.WakesByPublish, "wake-ups by publish: got %d, want 1", st.WakesByPublish)
		assert.Zero(t, st.WakesByTimer+st.WakesByLocal+st.WakesByReconnect, "wake-ups by other sources: %+v", st)
		t.Logf("woken and acquired %v after the release was sent", r.waited)
	})
}

func TestWaiterWokenByReleaserOfItsProcess(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		if k.name == "localremote" {
			return // its goroutines of one process queue locally, never on the channel
		}
		ctx := testCtx(t)
		p := newProc(t, srv, Options{})
		name := testenv.Unique("localwake-")
		holder := k.make(p, name)
		take(t, holder, 30*time.Second)
		sleeping := make(chan struct{}, 10)
		p.c.hooks.waiting = func(string) { sleeping <- struct{}{} }
		done := make(chan error)
		go func() { done <- waitAndUnlock(ctx, k.make(p, name)) }()
		<-sleeping
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-done)
		st := p.c.Stats()
		assert.Equal(t, uint64(1), st.WakesByLocal, "wake-ups by the local releaser: got %d, want 1", st.WakesByLocal)
		assert.Zero(t, st.WakesByTimer+st.WakesByPublish+st.WakesByReconnect, "wake-ups by other sources: %+v", st)
	})
}

func TestFairLockServesInQueueOrder(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := testCtx(t)
			procs := []proc{newProc(t, srv, Options{}), newProc(t, srv, Options{}), newProc(t, srv, Options{})}
			name := testenv.Unique("fifo-")
			holder := procs[0].c.FairLock(name)
			take(t, holder, 30*time.Second)

			const waiters = 8
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			for i := range waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := procs[1+i%2].c.FairLock(name) // two other processes, interleaved
					ok, err := l.TryLockWait(ctx, 15*time.Second, 30*time.Second)
					if !assert.NoError(t, err) || !assert.True(t, ok, "waiter %d", i) {
						return
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					assert.NoError(t, l.Unlock(ctx))
				}()
				// Queue the waiters one after another.
				eventually(t, fmt.Sprintf("waiter %d to queue", i), func() bool {
					return srv.Client.LLen(ctx, holder.keys[1]).Val() == int64(i+1)
				})
			}
			require.NoError(t, holder.Unlock(ctx))
			wg.Wait()
			want := make([]int, waiters)
			for i := range want {
				want[i] = i
			}
			assert.Equal(t, want, order, "order served: got %v, want %v", order, want)
		})
	}
}

func TestFairLockSkipsADeadWaiter(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := testCtx(t)
			a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
			name := testenv.Unique("deadwaiter-")
			holder := a.c.FairLock(name)
			take(t, holder, 30*time.Second)

			// A waiter of a process that then died: queued once with a 200 ms timeout, never
			// refreshed, never withdrawn.
			const deadOwner = "deadprocess-1"
			_, err := fairLockScript.Run(ctx, srv.Client, holder.keys, deadOwner, 30000, 30000, 200, "0", "1").Int64Slice()
			require.NoError(t, err)
			live := b.c.FairLock(name)
			done := make(chan error)
			go func() {
				ok, err := live.TryLockWait(ctx, 15*time.Second, 30*time.Second)
				if err == nil && !ok {
					err = fmt.Errorf("live waiter did not get the lock")
				}
				if err == nil {
					err = live.Unlock(ctx)
				}
				done <- err
			}()
			eventually(t, "the live waiter to queue behind the dead one", func() bool {
				q := srv.Client.LRange(ctx, holder.keys[1], 0, -1).Val()
				return len(q) == 2 && q[0] == deadOwner
			})
			eventually(t, "the dead waiter's deadline to pass", func() bool {
				deadline := srv.Client.ZScore(ctx, holder.keys[2], deadOwner).Val()
				now := srv.Client.Time(ctx).Val()
				return float64(now.UnixMilli()) > deadline
			})
			require.NoError(t, holder.Unlock(ctx))
			require.NoError(t, <-done)
			assert.Zero(t, srv.Client.Exists(ctx, holder.keys[1], holder.keys[2], holder.keys[3]).Val(), "queue keys left behind")
		})
	}
}

func TestLocalWaitersQueueWithoutRedis(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := testCtx(t)
			p := newProc(t, srv, Options{})
			l := p.r.Obtain(testenv.Unique("local-"))
			take(t, l, 10*time.Second)

			const waiters = 10
			got := make(chan struct{}, waiters)
			var wg sync.WaitGroup
			for range waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := l.TryLockWait(ctx, 10*time.Second, 10*time.Second)
					if assert.NoError(t, err) && assert.True(t, ok) {
						got <- struct{}{}
						assert.NoError(t, l.Unlock(ctx))
					}
				}()
			}
			e := p.r.lookup(l.name)
			eventually(t, "the local waiters to queue", func() bool {
				e.mu.Lock()
				defer e.mu.Unlock()
				return len(e.waiters) == waiters
			})
			require.NoError(t, l.Unlock(ctx))
			wg.Wait()
			assert.Len(t, got, waiters)
			assert.Zero(t, p.c.Stats().Subscribes, "local waiters subscribed to Redis")
			assert.Nil(t, p.r.lookup(l.name), "registry entry left behind")
			assert.Zero(t, srv.Client.Exists(ctx, l.Key()).Val(), "remote lock left behind")
		})
	}
}

func TestNoSubscriptionLeft(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
		name := testenv.Unique("leak-")
		la, lb := k.make(a, name), k.make(b, name)
		take(t, la, 30*time.Second)

		// Waiters that give up (wait runs out, context cancelled) and one that gets the lock.
		ok, err := lb.TryLockWait(ctx, 20*time.Millisecond, time.Second)
		require.NoError(t, err)
		require.False(t, ok)
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error)
		go func() { _, err := lb.TryLockWait(cctx, 10*time.Second, time.Second); errc <- err }()
		eventually(t, "the waiter to subscribe", func() bool { return numSub(t, srv, channelOf(lb)) == 1 })
		cancel()
		assert.ErrorIs(t, <-errc, context.Canceled)
		go func() {
			ok, err := lb.TryLockWait(ctx, 10*time.Second, time.Second)
			if err == nil && ok {
				err = lb.Unlock(ctx)
			}
			errc <- err
		}()
		eventually(t, "the waiter to subscribe", func() bool { return numSub(t, srv, channelOf(lb)) == 1 })
		require.NoError(t, la.Unlock(ctx))
		require.NoError(t, <-errc)

		eventually(t, "the channel to be unsubscribed", func() bool { return numSub(t, srv, channelOf(lb)) == 0 })
		// A channel whose last waiter left before its SUBSCRIBE was confirmed keeps its state
		// until the confirmation is read, which the server's NUMSUB of 0 can precede: wait
		// for the subscriber to read it, and fail if the state stays.
		eventually(t, "no channel state left in the subscriber", func() bool {
			b.c.sub.mu.Lock()
			defer b.c.sub.mu.Unlock()
			return len(b.c.sub.chans) == 0
		})
	})
}

func TestWaitersShareOneSubscription(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := testCtx(t)
			holder, waiters := newProc(t, srv, Options{}), newProc(t, srv, Options{})
			names := []string{testenv.Unique("share-a-"), testenv.Unique("share-b-")}
			sleeping := make(chan struct{}, 100)
			waiters.c.hooks.waiting = func(string) { sleeping <- struct{}{} }
			held := make([]*ReentrantLock, len(names))
			for i, name := range names {
				held[i] = holder.c.ReentrantLock(name)
				take(t, held[i], 30*time.Second)
			}
			const perLock = 5
			errc := make(chan error)
			for _, name := range names {
				for range perLock {
					go func() {
						l := waiters.c.ReentrantLock(name)
						ok, err := l.TryLockWait(ctx, 20*time.Second, 30*time.Second)
						if err == nil && !ok {
							err = fmt.Errorf("waiter did not get %s", name)
						}
						if err == nil {
							err = l.Unlock(ctx)
						}
						errc <- err
					}()
				}
			}
			for range len(names) * perLock {
				<-sleeping
			}
			for _, name := range names {
				got := numSub(t, srv, waiters.c.ReentrantLock(name).keys[1])
				assert.Equal(t, int64(1), got, "connections subscribed to %s's channel: got %d, want 1", name, got)
			}
			assert.Equal(t, uint64(len(names)), waiters.c.Stats().Subscribes, "one SUBSCRIBE per lock waited on")
			for _, l := range held {
				require.NoError(t, l.Unlock(ctx))
			}
			for range len(names) * perLock {
				require.NoError(t, <-errc)
			}
		})
	}
}

// TestFairHandoverBeforeSubscribeConfirmed: a releaser of the waiter's own process hands the
// FairLock over while the waiter's SUBSCRIBE is still unconfirmed. The waiter must take the
// handover without waiting for the confirmation, which the test holds back until it has.
// (A waiter that blocked until the confirmation stalled the queue's handover chain for a
// SUBSCRIBE round trip: the long first waits of a FairLock under load.)
func TestFairHandoverBeforeSubscribeConfirmed(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := testCtx(t)
			p := newProc(t, srv, Options{})
			name := testenv.Unique("unconfirmed-")
			holder := p.c.FairLock(name)
			ok, err := holder.TryLockWait(ctx, 0, 30*time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			subscribing := make(chan struct{}, 1)
			release := make(chan struct{})
			defer close(release)
			hold := func(string) {
				select {
				case subscribing <- struct{}{}:
				default:
				}
				<-release
			}
			p.c.sub.confirming.Store(&hold)
			defer p.c.sub.confirming.Store(nil)
			done := make(chan error, 1)
			go func() { done <- waitAndUnlock(ctx, p.c.FairLock(name)) }()
			<-subscribing // the waiter queued (its first attempt) and then subscribed
			require.NoError(t, holder.Unlock(ctx))
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter did not take the handover before its subscription was confirmed")
			}
		})
	}
}

// waitAndUnlock waits up to 20 s for l and releases it.
func waitAndUnlock(ctx context.Context, l waitLock) error {
	ok, err := l.TryLockWait(ctx, 20*time.Second, 30*time.Second)
	if err == nil && !ok {
		err = fmt.Errorf("waiter did not get the lock")
	}
	if err == nil {
		err = l.Unlock(ctx)
	}
	return err
}

// TestFailedAttemptPassesItsWakeUpOn: two goroutines of one process wait for a ReentrantLock
// that another process holds. Its release wakes one of them (one wake-up per release and
// process), whose attempt then fails (Redis did not answer it, or its context ended). The
// wake-up it used up must reach the other waiter, which takes the lock now rather than when
// its wait runs out.
func TestFailedAttemptPassesItsWakeUpOn(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := testCtx(t)
			var drop atomic.Bool
			p := newHookedProc(t, srv, dropNextScript(&drop), Options{}).c
			h := newProc(t, srv, Options{})
			name := testenv.Unique("passwake-")
			holder := h.c.ReentrantLock(name)
			// A long lease: a waiter that sleeps through the release waits until its wait
			// runs out.
			take(t, holder, 30*time.Second)

			sleeping := make(chan struct{}, 10)
			p.hooks.waiting = func(string) { sleeping <- struct{}{} }
			first := make(chan error, 1)
			go func() {
				_, err := p.ReentrantLock(name).TryLockWait(ctx, 20*time.Second, 30*time.Second)
				first <- err
			}()
			<-sleeping // the oldest waiter: the release wakes it
			second := make(chan error, 1)
			go func() {
				l := p.ReentrantLock(name)
				ok, err := l.TryLockWait(ctx, 3*time.Second, 30*time.Second)
				switch {
				case err == nil && !ok:
					err = fmt.Errorf("got not obtained, want the lock")
				case err == nil:
					err = l.Unlock(ctx)
				}
				second <- err
			}()
			<-sleeping

			drop.Store(true) // the woken waiter's attempt fails without reaching Redis
			require.NoError(t, holder.Unlock(ctx))
			require.ErrorIs(t, <-first, errScriptReplyLost, "the woken waiter's attempt fails")
			require.NoError(t, <-second)
			st := p.Stats()
			assert.Zero(t, st.WakesByTimer, "wake-ups by the wait running out: got %d, want 0", st.WakesByTimer)
		})
	}
}
