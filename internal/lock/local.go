package lock

import (
	"context"
	"sync"
	"time"
)

// LocalLocks is an in-process mutex per name: the Go analogue of Java's synchronized on an
// interned user id, hmdp's guard before its Redis lock. It excludes goroutines of one process only; two service
// instances each have their own, so the same user can order on both at once. It exists to
// show that failure and is never the right guard for a multi-instance deployment.
type LocalLocks struct {
	mu   sync.Mutex
	held map[string]bool // names currently held; an entry goes when released
}

// NewLocalLocks returns an empty set of in-process locks.
func NewLocalLocks() *LocalLocks {
	return &LocalLocks{held: make(map[string]bool)}
}

// New returns the in-process lock named name.
func (s *LocalLocks) New(name string) Lock {
	return &localLock{set: s, name: name}
}

type localLock struct {
	set  *LocalLocks
	name string
	mine bool
}

// TryLock ignores lease: an in-process lock dies with its process.
func (l *localLock) TryLock(context.Context, time.Duration) (bool, error) {
	l.set.mu.Lock()
	defer l.set.mu.Unlock()
	if l.set.held[l.name] {
		return false, nil
	}
	l.set.held[l.name], l.mine = true, true
	return true, nil
}

func (l *localLock) Unlock(context.Context) error {
	l.set.mu.Lock()
	defer l.set.mu.Unlock()
	if !l.mine {
		return ErrNotHeld
	}
	l.mine = false
	delete(l.set.held, l.name)
	return nil
}

// NoLocks hands out locks that never exclude anything: the service with no guard at all.
type NoLocks struct{}

// NewNoLocks returns the locks that exclude nothing.
func NewNoLocks() *NoLocks { return &NoLocks{} }

// New returns a lock whose TryLock always succeeds.
func (*NoLocks) New(string) Lock { return noLock{} }

type noLock struct{}

func (noLock) TryLock(context.Context, time.Duration) (bool, error) { return true, nil }
func (noLock) Unlock(context.Context) error                         { return nil }
