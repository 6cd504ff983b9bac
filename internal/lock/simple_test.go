package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
)

// TestSimpleRedisLockExcludes: goroutines of two processes, one inside at a time, for the
// hmdp lock with its grant counter and for SimpleRedisLocks without tokens (a bare SET NX).
func TestSimpleRedisLockExcludes(t *testing.T) {
	modes := []struct {
		name string
		make func(c *redis.Client, process string) func(name string) lock.Lock
	}{
		{"tokens", func(c *redis.Client, process string) func(string) lock.Lock {
			return func(name string) lock.Lock { return lock.NewSimpleRedisLock(c, process, name) }
		}},
		{"no-tokens", func(c *redis.Client, process string) func(string) lock.Lock {
			return lock.NewSimpleRedisLocks(c, process, lock.SimpleRedisOptions{NoTokens: true}).New
		}},
	}
	for _, srv := range testenv.RedisServers(t) {
		for _, mode := range modes {
			t.Run(srv.Name+"/"+mode.name, func(t *testing.T) {
				simpleExcludes(t, []func(string) lock.Lock{
					mode.make(srv.Client, lock.NewProcessID()), mode.make(srv.Client, lock.NewProcessID())})
			})
		}
	}
}

// simpleExcludes runs 100 goroutines, each with a lock of the same name from one of
// processes, 5 holds each, and requires one inside at a time.
func simpleExcludes(t *testing.T, processes []func(name string) lock.Lock) {
	ctx := context.Background()
	name := testenv.Unique("excl-")
	const goroutines, rounds = 100, 5
	var (
		counter  int // deliberately unsynchronised: only the lock protects it (-race checks)
		inside   int
		maxInner int
		mu       sync.Mutex // guards inside/maxInner bookkeeping only
		wg       sync.WaitGroup
	)
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			l := processes[g%len(processes)](name)
			<-start
			for done := 0; done < rounds; {
				ok, err := l.TryLock(ctx, 5*time.Second)
				if !assert.NoError(t, err) {
					return
				}
				if !ok {
					continue
				}
				mu.Lock()
				inside++
				maxInner = max(maxInner, inside)
				mu.Unlock()
				counter++
				mu.Lock()
				inside--
				mu.Unlock()
				assert.NoError(t, l.Unlock(ctx))
				done++
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, goroutines*rounds, counter, "counter")
	assert.Equal(t, 1, maxInner, "most goroutines inside at once")
}

func TestSimpleRedisLockOnlyOwnerUnlocks(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := context.Background()
			name := testenv.Unique("owner-")
			process := lock.NewProcessID()
			holder := lock.NewSimpleRedisLock(srv.Client, process, name)
			ok, err := holder.TryLock(ctx, 10*time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			owner := srv.Client.Get(ctx, holder.Key()).Val()
			require.Equal(t, lock.Owner(process), owner, "value is process id + goroutine id")

			// Same process, same lock value, another goroutine: not the owner.
			errc := make(chan error)
			go func() { errc <- holder.Unlock(ctx) }()
			assert.ErrorIs(t, <-errc, lock.ErrNotHeld, "unlock from another goroutine")
			// Another process (same goroutine, another UUID): not the owner either.
			other := lock.NewSimpleRedisLock(srv.Client, lock.NewProcessID(), name)
			assert.ErrorIs(t, other.Unlock(ctx), lock.ErrNotHeld, "unlock from another process")
			ok, err = other.TryLock(ctx, time.Second)
			require.NoError(t, err)
			assert.False(t, ok, "lock still held after the foreign unlocks")
			assert.Equal(t, owner, srv.Client.Get(ctx, holder.Key()).Val(), "value untouched")

			require.NoError(t, holder.Unlock(ctx))
			assert.Zero(t, srv.Client.Exists(ctx, holder.Key()).Val(), "key gone after the owner's unlock")
			assert.ErrorIs(t, holder.Unlock(ctx), lock.ErrNotHeld, "second unlock")
		})
	}
}

// TestSimpleRedisLockExpiry: a holder that outlives its TTL loses the lock to the next
// client, and its late unlock must not delete the new holder's lock (hmdp's wrong delete,
// 误删).
func TestSimpleRedisLockExpiry(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := context.Background()
			name := testenv.Unique("ttl-")
			a := lock.NewSimpleRedisLock(srv.Client, lock.NewProcessID(), name)
			b := lock.NewSimpleRedisLock(srv.Client, lock.NewProcessID(), name)
			ttl := 10 * time.Second // long: it runs out only when expire says so
			ok, err := a.TryLock(ctx, ttl)
			require.NoError(t, err)
			require.True(t, ok)
			pttl := srv.Client.PTTL(ctx, a.Key()).Val()
			require.True(t, pttl > 0 && pttl <= ttl, "PTTL %v, want in (0, %v]", pttl, ttl)
			ok, err = b.TryLock(ctx, time.Second)
			require.NoError(t, err)
			require.False(t, ok, "b while a holds")

			expire(t, srv, a.Key(), ttl)

			ok, err = b.TryLock(ctx, 10*time.Second)
			require.NoError(t, err)
			require.True(t, ok, "b after a's lock expired")
			assert.ErrorIs(t, a.Unlock(ctx), lock.ErrNotHeld, "a's late unlock")
			assert.Equal(t, int64(1), srv.Client.Exists(ctx, b.Key()).Val(), "b's lock survives a's unlock")
			require.NoError(t, b.Unlock(ctx))
		})
	}
}

// expire makes key's TTL run out: the embedded server's clock is moved by ttl; a real one
// cannot be, so the test cuts the remaining TTL to a millisecond (controlled expiry: Redis
// expires the key as it would at the end of its lease) and waits for the key to disappear,
// which is the condition, not a guess at a duration.
func expire(t *testing.T, srv testenv.Redis, key string, ttl time.Duration) {
	t.Helper()
	if srv.Mini != nil {
		srv.Mini.FastForward(ttl)
		return
	}
	require.NoError(t, srv.Client.PExpire(context.Background(), key, time.Millisecond).Err())
	require.Eventually(t, func() bool {
		return srv.Client.Exists(context.Background(), key).Val() == 0
	}, 5*time.Second, time.Millisecond, "key %s never expired", key)
}

// TestUnlockScriptIsOneCommand: the owner check and the delete reach Redis as one EVALSHA,
// never as a GET followed by a DEL that another client could interleave with.
func TestUnlockScriptIsOneCommand(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	ctx := context.Background()
	l := lock.NewSimpleRedisLock(srv.Client, lock.NewProcessID(), testenv.Unique("atomic-"))
	ok, err := l.TryLock(ctx, time.Second)
	require.NoError(t, err)
	require.True(t, ok)

	var cmds []string
	srv.Client.AddHook(recordHook{&cmds})
	require.NoError(t, l.Unlock(ctx))
	// The first run of a script may fall back from EVALSHA to EVAL (script not cached yet);
	// a connection the pool opens for it says HELLO first.
	for _, c := range cmds {
		assert.Contains(t, []string{"evalsha", "eval", "hello"}, c)
	}
	assert.NotEmpty(t, cmds)
	assert.Equal(t, int64(0), srv.Client.Exists(ctx, l.Key()).Val())
}

func TestSimpleRedisLockErrors(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	ctx := context.Background()
	l := lock.NewSimpleRedisLock(srv.Client, lock.NewProcessID(), testenv.Unique("err-"))
	_, err := l.TryLock(ctx, time.Microsecond)
	assert.ErrorIs(t, err, lock.ErrInvalidTTL)

	// A client that does not retry, so that "down" shows at once.
	down := redis.NewClient(&redis.Options{Addr: srv.Mini.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	l = lock.NewSimpleRedisLock(down, lock.NewProcessID(), testenv.Unique("err-"))
	srv.Mini.Close()
	ok, err := l.TryLock(ctx, time.Second)
	assert.False(t, ok)
	assert.Error(t, err, "TryLock with Redis down")
	assert.False(t, errors.Is(l.Unlock(ctx), lock.ErrNotHeld), "Redis down is not 'not held'")
}

func TestLocalLocks(t *testing.T) {
	ctx := context.Background()
	set := lock.NewLocalLocks()
	a, b := set.New("u1"), set.New("u1")
	ok, err := a.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	ok, _ = b.TryLock(ctx, 0)
	assert.False(t, ok, "same name, same process")
	ok, _ = set.New("u2").TryLock(ctx, 0)
	assert.True(t, ok, "another name")
	ok, _ = lock.NewLocalLocks().New("u1").TryLock(ctx, 0)
	assert.True(t, ok, "another process's set does not exclude: the multi-instance failure")
	assert.ErrorIs(t, b.Unlock(ctx), lock.ErrNotHeld, "non-holder unlock")
	require.NoError(t, a.Unlock(ctx))
	ok, _ = b.TryLock(ctx, 0)
	assert.True(t, ok, "after release")
}

// TestSimpleRedisLockCleansUpALostReply: a SET NX that took the lock but whose reply was lost
// (a timeout) is undone by TryLock, so the user's next try finds the lock free instead of
// waiting out the TTL; a key that holds another owner's value is left alone.
func TestSimpleRedisLockCleansUpALostReply(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := context.Background()
			lossy := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
			t.Cleanup(func() { _ = lossy.Close() })
			lossy.AddHook(lostReplyHook{})
			process := lock.NewProcessID()

			l := lock.NewSimpleRedisLock(lossy, process, testenv.Unique("lost-"))
			ok, err := l.TryLock(ctx, time.Minute)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the SET's error is returned")
			assert.False(t, ok)
			assert.Zero(t, srv.Client.Exists(ctx, l.Key()).Val(), "the lock the lost SET took is deleted")
			again := lock.NewSimpleRedisLock(srv.Client, process, l.Key()[len("lock:"):])
			ok, err = again.TryLock(ctx, time.Minute)
			require.NoError(t, err)
			assert.True(t, ok, "the next try takes the lock at once")
			require.NoError(t, again.Unlock(ctx))

			held := lock.NewSimpleRedisLock(lossy, process, testenv.Unique("lost-held-"))
			require.NoError(t, srv.Client.Set(ctx, held.Key(), "another-owner", time.Minute).Err())
			t.Cleanup(func() { srv.Client.Del(ctx, held.Key()) })
			ok, err = held.TryLock(ctx, time.Minute)
			require.Error(t, err)
			assert.False(t, ok)
			assert.Equal(t, "another-owner", srv.Client.Get(ctx, held.Key()).Val(), "another owner's lock is untouched")
		})
	}
}

// scriptsDownHook fails every script while down is set, as a Redis whose replies come late
// does: the cleanup after a lost SET reply cannot get through.
type scriptsDownHook struct{ down *atomic.Bool }

func (scriptsDownHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h scriptsDownHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.down.Load() && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return next(ctx, cmd)
	}
}

func (h scriptsDownHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.down.Load() {
			for _, cmd := range cmds {
				if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
					for _, c := range cmds {
						c.SetErr(errLostReply)
					}
					return errLostReply
				}
			}
		}
		return next(ctx, cmds)
	}
}

// TestSimpleRedisLocksRetryAFailedCleanup: when the cleanup after a lost SET reply fails too,
// a lock of SimpleRedisLocks retries it in the background, so the user's lock is free again
// once Redis answers, not after the TTL; meanwhile its owner does not SET the same value again.
func TestSimpleRedisLocksRetryAFailedCleanup(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := context.Background()
			var down atomic.Bool
			lossy := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
			t.Cleanup(func() { _ = lossy.Close() })
			lossy.AddHook(lostReplyHook{})
			lossy.AddHook(scriptsDownHook{&down})
			locks := lock.NewSimpleRedisLocks(lossy, lock.NewProcessID(), lock.SimpleRedisOptions{})
			name := testenv.Unique("stray-")
			l := locks.New(name).(*lock.SimpleRedisLock)
			t.Cleanup(func() { srv.Client.Del(ctx, l.Key()) })

			down.Store(true)
			ok, err := l.TryLock(ctx, time.Hour)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			assert.False(t, ok)
			stranded := srv.Client.Get(ctx, l.Key()).Val()
			require.NotEmpty(t, stranded, "the lost SET took the lock and its cleanup failed")

			ok, err = locks.New(name).TryLock(ctx, time.Hour)
			require.ErrorIs(t, err, lock.ErrStrayPending, "the owner of the stray does not take it again while its cleanup is pending")
			assert.False(t, ok)

			down.Store(false)
			require.Eventually(t, func() bool { return srv.Client.Exists(ctx, l.Key()).Val() == 0 },
				10*time.Second, 10*time.Millisecond, "the retried cleanup deletes the stray lock, long before its hour")
			// From this goroutine (the stray's owner): once the stray is forgotten, the SET is
			// sent again (and here loses its reply; its cleanup now succeeds).
			var sent bool
			for deadline := time.Now().Add(10 * time.Second); !sent && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				_, err = locks.New(name).TryLock(ctx, time.Hour)
				sent = errors.Is(err, os.ErrDeadlineExceeded)
			}
			assert.True(t, sent, "the stray is forgotten once its cleanup was answered")
			assert.Zero(t, srv.Client.Exists(ctx, l.Key()).Val())
		})
	}
}

// TestSimpleRedisLocksRetryAnUnansweredUnlock: an Unlock without an answer is retried in the
// background like a failed cleanup, so the lock does not outlive Redis's stall by a whole TTL.
func TestSimpleRedisLocksRetryAnUnansweredUnlock(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := context.Background()
			var down atomic.Bool
			c := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
			t.Cleanup(func() { _ = c.Close() })
			c.AddHook(scriptsDownHook{&down})
			locks := lock.NewSimpleRedisLocks(c, lock.NewProcessID(), lock.SimpleRedisOptions{})
			name := testenv.Unique("unanswered-")
			l := locks.New(name).(*lock.SimpleRedisLock)
			t.Cleanup(func() { srv.Client.Del(ctx, l.Key()) })

			ok, err := l.TryLock(ctx, time.Hour)
			require.NoError(t, err)
			require.True(t, ok)
			down.Store(true)
			require.Error(t, l.Unlock(ctx))
			require.EqualValues(t, 1, srv.Client.Exists(ctx, l.Key()).Val(), "the unlock did not get through")
			ok, err = locks.New(name).TryLock(ctx, time.Hour)
			require.ErrorIs(t, err, lock.ErrStrayPending, "held until the retried unlock is answered")
			assert.False(t, ok)

			down.Store(false)
			require.Eventually(t, func() bool { return srv.Client.Exists(ctx, l.Key()).Val() == 0 },
				10*time.Second, 10*time.Millisecond, "the retried unlock deletes the lock, long before its hour")
			// From this goroutine (the owner): the lock is ours to take again once the retried
			// unlock was answered (and the retries have ended before the client closes).
			again := locks.New(name)
			for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				ok, err = again.TryLock(ctx, time.Hour)
				if err != nil {
					require.ErrorIs(t, err, lock.ErrStrayPending)
				}
			}
			require.True(t, ok, "the unanswered unlock is forgotten once answered")
			require.NoError(t, again.Unlock(ctx))
		})
	}
}

// evalPipelines counts the pipelines carrying a script that reached Redis.
type evalPipelines struct{ n *atomic.Int64 }

func (evalPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (evalPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h evalPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if c.Name() == "eval" || c.Name() == "evalsha" {
				h.n.Add(1)
				break
			}
		}
		return err
	}
}

// TestSimpleRedisLocksClearManyStraysInOneRoundTrip: forty locks stranded while Redis was
// away are cleared, once it answers, by the probe and one pipelined round trip, not by one
// compare-and-delete per lock.
func TestSimpleRedisLocksClearManyStraysInOneRoundTrip(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := context.Background()
			var down atomic.Bool
			var rounds atomic.Int64
			lossy := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
			t.Cleanup(func() { _ = lossy.Close() })
			lossy.AddHook(lostReplyHook{})
			lossy.AddHook(scriptsDownHook{&down})
			lossy.AddHook(evalPipelines{&rounds})
			locks := lock.NewSimpleRedisLocks(lossy, lock.NewProcessID(), lock.SimpleRedisOptions{})
			prefix := testenv.Unique("strays-")
			var keys []string
			down.Store(true)
			for i := range 40 {
				l := locks.New(fmt.Sprintf("%s%d", prefix, i)).(*lock.SimpleRedisLock)
				keys = append(keys, l.Key())
				_, err := l.TryLock(ctx, time.Hour)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			}
			t.Cleanup(func() { srv.Client.Del(ctx, keys...) })
			require.EqualValues(t, 40, srv.Client.Exists(ctx, keys...).Val(), "forty stranded locks")

			before := rounds.Load() // the hook counts only what passed scriptsDownHook
			down.Store(false)
			require.Eventually(t, func() bool { return srv.Client.Exists(ctx, keys...).Val() == 0 },
				10*time.Second, 5*time.Millisecond, "every stray cleared")
			assert.LessOrEqual(t, rounds.Load()-before, int64(2), "the probe and one pipeline of the other 39")
		})
	}
}

// TestSimpleRedisLocksNoTokens: with SimpleRedisOptions.NoTokens a lock is one SET NX PX
// and the release script, hands out no token and leaves no grant counter behind, and still
// undoes a SET whose reply was lost (TestSimpleRedisLockExcludes runs it for exclusion).
func TestSimpleRedisLocksNoTokens(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx := context.Background()
			noTokens := lock.SimpleRedisOptions{NoTokens: true}

			var cmds []string
			rec := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
			t.Cleanup(func() { _ = rec.Close() })
			rec.AddHook(recordHook{&cmds})
			require.NoError(t, rec.Ping(ctx).Err()) // the connection's handshake, before counting
			cmds = nil
			name := testenv.Unique("notokens-")
			l := lock.NewSimpleRedisLocks(rec, lock.NewProcessID(), noTokens).New(name).(*lock.SimpleRedisLock)
			ok, err := l.TryLock(ctx, time.Minute)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, []string{"set"}, cmds, "TryLock's commands: one SET, no MULTI/EXEC")
			assert.Zero(t, l.Token(), "no fencing token")
			counters, err := srv.Client.Keys(ctx, "*"+name+"*:fence").Result()
			require.NoError(t, err)
			assert.Empty(t, counters, "no grant counter")
			other := lock.NewSimpleRedisLocks(srv.Client, lock.NewProcessID(), noTokens).New(name)
			ok, err = other.TryLock(ctx, time.Minute)
			require.NoError(t, err)
			assert.False(t, ok, "another process takes the held lock")
			assert.ErrorIs(t, other.Unlock(ctx), lock.ErrNotHeld, "another process releases it")
			require.NoError(t, l.Unlock(ctx))
			assert.Equal(t, []string{"set", "evalsha"}, cmds, "Unlock's command: the release script")

			// A lost reply is cleaned up as for the counted lock.
			lossy := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
			t.Cleanup(func() { _ = lossy.Close() })
			lossy.AddHook(lostReplyHook{})
			lost := lock.NewSimpleRedisLocks(lossy, lock.NewProcessID(), noTokens).New(testenv.Unique("notokens-lost-")).(*lock.SimpleRedisLock)
			ok, err = lost.TryLock(ctx, time.Minute)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the SET's error is returned")
			assert.False(t, ok)
			assert.Zero(t, srv.Client.Exists(ctx, lost.Key()).Val(), "the lock the lost SET took is deleted")
		})
	}
}
