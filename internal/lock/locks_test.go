package lock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// family is one of the Client's lock families, as the order service uses it.
type family interface{ New(name string) Lock }

var families = []struct {
	name string
	make func(p proc) family
}{
	{"reentrant", func(p proc) family { return NewReentrantLocks(p.c) }},
	{"fair", func(p proc) family { return NewFairLocks(p.c) }},
	{"localremote", func(p proc) family { return NewLocalRemoteLocks(p.r) }},
}

func TestFamiliesTryOnceAndReportLoss(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		for _, f := range families {
			t.Run(srv.Name+"/"+f.name, func(t *testing.T) {
				ctx := testCtx(t)
				a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
				name := testenv.Unique("guard-")
				fa, fb := f.make(a), f.make(b)

				l := fa.New(name)
				ok, err := l.TryLock(ctx, time.Minute)
				require.NoError(t, err)
				require.True(t, ok)
				for _, other := range []struct {
					name string
					f    family
				}{{"same process", fa}, {"other process", fb}} {
					start := time.Now()
					errc := make(chan error)
					go func() { // another request's goroutine
						ok, err := other.f.New(name).TryLock(ctx, time.Minute)
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

				for _, lease := range []time.Duration{0, -1, time.Microsecond} {
					_, err = fa.New(name).TryLock(ctx, lease)
					assert.ErrorIs(t, err, ErrInvalidTTL, "lease %v", lease)
				}
			})
		}
	}
}

// TestTryLockLeaseIsTheWatchdogs: TryLock's lease is the lease set and renewed, whatever the
// Client's default (Options.WatchdogLease) says.
func TestTryLockLeaseIsTheWatchdogs(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		lease := watchdogLeaseFor(srv)
		a := newProc(t, srv, Options{WatchdogLease: time.Hour})
		renewed := renewals(a)
		l := k.make(a, testenv.Unique("trylease-"))
		ok, err := l.TryLock(ctx, lease)
		require.NoError(t, err)
		require.True(t, ok)
		pttl, err := srv.Client.PTTL(ctx, l.Key()).Result()
		require.NoError(t, err)
		assert.True(t, pttl > 0 && pttl <= lease, "PTTL after TryLock: got %v, want in (0, %v]", pttl, lease)
		select {
		case ok := <-renewed:
			require.True(t, ok, "renewal failed")
		case <-time.After(10 * time.Second):
			t.Fatal("TryLock's hold is not renewed")
		}
		pttl, err = srv.Client.PTTL(ctx, l.Key()).Result()
		require.NoError(t, err)
		assert.True(t, pttl > 0 && pttl <= lease, "PTTL after a renewal: got %v, want in (0, %v]", pttl, lease)
		require.NoError(t, l.Unlock(ctx))
	})
}

func TestFamiliesOfTheSimpleGuards(t *testing.T) {
	ctx := testCtx(t)
	srv := testenv.EmbeddedRedis(t)
	tests := []struct {
		name     string
		f        family
		excludes bool
	}{
		{"simple", NewSimpleRedisLocks(srv.Client, NewProcessID(), SimpleRedisOptions{}), true},
		{"local", NewLocalLocks(), true},
		{"none", NewNoLocks(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := testenv.Unique("family-")
			l := tt.f.New(name)
			ok, err := l.TryLock(ctx, time.Minute)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = tt.f.New(name).TryLock(ctx, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, !tt.excludes, ok, "a second lock of the same name taken")
			require.NoError(t, l.Unlock(ctx))
		})
	}
}
