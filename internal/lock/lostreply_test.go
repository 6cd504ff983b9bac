package lock

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// loseNextScriptReply runs the next script that Redis runs successfully once armed, then
// reports a read timeout instead of its reply: the acquire script reached Redis, its answer
// never came back. A NOSCRIPT refusal (EVALSHA before EVAL) does not use it up.
type loseNextScriptReply struct{ armed *atomic.Bool }

var errScriptReplyLost = fmt.Errorf("read tcp: i/o timeout: %w", os.ErrDeadlineExceeded)

func (loseNextScriptReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h loseNextScriptReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil || (cmd.Name() != "evalsha" && cmd.Name() != "eval") || !h.armed.CompareAndSwap(true, false) {
			return err
		}
		cmd.SetErr(errScriptReplyLost)
		return errScriptReplyLost
	}
}

func (loseNextScriptReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dropNextScript fails the next script the client would send once armed, without sending
// it: the attempt never reached Redis.
func dropNextScript(armed *atomic.Bool) hook {
	return func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if (cmd.Name() != "evalsha" && cmd.Name() != "eval") || !armed.CompareAndSwap(true, false) {
				return next(ctx, cmd)
			}
			cmd.SetErr(errScriptReplyLost)
			return errScriptReplyLost
		}
	}
}

// loseNextSetReply runs the next SET that Redis runs once armed, alone (SimpleRedisOptions.NoTokens)
// or in the SimpleRedisLock's MULTI/EXEC, then reports a read timeout instead of its reply.
type loseNextSetReply struct{ armed *atomic.Bool }

func (loseNextSetReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h loseNextSetReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil || cmd.Name() != "set" || !h.armed.CompareAndSwap(true, false) {
			return err
		}
		cmd.SetErr(errScriptReplyLost)
		return errScriptReplyLost
	}
}

func (h loseNextSetReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err != nil || !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "set" }) ||
			!h.armed.CompareAndSwap(true, false) {
			return err
		}
		for _, c := range cmds {
			c.SetErr(errScriptReplyLost)
		}
		return errScriptReplyLost
	}
}

// TestLostAcquireReplyReleased: the reply to a first acquisition is lost after the script
// took the lock. TryLock returns the error, and gives up the hold it cannot know it has, so
// that another process takes the lock at once instead of after the lease (a minute here).
func TestLostAcquireReplyReleased(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		var armed atomic.Bool
		lossy := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
		lossy.AddHook(loseNextScriptReply{&armed})
		a := NewClient(lossy, Options{})
		t.Cleanup(func() { _ = a.Close(); _ = lossy.Close() })
		pa, b := proc{c: a, r: NewRegistry(a)}, newProc(t, srv, Options{})
		name := testenv.Unique("lost-")

		armed.Store(true)
		ok, err := k.make(pa, name).TryLockWait(ctx, 0, time.Minute)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the attempt's error is returned")
		require.False(t, armed.Load(), "the acquire script ran and its reply was lost")
		assert.False(t, ok)
		lb := k.make(b, name)
		ok, err = lb.TryLockWait(ctx, 0, time.Minute)
		require.NoError(t, err)
		require.True(t, ok, "another process takes the lock at once: the lost grant was released")
		require.NoError(t, lb.Unlock(ctx))
	})
}

// TestLostReentryGivesBackOnlyItsOwn: a holder tries the lock again (a re-entry), through the
// same lock or a second one of the name, and the attempt fails: its script ran and its reply
// was lost, or it never reached Redis. The cleanup gives back exactly the hold that attempt
// made: the hold from before stays (another process is refused), and the holder's one Unlock
// frees the lock (another process takes it at once, not after the lease).
func TestLostReentryGivesBackOnlyItsOwn(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		if k.name == "localremote" {
			t.Skip("a re-entry of a LocalRemoteLock never asks Redis")
		}
		ctx := testCtx(t)
		var lose, drop atomic.Bool
		lossy := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
		lossy.AddHook(loseNextScriptReply{&lose})
		lossy.AddHook(dropNextScript(&drop))
		a := NewClient(lossy, Options{})
		t.Cleanup(func() { _ = a.Close(); _ = lossy.Close() })
		pa, b := proc{c: a, r: NewRegistry(a)}, newProc(t, srv, Options{})
		for _, c := range []struct {
			name   string
			armed  *atomic.Bool
			second bool // through a second lock of the name, not the holder's
		}{
			{"reply lost", &lose, false},
			{"reply lost, second lock", &lose, true},
			{"never ran", &drop, false},
			{"never ran, second lock", &drop, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				name := testenv.Unique("lostreentry-")
				la, lb := k.make(pa, name), k.make(b, name)
				ok, err := la.TryLockWait(ctx, 0, time.Minute)
				require.NoError(t, err)
				require.True(t, ok)
				again := la
				if c.second {
					again = k.make(pa, name)
				}
				c.armed.Store(true)
				_, err = again.TryLockWait(ctx, 0, time.Minute)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				require.False(t, c.armed.Load(), "the attempt failed")

				ok, err = lb.TryLockWait(ctx, 0, time.Minute)
				require.NoError(t, err)
				assert.False(t, ok, "the hold before the failed re-entry is kept")
				require.NoError(t, la.Unlock(ctx))
				ok, err = lb.TryLockWait(ctx, 0, time.Minute)
				require.NoError(t, err)
				require.True(t, ok, "the holder's one Unlock frees the lock: the failed re-entry left no hold behind")
				require.NoError(t, lb.Unlock(ctx))
			})
		}
	})
}

// TestSimpleRedisLockLostReplyKeepsAnEarlierHold: a goroutine that holds a SimpleRedisLock
// tries the name again (a mistake: the lock is not reentrant), through the same lock or a
// second one, and that SET's reply is lost. The SET found the key and did nothing; the
// cleanup must not delete the hold from before, or another owner takes the lock while its
// holder works. Once the holder has unlocked, a lost reply is cleaned up again.
func TestSimpleRedisLockLostReplyKeepsAnEarlierHold(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		for _, c := range []struct {
			name   string
			second bool
			opts   *SimpleRedisOptions // nil: NewSimpleRedisLock, else a lock of SimpleRedisLocks
		}{
			{"same lock", false, nil},
			{"second lock", true, nil},
			{"SimpleRedisLocks, second lock", true, &SimpleRedisOptions{}},
			{"SimpleRedisLocks NoTokens, second lock", true, &SimpleRedisOptions{NoTokens: true}},
		} {
			t.Run(srv.Name+"/"+c.name, func(t *testing.T) {
				ctx := testCtx(t)
				var armed atomic.Bool
				lossy := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
				lossy.AddHook(loseNextSetReply{&armed})
				t.Cleanup(func() { _ = lossy.Close() })
				process, name := NewProcessID(), testenv.Unique("lostsimple-")
				mk := func() Lock { return NewSimpleRedisLock(lossy, process, name) }
				if c.opts != nil {
					ls := NewSimpleRedisLocks(lossy, process, *c.opts)
					mk = func() Lock { return ls.New(name) }
				}
				first := mk()
				other := NewSimpleRedisLock(srv.Client, NewProcessID(), name)
				ok, err := first.TryLock(ctx, time.Minute)
				require.NoError(t, err)
				require.True(t, ok)
				again := first
				if c.second {
					again = mk()
				}

				armed.Store(true)
				_, err = again.TryLock(ctx, time.Minute)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				require.False(t, armed.Load(), "the SET ran and its reply was lost")
				ok, err = other.TryLock(ctx, time.Minute)
				require.NoError(t, err)
				assert.False(t, ok, "another owner is refused: the hold from before the lost SET is kept")
				require.NoError(t, first.Unlock(ctx), "the holder still holds the lock")

				armed.Store(true)
				_, err = again.TryLock(ctx, time.Minute)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				require.False(t, armed.Load())
				ok, err = other.TryLock(ctx, time.Minute)
				require.NoError(t, err)
				require.True(t, ok, "after the Unlock, the lock a lost SET took is deleted at once")
				require.NoError(t, other.Unlock(ctx))
			})
		}
	}
}

// TestLateRenewalNeverShortensTheLease: a LocalRemoteLock holder's watchdog (a short lease)
// sends a renewal whose reply is lost; the holder unlocks and hands the lock to a goroutine
// that waits with a long fixed lease, extending the key to it; then the lost renewal lands
// (a request that was on its way all along). It must not cut the key back to the watchdog's
// lease: the next holder counts on the extension, and another process would take the lock
// while its Lost() is open. The extension script reset the lease to whatever it was given.
func TestLateRenewalNeverShortensTheLease(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	ctx := testCtx(t)
	const watchLease, fixedLease = 300 * time.Millisecond, 30 * time.Second
	require.NoError(t, registryExtendScript.Load(ctx, srv.Client).Err()) // EVALSHA replays
	var armed atomic.Bool
	held := make(chan []any, 1) // the renewal on its way: its command
	a := newHookedProc(t, srv, hook(func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			args := cmd.Args()
			if cmd.Name() == "evalsha" && len(args) == 6 && args[1] == registryExtendScript.Hash() &&
				args[5] == watchLease.Milliseconds() && armed.CompareAndSwap(true, false) {
				held <- args
				cmd.SetErr(errScriptReplyLost)
				return errScriptReplyLost
			}
			return next(ctx, cmd)
		}
	}), Options{})
	name := testenv.Unique("laterenew-")
	first := a.r.Obtain(name)
	armed.Store(true)
	ok, err := first.TryLock(ctx, watchLease)
	require.NoError(t, err)
	require.True(t, ok)
	renewal := <-held // the watchdog saw a lost reply and goes on renewing

	next := queueLocally(t, ctx, a, name, fixedLease)
	require.NoError(t, first.Unlock(ctx)) // hands over, extending the key to fixedLease
	next.holds(t)
	require.NoError(t, srv.Client.Do(ctx, renewal...).Err()) // the renewal lands
	srv.Mini.FastForward(2 * watchLease)
	next.requireLostIfTaken(t, ctx, newProc(t, srv, Options{}).r.Obtain(name))
}

// TestRetakeAfterFailedUnlockIsAFreshHold: a holder's last Unlock fails before its script
// reaches Redis, so the hold is over for the Client (its watchdog stopped) while Redis keeps
// the owner's count until the lease runs out. The same goroutine then takes the lock again:
// that is a fresh hold, with a fencing token above the last one, a Lost channel still open,
// and one Unlock that frees the lock. The count the Redis field had left must not make it a
// re-entry the Client keeps no record of (no watchdog, no token, Lost closed, a hold left
// behind by its Unlock).
func TestRetakeAfterFailedUnlockIsAFreshHold(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		if k.name == "localremote" {
			t.Skip("a LocalRemoteLock's failed release forgets the remote key, and the next obtain takes it as its own")
		}
		ctx := testCtx(t)
		var drop atomic.Bool
		pa, b := newHookedProc(t, srv, dropNextScript(&drop), Options{}), newProc(t, srv, Options{})
		name := testenv.Unique("retake-")
		la := k.make(pa, name)
		fenced := la.(Fenced)
		take(t, la, -1)
		before := fenced.Token()

		drop.Store(true)
		require.ErrorIs(t, la.Unlock(ctx), errScriptReplyLost, "the release never reaches Redis")
		require.False(t, drop.Load())

		take(t, la, -1)
		assert.Greater(t, fenced.Token(), before, "token of the hold taken again: got %d, want above %d", fenced.Token(), before)
		select {
		case <-la.Lost():
			t.Error("Lost closed for the hold taken again: got closed, want open")
		default:
		}
		require.NoError(t, la.Unlock(ctx))
		ok, err := k.make(b, name).TryLockWait(ctx, 0, time.Second)
		require.NoError(t, err)
		assert.True(t, ok, "the one Unlock of the hold taken again frees the lock: another process got refused")
	})
}
