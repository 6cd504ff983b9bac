package lock

import (
	"context"
	"fmt"
	"os"
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

// TestLostAcquireReplyReleased: the reply to a first acquisition is lost after the script
// took the lock. TryLock returns the error, and gives up the hold it cannot know it has, so
// that another process takes the lock at once instead of after the lease (a minute here).
// A re-entry whose reply is lost gives up nothing: the earlier hold stays.
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

		if k.name == "localremote" {
			return // a re-entry of a LocalRemoteLock never asks Redis
		}
		la := k.make(pa, name)
		ok, err = la.TryLockWait(ctx, 0, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		armed.Store(true)
		_, err = la.TryLockWait(ctx, 0, time.Minute)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		ok, err = lb.TryLockWait(ctx, 0, time.Minute)
		require.NoError(t, err)
		assert.False(t, ok, "the hold before the lost re-entry is kept")
	})
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
