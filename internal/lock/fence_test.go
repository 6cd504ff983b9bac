package lock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
)

// fencedLock is a lock that hands out fencing tokens and can be taken with a fixed lease.
type fencedLock interface {
	lock.Fenced
	Unlock(ctx context.Context) error
	tryFixed(ctx context.Context, lease time.Duration) (bool, error)
}

// waitFenced is a Client lock: TryLockWait(0, lease) takes it once with a fixed lease.
type waitFenced interface {
	lock.Lock
	lock.Fenced
	TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error)
}

// fixed adapts a Client lock to fencedLock.
type fixed struct{ waitFenced }

func (f fixed) tryFixed(ctx context.Context, lease time.Duration) (bool, error) {
	return f.TryLockWait(ctx, 0, lease)
}

type simpleFixed struct{ *lock.SimpleRedisLock }

func (s simpleFixed) tryFixed(ctx context.Context, lease time.Duration) (bool, error) {
	return s.TryLock(ctx, lease)
}

// fencedKinds make, for one process (a Client) and a name, each Redis lock with tokens.
var fencedKinds = []struct {
	name string
	make func(srv testenv.Redis, c *lock.Client, r *lock.Registry, name string) fencedLock
}{
	{"simple", func(srv testenv.Redis, c *lock.Client, _ *lock.Registry, name string) fencedLock {
		return simpleFixed{lock.NewSimpleRedisLock(srv.Client, c.Process(), name)}
	}},
	{"reentrant", func(_ testenv.Redis, c *lock.Client, _ *lock.Registry, name string) fencedLock {
		return fixed{c.ReentrantLock(name)}
	}},
	{"fair", func(_ testenv.Redis, c *lock.Client, _ *lock.Registry, name string) fencedLock {
		return fixed{c.FairLock(name)}
	}},
	{"localremote", func(_ testenv.Redis, _ *lock.Client, r *lock.Registry, name string) fencedLock {
		return fixed{r.Obtain(name)}
	}},
}

// forEachFenced runs f for every Redis lock with tokens on every Redis server under test,
// each embedded run on its own server (FastForward ages only its locks).
func forEachFenced(t *testing.T, f func(t *testing.T, srv testenv.Redis, pairOf func(name string) (fencedLock, fencedLock))) {
	for _, srv := range testenv.RedisServers(t) {
		for _, k := range fencedKinds {
			t.Run(srv.Name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				s := srv
				if s.Mini != nil {
					s = testenv.EmbeddedRedis(t)
				}
				var procs [2]struct {
					c *lock.Client
					r *lock.Registry
				}
				for i := range procs {
					procs[i].c = lock.NewClient(s.Client, lock.Options{})
					procs[i].r = lock.NewRegistry(procs[i].c)
					t.Cleanup(func() { _ = procs[i].c.Close() })
				}
				f(t, s, func(name string) (fencedLock, fencedLock) {
					return k.make(s, procs[0].c, procs[0].r, name), k.make(s, procs[1].c, procs[1].r, name)
				})
			})
		}
	}
}

func fenceCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTokensGrowWithEveryGrant(t *testing.T) {
	forEachFenced(t, func(t *testing.T, _ testenv.Redis, pairOf func(string) (fencedLock, fencedLock)) {
		ctx := fenceCtx(t)
		a, b := pairOf(testenv.Unique("grants-"))
		var last int64
		for i := range 6 {
			l := []fencedLock{a, b}[i%2]
			assert.Zero(t, l.Token(), "no token before the grant")
			ok, err := l.tryFixed(ctx, 10*time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			tok := l.Token()
			assert.Greater(t, tok, last, "grant %d", i)
			last = tok
			require.NoError(t, l.Unlock(ctx))
			assert.Zero(t, l.Token(), "no token after the release")
		}
	})
}

func TestReentryKeepsTheToken(t *testing.T) {
	forEachFenced(t, func(t *testing.T, _ testenv.Redis, pairOf func(string) (fencedLock, fencedLock)) {
		ctx := fenceCtx(t)
		a, _ := pairOf(testenv.Unique("reenter-"))
		if _, simple := a.(simpleFixed); simple {
			t.Skip("SimpleRedisLock is not reentrant")
		}
		ok, err := a.tryFixed(ctx, 10*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		tok := a.Token()
		ok, err = a.tryFixed(ctx, 10*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, tok, a.Token(), "a re-entry keeps the token")
		require.NoError(t, a.Unlock(ctx))
		assert.Equal(t, tok, a.Token(), "the outer hold keeps the token")
		require.NoError(t, a.Unlock(ctx))
	})
}

// TestTakeoverAfterExpiryGetsALargerToken: the holder's lease runs out while it still
// believes it holds the lock; the next owner's token is larger than the stale holder's, which
// is what lets a store refuse the stale holder's writes.
func TestTakeoverAfterExpiryGetsALargerToken(t *testing.T) {
	forEachFenced(t, func(t *testing.T, srv testenv.Redis, pairOf func(string) (fencedLock, fencedLock)) {
		ctx := fenceCtx(t)
		a, b := pairOf(testenv.Unique("takeover-"))
		// A's hold ends on its own clock with the lease, and Token then answers 0: the lease
		// leaves room for a loaded machine between the take and the read (50 ms did not,
		// once, under make test-integration's parallel packages).
		ok, err := a.tryFixed(ctx, time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		stale := a.Token()
		require.Positive(t, stale)
		if srv.Mini != nil {
			srv.Mini.FastForward(time.Second)
		}
		// The lease runs out on the server's clock; then b takes it over.
		// The lock's owner is the goroutine: b tries from this one, not from Eventually's.
		for ok = false; !ok; time.Sleep(time.Millisecond) {
			ok, err = b.tryFixed(ctx, 10*time.Second)
			require.NoError(t, err, "the takeover")
		}
		assert.Greater(t, b.Token(), stale, "takeover after expiry")
		require.NoError(t, b.Unlock(ctx))
	})
}

// TestTokensFollowTheOrderOfHolds: goroutines of two processes take the lock in turn; the
// tokens, read inside each hold, come out strictly increasing in the order of the holds.
func TestTokensFollowTheOrderOfHolds(t *testing.T) {
	forEachFenced(t, func(t *testing.T, _ testenv.Redis, pairOf func(string) (fencedLock, fencedLock)) {
		ctx := fenceCtx(t)
		name := testenv.Unique("order-")
		const goroutines, rounds = 16, 4
		var (
			mu     sync.Mutex // orders the record; the lock alone decides who is inside
			tokens []int64
			wg     sync.WaitGroup
		)
		start := make(chan struct{})
		for g := range goroutines {
			wg.Go(func() {
				a, b := pairOf(name)
				l := []fencedLock{a, b}[g%2]
				<-start
				for done := 0; done < rounds; {
					ok, err := l.tryFixed(ctx, 10*time.Second)
					if !assert.NoError(t, err) {
						return
					}
					if !ok {
						time.Sleep(time.Millisecond)
						continue
					}
					mu.Lock()
					tokens = append(tokens, l.Token())
					mu.Unlock()
					assert.NoError(t, l.Unlock(ctx))
					done++
				}
			})
		}
		close(start)
		wg.Wait()
		require.Len(t, tokens, goroutines*rounds)
		for i := 1; i < len(tokens); i++ {
			assert.Greater(t, tokens[i], tokens[i-1], "hold %d", i)
		}
	})
}

// forEachCounterLock runs f for every Redis lock whose tokens come from a grant counter
// (SimpleRedisLock as SimpleRedisLocks makes it, with a clock to reseed from, and the three of
// fencedKinds), each on an embedded Redis of its own; lockOf makes a lock of the kind.
func forEachCounterLock(t *testing.T, f func(t *testing.T, srv testenv.Redis, lockOf func(name string) fencedLock)) {
	kinds := append([]struct {
		name string
		make func(srv testenv.Redis, c *lock.Client, r *lock.Registry, name string) fencedLock
	}{{"simple", func(srv testenv.Redis, c *lock.Client, _ *lock.Registry, name string) fencedLock {
		return simpleFixed{lock.NewSimpleRedisLocks(srv.Client, c.Process(), lock.SimpleRedisOptions{}).New(name).(*lock.SimpleRedisLock)}
	}}}, fencedKinds[1:]...)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srv := testenv.EmbeddedRedis(t)
			c := lock.NewClient(srv.Client, lock.Options{})
			t.Cleanup(func() { _ = c.Close() })
			r := lock.NewRegistry(c)
			f(t, srv, func(name string) fencedLock { return k.make(srv, c, r, name) })
		})
	}
}

// grantAbove takes l, requires its token (grant nº i) to be above last, releases it and
// returns the token.
func grantAbove(ctx context.Context, t *testing.T, l fencedLock, last int64, i int) int64 {
	t.Helper()
	ok, err := l.tryFixed(ctx, 10*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, l.Token(), last, "grant %d", i)
	token := l.Token()
	require.NoError(t, l.Unlock(ctx))
	return token
}

// TestTokensSurviveALostCounter: Redis loses the grant counter (a restart without
// persistence); the next grant's token is still larger than every earlier one, because a
// counter that does not exist starts at the clock in microseconds. Were it to start at 1, the
// database would refuse every later order of the name as fenced.
func TestTokensSurviveALostCounter(t *testing.T) {
	forEachCounterLock(t, func(t *testing.T, srv testenv.Redis, lockOf func(string) fencedLock) {
		ctx := fenceCtx(t)
		name := testenv.Unique("lost-")
		var last int64
		for i := range 3 {
			last = grantAbove(ctx, t, lockOf(name), last, i)
			srv.Mini.FlushAll() // Redis restarted empty
		}
	})
}

// TestGrantCountersExpire: a name's grant counter is kept a day after its last grant, not for
// ever (one per user in the service), and a grant after it expired still gets a larger token:
// the counter starts again from the clock, as one that Redis lost does.
func TestGrantCountersExpire(t *testing.T) {
	forEachCounterLock(t, func(t *testing.T, srv testenv.Redis, lockOf func(string) fencedLock) {
		ctx := fenceCtx(t)
		name := testenv.Unique("expire-")
		var last int64
		for i := range 2 {
			last = grantAbove(ctx, t, lockOf(name), last, i)
			counters, err := srv.Client.Keys(ctx, "*"+name+"*:fence").Result()
			require.NoError(t, err)
			require.Len(t, counters, 1, "the name's grant counter")
			ttl := srv.Client.PTTL(ctx, counters[0]).Val()
			assert.Greater(t, ttl, 23*time.Hour, "the counter outlives the grant by a day")
			assert.LessOrEqual(t, ttl, 24*time.Hour)
			srv.Mini.FastForward(24*time.Hour + time.Second)
			assert.Zero(t, srv.Client.Exists(ctx, counters[0]).Val(), "gone a day after the grant")
		}
	})
}
