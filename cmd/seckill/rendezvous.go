package main

import (
	"context"
	"sync"
	"time"
)

// rendezvous is the demo's business step inside the critical section. A request of a user
// waits there until a second request of the same user is inside too, or until bound has
// passed, whichever comes first. Behind a broken guard two requests of a user are let in
// together, so the first one holds the window open until the second has also begun its
// transaction (or its existing-order read, on SQLite), and both go on to write: the
// duplicate reaches the unique key every time instead of when the scheduler happens to allow
// it. Behind a working guard no second request ever gets in, and the wait is simply bound,
// like the delay it stands for. bound is shorter than the lock's lease, so no lock expires
// while its holder waits.
//
// One rendezvous serves every instance of the demo: they run in one process.
type rendezvous struct {
	bound  time.Duration
	mu     sync.Mutex
	inside map[int64]*meeting
}

// meeting is the requests of one user inside the critical section.
type meeting struct {
	n    int           // requests inside
	met  chan struct{} // closed when a second one came in
	done bool          // met is closed
}

func newRendezvous(bound time.Duration) *rendezvous {
	return &rendezvous{bound: bound, inside: map[int64]*meeting{}}
}

// wait is an order.Config.Process.
func (r *rendezvous) wait(ctx context.Context, userID int64) error {
	r.mu.Lock()
	m := r.inside[userID]
	if m == nil {
		m = &meeting{met: make(chan struct{})}
		r.inside[userID] = m
	}
	m.n++
	if m.n == 2 && !m.done {
		m.done = true
		close(m.met)
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if m.n--; m.n == 0 {
			delete(r.inside, userID)
		}
	}()

	t := time.NewTimer(r.bound)
	defer t.Stop()
	select {
	case <-m.met:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// count reports how many requests of userID are inside the critical section.
func (r *rendezvous) count(userID int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.inside[userID]; m != nil {
		return m.n
	}
	return 0
}
