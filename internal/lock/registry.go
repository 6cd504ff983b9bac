package lock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLockLost is returned by LocalRemoteLock.Unlock when the remote lock had expired while
// held (RedisLockRegistry's IllegalStateException). It wraps ErrNotHeld.
var ErrLockLost = fmt.Errorf("lock: released in the store due to expiration, the integrity of data protected by this lock may have been compromised: %w", ErrNotHeld)

// Registry hands out LocalRemoteLocks, after Spring Integration's RedisLockRegistry. Each name has a local lock in front of a remote Redis lock whose value
// is the process id. The goroutines of one process queue on the local lock, without a word
// to Redis; only the one at the front competes for the remote lock with other processes.
//
// One step beyond RedisLockRegistry: when a holder unlocks while other local goroutines wait, it
// checks the remote lock is still the process's and extends its lease (one round trip, the
// same that a release costs) and hands it, with the local lock, to the next local goroutine,
// which starts work at once and holds what is left of that extension's lease, counted from
// when the extension was sent (its watchdog, if any, renews it from there). An extension or
// renewal lengthens the key's lease and never shortens it: a holder that waited with a
// shorter lease than its predecessor's leaves the key the longer one (should its process
// die, other processes wait that much longer). After
// LocalHandoffs such handoffs in a row the remote lock is released, so other processes get
// their turn; Options.LocalHandoffs < 0 disables handoffs.
//
// Entries live while a goroutine holds or waits for them, so the registry does not grow
// with the number of names ever used.
type Registry struct {
	c       *Client
	mu      sync.Mutex
	entries map[string]*entry
}

// NewRegistry returns a Registry whose remote locks use c (its process id, subscription and
// watchdogs).
func NewRegistry(c *Client) *Registry {
	return &Registry{c: c, entries: make(map[string]*entry)}
}

// Obtain returns the lock named name (remote key "lock:{name}:registry").
func (r *Registry) Obtain(name string) *LocalRemoteLock {
	key := hashTag(name, "registry")
	channel := key + ":released"
	return &LocalRemoteLock{r: r, name: name, remote: &remote{key: key, channel: channel,
		obtainKeys: []string{key, fenceKey(key)}, releaseKeys: []string{key, channel}}}
}

// LocalRemoteLock is a Registry's lock for one name; it is reentrant for the goroutine that
// holds it (re-entry counts locally and does not touch Redis), and safe for concurrent use.
type LocalRemoteLock struct {
	r    *Registry
	name string
	*remote
}

// remote names the Redis side of a LocalRemoteLock: its key, its release channel and the keys
// its scripts take, built once by Obtain and shared by the entries of the name.
type remote struct {
	key, channel string
	obtainKeys   []string // key and its grant counter
	releaseKeys  []string // key and channel; extend takes the first
}

// entry is the local state of one name.
type entry struct {
	name string
	*remote
	refs int // holders and waiters using the entry; guarded by Registry.mu

	mu      sync.Mutex
	locked  bool           // the local lock
	waiters []*localWaiter // oldest first

	holder atomic.Uint64 // goroutine id of the holder, 0 when none

	// Owned by whichever goroutine holds the local lock.
	count      int
	remoteHeld bool  // the process holds the remote lock
	handoffs   int   // local handoffs since the remote lock was obtained
	hold       *hold // the remote lock's watchdog or lease timer
	token      int64 // the remote lock's fencing token, kept across local handoffs

	// The remote lease as the process last set it: when the request that set it was sent,
	// and how long. The holder's goroutine (obtaining, extending at a handoff) and its
	// watchdog (renewing) both set it, each request under leaseMu, so the last recorded is
	// the last to take effect; a request whose reply was lost may still land later, but the
	// extension script only lengthens the lease. So a holder's deadline, leaseSet+extended,
	// is never later than the key's expiry in Redis.
	leaseMu  sync.Mutex
	leaseSet time.Time
	extended time.Duration
}

type localWaiter struct {
	terms holdTerms     // how the waiting caller will hold the lock
	ch    chan struct{} // capacity 1: the local lock was handed to this waiter
}

// Key returns the remote lock's Redis key.
func (l *LocalRemoteLock) Key() string { return l.key }

// TryLock tries once, never waiting, and holds the lock with the watchdog renewing lease
// (see ReentrantLock.TryLock). It fails at once, without asking Redis, when another
// goroutine of this process holds the name. Re-entry by the holder succeeds at once.
func (l *LocalRemoteLock) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	return tryWatched(ctx, lease, l.tryLock)
}

// TryLockWait takes the local lock, then (unless a local predecessor handed it over) the
// remote lock, with the wait and lease semantics of ReentrantLock.TryLockWait: wait == 0
// tries once, wait > 0 waits up to wait in all, wait < 0 until ctx ends; lease > 0 is fixed,
// lease < 0 the watchdog with Options.WatchdogLease. A remote lock handed over keeps being
// renewed by the new holder's lease. TryLockWait reports false, nil when wait ran out; it
// returns ctx's error when ctx ended first.
func (l *LocalRemoteLock) TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error) {
	return l.r.c.tryWait(ctx, wait, lease, l.tryLock)
}

func (l *LocalRemoteLock) tryLock(ctx context.Context, wait time.Duration, t holdTerms) (bool, error) {
	c := l.r.c
	gid := goroutineID()
	e := l.r.ref(l.name, l.remote)
	if e.holder.Load() == gid {
		e.count++
		l.r.unref(e)
		return true, nil
	}
	start := time.Now()
	ok, err := e.lockLocal(ctx, c, wait, t)
	if err != nil || !ok {
		l.r.unref(e)
		return false, err
	}
	// What follows asks Redis: bounded by the wait too, even when the local wait used it up.
	rctx, cancel := waitBound(ctx, start, wait)
	defer cancel()
	if _, lease := e.lease(); e.remoteHeld && lease != t.lease {
		// Handed over with another waiter's lease (that one gave up): set ours.
		if kept, err := e.extend(rctx, c, t.lease, nil); err != nil || !kept {
			e.dropRemote()
		}
	}
	if !e.remoteHeld {
		left := wait
		if wait > 0 {
			left = max(wait-time.Since(start), 0)
		}
		n, err := c.acquire(rctx, left, contender{channel: e.channel, try: e.obtain(c, t.lease),
			// The remote key was not the process's (remoteHeld was false) and only this
			// goroutine, holding the local lock, asks for it: after a failed attempt, a key
			// of the process's is that attempt's.
			lost: func(ctx context.Context) { _ = e.releaseRemote(ctx, c) }})
		if err != nil || n == 0 {
			e.passOn(context.WithoutCancel(ctx), c)
			l.r.unref(e)
			return false, err
		}
		e.remoteHeld, e.handoffs = true, 0
	}
	e.startHold(c, t)
	e.count = 1
	e.holder.Store(gid)
	return true, nil
}

// Lock waits until the calling goroutine holds the lock, with the watchdog and
// Options.WatchdogLease, or until ctx ends (then it returns ctx's error).
func (l *LocalRemoteLock) Lock(ctx context.Context) error {
	_, err := l.TryLockWait(ctx, -1, -1)
	return err
}

// Unlock releases one hold of the calling goroutine. At the last one it hands the lock to
// the next local waiter or releases the remote lock, and in both cases checks that the remote
// lock was still the process's: if it had expired, Unlock still releases the local lock and
// returns ErrLockLost. It returns an error wrapping ErrNotHeld when the calling goroutine does
// not hold the lock.
func (l *LocalRemoteLock) Unlock(ctx context.Context) error {
	c := l.r.c
	gid := goroutineID()
	e := l.r.lookup(l.name)
	if e == nil || e.holder.Load() != gid {
		return fmt.Errorf("unlock %s: you do not own this lock: %w", l.key, ErrNotHeld)
	}
	if e.count > 1 {
		e.count--
		return nil
	}
	e.count = 0
	e.holder.Store(0)
	var err error
	if next, ok := e.nextTerms(); ok && e.handoffs < c.opts.LocalHandoffs {
		// The hold ends before the extension: no renewal of ours may follow the extension
		// whose lease the next holder counts on.
		e.endHold()
		kept, rerr := e.extend(ctx, c, next.lease, nil)
		switch {
		case rerr != nil:
			err = rerr
			e.dropRemote() // unknown: the next holder obtains again (its own value is accepted)
		case !kept:
			err = fmt.Errorf("unlock %s: %w", l.key, ErrLockLost)
			e.dropRemote()
		default:
			e.handoffs++
		}
	} else {
		err = e.releaseRemote(ctx, c)
	}
	e.passOn(context.WithoutCancel(ctx), c)
	l.r.unref(e)
	return err
}

// Token returns the calling goroutine's fencing token: the remote lock's, from the grant
// counter its obtaining incremented (see ReentrantLock.Token). A local handoff passes the
// remote lock on, and its token with it: the next local holder continues the same grant. It
// is 0 when the goroutine holds nothing.
func (l *LocalRemoteLock) Token() int64 {
	e := l.r.lookup(l.name)
	if e == nil || e.holder.Load() != goroutineID() {
		return 0
	}
	return e.token
}

// Lost returns a channel closed when the calling goroutine's hold of the remote lock is lost
// (see ReentrantLock.Lost); it is already closed when the goroutine holds nothing.
func (l *LocalRemoteLock) Lost() <-chan struct{} {
	e := l.r.lookup(l.name)
	if e == nil || e.holder.Load() != goroutineID() || e.hold == nil {
		return closedChan
	}
	return e.hold.lost
}

func (r *Registry) ref(name string, rk *remote) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[name]
	if e == nil {
		e = &entry{name: name, remote: rk}
		r.entries[name] = e
	}
	e.refs++
	return e
}

func (r *Registry) unref(e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.refs--
	if e.refs == 0 {
		delete(r.entries, e.name)
	}
}

func (r *Registry) lookup(name string) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entries[name]
}

// lockLocal takes the local lock, queueing up to wait (see TryLockWait) for it to be handed
// over.
func (e *entry) lockLocal(ctx context.Context, c *Client, wait time.Duration, t holdTerms) (bool, error) {
	e.mu.Lock()
	if !e.locked {
		e.locked = true
		e.mu.Unlock()
		return true, nil
	}
	if wait == 0 {
		e.mu.Unlock()
		return false, nil
	}
	w := &localWaiter{terms: t, ch: make(chan struct{}, 1)}
	e.waiters = append(e.waiters, w)
	e.mu.Unlock()

	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	var cause error
	select {
	case <-w.ch:
		return true, nil
	case <-timeout:
	case <-ctx.Done():
		cause = ctx.Err()
	}
	e.mu.Lock()
	for i, x := range e.waiters {
		if x == w {
			e.waiters = append(e.waiters[:i], e.waiters[i+1:]...)
			e.mu.Unlock()
			return false, cause
		}
	}
	e.mu.Unlock()
	// The lock was handed to us just as we gave up: it is ours, so pass it on.
	<-w.ch
	e.passOn(context.WithoutCancel(ctx), c)
	return false, cause
}

// nextTerms reports the terms of the oldest local waiter, if any.
func (e *entry) nextTerms() (holdTerms, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.waiters) == 0 {
		return holdTerms{}, false
	}
	return e.waiters[0].terms, true
}

// passOn gives the local lock (and the remote one, if held) to the oldest local waiter; with
// none, it releases the remote lock and then the local one.
func (e *entry) passOn(ctx context.Context, c *Client) {
	for {
		e.mu.Lock()
		if len(e.waiters) > 0 {
			w := e.waiters[0]
			e.waiters = e.waiters[1:]
			w.ch <- struct{}{}
			e.mu.Unlock()
			return
		}
		if !e.remoteHeld {
			e.locked = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		_ = e.releaseRemote(ctx, c) // nobody holds it: a loss here harms no one
	}
}

// releaseRemote deletes the remote lock if it is still the process's and publishes the
// release. It returns an error wrapping ErrLockLost when it was not.
func (e *entry) releaseRemote(ctx context.Context, c *Client) error {
	e.dropRemote()
	v, err := registryReleaseScript.Run(ctx, c.rdb, e.releaseKeys, c.processArg).Int64()
	if err != nil {
		return fmt.Errorf("unlock %s: %w", e.key, err)
	}
	if v == 0 {
		return fmt.Errorf("unlock %s: %w", e.key, ErrLockLost)
	}
	return nil
}

// dropRemote forgets the remote lock and stops its watchdog or timer.
func (e *entry) dropRemote() {
	e.remoteHeld, e.handoffs = false, 0
	e.endHold()
}

// endHold stops the remote lock's watchdog or lease timer, if any.
func (e *entry) endHold() {
	if e.hold != nil {
		e.hold.end()
		e.hold = nil
	}
}

// startHold replaces the remote lock's watchdog or lease timer with one for the new holder,
// timed from the request that last set the remote lease: a holder handed the lock locally has
// what is left of the lease its predecessor's extension set, not a whole new one.
func (e *entry) startHold(c *Client, t holdTerms) {
	e.endHold()
	set, lease := e.lease() // after any renewal of the ended hold still on its way
	expires := set.Add(lease)
	h := newHold()
	e.hold = h
	if !t.watchdog {
		h.leaseTimer(time.Until(expires))
		return
	}
	first := max(time.Until(set.Add(t.lease/3)), 0)
	c.watch(h, e.key, t.lease, first, expires, func(ctx context.Context, lease time.Duration) (bool, error) {
		return e.extend(ctx, c, lease, h)
	})
}

// lease returns when the process last set the remote lease (when that request was sent) and
// how long a lease it set.
func (e *entry) lease() (time.Time, time.Duration) {
	e.leaseMu.Lock()
	defer e.leaseMu.Unlock()
	return e.leaseSet, e.extended
}

// obtain returns the attempt that runs registry_obtain.lua for e; an attempt that takes the
// lock stores its fencing token and records the lease it set.
func (e *entry) obtain(c *Client, lease time.Duration) func(context.Context, tryMode) (int64, time.Duration, error) {
	ms := lease.Milliseconds()
	return func(ctx context.Context, _ tryMode) (int64, time.Duration, error) {
		e.leaseMu.Lock()
		defer e.leaseMu.Unlock()
		sent := time.Now()
		v, err := registryObtainScript.Run(ctx, c.rdb, e.obtainKeys, c.processArg, ms, fenceTTLArg).Int64Slice()
		if err != nil {
			return 0, 0, fmt.Errorf("lock %s: %w", e.key, err)
		}
		n, ttl, tok, err := grantReply(v)
		if n > 0 {
			e.token = tok
			e.leaseSet, e.extended = sent, lease
		}
		return n, ttl, err
	}
}

// extend resets the remote lease to lease if the process still holds the key, and records
// when the request was sent. A watchdog passes its hold h, and once h has ended (the lock was
// handed on or released) extend sets nothing: no renewal of an earlier holder follows the
// extension a handoff made for the next.
func (e *entry) extend(ctx context.Context, c *Client, lease time.Duration, h *hold) (bool, error) {
	e.leaseMu.Lock()
	defer e.leaseMu.Unlock()
	if h != nil && h.ended() {
		return false, nil
	}
	sent := time.Now()
	kept, err := c.extendRemote(ctx, e.remote, lease)
	if err == nil && kept {
		e.leaseSet, e.extended = sent, lease
	}
	return kept, err
}

// extendRemote makes the lease of rk's key run at least lease from now if the process still
// holds it (registry_extend.lua never shortens it).
func (c *Client) extendRemote(ctx context.Context, rk *remote, lease time.Duration) (bool, error) {
	v, err := registryExtendScript.Run(ctx, c.rdb, rk.releaseKeys[:1], c.processArg, lease.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("extend %s: %w", rk.key, err)
	}
	return v == 1, nil
}
