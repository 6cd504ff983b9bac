package lock

import (
	"context"
	"time"
)

// Guards adapts the waiting locks (ReentrantLock, FairLock, LocalRemoteLock) to Lock, the
// shape the order service guards with. Its TryLock(ctx, ttl) tries once and fails fast (no
// waiting); ttl is a fixed lease, or the watchdog's when ttl is negative or the Guards were
// made with watchdog set. Unlock returns an error wrapping ErrNotHeld when the lock was lost.
// Locks are keyed by goroutine: TryLock and Unlock must run on the same goroutine, as they do
// in an HTTP handler.
type Guards struct {
	newLock  func(name string) waitLock
	watchdog bool
}

// ReentrantLocks returns Guards making c's ReentrantLocks.
func ReentrantLocks(c *Client, watchdog bool) Guards {
	return Guards{func(name string) waitLock { return c.ReentrantLock(name) }, watchdog}
}

// FairLocks returns Guards making c's FairLocks. Trying once never queues, so through Lock a
// FairLock behaves as a ReentrantLock that also respects waiters queued elsewhere by Lock
// or by TryLock with a wait.
func FairLocks(c *Client, watchdog bool) Guards {
	return Guards{func(name string) waitLock { return c.FairLock(name) }, watchdog}
}

// LocalRemoteLocks returns Guards making r's LocalRemoteLocks. Trying once fails at once,
// without asking Redis, when another goroutine of this process holds the name.
func LocalRemoteLocks(r *Registry, watchdog bool) Guards {
	return Guards{func(name string) waitLock { return r.Obtain(name) }, watchdog}
}

// New returns the lock named name as a Lock.
func (g Guards) New(name string) Lock { return tryOnceLock{g.newLock(name), g.watchdog} }

// waitLock is what the waiting locks have in common.
type waitLock interface {
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
}

type tryOnceLock struct {
	l        waitLock
	watchdog bool
}

func (g tryOnceLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	if g.watchdog {
		ttl = -1
	}
	return g.l.TryLock(ctx, 0, ttl)
}

func (g tryOnceLock) Unlock(ctx context.Context) error { return g.l.Unlock(ctx) }
