package lock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

func TestGuardsTryOnceAndReportLoss(t *testing.T) {
	factories := []struct {
		name string
		make func(p proc) Guards
	}{
		{"reentrant", func(p proc) Guards { return ReentrantLocks(p.c, false) }},
		{"fair", func(p proc) Guards { return FairLocks(p.c, false) }},
		{"localremote", func(p proc) Guards { return LocalRemoteLocks(p.r, false) }},
	}
	for _, srv := range testenv.RedisServers(t) {
		for _, f := range factories {
			t.Run(srv.Name+"/"+f.name, func(t *testing.T) {
				ctx := testCtx(t)
				a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
				name := testenv.Unique("guard-")
				ga, gb := f.make(a), f.make(b)

				l := ga.New(name)
				ok, err := l.TryLock(ctx, time.Minute)
				require.NoError(t, err)
				require.True(t, ok)
				for _, other := range []struct {
					name string
					g    Guards
				}{{"same process", ga}, {"other process", gb}} {
					start := time.Now()
					errc := make(chan error)
					go func() { // another request's goroutine
						ok, err := other.g.New(name).TryLock(ctx, time.Minute)
						if err == nil && ok {
							err = assert.AnError
						}
						errc <- err
					}()
					require.NoError(t, <-errc, "%s: second TryLock must fail fast", other.name)
					assert.Less(t, time.Since(start), 5*time.Second, "%s waited", other.name)
				}
				require.NoError(t, l.Unlock(ctx))

				// A lock lost behind its holder's back.
				ok, err = l.TryLock(ctx, time.Minute)
				require.NoError(t, err)
				require.True(t, ok)
				keys, err := srv.Client.Keys(ctx, "lock:{"+name+"}*").Result()
				require.NoError(t, err)
				require.NoError(t, srv.Client.Del(ctx, keys...).Err())
				assert.ErrorIs(t, l.Unlock(ctx), ErrNotHeld)

				_, err = ga.New(name).TryLock(ctx, 0)
				assert.ErrorIs(t, err, ErrInvalidTTL)
				wl := ReentrantLocks(a.c, true).New(name)
				ok, err = wl.TryLock(context.Background(), 0)
				require.NoError(t, err, "watchdog guards ignore ttl")
				assert.True(t, ok)
				require.NoError(t, wl.Unlock(ctx))
			})
		}
	}
}
