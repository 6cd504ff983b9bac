package lock

import (
	"context"
	"fmt"
	"time"
)

// queueClient is the client of a queueLock: ZooKeeperClient (nodes under a parent node) or
// EtcdClient (keys under a prefix).
type queueClient interface {
	// acquire takes the lock whose contenders queue under at, for owner me, waiting as
	// TryLockWait says; ctx bounds every call it makes.
	acquire(ctx context.Context, at, me string, wait time.Duration) (bool, error)
	// drop deletes the node or key of a hold just released. gone reports that it had gone
	// with its session or lease; when the service does not answer, the delete goes on in
	// the background and drop returns the error.
	drop(ctx context.Context, h *sessionHold) (gone bool, err error)
}

// queueLock is what ZooKeeperLock and EtcdLock share: a lock whose contenders queue in a
// coordination service, each as a node or key of its own, held by the client's session or
// lease rather than a lease of the lock's, its holds kept by the client's sessionHolds.
type queueLock struct {
	c       queueClient
	holds   *sessionHolds
	process string
	at      string // the parent node, or the key prefix, the contenders queue under
	entry   string // what a contender is: "node", "key"
	heldBy  string // what holds it: "session", "lease"
}

// TryLock tries once, never waiting: it queues the calling goroutine (its node or key) and,
// when it is not first, withdraws it again and reports false, nil. lease is ignored: the
// lock is held by the client's session or lease. Re-entry by the holder succeeds at once.
// TryLock returns an error when the service could not be asked, ErrClosed after the
// client's Close.
func (l *queueLock) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	return l.TryLockWait(ctx, 0, lease)
}

// TryLockWait takes the lock for the calling goroutine, waiting in the queue: wait == 0
// tries once, wait > 0 waits up to wait, wait < 0 until ctx ends. lease is ignored (see
// TryLock). A waiter whose session or lease is lost queues again (etcd: under the client's
// next lease if its first grant since the loss brings one; if not, it fails). Every call to
// the service is bounded by ctx, by the session (ZooKeeper: its timeout) or lease (etcd: until
// the client declares it lost), and with wait > 0 by the wait and half a second, as the Redis
// and MySQL locks' calls are: a service that does not answer holds the caller that long (an
// attempt cut short so is an error), not a session timeout or 2/3 of a lease TTL per call. A
// node or key left by an attempt that failed or gave up is deleted, in the background when
// ctx has ended.
//
// TryLockWait reports false, nil when wait ran out with another owner holding the lock; it
// returns ctx's error when ctx ended first, and an error when the service could not be asked.
func (l *queueLock) TryLockWait(ctx context.Context, wait, _ time.Duration) (bool, error) {
	bctx, cancel := waitBound(ctx, time.Now(), wait)
	defer cancel()
	ok, err := l.c.acquire(bctx, l.at, owner(l.process), wait)
	if err != nil {
		if ctx.Err() == nil && bctx.Err() != nil {
			err = fmt.Errorf("%w (no answer within the wait and %s)", err, waitOverrun)
		}
		return false, fmt.Errorf("lock %s: %w", l.at, err)
	}
	return ok, nil
}

// Lock waits until the calling goroutine holds the lock, or until ctx ends (then it returns
// ctx's error).
func (l *queueLock) Lock(ctx context.Context) error {
	_, err := l.TryLockWait(ctx, -1, 0)
	return err
}

// Unlock releases one hold of the calling goroutine; the last one deletes its node or key,
// which wakes the next waiter. It returns an error wrapping ErrNotHeld when the goroutine
// does not hold the lock: it never took it, or its session or lease was lost (its node or key
// was gone, and another owner may have held the lock since), or the client was closed (then
// the error wraps ErrClosed too). When the service does not
// answer, the node or key is deleted in the background and Unlock returns the error.
func (l *queueLock) Unlock(ctx context.Context) error {
	h, held := l.holds.release(holdKey(l.at, owner(l.process)))
	if !held {
		if _, _, open := l.holds.current(); !open {
			// Close ended the hold: not held, as for a lost session, and the caller may
			// want to know that it was its own Close.
			return fmt.Errorf("unlock %s: %w (%w)", l.at, ErrNotHeld, ErrClosed)
		}
		return fmt.Errorf("unlock %s: %w", l.at, ErrNotHeld)
	}
	if h == nil {
		return nil // an outer hold remains
	}
	gone, err := l.c.drop(ctx, h)
	switch {
	case err != nil:
		return fmt.Errorf("unlock %s: %w", l.at, err)
	case gone:
		return fmt.Errorf("unlock %s: %s %s was gone with its %s: %w", l.at, l.entry, h.at, l.heldBy, ErrNotHeld)
	}
	return nil
}

// Lost returns a channel that is closed when the calling goroutine's hold is lost: the
// client's session or lease ended, went too long without word from the service to be sure
// of it, or the client closed. A holder doing long work should select on it and stop. The
// channel is already closed when the goroutine holds nothing.
func (l *queueLock) Lost() <-chan struct{} {
	lost, _ := l.holds.hold(holdKey(l.at, owner(l.process)))
	return lost
}

// Token returns the calling goroutine's fencing token (the lock's type says what it is), or
// 0 when the goroutine does not hold the lock.
func (l *queueLock) Token() int64 {
	_, token := l.holds.hold(holdKey(l.at, owner(l.process)))
	return token
}
