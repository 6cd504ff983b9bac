package lock

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

func TestMutualExclusion(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		procs := []proc{newProc(t, srv, Options{}), newProc(t, srv, Options{})}
		name := testenv.Unique("mutex-")
		const goroutines, rounds = 100, 3
		// The counter is read, the goroutine yields, and the counter is written back: a plain
		// read-modify-write that loses updates unless the lock excludes. Atomics only keep
		// the race detector from flagging accesses ordered through Redis, which it cannot see.
		var counter, inside, overlaps atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := k.make(procs[g%len(procs)], name)
				for range rounds {
					ok, err := l.TryLockWait(ctx, -1, 10*time.Second)
					if !assert.NoError(t, err) || !assert.True(t, ok) {
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					v := counter.Load()
					runtime.Gosched()
					counter.Store(v + 1)
					inside.Add(-1)
					assert.NoError(t, l.Unlock(ctx))
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, int64(goroutines*rounds), counter.Load(), "counter: got %d, want %d", counter.Load(), goroutines*rounds)
		assert.Zero(t, overlaps.Load(), "holders overlapped")
		for _, p := range procs {
			require.NoError(t, p.c.Close())
		}
	})
}
