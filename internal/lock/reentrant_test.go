package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

func TestReentrancyDepthAndUnwinding(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
		name := testenv.Unique("reenter-")
		la, lb := k.make(a, name), k.make(b, name)
		const depth = 5
		for i := range depth {
			ok, err := la.TryLockWait(ctx, 0, 10*time.Second)
			require.NoError(t, err)
			require.True(t, ok, "re-entry %d: got false, want true", i+1)
		}
		if k.name != "localremote" {
			// The hash holds the hold count; a LocalRemoteLock counts re-entry locally.
			got, err := srv.Client.HGet(ctx, la.Key(), owner(a.c.Process())).Int()
			require.NoError(t, err)
			assert.Equal(t, depth, got, "hold count: got %d, want %d", got, depth)
		}
		for i := range depth {
			ok, err := lb.TryLockWait(ctx, 0, 10*time.Second)
			require.NoError(t, err)
			require.False(t, ok, "other process got the lock with %d holds left", depth-i)
			require.NoError(t, la.Unlock(ctx), "unlock %d", i+1)
		}
		ok, err := lb.TryLockWait(ctx, 0, 10*time.Second)
		require.NoError(t, err)
		assert.True(t, ok, "other process after full unwinding: got false, want true")
		require.NoError(t, lb.Unlock(ctx))
		err = la.Unlock(ctx)
		assert.ErrorIs(t, err, ErrNotHeld, "one unlock too many")
	})
}

func TestOnlyTheOwnerUnlocks(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
		name := testenv.Unique("owner-")
		la := k.make(a, name)
		take(t, la, 10*time.Second)

		tests := []struct {
			name   string
			unlock func() error
		}{
			{"another process", func() error { return k.make(b, name).Unlock(ctx) }},
			{"another goroutine of the holder's process", func() error {
				errc := make(chan error)
				go func() { errc <- la.Unlock(ctx) }()
				return <-errc
			}},
			{"a lock never taken", func() error { return k.make(a, testenv.Unique("never-")).Unlock(ctx) }},
		}
		for _, tt := range tests {
			err := tt.unlock()
			assert.ErrorIs(t, err, ErrNotHeld, "%s: got %v, want ErrNotHeld", tt.name, err)
		}
		// The holder still holds it.
		ok, err := k.make(b, name).TryLockWait(ctx, 0, time.Second)
		require.NoError(t, err)
		assert.False(t, ok, "lock free after foreign unlocks")
		require.NoError(t, la.Unlock(ctx))
	})
}

func TestInvalidLease(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		l := k.make(newProc(t, srv, Options{}), testenv.Unique("lease-"))
		for _, lease := range []time.Duration{0, time.Microsecond} {
			_, err := l.TryLockWait(context.Background(), 0, lease)
			assert.ErrorIs(t, err, ErrInvalidTTL, "lease %v", lease)
		}
	})
}

func TestWaitRunsOut(t *testing.T) {
	forEach(t, func(t *testing.T, srv testenv.Redis, k kind) {
		ctx := testCtx(t)
		a, b := newProc(t, srv, Options{}), newProc(t, srv, Options{})
		name := testenv.Unique("waitout-")
		la := k.make(a, name)
		take(t, la, 10*time.Second)

		ok, err := k.make(b, name).TryLockWait(ctx, 50*time.Millisecond, 10*time.Second)
		require.NoError(t, err, "a wait running out is not an error")
		assert.False(t, ok)

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ok, err = k.make(b, name).TryLockWait(cctx, time.Second, 10*time.Second)
		assert.False(t, ok)
		assert.True(t, errors.Is(err, context.Canceled), "cancelled wait: got %v, want context.Canceled", err)
		require.NoError(t, la.Unlock(ctx))
	})
}
