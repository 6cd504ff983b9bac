//go:build integration

package lock

import (
	"context"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seckill/seckill/internal/testenv"
)

// The etcd lock against a real etcd: SECKILL_TEST_ETCD_ADDR, by default the one
// scripts/services.sh runs on 127.0.0.1:2379. Each test works under its own prefix. Two
// clients stand for two processes: each has its own lease.

// etcdTestTTL is the tests' lease: the default, so that a loaded machine's stalls (the
// client declares a lease lost after 2/3 of it without a renewal answered) do not end holds
// the tests expect to keep. TestEtcdLeaseLostIsReported ends one on purpose.
const etcdTestTTL = DefaultEtcdLeaseTTL

// newEtcdTestClient connects a client (one "process") under prefix, failing t with the way
// to start etcd when none answers.
func newEtcdTestClient(t *testing.T, prefix string, hooks etcdHooks) *EtcdClient {
	t.Helper()
	addr := testenv.EtcdAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := newEtcdClient(ctx, []string{addr}, EtcdOptions{LeaseTTL: etcdTestTTL, Prefix: prefix}, hooks)
	if err != nil {
		t.Fatalf("no etcd answers on %s (%v): run `scripts/services.sh up etcd`, "+
			"or set SECKILL_TEST_ETCD_ADDR to one that runs", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// etcdKeys counts the keys under prefix, read with a client of the test's own.
func etcdKeys(t *testing.T, prefix string) int64 {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{testenv.EtcdAddr()}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count
}

// TestEtcdMutualExclusion: two clients, eight goroutines each, one lock: never two holders at
// once, every grant's token larger than the one before, no key left behind.
func TestEtcdMutualExclusion(t *testing.T) {
	prefix := serverTestRoot(t)
	clients := []*EtcdClient{newEtcdTestClient(t, prefix, etcdHooks{}), newEtcdTestClient(t, prefix, etcdHooks{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var inside, most atomic.Int32
	var tokens []int64 // appended under the lock only
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := NewEtcdLocks(clients[i%2]).EtcdLock("stock")
			for range 10 {
				if !assert.NoError(t, l.Lock(ctx)) {
					return
				}
				n := inside.Add(1)
				if n > most.Load() {
					most.Store(n)
				}
				tokens = append(tokens, l.Token())
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				assert.NoError(t, l.Unlock(ctx))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "holders at once")
	require.Len(t, tokens, 160)
	for i := 1; i < len(tokens); i++ {
		assert.Greater(t, tokens[i], tokens[i-1], "grant %d's token after grant %d's", i, i-1)
	}
	assert.Zero(t, etcdKeys(t, prefix), "keys left under the prefix")
}

// TestEtcdTryLockDoesNotWait: with the lock held elsewhere TryLock reports false at once and
// leaves no key of its own; a bounded wait reports false when it runs out, a cancelled one
// ctx's error, both without a key left.
func TestEtcdTryLockDoesNotWait(t *testing.T) {
	prefix := serverTestRoot(t)
	a := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("u1")
	b := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("u1")
	ctx := context.Background()
	ok, err := a.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)

	ok, err = b.TryLock(ctx, 0)
	require.NoError(t, err)
	assert.False(t, ok, "TryLock of a held lock")
	assert.Zero(t, b.Token())
	assert.Equal(t, int64(1), etcdKeys(t, prefix), "keys: the holder's only")

	ok, err = b.TryLockWait(ctx, 200*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a wait of 200ms for a lock held throughout")
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	ok, err = b.TryLockWait(cctx, -1, 0)
	assert.False(t, ok)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return etcdKeys(t, prefix) == 1 }, 5*time.Second, 20*time.Millisecond,
		"the waiters' keys are deleted")

	require.NoError(t, a.Unlock(ctx))
	ok, err = b.TryLock(ctx, 0)
	require.NoError(t, err)
	assert.True(t, ok, "TryLock once the holder released")
	require.NoError(t, b.Unlock(ctx))
}

// TestEtcdReentrant: the holder takes the lock again at once, keeps its token, and releases it
// only at its last Unlock; one Unlock more is ErrNotHeld.
func TestEtcdReentrant(t *testing.T) {
	prefix := serverTestRoot(t)
	a := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("u1")
	b := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("u1")
	ctx := context.Background()
	for range 2 {
		ok, err := a.TryLock(ctx, 0)
		require.NoError(t, err)
		require.True(t, ok)
	}
	token := a.Token()
	require.NotZero(t, token)
	require.NoError(t, a.Unlock(ctx))
	assert.Equal(t, token, a.Token(), "the outer hold keeps the token")
	ok, err := b.TryLock(ctx, 0)
	require.NoError(t, err)
	assert.False(t, ok, "taken while an outer hold remains")
	require.NoError(t, a.Unlock(ctx))
	assert.ErrorIs(t, a.Unlock(ctx), ErrNotHeld)
	ok, err = b.TryLock(ctx, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Greater(t, b.Token(), token)
	require.NoError(t, b.Unlock(ctx))
}

// TestEtcdWaitersWatchTheirPredecessor: three waiters queue behind a holder; each watches the
// key created just before its own (no herd), and they get the lock in the order they queued.
func TestEtcdWaitersWatchTheirPredecessor(t *testing.T) {
	prefix := serverTestRoot(t)
	watched := make(chan [2]string, 16)
	holder := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("hot")
	waiters := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{watching: func(me, pred string) { watched <- [2]string{me, pred} }}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok, err := holder.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)

	order := make(chan int, 3)
	release := make([]chan struct{}, 3)
	var keys []string // holder's, then each waiter's, in queue order
	var wg sync.WaitGroup
	for i := range 3 {
		release[i] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := waiters.EtcdLock("hot")
			if !assert.NoError(t, l.Lock(ctx)) {
				return
			}
			order <- i
			<-release[i]
			assert.NoError(t, l.Unlock(ctx))
		}()
		// The next waiter queues only once this one watches: queue order = start order.
		w := <-watched
		if i == 0 {
			keys = append(keys, w[1])
		}
		require.Equal(t, keys[i], w[1], "waiter %d watches the key just before its own", i)
		keys = append(keys, w[0])
	}
	require.NoError(t, holder.Unlock(ctx))
	for i := range 3 {
		assert.Equal(t, i, <-order, "grant %d", i)
		close(release[i])
	}
	wg.Wait()
	select {
	case w := <-watched:
		t.Errorf("a waiter watched again (%s → %s): woken by a release not its predecessor's", w[0], w[1])
	default:
	}
}

// TestEtcdLeaseLostIsReported: the holder's lease ends (revoked behind its back, as etcd would
// expire it after a pause): Lost closes, Unlock is ErrNotHeld, another owner gets the lock with
// a larger token, and the client goes on with a new lease.
func TestEtcdLeaseLostIsReported(t *testing.T) {
	t.Parallel()
	prefix := serverTestRoot(t)
	ca := newEtcdTestClient(t, prefix, etcdHooks{})
	a := NewEtcdLocks(ca).EtcdLock("u1")
	b := NewEtcdLocks(newEtcdTestClient(t, prefix, etcdHooks{})).EtcdLock("u1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok, err := a.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	token := a.Token()
	lost := a.Lost()

	ca.mu.Lock()
	lease := ca.lease
	ca.mu.Unlock()
	_, err = ca.cli.Revoke(ctx, lease)
	require.NoError(t, err)
	select {
	case <-lost:
	case <-time.After(etcdTestTTL):
		t.Fatal("Lost did not close within the lease's TTL of its revocation")
	}
	assert.Zero(t, a.Token())
	assert.ErrorIs(t, a.Unlock(ctx), ErrNotHeld)

	require.NoError(t, b.Lock(ctx))
	assert.Greater(t, b.Token(), token, "the next grant's token")
	require.NoError(t, b.Unlock(ctx))

	// Without a lease an acquisition fails at once (fail closed); the client grants a new one
	// in the background, which a loaded machine may not have done yet.
	require.Eventually(t, func() bool {
		l, _, _, err := ca.current()
		return err == nil && l != lease
	}, 10*time.Second, 10*time.Millisecond, "the client never got a new lease")
	require.NoError(t, a.Lock(ctx), "the client takes locks again with its new lease")
	require.NoError(t, a.Unlock(ctx))
}

// TestEtcdClose: closing the client ends its holds and deletes their keys at once; Unlock of
// such a hold says both that it is not held and that the client closed, and acquisitions
// return ErrClosed.
func TestEtcdClose(t *testing.T) {
	prefix := serverTestRoot(t)
	c := newEtcdTestClient(t, prefix, etcdHooks{})
	l := NewEtcdLocks(c).EtcdLock("close")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := l.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	lost := l.Lost()
	require.NoError(t, c.Close())
	assert.True(t, isClosed(lost), "Lost not closed by Close")
	assert.Zero(t, etcdKeys(t, prefix), "keys left after Close")
	err = l.Unlock(ctx)
	assert.ErrorIs(t, err, ErrNotHeld, "Unlock of a hold that Close ended")
	assert.ErrorIs(t, err, ErrClosed, "Unlock of a hold that Close ended")
	_, err = l.TryLock(ctx, 0)
	assert.ErrorIs(t, err, ErrClosed)
}

// TestEtcdLostReplyFoundAgain: an acquisition whose put reached etcd but whose reply was lost
// asks again and finds its key (named by lease and owner) instead of leaving it orphaned: the
// retry holds the lock with that key's revision, and Unlock deletes it.
func TestEtcdLostReplyFoundAgain(t *testing.T) {
	prefix := serverTestRoot(t)
	c := newEtcdTestClient(t, prefix, etcdHooks{})
	l := NewEtcdLocks(c).EtcdLock("u1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, _, _, err := c.current()
	require.NoError(t, err)
	me := owner(c.process)
	key := l.Prefix() + strconv.FormatInt(int64(lease), 16) + "-" + url.PathEscape(me)
	put, err := c.cli.Put(ctx, key, me, clientv3.WithLease(lease)) // the put whose reply was lost
	require.NoError(t, err)

	ok, err := l.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, put.Header.Revision, l.Token(), "the token is the found key's create revision")
	assert.Equal(t, int64(1), etcdKeys(t, prefix), "one key: the one found again")
	require.NoError(t, l.Unlock(ctx))
	assert.Zero(t, etcdKeys(t, prefix))
}

// ownEtcdClient starts an etcd of the test's own, which the test may freeze, and connects a
// client with a lease of ttl to it; the client is closed, etcd thawed first, when t ends.
func ownEtcdClient(t *testing.T, ttl time.Duration) (*testenv.EtcdProcess, *EtcdClient) {
	t.Helper()
	srv := testenv.StartEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewEtcdClient(ctx, []string{srv.Addr}, EtcdOptions{LeaseTTL: ttl, Prefix: serverTestRoot(t)})
	require.NoError(t, err)
	t.Cleanup(func() {
		srv.Thaw() // Close revokes the lease: etcd must answer
		_ = c.Close()
	})
	return srv, c
}

// TestEtcdFrozenServer: etcd stops answering (SIGSTOP) while a goroutine holds a lock. No
// renewal is answered, so the client reports the hold lost (Lost closes) within the lease
// of the freeze, before the holder could believe in a lease etcd may have ended; an
// acquisition meanwhile fails within its context instead of hanging; once etcd answers
// again the client has a new lease and takes the lock again, with a larger token.
func TestEtcdFrozenServer(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	srv, c := ownEtcdClient(t, ttl)
	ctx := context.Background()
	l := NewEtcdLocks(c).EtcdLock("u1")
	ok, err := l.TryLock(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	token, lost := l.Token(), l.Lost()

	srv.Freeze()
	frozen := time.Now()
	// At once, while the client still has its lease: the request waits for an etcd that
	// does not answer, until its context ends.
	actx, acancel := context.WithTimeout(ctx, 300*time.Millisecond)
	ok, err = NewEtcdLocks(c).EtcdLock("u2").TryLock(actx, 0)
	acancel()
	assert.False(t, ok)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "an acquisition while etcd is frozen")
	assert.Less(t, time.Since(frozen), 2*time.Second, "bounded by its context")
	select {
	case <-lost:
	case <-time.After(ttl - time.Since(frozen)):
		t.Fatal("the hold was not reported lost within the lease of etcd's freeze")
	}
	ok, err = NewEtcdLocks(c).EtcdLock("u3").TryLock(ctx, 0)
	assert.False(t, ok)
	assert.ErrorIs(t, err, errEtcdNoLease, "with the lease lost and etcd frozen, at once")

	srv.Thaw()
	// Here, not in require.Eventually's goroutine: the holder is the goroutine that locks.
	for deadline := time.Now().Add(20 * time.Second); ; {
		tctx, tcancel := context.WithTimeout(ctx, time.Second)
		ok, err = l.TryLock(tctx, 0)
		tcancel()
		if err == nil && ok {
			break
		}
		require.True(t, time.Now().Before(deadline), "the lock was not taken again within 20s of etcd answering: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
	assert.Greater(t, l.Token(), token)
	require.NoError(t, l.Unlock(ctx))
}

// TestEtcdFrozenServerEndsLongWaits: etcd stops answering (SIGSTOP) while a goroutine holds a
// lock, one waits for it in the queue and one starts to queue, each with a context that
// outlasts the freeze. The client declares its lease lost within 2/3 of its TTL without a
// renewal answered; from then on no call of theirs may go on waiting for etcd. The waiters
// end with errEtcdNoLease once the client's grant of a next lease has failed (no lease to
// queue again with) and the holder's Unlock with an error, all while etcd is still frozen, instead of hanging until their contexts end (a
// context without deadline: for as long as etcd is frozen).
func TestEtcdFrozenServerEndsLongWaits(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	srv := testenv.StartEtcd(t)
	prefix := serverTestRoot(t)
	watching := make(chan struct{}, 1)
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c, err := newEtcdClient(cctx, []string{srv.Addr}, EtcdOptions{LeaseTTL: ttl, Prefix: prefix},
		etcdHooks{watching: func(string, string) {
			select {
			case watching <- struct{}{}:
			default:
			}
		}})
	cancel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // outlasts the test
	t.Cleanup(cancel)
	t.Cleanup(srv.Thaw) // first: Close revokes the lease, and the calls cut short end
	locks := NewEtcdLocks(c)

	unlock, unlocked := make(chan struct{}), make(chan error, 1)
	held := make(chan struct{})
	go func() { // the holder: the goroutine that locks unlocks
		l := locks.EtcdLock("u1")
		if !assert.NoError(t, l.Lock(ctx)) {
			close(held)
			unlocked <- nil
			return
		}
		close(held)
		<-unlock
		unlocked <- l.Unlock(ctx)
	}()
	<-held
	queued := make(chan error, 1)
	go func() { queued <- locks.EtcdLock("u1").Lock(ctx) }()
	<-watching // the waiter is queued behind the holder

	srv.Freeze()
	frozen := time.Now()
	late := make(chan error, 1)
	go func() { late <- locks.EtcdLock("u1").Lock(ctx) }() // its put waits for etcd
	close(unlock)                                          // so does the delete

	// Each within the lease of the freeze (2/3 of it), the failed grant of the next lease
	// (etcdCleanupTimeout) and a margin for a loaded machine.
	bound := time.After(ttl + 2*etcdCleanupTimeout)
	for _, w := range []struct {
		what string
		ch   <-chan error
		want error
	}{{"the waiter queued before the freeze", queued, errEtcdNoLease},
		{"the waiter that queued during it", late, errEtcdNoLease},
		{"the holder's Unlock", unlocked, nil}} {
		select {
		case err := <-w.ch:
			if w.want != nil {
				assert.ErrorIs(t, err, w.want, w.what)
			} else {
				assert.Error(t, err, w.what)
			}
			t.Logf("%s: after %s: %v", w.what, time.Since(frozen).Round(time.Millisecond), err)
		case <-bound:
			t.Fatalf("%s still waits for the frozen etcd %s after the freeze", w.what, time.Since(frozen).Round(time.Millisecond))
		}
	}
}

// TestEtcdWaitBoundedWhenEtcdFreezes: an etcd of the test's own stops answering (SIGSTOP)
// while a caller waits a second (TryLockWait, its ctx without a deadline) for a lock. Every
// call of the wait must end with the wait and WaitOverrun, as the Redis and MySQL locks'
// do, and TryLockWait return an error then. Its calls were bounded only by the caller's ctx
// and the lease's loss, so the wait lasted until the client declared its lease lost (2/3
// of the TTL, 6.7 s with the default 10 s).
func TestEtcdWaitBoundedWhenEtcdFreezes(t *testing.T) {
	srv, c := ownEtcdClient(t, DefaultEtcdLeaseTTL)
	l := NewEtcdLocks(c).EtcdLock("u1")

	srv.Freeze()
	const wait = time.Second
	start := time.Now()
	ok, err := l.TryLockWait(context.Background(), wait, 0)
	took := time.Since(start)
	assert.False(t, ok)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "an attempt the frozen etcd did not answer")
	assert.LessOrEqual(t, took, wait+waitOverrun+time.Second, "TryLockWait(%s) returned after %s (%v)", wait, took, err)
	t.Logf("returned %v, %v after %s", ok, err, took.Round(time.Millisecond))
}
