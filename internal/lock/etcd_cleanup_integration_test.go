//go:build integration

package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEtcdLateDeleteSparesTheNextHold: an Unlock whose context has ended leaves the delete of
// the key to the background. The same owner then takes the lock again before that delete has
// reached etcd. Its key has the same name (lease and owner), so it must not simply adopt the
// key the background delete is about to remove: the late delete would then take the new
// hold's key, and another owner would get the lock while this one holds it, unaware (Lost
// open, lease fine).
func TestEtcdLateDeleteSparesTheNextHold(t *testing.T) {
	prefix := serverTestRoot(t)
	proceed := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	cleaned := make(chan string, 4)
	ca := newEtcdTestClient(t, prefix, etcdHooks{
		cleaning: func(string) { <-proceed },          // the background delete is late...
		cleaned:  func(key string) { cleaned <- key }, // ...and done here
		awaiting: func(string) { release() },          // the next acquisition waits for it
	})
	a := NewEtcdLocks(ca).EtcdLock("u1")
	b := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("u1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ok, err := a.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	ended, end := context.WithCancel(ctx)
	end()
	require.ErrorIs(t, a.Unlock(ended), context.Canceled, "the delete goes on in the background")

	ok, err = a.TryLock(ctx, 0) // the same goroutine, again, before the delete has landed
	require.NoError(t, err)
	require.True(t, ok)
	release()
	select {
	case <-cleaned:
	case <-time.After(10 * time.Second):
		t.Fatal("the background delete never finished")
	}

	select {
	case <-a.Lost():
		t.Fatal("the hold was reported lost")
	default:
	}
	ok, err = b.TryLock(ctx, 0)
	require.NoError(t, err)
	if ok {
		_ = b.Unlock(ctx)
	}
	assert.False(t, ok, "another owner took the lock while the first one holds it: the late delete removed the new hold's key")
	require.NoError(t, a.Unlock(ctx))
	assert.Zero(t, etcdKeys(t, prefix))
}

// TestEtcdLostPutReplyLeavesNoOrphan: the put of an acquisition reaches etcd but its reply is
// lost (the caller's context ends first, the connection drops), and the acquisition fails.
// The owner never asks again (a request's goroutine that gave up and ended), so the key it
// does not know it made must be deleted: left, it heads the queue for as long as the client's
// lease lives, and no one gets the lock.
func TestEtcdLostPutReplyLeavesNoOrphan(t *testing.T) {
	prefix := serverTestRoot(t)
	var armed atomic.Bool
	errLost := errors.New("rpc error: code = DeadlineExceeded (the put's reply was lost)")
	cleaned := make(chan string, 4)
	ca := newEtcdTestClient(t, prefix, etcdHooks{
		enqueued: func(err error) error {
			if err == nil && armed.CompareAndSwap(true, false) {
				return errLost
			}
			return err
		},
		cleaned: func(key string) { cleaned <- key },
	})
	a := NewEtcdLocks(ca).EtcdLock("u1")
	b := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("u1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	armed.Store(true)
	failed := make(chan error, 1)
	go func() { // an owner that gives up and is gone
		ok, err := a.TryLock(ctx, 0)
		assert.False(t, ok)
		failed <- err
	}()
	require.ErrorIs(t, <-failed, errLost)

	select {
	case <-cleaned:
	case <-time.After(5 * time.Second):
		t.Errorf("the key of the put whose reply was lost was never deleted (%d key(s) left)", etcdKeys(t, prefix))
	}
	ok, err := b.TryLock(ctx, 0)
	require.NoError(t, err)
	assert.True(t, ok, "the lock is blocked by an orphaned key")
	if ok {
		require.NoError(t, b.Unlock(ctx))
	}
}
