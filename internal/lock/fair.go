package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// FairLock is a ReentrantLock that serves waiters first come, first served across processes
// (Redisson's getFairLock). A caller that fails and will wait joins a queue in Redis; the
// final Unlock hands the lock straight to the first waiter, so the new holder starts work
// without asking Redis again: woken by the releaser when it is in the same process, else by
// the message naming it. The handover names the waiter's owner and the ticket of its current
// wait, so that a late handover to an earlier wait of the same goroutine is never taken for
// one to this wait. (Should the releaser lose the reply, a waiter of its process learns of
// the handover at its next refresh, within WaiterTimeout/3.)
//
// A waiter keeps its place by trying again at least every WaiterTimeout/3; one that stops
// (its process died) is dropped from the queue after WaiterTimeout, so it cannot block the
// others. A caller that only tries (TryLock, or TryLockWait with wait == 0) never queues,
// and gets the lock only when it is free and nobody is queued.
//
// When the lock is handed over, the new holder's lease is its own (fixed) lease, or for a
// watchdog waiter the shorter of the watchdog lease and WaiterTimeout, renewed at once (and
// the watchdog's first deadline is that shorter lease's end): a waiter that died just before
// its turn blocks the lock for at most that long. The new holder counts that lease from a
// moment it knows came before the release, never from when it heard of the handover, and
// asks Redis once (which sets the lease again) when that may leave it less than two thirds
// of the lease.
type FairLock struct {
	hashLock
}

// FairLock returns the fair lock named name (hash "lock:{name}:fair" with its queue keys).
func (c *Client) FairLock(name string) *FairLock {
	key := hashTag(name, "fair")
	keys := []string{key, key + ":queue", key + ":deadlines", key + ":leases", key + ":released", fenceKey(key)}
	return &FairLock{hashLock{c: c, key: key, channel: key + ":released", keys: keys, lockKeys: keys, unlockScript: fairUnlockScript}}
}

// TryLock tries once, without queueing, and holds the lock with the watchdog renewing
// lease, as ReentrantLock.TryLock. It reports false, nil when another owner holds the lock
// or anyone is queued for it.
func (l *FairLock) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	return tryWatched(ctx, lease, l.tryLock)
}

// TryLockWait is ReentrantLock.TryLockWait in queue order: wait == 0 tries once without
// queueing, wait > 0 queues for up to wait, wait < 0 until ctx ends; lease > 0 is fixed,
// lease < 0 the watchdog with Options.WatchdogLease. It reports false, nil when wait ran
// out; it returns ctx's error when ctx ended first.
func (l *FairLock) TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error) {
	return l.c.tryWait(ctx, wait, lease, l.tryLock)
}

func (l *FairLock) tryLock(ctx context.Context, wait time.Duration, t holdTerms) (bool, error) {
	me := owner(l.c.opts.Process)
	grantLease := t.lease
	if t.watchdog {
		grantLease = min(t.lease, l.c.opts.WaiterTimeout)
	}
	timeout := l.c.opts.WaiterTimeout.Milliseconds()
	// A handover names the wait it serves, not only the owner: the same goroutine waits for
	// the lock again and again, and a handover to one of its earlier waits (its message or
	// local wake-up late, the lock long taken, used and released) would else pass for one
	// to this wait, and make it a holder of a lock held by another.
	ticket := strconv.FormatUint(l.c.waits.Add(1), 10)
	made := l.holdCount(me) + 1 // the hold count a successful attempt makes
	fresh := freshArg(made)
	direct := false // taken by an attempt that set our own lease, not handed over
	var token int64
	// sent is when the lease we hold was set, at the earliest: the send of the attempt that
	// set it, or for a handover the later of our last attempt's send (that attempt ran in
	// Redis before the handover, or it would have found the lock ours) and the release's
	// send, when a releaser of this process woke us, or the send of the withdrawal that found
	// the lock ours and set its lease again.
	var sent time.Time
	k := contender{
		channel: l.channel,
		owner:   me + "/" + ticket,
		refresh: l.c.opts.WaiterTimeout / 3,
		try: func(ctx context.Context, mode tryMode) (int64, time.Duration, error) {
			queue, retry := int64(0), "0"
			if mode != tryOnce {
				queue = timeout
			}
			if mode == retryQueued {
				retry = "1"
			}
			sent = time.Now()
			v, err := fairLockScript.Run(ctx, l.c.rdb, l.lockKeys, me, t.lease.Milliseconds(),
				grantLease.Milliseconds(), queue, retry, ticket, fenceTTLArg, fresh).Int64Slice()
			if err != nil {
				return 0, 0, fmt.Errorf("lock %s: %w", l.key, err)
			}
			n, ttl, tok, err := grantReply(v)
			token = tok
			direct = n > 0 && mode != retryQueued
			return n, ttl, err
		},
		// The handover set the lease in Redis at some moment between our last attempt
		// and its message or wake-up, which may have been on its way for any time: count
		// from the earliest moment it may have been. A message reaching us more than a
		// third of the grant lease after our last attempt (a waiter sleeps up to
		// WaiterTimeout/3, or the holder's lease) may leave too little of the lease to
		// count on, and a lease timer or watchdog started on a lease that may have run out
		// would report the hold lost at once: ask Redis (the retry), which confirms the
		// lock is ours and sets the grant lease again, one round trip.
		handed: func(tok int64, released time.Time) bool {
			from := sent
			if released.After(from) {
				from = released
			}
			if time.Since(from) > grantLease/3 {
				return false
			}
			token, direct, sent = tok, false, from
			return true
		},
		leave: func(ctx context.Context, cause error) (int64, error) {
			// Handed over just as the wait ran out, we keep the lock; the handover came at
			// some moment after our last attempt, which may be a wait ago (the wait ran
			// out while we subscribed), too long to count its lease from. The withdrawal
			// sets the grant lease again, so it counts from this send.
			keep := int64(0)
			if cause == nil {
				keep = grantLease.Milliseconds()
			}
			at := time.Now()
			v, err := fairWithdrawScript.Run(ctx, l.c.rdb, l.keys, me, keep).Int64()
			if err != nil {
				return 0, fmt.Errorf("withdraw from %s: %w", l.key, err)
			}
			if v == 0 {
				return 0, nil
			}
			token = v
			if cause == nil {
				direct, sent = false, at
				return 1, nil
			}
			// Handed over, but the caller is gone: pass the lock on to the next waiter.
			if err := l.Unlock(ctx); err != nil {
				return 0, err
			}
			return 0, nil
		},
	}
	// After a failed attempt leave the queue it may have joined, and give back the hold it may
	// have made (a grant, a handover to its place, or a re-entry): see releaseLost.
	k.lost = func(ctx context.Context) {
		if v, err := fairWithdrawScript.Run(ctx, l.c.rdb, l.keys, me, 0).Int64(); err == nil && v != 0 {
			l.releaseLost(ctx, me, made)
		}
	}
	n, err := l.c.acquire(ctx, wait, k)
	if err != nil || n == 0 {
		return false, err
	}
	// The first renewal comes a third of a lease after the lease was set, not after now.
	first, expires := max(time.Until(sent.Add(t.lease/3)), 0), sent.Add(t.lease)
	if !direct && grantLease < t.lease {
		// A handover may have set the shorter grant lease: renew at once, and count that
		// lease, not the watchdog's, as the first deadline.
		first, expires = 0, sent.Add(grantLease)
	}
	l.held(me, n, token, t, first, expires)
	return true, nil
}

// Lock waits in the queue until the calling goroutine holds the lock, with the watchdog and
// Options.WatchdogLease, or until ctx ends (then it returns ctx's error).
func (l *FairLock) Lock(ctx context.Context) error {
	_, err := l.TryLockWait(ctx, -1, -1)
	return err
}
