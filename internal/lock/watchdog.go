package lock

import (
	"context"
	"sync"
	"time"
)

// renewFunc resets a held lock's lease. It reports false when the lock is no longer held.
type renewFunc func(ctx context.Context, lease time.Duration) (bool, error)

// hold is this process's record of one lock it holds (one key and owner): the channel that
// tells the holder the lock is lost, and the watchdog or lease timer behind it.
type hold struct {
	lost     chan struct{}
	lostOnce sync.Once
	table    *holds // the table to leave once lost; nil when not in one
	id       holdID // the hold's entry in table
	stopOnce sync.Once
	stop     chan struct{} // closed at the final unlock: the watchdog exits quietly; nil without one
	timer    *time.Timer   // fixed lease: fires when the lease has run out
	expires  time.Time     // fixed lease: when timer fires; set by the holder's goroutine
	token    int64         // the grant's fencing token
	// count is the owner's hold count in Redis as its last acquisition or release answered
	// (ReentrantLock, FairLock). Only the owner's goroutine reads or writes it: nobody else
	// changes that owner's count.
	count int64
}

func newHold() *hold {
	return &hold{lost: make(chan struct{})}
}

// markLost closes lost. A lost hold is over, so it also leaves its table: a holder that
// never unlocks leaks nothing once its lease has run out.
func (h *hold) markLost() {
	h.lostOnce.Do(func() {
		if h.table != nil {
			h.table.forget(h) // first: whoever sees lost closed finds the hold gone
		}
		close(h.lost)
	})
}

// ended reports whether end was called on a watched hold.
func (h *hold) ended() bool {
	select {
	case <-h.stop:
		return true
	default:
		return false
	}
}

func (h *hold) end() {
	if h.stop != nil {
		h.stopOnce.Do(func() { close(h.stop) })
	}
	if h.timer != nil {
		h.timer.Stop()
	}
}

// holds maps key and owner to the hold of a lock this process holds.
type holds struct {
	mu sync.Mutex
	m  map[holdID]*hold
}

// holdID names a hold in a holds table. A struct rather than key+owner joined into one
// string, so that the lookups at every acquisition and release allocate nothing.
type holdID struct{ key, owner string }

func holdKey(key, owner string) string { return key + "\x00" + owner }

// closedChan is what Lost returns to a goroutine that holds nothing.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// lost returns the lost channel of the hold, or a closed channel when there is none.
func (hs *holds) lost(key, owner string) <-chan struct{} {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if h := hs.m[holdID{key, owner}]; h != nil {
		return h.lost
	}
	return closedChan
}

// begin records a first hold of key by owner (a fresh acquisition) with its fencing token,
// replacing a stale record left by a hold that expired without an unlock. It returns the new
// hold.
func (hs *holds) begin(key, owner string, token int64) *hold {
	h := newHold()
	h.token = token
	h.table, h.id = hs, holdID{key, owner}
	hs.mu.Lock()
	old := hs.m[h.id]
	hs.m[h.id] = h
	hs.mu.Unlock()
	if old != nil {
		old.markLost()
		old.end()
	}
	return h
}

// forget removes h from the table, unless a newer hold of its key and owner replaced it.
func (hs *holds) forget(h *hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.m[h.id] == h {
		delete(hs.m, h.id)
	}
}

// get returns the current hold of key by owner, or nil.
func (hs *holds) get(key, owner string) *hold {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.m[holdID{key, owner}]
}

// finish removes the hold of key by owner and stops its watchdog; lost marks it lost first.
func (hs *holds) finish(key, owner string, lost bool) {
	id := holdID{key, owner}
	hs.mu.Lock()
	h := hs.m[id]
	delete(hs.m, id)
	hs.mu.Unlock()
	if h == nil {
		return
	}
	if lost {
		h.markLost()
	}
	h.end()
}

// leaseTimer reports h lost when a fixed lease runs out, or resets a running timer (a
// re-entry sets the lease again).
func (h *hold) leaseTimer(lease time.Duration) {
	h.expires = time.Now().Add(lease)
	if lease <= 0 {
		h.markLost() // run out already, while its answer was on its way
		return
	}
	if h.timer != nil {
		h.timer.Reset(lease)
		return
	}
	h.timer = time.AfterFunc(lease, h.markLost)
}

// watch starts h's watchdog: every lease/3 it renews the lock with renew until h ends. It
// marks h lost, and stops, when renew finds the lock gone, when renewals have failed for a
// whole lease (the lease has surely run out), when MaxHold has passed since the hold began
// (the lock then expires within one lease), or when the Client closes. first is the delay to
// the first renewal: zero when the lock was handed over with a shorter lease than it needs.
// expires is when the lease the grant set runs out: that lease after the attempt that set
// it was sent (a FairLock handover's is the shorter grant lease, not lease).
func (c *Client) watch(h *hold, key string, lease, first time.Duration, expires time.Time, renew renewFunc) {
	h.stop = make(chan struct{}) // before the goroutine: end, later, sees it
	c.watchMu.Lock()
	if c.closed.Load() {
		// Granted while the Client closed: no watchdog will renew it, so it is lost now.
		c.watchMu.Unlock()
		h.markLost()
		return
	}
	c.wg.Add(1)
	c.watchMu.Unlock()
	go func() {
		defer c.wg.Done()
		interval := lease / 3
		// deadline is when the lease in Redis may run out: a lease after the last renewal
		// known to have worked was sent (at first, the grant's own expiry). Past it another
		// owner may hold the lock, so the hold must be reported lost by then, not when a
		// renewal that is still waiting for its answer gives up.
		deadline := expires
		var maxHold <-chan time.Time
		if c.opts.MaxHold > 0 {
			t := time.NewTimer(c.opts.MaxHold)
			defer t.Stop()
			maxHold = t.C
		}
		tick := time.NewTimer(first)
		defer tick.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-c.ctx.Done():
				h.markLost()
				return
			case <-maxHold:
				h.markLost()
				return
			case <-tick.C:
			}
			sent := time.Now()
			until := sent.Add(interval)
			if deadline.Before(until) {
				until = deadline
			}
			ctx, cancel := context.WithDeadline(c.ctx, until)
			ok, err := renew(ctx, lease)
			cancel()
			if h.ended() {
				return // unlocked while the renewal was on its way: nothing to report
			}
			if c.hooks.renewed != nil {
				c.hooks.renewed(key, ok && err == nil)
			}
			if c.opts.Renewed != nil {
				c.opts.Renewed(key, ok, err)
			}
			switch {
			case err == nil && ok:
				c.stats.renewals.Add(1)
				deadline = sent.Add(lease)
			case err == nil || !time.Now().Before(deadline):
				h.markLost()
				return
			}
			// After a failure, try again by the deadline at the latest: a renewal started
			// then fails at once and reports the hold lost.
			tick.Reset(min(interval, time.Until(deadline)))
		}
	}()
}
