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
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
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
	a, b, ctx := ownersOfU1(t, prefix, ca)

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
	a, b, ctx := ownersOfU1(t, prefix, ca)

	armed.Store(true)
	require.ErrorIs(t, <-giveUp(t, ctx, a), errLost)

	select {
	case <-cleaned:
	case <-time.After(5 * time.Second):
		t.Errorf("the key of the put whose reply was lost was never deleted (%d key(s) left)", etcdKeys(t, prefix))
	}
	assertFree(t, ctx, b, "the lock is blocked by an orphaned key")
}

// TestEtcdLatePutLeavesNoOrphan: the put of an acquisition is still on its way to etcd when
// the caller's context ends (a slow network, a busy leader). The acquisition fails and
// deletes its key in the background, but the put reaches etcd only after that delete. It must
// not create the key then: the owner is gone, the delete is over, and the key would head the
// queue for as long as the client's lease lives, so that no one gets the lock.
func TestEtcdLatePutLeavesNoOrphan(t *testing.T) {
	prefix := serverTestRoot(t)
	var armed atomic.Bool
	held := make(chan struct{})    // the put is held back...
	deliver := make(chan struct{}) // ...until the test lets it reach etcd
	over := make(chan struct{})    // or ends first
	t.Cleanup(func() { close(over) })
	type late struct {
		resp *etcdserverpb.TxnResponse
		err  error
	}
	delivered := make(chan late, 1)
	cleaned := make(chan string, 4)
	ca := newEtcdTestClient(t, prefix, etcdHooks{
		interceptor: func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method != "/etcdserverpb.KV/Txn" || !armed.CompareAndSwap(true, false) {
				return invoker(ctx, method, req, reply, cc, opts...)
			}
			go func() { // the request, in flight
				select {
				case <-deliver:
				case <-over:
					return
				}
				dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var resp etcdserverpb.TxnResponse
				err := invoker(dctx, method, req, &resp, cc, opts...)
				delivered <- late{&resp, err}
			}()
			close(held)
			<-ctx.Done()
			return ctx.Err()
		},
		cleaned: func(key string) { cleaned <- key },
	})
	a, b, ctx := ownersOfU1(t, prefix, ca)

	armed.Store(true)
	actx, end := context.WithCancel(ctx)
	failed := giveUp(t, actx, a)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the acquisition never sent its put")
	}
	end()
	select {
	case err := <-failed:
		require.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("the acquisition did not end with its context")
	}
	select {
	case <-cleaned:
	case <-ctx.Done():
		t.Fatal("the background delete never finished")
	}

	close(deliver) // the put reaches etcd, after the delete
	var put late
	select {
	case put = <-delivered:
	case <-ctx.Done():
		t.Fatal("the held put never reached etcd")
	}
	require.NoError(t, put.err, "the late put")
	assertFree(t, ctx, b, "the lock is blocked by an orphaned key: the put that reached etcd after the background delete created it (put done: %v)", put.resp.Succeeded)

	// An acquisition that read the void mark before the delete moved it (another goroutine's,
	// sent meanwhile) fails its compare, reads the mark again and puts its key.
	ca.mu.Lock()
	ca.void = 0
	ca.mu.Unlock()
	ok, err := a.TryLock(ctx, 0)
	require.NoError(t, err, "an acquisition with a void mark seen before it moved")
	require.True(t, ok)
	require.NoError(t, a.Unlock(ctx))
}

// ownersOfU1 returns lock u1 through ca and through a client of its own under prefix (a
// second process), and a context that bounds the test.
func ownersOfU1(t *testing.T, prefix string, ca *EtcdClient) (a, b *EtcdLock, ctx context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return NewEtcdLocks(ca).EtcdLock("u1"), NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("u1"), ctx
}

// giveUp runs a.TryLock(ctx, 0) on a goroutine of its own, an owner that fails and is gone,
// and returns the channel its error comes on.
func giveUp(t *testing.T, ctx context.Context, a *EtcdLock) <-chan error {
	failed := make(chan error, 1)
	go func() {
		ok, err := a.TryLock(ctx, 0)
		assert.False(t, ok)
		failed <- err
	}()
	return failed
}

// assertFree asserts that b takes the lock at once (and releases it): no key heads its queue.
func assertFree(t *testing.T, ctx context.Context, b *EtcdLock, msgAndArgs ...any) {
	t.Helper()
	ok, err := b.TryLock(ctx, 0)
	require.NoError(t, err)
	if ok {
		require.NoError(t, b.Unlock(ctx))
	}
	assert.True(t, ok, msgAndArgs...)
}

// TestEtcdLeaseFoundGoneAtThePut: the client's lease ends in etcd (revoked here, just before
// an acquisition's put reaches etcd) before the client has heard of it from its keep-alive.
// The put fails, as etcd makes no key with a lease it does not have. The acquisition must
// report the lease lost, not etcd's raw "requested lease not found", and the client, which
// now knows its keys are gone, must report its holds lost at once and take a new lease,
// instead of waiting for the keep-alive's next answer (up to a third of the TTL) while its
// holders go on believing in keys another process may have replaced.
func TestEtcdLeaseFoundGoneAtThePut(t *testing.T) {
	prefix := serverTestRoot(t)
	var armed atomic.Bool
	var ca *EtcdClient
	ca = newEtcdTestClient(t, prefix, etcdHooks{
		interceptor: func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == "/etcdserverpb.KV/Txn" && armed.CompareAndSwap(true, false) {
				lease, _, _, err := ca.current()
				if err != nil {
					return err
				}
				if _, err := ca.cli.Revoke(ctx, lease); err != nil {
					return err
				}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := NewEtcdLocks(ca).EtcdLock("held")
	ok, err := held.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	lost := held.Lost()
	lease, _, _, err := ca.current()
	require.NoError(t, err)

	armed.Store(true)
	l := NewEtcdLocks(ca).EtcdLock("u1")
	ok, err = l.TryLock(ctx, 0)
	assert.False(t, ok)
	assert.ErrorIs(t, err, errEtcdRequeue, "the acquisition's report of a lease etcd no longer has")
	select {
	case <-lost:
	default:
		t.Error("the lease is gone in etcd, and with it the held key, but the holder's Lost() is open")
	}
	assert.Zero(t, etcdKeys(t, prefix), "a key left behind")

	require.Eventually(t, func() bool {
		l, _, _, err := ca.current()
		return err == nil && l != lease
	}, 10*time.Second, 10*time.Millisecond, "the client never got a new lease")
	ok, err = l.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok, "the client takes locks again with its new lease")
	require.NoError(t, l.Unlock(ctx))
}

// TestEtcdWaiterRequeuesUnderTheNextLease: a waiter's lease is lost (revoked, and found gone)
// while it waits behind another process's hold. It queues again under the client's next lease
// when the client's first grant since the loss brings one, however long that grant takes,
// and fails closed ("no etcd lease") when etcd refuses it. It used to look for a new lease
// once, 50 ms after the loss, and fail when the grant had not been answered by then.
func TestEtcdWaiterRequeuesUnderTheNextLease(t *testing.T) {
	prefix := serverTestRoot(t)
	const (
		pass = iota
		hold // hold the grant back until release closes
		fail // refuse the grant
	)
	var grants atomic.Int32
	granting := make(chan struct{}, 1)
	release := make(chan struct{})
	watching := make(chan struct{}, 1)
	awaiting := make(chan struct{}, 1)
	signal := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	ca := newEtcdTestClient(t, prefix, etcdHooks{
		interceptor: func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == "/etcdserverpb.Lease/LeaseGrant" {
				switch grants.Load() {
				case hold:
					signal(granting)
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
				case fail:
					signal(granting)
					return errors.New("grant refused by the test")
				}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		},
		watching:      func(string, string) { signal(watching) },
		awaitingLease: func() { signal(awaiting) },
	})
	a, b, ctx := ownersOfU1(t, prefix, ca)
	type result struct {
		ok  bool
		err error
	}
	// waitBehind queues a waiter behind b's hold, then ends ca's lease under it as etcd would
	// (revoked, and found gone by a call) with the next grant in the given mode.
	waitBehind := func(mode int32) <-chan result {
		t.Helper()
		ok, err := b.TryLock(ctx, 0)
		require.NoError(t, err)
		require.True(t, ok)
		done := make(chan result, 1)
		go func() {
			ok, err := a.TryLockWait(ctx, 15*time.Second, 0)
			if ok {
				err = errors.Join(err, a.Unlock(ctx))
			}
			done <- result{ok, err}
		}()
		select {
		case <-watching:
		case r := <-done:
			t.Fatalf("the waiter did not queue: %v, %v", r.ok, r.err)
		}
		grants.Store(mode)
		lease, _, _, err := ca.current()
		require.NoError(t, err)
		_, err = ca.cli.Revoke(ctx, lease)
		require.NoError(t, err)
		ca.leaseGone(lease)
		select {
		case <-granting:
		case <-ctx.Done():
			t.Fatal("the client never asked for its next lease")
		}
		return done
	}

	done := waitBehind(hold)
	select {
	case <-awaiting:
	case r := <-done:
		t.Fatalf("the waiter gave up while the client was granting its next lease: %v, %v", r.ok, r.err)
	}
	grants.Store(pass)
	close(release)
	require.NoError(t, b.Unlock(ctx))
	r := <-done
	require.NoError(t, r.err, "the waiter whose lease was lost")
	assert.True(t, r.ok, "the waiter takes the lock under the next lease")

	require.Eventually(t, func() bool { _, _, _, err := ca.current(); return err == nil }, 10*time.Second,
		10*time.Millisecond, "the client has a lease again")
	done = waitBehind(fail)
	r = <-done
	assert.False(t, r.ok)
	assert.ErrorIs(t, r.err, errEtcdNoLease, "a waiter whose lease was lost, etcd refusing the next")
	grants.Store(pass)
	require.NoError(t, b.Unlock(ctx))
}
