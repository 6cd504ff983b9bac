package lock

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errEtcdRequeue tells an acquisition that its key went with its lease while it waited: it
// starts again with a new key.
var errEtcdRequeue = errors.New("lock: etcd lease lost during the attempt")

// EtcdLocks makes the locks of one EtcdClient.
type EtcdLocks struct{ c *EtcdClient }

// NewEtcdLocks returns the EtcdLocks of c.
func NewEtcdLocks(c *EtcdClient) *EtcdLocks { return &EtcdLocks{c: c} }

// New returns the EtcdLock named name as a Lock.
func (f *EtcdLocks) New(name string) Lock { return f.EtcdLock(name) }

// EtcdLock returns the lock named name, whose keys live under Prefix/name/ (name
// path-escaped).
func (f *EtcdLocks) EtcdLock(name string) *EtcdLock {
	return &EtcdLock{queueLock{c: f.c, holds: f.c.holds, process: f.c.process,
		at: f.c.prefix + "/" + url.PathEscape(name) + "/", entry: "key", heldBy: "lease"}}
}

// EtcdLock is the etcd recipe of etcd's concurrency.Mutex. To take it, a client puts its key
// under the lock's prefix, attached to its lease, if the key is not there yet; the key with
// the lowest create revision holds the lock, and every other waiter watches only the key
// created just before its own, so a release wakes one waiter, not the herd. The key's name is
// the lease and the owner, so an acquisition whose reply was lost finds its key again by
// asking for it instead of orphaning it.
//
// The lock is held by the client's lease: the key lives until it is deleted or the lease
// ends, which etcd decides when the client stops renewing it for its TTL. So TryLock and
// TryLockWait ignore their lease argument. When the lease is lost (see EtcdClient), every hold
// is reported on Lost, and Unlock returns ErrNotHeld.
//
// The holder of an EtcdLock is the goroutine that took it (process id and goroutine id, as
// for the package's other locks); it may take it again, and each TryLock needs its Unlock.
// Token returns a fencing token: the create revision of the holder's key. Revisions grow with
// every change to the store, and the lock goes to its keys in the order they were created,
// so every grant of the name gets a larger token than the one before. An EtcdLock is safe for
// concurrent use.
type EtcdLock struct{ queueLock }

// Prefix returns the lock's key prefix, ending in "/".
func (l *EtcdLock) Prefix() string { return l.at }

// errEtcdLeaseLost is Unlock's report that the lease was lost before etcd answered the
// delete: the key goes with the lease.
var errEtcdLeaseLost = errors.New("lock: etcd lease lost before the key was deleted; it goes with the lease")

// drop deletes the key of a hold just released (queueClient), no longer than the lease lives.
func (c *EtcdClient) drop(ctx context.Context, h *sessionHold) (bool, error) {
	_, lost, _ := c.holds.current()
	rctx, stop := untilLost(ctx, lost)
	defer stop()
	gone, err := c.remove(rctx, h.at, h.token)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(rctx), errEtcdRequeue) {
		err = errEtcdLeaseLost
	}
	return gone, err
}

// untilLost returns a context that ends with ctx, or with cause errEtcdRequeue when lost
// closes, and the function that releases it. The calls of an acquisition or a release go
// through it, so none outlasts the lease it is made under: a client whose renewals go
// unanswered declares the lease lost within 2/3 of its TTL, and a call to an etcd that does
// not answer would otherwise wait as long as ctx, for ever with a context without deadline.
func untilLost(ctx context.Context, lost <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-lost:
			cancel(errEtcdRequeue)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// acquire takes the lock whose keys live under queue for owner me (see TryLockWait).
func (c *EtcdClient) acquire(ctx context.Context, queue, me string, wait time.Duration) (bool, error) {
	hk := holdKey(queue, me)
	if c.holds.reenter(hk) {
		return true, nil
	}
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for requeued := false; ; requeued = true {
		lease, epoch, lost, err := c.current()
		if errors.Is(err, errEtcdNoLease) && requeued {
			// A waiter whose lease was lost queues again under the client's next lease if
			// the client's first grant since the loss brings one, and fails closed if etcd
			// does not grant it: not at the whim of how long the grant takes.
			if c.hooks.awaitingLease != nil {
				c.hooks.awaitingLease()
			}
			select {
			case <-c.nextLease():
			case <-ctx.Done():
				return false, ctx.Err()
			case <-c.done:
				return false, ErrClosed
			}
			lease, epoch, lost, err = c.current()
		}
		if err != nil {
			return false, err
		}
		key := queue + strconv.FormatInt(int64(lease), 16) + "-" + url.PathEscape(me)
		if err := c.awaitCleanup(ctx, key); err != nil {
			return false, err
		}
		actx, stop := untilLost(ctx, lost)
		rev, first, err := c.enqueue(actx, queue, key, me, lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// No key was made: etcd puts none with a lease it does not have.
			c.leaseGone(lease)
			err = errEtcdRequeue
		}
		if err == nil {
			got := first
			if !got && wait != 0 {
				got, err = c.wait(actx, queue, key, rev, deadline, lost)
			}
			if got {
				if c.holds.register(hk, key, rev, epoch) {
					stop()
					return true, nil
				}
				err = errEtcdRequeue
			}
		}
		switch {
		case rev != 0:
			// Once the lease is lost actx has ended: the delete goes on in the background.
			_, _ = c.remove(actx, key, rev) // failing, it goes on in the background
		case err != nil && !errors.Is(err, errEtcdRequeue):
			// The put may have been done all the same, its reply lost, or may reach etcd yet:
			// a key this owner does not know it has would head the queue for as long as the
			// lease lives.
			c.cleanupLater(key, 0, lease)
		}
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errEtcdRequeue) {
			err = errEtcdRequeue // the lease was lost: its calls were cut short
		}
		stop()
		if !errors.Is(err, errEtcdRequeue) || wait == 0 || (!deadline.IsZero() && time.Now().After(deadline)) {
			return false, err
		}
		select {
		case <-time.After(etcdLeasePause / 10):
		case <-ctx.Done():
			return false, ctx.Err()
		case <-c.done:
			return false, ErrClosed
		}
	}
}

// enqueue puts key (value me, attached to lease) under queue unless it is there already — a
// put whose reply was lost — and reports its create revision and whether it is the first
// key of the queue, in one transaction. The put is done only while lease's void mark is the
// one last seen (see voidKey); a mark moved since by another acquisition's cleanup is read
// and the transaction tried again.
func (c *EtcdClient) enqueue(ctx context.Context, queue, key, me string, lease clientv3.LeaseID) (rev int64, first bool, err error) {
	firstKey := clientv3.OpGet(queue, clientv3.WithFirstCreate()...)
	mark := c.voidKey(lease)
	seen := c.voidSeen(lease)
	var resp *clientv3.TxnResponse
	for {
		resp, err = c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
				clientv3.Compare(clientv3.ModRevision(mark), "=", seen)).
			Then(clientv3.OpPut(key, me, clientv3.WithLease(lease)), firstKey).
			Else(clientv3.OpGet(key), firstKey, clientv3.OpGet(mark)).
			Commit()
		if c.hooks.enqueued != nil {
			err = c.hooks.enqueued(err)
		}
		if err != nil {
			return 0, false, err
		}
		if resp.Succeeded {
			break
		}
		now := int64(0)
		if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
			now = kvs[0].ModRevision
		}
		if now == seen {
			break
		}
		seen = now
		c.sawVoid(lease, now)
	}
	if resp.Succeeded {
		rev = resp.Header.Revision
	} else {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return 0, false, errEtcdRequeue
		}
		rev = kvs[0].CreateRevision
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return rev, false, errEtcdRequeue // ours went already: its lease ended
	}
	return rev, kvs[0].CreateRevision == rev, nil
}

// wait waits until key, created at rev, is the first under queue, watching only the key
// created just before it. It reports false, nil at deadline (when not zero), ctx's error
// when ctx ends, and errEtcdRequeue when the lease is lost (lost closes) or key is found gone.
func (c *EtcdClient) wait(ctx context.Context, queue, key string, rev int64, deadline time.Time, lost <-chan struct{}) (bool, error) {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	for {
		// Our key and its predecessor, read at one revision.
		resp, err := c.cli.Txn(ctx).Then(
			clientv3.OpGet(key),
			clientv3.OpGet(queue, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...),
		).Commit()
		if err != nil {
			return false, err
		}
		if mine := resp.Responses[0].GetResponseRange().Kvs; len(mine) == 0 || mine[0].CreateRevision != rev {
			return false, errEtcdRequeue
		}
		preds := resp.Responses[1].GetResponseRange().Kvs
		if len(preds) == 0 {
			return true, nil
		}
		pred := string(preds[0].Key)
		if c.hooks.watching != nil {
			c.hooks.watching(key, pred)
		}
		wctx, cancel := context.WithCancel(ctx)
		events := c.cli.Watch(wctx, pred, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut())
		err = c.waitDelete(ctx, events, timeout, lost)
		cancel()
		if err != nil || ctx.Err() != nil {
			if err == nil {
				err = ctx.Err()
			}
			if errors.Is(err, errEtcdTimeout) {
				return false, nil
			}
			return false, err
		}
	}
}

// errEtcdTimeout is waitDelete's report that the acquisition's wait ran out.
var errEtcdTimeout = errors.New("lock: etcd wait ran out")

// waitDelete returns nil once events report a delete (or end, to look again), errEtcdTimeout
// at timeout, errEtcdRequeue when lost closes, ctx's error or ErrClosed.
func (c *EtcdClient) waitDelete(ctx context.Context, events clientv3.WatchChan, timeout <-chan time.Time, lost <-chan struct{}) error {
	for {
		select {
		case wr, ok := <-events:
			if !ok {
				return nil
			}
			if err := wr.Err(); err != nil {
				return nil // compacted or cancelled: look again
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return nil
				}
			}
		case <-lost:
			return errEtcdRequeue
		case <-timeout:
			return errEtcdTimeout
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrClosed
		}
	}
}

// remove deletes key, made at revision rev by the calling goroutine, and reports gone when it
// was not there. When etcd does not answer within ctx, or ctx has ended, the delete goes on in
// the background (cleanupLater), bounded by etcdCleanupTimeout, and only while the key is
// still the one made at rev; the goroutine's next acquisition, whose key has the same name
// (same owner, same lease), waits for that delete before it puts or adopts a key.
func (c *EtcdClient) remove(ctx context.Context, key string, rev int64) (gone bool, err error) {
	if ctx.Err() == nil {
		// In the foreground a plain delete will do: the owner is this goroutine, which makes
		// no new key of the name before remove returns.
		var resp *clientv3.DeleteResponse
		if resp, err = c.cli.Delete(ctx, key); err == nil {
			return resp.Deleted == 0, nil
		}
	}
	c.cleanupLater(key, rev, 0)
	if err == nil {
		err = ctx.Err()
	}
	return false, err
}

// cleanupLater deletes key in the background, bounded by etcdCleanupTimeout: only while it is
// the key made at rev, or whatever its revision when rev is 0 (a put, attached to lease, whose
// reply was lost or that may still be on its way). In that case the same transaction moves
// lease's void mark, so that the put, should it reach etcd only now, fails its compare
// instead of making a key no one will delete (see voidKey). Until that delete is over, the
// owner's next acquisition, whose key has the same name, waits for it (awaitCleanup) instead
// of adopting the key the delete is about to remove.
func (c *EtcdClient) cleanupLater(key string, rev int64, lease clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed { // after Close the revoked lease took the key
		return
	}
	prev := c.cleaning[key]
	done := make(chan struct{})
	c.cleaning[key] = done
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			if c.cleaning[key] == done {
				delete(c.cleaning, key)
			}
			c.mu.Unlock()
			close(done)
		}()
		if prev != nil {
			<-prev // bounded as this one is
		}
		if c.hooks.cleaning != nil {
			c.hooks.cleaning(key)
		}
		bctx, cancel := context.WithTimeout(context.Background(), etcdCleanupTimeout)
		defer cancel()
		if rev != 0 {
			_, _ = c.cli.Txn(bctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
				Then(clientv3.OpDelete(key)).Commit()
		} else if resp, err := c.cli.Txn(bctx).
			Then(clientv3.OpDelete(key), clientv3.OpPut(c.voidKey(lease), "", clientv3.WithLease(lease))).
			Commit(); err == nil {
			c.sawVoid(lease, resp.Header.Revision)
		}
		if c.hooks.cleaned != nil {
			c.hooks.cleaned(key)
		}
	}()
}

// awaitCleanup waits until no background delete of key is on its way, or ctx ends or the
// client closes.
func (c *EtcdClient) awaitCleanup(ctx context.Context, key string) error {
	c.mu.Lock()
	done := c.cleaning[key]
	c.mu.Unlock()
	if done == nil {
		return nil
	}
	if c.hooks.awaiting != nil {
		c.hooks.awaiting(key)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
}

// voidKey is lease's void mark, a key beside the lock queues (it ends without "/", so it is
// under none of them) attached to lease. Every put of an acquisition compares the mark's mod
// revision with the one last seen, and the background delete of a put that may not have
// reached etcd yet moves the mark in the same transaction: the put, arriving after that
// delete, finds the mark moved and makes no key. Without it the put would make a key no one
// deletes, at the head of the queue for as long as the lease lives. (etcd's concurrency.Mutex
// leaves this to its session: a user that gives up closes the session, whose revoked lease
// takes a late key with it; here one lease serves every lock of the process.) The mark goes
// with the lease.
func (c *EtcdClient) voidKey(lease clientv3.LeaseID) string {
	return c.prefix + "/" + strconv.FormatInt(int64(lease), 16) + ".void"
}

// voidSeen returns the mod revision of lease's void mark as last seen.
func (c *EtcdClient) voidSeen(lease clientv3.LeaseID) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease != lease {
		return 0
	}
	return c.void
}

// sawVoid records rev as a mod revision of lease's void mark; the mark only moves forward.
func (c *EtcdClient) sawVoid(lease clientv3.LeaseID, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease == lease && rev > c.void {
		c.void = rev
	}
}
