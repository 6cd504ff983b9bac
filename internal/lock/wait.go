package lock

import (
	"context"
	"errors"
	"time"
)

// tryMode tells an attempt whether it may queue and whether the caller already has.
type tryMode int

const (
	tryOnce     tryMode = iota // first attempt, and the caller will not wait
	tryAndQueue                // first attempt of a caller that will wait
	retryQueued                // a later attempt of a waiting caller
)

// contender describes how one caller competes for one lock: how to try, where releases are
// announced, and how to leave.
type contender struct {
	channel string
	// owner is the payload of a message that hands the lock straight to this caller (a
	// FairLock handover): it names this one wait, so that a handover to an earlier wait of
	// the same goroutine cannot be taken for it. Empty for locks whose messages only say
	// "released".
	owner string
	// try attempts to take the lock. It returns the hold count (>= 1) on success, else how
	// long the lock has left to live.
	try func(ctx context.Context, mode tryMode) (int64, time.Duration, error)
	// leave, when set, withdraws a caller that stops waiting. It returns a hold count >= 1
	// when the lock had been handed to the caller meanwhile and the caller keeps it.
	leave func(ctx context.Context, cause error) (int64, error)
	// handed, when set, takes the fencing token of a handover to this caller (owner set),
	// which acquire reports as a hold without asking Redis again; released is when a
	// releaser of this process sent the release (zero for a message). handed reports false
	// when the caller cannot count on the handover's lease without asking Redis: the retry
	// that follows finds the lock its own and sets the lease again.
	handed func(token int64, released time.Time) bool
	// refresh, when positive, caps each sleep: the caller must try again that often to keep
	// its place (FairLock's heartbeat).
	refresh time.Duration
	// lost, when set, gives up what an attempt that failed may have taken all the same: its
	// script reached Redis, the answer did not come back (a timeout), and the caller, who
	// held nothing before, may now hold the lock or a place in its queue with nobody to
	// release it before its lease ends. Best effort, on a context of its own bounded by
	// cleanupTimeout.
	lost func(ctx context.Context)
}

// attempt runs try, and lost after an attempt that failed.
func (k *contender) attempt(ctx context.Context, mode tryMode) (int64, time.Duration, error) {
	n, ttl, err := k.try(ctx, mode)
	if err != nil && k.lost != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		k.lost(cctx)
	}
	return n, ttl, err
}

// waitOverrun is how long past the end of a wait (TryLockWait with wait > 0) its attempts may
// run: the last one starts as the wait runs out (the lock may be free by then) and needs a
// round trip. Every attempt of the wait runs on a context that ends then, so a Redis that
// hangs holds the caller for wait, waitOverrun and a cleanup (cleanupTimeout) at most, not
// until the client's read timeout or for ever.
const waitOverrun = 500 * time.Millisecond

// waitBound returns ctx bounded, when wait > 0, by the end of a wait that began at start and
// waitOverrun more (see waitOverrun), and its cancel.
func waitBound(ctx context.Context, start time.Time, wait time.Duration) (context.Context, context.CancelFunc) {
	if wait <= 0 {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, start.Add(wait+waitOverrun))
}

// acquire runs Redisson's tryLock(waitTime) loop: try; if that fails and wait allows, join
// the lock's channel on the shared subscription and sleep until a release message, the
// lock's remaining lease, the end of wait or the end of ctx, whichever comes first; try
// again. wait == 0 tries once, wait < 0 waits as long as ctx allows; wait > 0 bounds every
// attempt too (waitOverrun), and an attempt cut short by it is an error, as one Redis did
// not answer. It returns the hold count, or 0 when the lock was not taken; a wait running
// out is not an error.
func (c *Client) acquire(ctx context.Context, wait time.Duration, k contender) (int64, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	start := time.Now()
	actx, cancel := waitBound(ctx, start, wait) // the attempts'
	defer cancel()
	mode := tryOnce
	var w *waiter
	if wait != 0 {
		mode = tryAndQueue
		w = c.sub.registerHot(k.channel, k.owner)
	}
	n, ttl, err := k.attempt(actx, mode)
	if err != nil || n > 0 || wait == 0 {
		if w != nil {
			c.sub.unregister(w)
		}
		return n, err
	}
	var deadline time.Time
	if wait > 0 {
		deadline = start.Add(wait)
	}
	stop := func(cause error) (int64, error) {
		if k.leave == nil {
			return 0, cause
		}
		// Bounded as a cleanup: the wait is over, and Redis may be what made it run out.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		n, err := k.leave(lctx, cause)
		if err != nil {
			return 0, errors.Join(cause, err)
		}
		if n > 0 {
			return n, nil
		}
		return 0, cause
	}

	// Registered before the first attempt, the caller has missed nothing; registered
	// after it, it must try again, as a release may have come in between, and once more
	// when the subscription is confirmed (ready): a release of another process published
	// before that is not delivered.
	retry := w == nil
	var ready <-chan struct{}
	if w == nil {
		rctx := ctx
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			rctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		w, ready, err = c.sub.register(rctx, k.channel, k.owner)
		if err != nil {
			if ctx.Err() == nil && rctx.Err() != nil {
				err = nil // the wait ran out while subscribing
			}
			return stop(err)
		}
		select {
		case <-ready:
			ready = nil // confirmed already: the retry below covers it
		default:
		}
	}
	defer c.sub.unregister(w)

	// woken is the wake-up the caller last slept until, not yet answered by an attempt.
	var woken *wakeup
	for {
		if retry {
			u := woken
			woken = nil
			n, ttl, err = k.attempt(actx, retryQueued)
			if err != nil && u != nil {
				// A release woke this caller alone of its process, and its attempt did
				// not tell whether the lock is free: hand the wake-up back, so that
				// unregister passes it to the next waiter, which would otherwise sleep
				// through the release until the lease it last saw runs out.
				w.requeue(*u)
			}
			if err != nil || n > 0 {
				return n, err
			}
		}
		retry = true
		sleep := ttl
		if k.refresh > 0 && k.refresh < sleep {
			sleep = k.refresh
		}
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return stop(nil)
			}
			sleep = min(sleep, left)
		}
		timer := time.NewTimer(sleep)
		if c.hooks.waiting != nil && ready == nil {
			c.hooks.waiting(k.channel) // asleep where every release reaches it
		}
		select {
		case u := <-w.wake:
			timer.Stop()
			c.stats.count(u.source)
			woken = &u
			if k.owner != "" {
				if wait, token := splitHandover(u.payload); wait == k.owner {
					if k.handed != nil && token > 0 && k.handed(token, u.released) {
						return 1, nil // handed over: the release made us the holder
					}
					// Handed over, but the message does not say with which token, or the
					// lease the handover set may be mostly gone: the retry below finds
					// the lock ours, reads the token and sets the lease again.
				}
			}
		case <-ready:
			timer.Stop()
			ready = nil // confirmed: try again, a release may have gone unheard before
		case <-timer.C:
			c.stats.wakesByTimer.Add(1)
		case <-ctx.Done():
			timer.Stop()
			return stop(ctx.Err())
		case <-c.sub.done:
			timer.Stop()
			return stop(ErrClosed)
		}
	}
}

// countOrTTL decodes a lock script's answer: a hold count (>= 1) when the lock is taken, else
// minus the lock's remaining time to live in milliseconds.
func countOrTTL(v int64) (int64, time.Duration) {
	if v > 0 {
		return v, 0
	}
	return 0, time.Duration(-v) * time.Millisecond
}
