package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReentrantLock is Redisson's RLock: one Redis hash per lock whose single field is the owner
// (process id and goroutine id) and whose value is the owner's hold count. The goroutine
// that holds it may take it again; each TryLock needs its Unlock, and the last Unlock deletes
// the hash and publishes on the lock's channel, waking a waiter in every process that waits.
//
// Like every lock keyed by goroutine id, it is held by the goroutine that took it: Unlock
// from another goroutine returns ErrNotHeld. The value is safe for concurrent use; many
// goroutines may share one ReentrantLock or make their own for the same name.
type ReentrantLock struct {
	hashLock
}

// ReentrantLock returns the reentrant lock named name (hash "lock:{name}:reentrant").
func (c *Client) ReentrantLock(name string) *ReentrantLock {
	key := hashTag(name, "reentrant")
	return &ReentrantLock{hashLock{c: c, key: key, channel: key + ":released", keys: []string{key, key + ":released"},
		lockKeys: []string{key, fenceKey(key)}, unlockScript: reentrantUnlockScript}}
}

// TryLock tries once to take the lock for the calling goroutine, never waiting, and holds it
// with the watchdog: lease is the lease it sets and renews every lease/3 until the last
// Unlock (see Lost). Re-entry by the holder succeeds at once. TryLock reports false, nil when
// another owner holds the lock; it returns ErrInvalidTTL for a lease under a millisecond,
// and an error when Redis could not be asked.
func (l *ReentrantLock) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	return tryWatched(ctx, lease, l.tryLock)
}

// TryLockWait takes the lock for the calling goroutine, with Redisson's tryLock(waitTime,
// leaseTime) semantics. wait == 0 tries once; wait > 0 waits up to wait; wait < 0 waits
// until ctx ends. Waiting sleeps on the shared subscription until the holder's release
// message, bounded by the lease the holder has left, and never polls at a fixed interval.
// lease > 0 is a fixed lease; lease < 0 asks for the watchdog with Options.WatchdogLease.
// Re-entry by the holder succeeds at once and may lengthen the lease, never shorten it.
//
// A wait > 0 bounds the call even when ctx has no deadline: every attempt runs on a context
// that ends half a second after the wait, so TryLockWait returns within about a second of
// wait when Redis hangs (for a go-redis client with ContextTimeoutEnabled; without it, its
// ReadTimeout ends a call that was sent).
//
// TryLockWait reports false, nil when wait ran out with another owner holding the lock; it
// returns ctx's error when ctx ended first, ErrInvalidTTL for a lease of zero or under a
// millisecond, and an error when Redis could not be asked or did not answer in that bound.
func (l *ReentrantLock) TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error) {
	return l.c.tryWait(ctx, wait, lease, l.tryLock)
}

// Lock waits until the calling goroutine holds the lock, with the watchdog and
// Options.WatchdogLease, or until ctx ends (then it returns ctx's error).
func (l *ReentrantLock) Lock(ctx context.Context) error {
	_, err := l.TryLockWait(ctx, -1, -1)
	return err
}

func (l *ReentrantLock) tryLock(ctx context.Context, wait time.Duration, t holdTerms) (bool, error) {
	me := owner(l.c.opts.Process)
	ms := t.lease.Milliseconds()
	made := l.holdCount(me) + 1 // the hold count a successful attempt makes
	fresh := freshArg(made)
	var token int64
	var sent time.Time // of the last attempt: the lease it set runs from no earlier
	k := contender{
		channel: l.channel,
		try: func(ctx context.Context, _ tryMode) (int64, time.Duration, error) {
			sent = time.Now()
			v, err := reentrantLockScript.Run(ctx, l.c.rdb, l.lockKeys, me, ms, fenceTTLArg, fresh).Int64Slice()
			if err != nil {
				return 0, 0, fmt.Errorf("lock %s: %w", l.key, err)
			}
			n, ttl, tok, err := grantReply(v)
			token = tok
			return n, ttl, err
		},
	}
	k.lost = func(ctx context.Context) { l.releaseLost(ctx, me, made) }
	n, err := l.c.acquire(ctx, wait, k)
	if err != nil || n == 0 {
		return false, err
	}
	l.held(me, n, token, t, t.lease/3, sent.Add(t.lease))
	return true, nil
}

// hashLock is what ReentrantLock and FairLock share: a hash keyed by owner with hold counts,
// released by a script that returns -1 (not held), the remaining count, or 0 (released).
type hashLock struct {
	c            *Client
	key          string   // the lock hash
	channel      string   // where releases and handovers are published
	keys         []string // the keys its unlock script takes; keys[0] is key
	lockKeys     []string // the keys its lock script takes
	unlockScript *redis.Script
}

// Key returns the lock's Redis hash key.
func (l *hashLock) Key() string { return l.key }

// Token returns the calling goroutine's fencing token: the value of the name's grant counter
// (a key beside the hash, kept a day after each grant) that its grant incremented, larger
// than that of every earlier grant, a takeover after an expiry and a FairLock handover
// included. A
// re-entry keeps it. Token returns 0 when the goroutine holds nothing (its hold was lost too).
func (l *hashLock) Token() int64 {
	if h := l.c.holds.get(l.key, owner(l.c.opts.Process)); h != nil {
		return h.token
	}
	return 0
}

// grantReply reads a lock script's reply: {hold count, token} when the caller holds the
// lock (a re-entry's token is 0: held keeps the grant's), {minus the lock's remaining time to
// live in ms, 0} when it does not.
func grantReply(v []int64) (n int64, ttl time.Duration, token int64, err error) {
	if len(v) != 2 {
		return 0, 0, 0, fmt.Errorf("lock: unexpected script reply %v", v)
	}
	n, ttl = countOrTTL(v[0])
	return n, ttl, v[1], nil
}

// Unlock releases one hold of the calling goroutine; the last one deletes the lock and wakes
// a waiter. It returns an error wrapping ErrNotHeld when the goroutine does not hold the lock:
// it never took it, or the lease ran out (the work it protected may have overlapped another
// holder's). It stops the watchdog at the last hold, also when Redis could not be asked (the
// lock then expires within one lease, unless an Unlock tried again releases it first).
//
// A release that frees the lock, or hands it to a waiter of this process, wakes that waiter
// directly instead of leaving it to the message, which other processes still get.
func (l *hashLock) Unlock(ctx context.Context) error {
	me := owner(l.c.opts.Process)
	channel := l.channel
	sent := time.Now() // a handover's lease runs from no earlier
	v, err := l.unlockScript.Run(ctx, l.c.rdb, l.keys, me, l.c.processArg, fenceTTLArg).Result()
	if err != nil {
		// It may have been released: let local waiters look rather than sleep through a
		// message this process ignores as its own.
		l.c.sub.wakeLocal(channel, "", sent)
		if l.holdCount(me) <= 1 {
			// The caller is done with the lock whatever Redis did, so its watchdog stops
			// (as Redisson's unlock cancels the renewal on failure too): a hold left
			// renewed would stay held for a goroutine that has moved on, until the
			// Client closes, where now it expires within one lease. An Unlock tried again
			// still releases it.
			l.c.holds.finish(l.key, me, false)
		}
		return fmt.Errorf("unlock %s: %w", l.key, err)
	}
	switch v := v.(type) {
	case string: // released and handed to the owner v
		l.c.holds.finish(l.key, me, false)
		l.c.sub.wakeLocal(channel, v, sent)
	case int64:
		switch {
		case v < 0:
			l.c.holds.finish(l.key, me, true)
			return fmt.Errorf("unlock %s: %w", l.key, ErrNotHeld)
		case v == 0:
			l.c.holds.finish(l.key, me, false)
			l.c.sub.wakeLocal(channel, "", sent)
		default:
			if h := l.c.holds.get(l.key, me); h != nil {
				h.count = v
			}
		}
	default:
		return fmt.Errorf("unlock %s: unexpected reply %v", l.key, v)
	}
	return nil
}

// freshArg is the lock scripts' argument that tells a first hold by the caller's record
// (made, the hold count a successful attempt makes, is 1) from a re-entry: an owner's field
// the script finds for a first hold is a leftover of a hold that is over for the caller (its
// last Unlock never reached Redis, or it was reported lost while its lease ran on), which the
// script grants afresh with one hold. Taken as a re-entry, it would leave the caller a hold
// without watchdog, timer or token, and its Unlock a hold behind.
func freshArg(made int64) string {
	if made == 1 {
		return "1"
	}
	return "0"
}

// holdCount returns owner me's hold count as this Client recorded it: 0 when it holds nothing.
func (l *hashLock) holdCount(me string) int64 {
	if h := l.c.holds.get(l.key, me); h != nil {
		return h.count
	}
	return 0
}

// releaseLost gives back the hold that an attempt of owner me may have made although its
// answer was lost (or never came): made is the hold count that attempt made, and the unlock
// script gives back one hold only when me's count is exactly made. A first grant is deleted
// (a FairLock's is handed to the next waiter) and waiters of this process are woken as by
// Unlock; a re-entry's extra hold is taken off, so the holder's last Unlock still frees the
// lock. A hold from before the attempt is never touched: an attempt that did not run left
// the count below made. Errors are dropped: the lease ends such a hold anyway.
//
// Redis cannot tell which attempt made a hold (the hash counts holds, it does not name
// them), but the count tells it: only me's goroutine changes me's count, and it is here,
// waiting for this attempt.
func (l *hashLock) releaseLost(ctx context.Context, me string, made int64) {
	sent := time.Now()
	v, err := l.unlockScript.Run(ctx, l.c.rdb, l.keys, me, l.c.processArg, fenceTTLArg, made).Result()
	if err != nil {
		return
	}
	switch v := v.(type) {
	case string:
		l.c.sub.wakeLocal(l.channel, v, sent)
	case int64:
		if v == 0 {
			l.c.sub.wakeLocal(l.channel, "", sent)
		}
	}
}

// Lost returns a channel that is closed when the calling goroutine's hold is lost: its
// watchdog found the lock gone or could not renew it for a whole lease, MaxHold passed, the
// Client closed, or (fixed lease) the lease ran out. A holder doing long work should select
// on it and stop. The channel is already closed when the goroutine holds nothing.
func (l *hashLock) Lost() <-chan struct{} {
	return l.c.holds.lost(l.key, owner(l.c.opts.Process))
}

// held records an acquisition by holder with hold count n and fencing token: a first hold
// (n == 1) starts the watchdog (first renewal after first) or the fixed lease's timer; a
// re-entry resets the timer. expires is when the lease the acquisition set runs out, counted
// from when the attempt that set it was sent: Redis started it then or later, before its
// answer came back.
func (l *hashLock) held(holder string, n, token int64, t holdTerms, first time.Duration, expires time.Time) {
	if n > 1 {
		// A re-entry lengthens the lease in Redis, never shortens it (see the lock scripts):
		// a fixed lease's timer moves only later.
		h := l.c.holds.get(l.key, holder)
		if h == nil {
			return
		}
		h.count = n
		if h.timer != nil && !t.watchdog && expires.After(h.expires) {
			h.leaseTimer(time.Until(expires))
		}
		return
	}
	h := l.c.holds.begin(l.key, holder, token)
	h.count = 1
	if !t.watchdog {
		h.leaseTimer(time.Until(expires))
		return
	}
	l.c.watch(h, l.key, t.lease, first, expires, func(ctx context.Context, lease time.Duration) (bool, error) {
		v, err := renewScript.Run(ctx, l.c.rdb, l.keys[:1], holder, lease.Milliseconds()).Int64()
		return v == 1, err
	})
}
