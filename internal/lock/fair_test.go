package lock

import (
	"strings"
	"testing"
	"time"

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
