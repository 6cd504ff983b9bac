//go:build integration

package lock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/seckill/seckill/internal/testenv"
)

// TestWaitBoundedWhenRedisHangs: a caller waits a second (TryLockWait, its ctx without a
// deadline) for a lock another process holds, and Redis hangs (SIGSTOP) while it sleeps. The
// attempt it makes as its wait runs out must not outlast the wait by more than waitOverrun,
// and the cleanup after it by more than cleanupTimeout: TryLockWait returns within a second
// of its wait. That attempt ran on the caller's ctx and waited for Redis until the client's
// read timeout, a minute here (the service's clients have ContextTimeoutEnabled, as this one).
func TestWaitBoundedWhenRedisHangs(t *testing.T) {
	t.Parallel()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			rs := testenv.StartRedisServer(t)
			rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, ContextTimeoutEnabled: true, ReadTimeout: time.Minute, MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			srv := testenv.Redis{Name: "own", Client: rdb}
			a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
			name := testenv.Unique("hang-")
			take(t, k.make(a, name), time.Minute)

			asleep := make(chan struct{}, 1)
			b.c.hooks.waiting = func(string) {
				select {
				case asleep <- struct{}{}:
				default:
				}
			}
			type result struct {
				ok   bool
				err  error
				took time.Duration
			}
			done := make(chan result, 1)
			const wait = time.Second
			go func() {
				start := time.Now()
				ok, err := k.make(b, name).TryLockWait(context.Background(), wait, time.Minute)
				done <- result{ok, err, time.Since(start)}
			}()
			<-asleep
			rs.Freeze()
			t.Cleanup(rs.Thaw) // before the clients close and the server is killed
			const bound = wait + waitOverrun + cleanupTimeout
			select {
			case r := <-done:
				assert.False(t, r.ok)
				assert.LessOrEqual(t, r.took, bound+3*time.Second, "TryLockWait(%s) returned after %s (%v)", wait, r.took, r.err)
				t.Logf("returned %v, %v after %s", r.ok, r.err, r.took.Round(time.Millisecond))
			case <-time.After(20 * time.Second):
				t.Fatalf("TryLockWait(%s) has not returned 20s after it began, Redis hanging", wait)
			}
		})
	}
}
