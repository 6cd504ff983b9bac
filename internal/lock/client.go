package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults for Options fields left zero.
const (
	// DefaultWatchdogLease is Options.WatchdogLease when left zero (Redisson's 30 s).
	DefaultWatchdogLease = 30 * time.Second
	// DefaultWaiterTimeout is how long a FairLock waiter keeps its place without refreshing it.
	DefaultWaiterTimeout = 5 * time.Second
	// DefaultLocalHandoffs bounds how many times in a row a LocalRemoteLock passes the remote
	// lock from one local goroutine to the next before releasing it to other processes.
	DefaultLocalHandoffs = 16
)

// ErrClosed is returned by the locks of a Client after Close.
var ErrClosed = errors.New("lock: client closed")

// Options configures a Client. The zero value is usable.
type Options struct {
	// Process identifies this process in lock values; NewProcessID() when empty. Two
	// processes must never share one.
	Process string
	// WatchdogLease is the library's default lease, for the calls that name none: Lock, and
	// TryLockWait with a negative lease (Redisson's lockWatchdogTimeout). The watchdog resets
	// it every WatchdogLease/3 while the lock is held. TryLock never uses it: its lease
	// argument is the watchdog's lease. DefaultWatchdogLease when zero.
	WatchdogLease time.Duration
	// MaxHold, when positive, bounds how long a watchdog keeps renewing one hold: after it
	// the renewals stop, the hold is reported lost, and the lock expires within one lease.
	MaxHold time.Duration
	// WaiterTimeout is how long a FairLock waiter keeps its place in the queue without
	// refreshing it; a waiter refreshes every WaiterTimeout/3, so one that died is dropped
	// after at most WaiterTimeout. DefaultWaiterTimeout when zero.
	WaiterTimeout time.Duration
	// LocalHandoffs bounds the consecutive local handoffs of a LocalRemoteLock's remote
	// lock (see Registry). DefaultLocalHandoffs when zero; negative disables them, so every
	// final unlock releases the remote lock as Spring's RedisLockRegistry does.
	LocalHandoffs int
	// Renewed, when set, is called after each renewal a watchdog sent, on the watchdog's
	// goroutine, with the lock's key: ok reports that the lease was reset, err that Redis
	// could not be asked. For metrics and logs (a failed renewal is a hold about to be
	// lost), and for a test that steps the watchdog: the next renewal is timed from its
	// return, so a Renewed that blocks delays it. It is not called for a renewal that was on
	// its way when the lock was released.
	Renewed func(key string, ok bool, err error)
}

// Client is one process's access to the Redis locks that wait by subscription: ReentrantLock,
// FairLock and, through a Registry, LocalRemoteLock. It owns the process's single pub/sub
// connection, shared by every waiter of every lock it made, and the watchdogs of the locks
// held. Make one per process (or per service instance) and Close it at shutdown.
//
// Close stops the watchdogs without releasing anything, as a crash would: locks still held
// expire within one lease.
type Client struct {
	rdb   redis.UniversalClient
	opts  Options
	sub   *subscriber
	holds holds
	stats stats

	ctx    context.Context // cancelled by Close; parents the watchdogs
	cancel context.CancelFunc
	wg     sync.WaitGroup // watchdog goroutines
	// watchMu orders a watchdog's wg.Add with Close: a lock granted while the Client closes
	// must not Add after Close began to Wait (a WaitGroup misuse).
	watchMu sync.Mutex
	closed  atomic.Bool
	waits   atomic.Uint64 // FairLock waits so far: each wait's ticket

	hooks hooks

	// processArg is opts.Process as a script argument, boxed once rather than at every call.
	processArg any
}

// hooks lets the package's tests observe internal events. All nil outside tests.
type hooks struct {
	renewed func(key string, ok bool) // after each watchdog renewal attempt
	waiting func(channel string)      // a waiter is about to sleep, its subscription confirmed
}

// NewClient returns a Client using rdb, which may be a single node, Sentinel or Cluster
// client: every lock keeps its keys in one hash slot by a {name} hash tag.
func NewClient(rdb redis.UniversalClient, opts Options) *Client {
	if opts.Process == "" {
		opts.Process = NewProcessID()
	}
	if opts.WatchdogLease <= 0 {
		opts.WatchdogLease = DefaultWatchdogLease
	}
	if opts.WaiterTimeout <= 0 {
		opts.WaiterTimeout = DefaultWaiterTimeout
	}
	if opts.LocalHandoffs == 0 {
		opts.LocalHandoffs = DefaultLocalHandoffs
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{rdb: rdb, opts: opts, processArg: opts.Process, ctx: ctx, cancel: cancel}
	c.holds.m = make(map[holdID]*hold)
	c.sub = newSubscriber(rdb, &c.stats, opts.Process)
	return c
}

// Process returns the process id the Client writes into lock values.
func (c *Client) Process() string { return c.opts.Process }

// Close stops every watchdog and closes the subscription connection. Waiters return
// ErrClosed; locks still held are not released and expire within their lease.
func (c *Client) Close() error {
	c.watchMu.Lock()
	first := c.closed.CompareAndSwap(false, true)
	c.watchMu.Unlock()
	if !first {
		return nil
	}
	c.cancel()
	err := c.sub.close()
	c.wg.Wait()
	return err
}

// Stats counts what a Client's locks did, for tests and benchmarks.
type Stats struct {
	// WakesByPublish counts waiters woken by a release (or handover) message published by
	// another process and received on the subscription.
	WakesByPublish uint64
	// WakesByLocal counts waiters woken directly by a release in this process (its message,
	// when it comes back on the subscription, is ignored).
	WakesByLocal uint64
	// WakesByReconnect counts waiters woken because the subscription connection failed and
	// a message may have been lost.
	WakesByReconnect uint64
	// WakesByTimer counts waiters woken because the wait bounded by the lock's remaining
	// lease (or the fair queue's refresh interval) ran out without a message.
	WakesByTimer uint64
	// Renewals counts successful watchdog renewals.
	Renewals uint64
	// Subscribes and Unsubscribes count the commands sent on the shared connection.
	Subscribes, Unsubscribes uint64
}

type stats struct {
	wakesByPublish, wakesByLocal, wakesByReconnect, wakesByTimer, renewals, subscribes, unsubscribes atomic.Uint64
}

func (s *stats) count(src wakeSource) {
	switch src {
	case byMessage:
		s.wakesByPublish.Add(1)
	case byLocal:
		s.wakesByLocal.Add(1)
	default:
		s.wakesByReconnect.Add(1)
	}
}

// Stats returns the counters so far.
func (c *Client) Stats() Stats {
	return Stats{
		WakesByPublish:   c.stats.wakesByPublish.Load(),
		WakesByLocal:     c.stats.wakesByLocal.Load(),
		WakesByReconnect: c.stats.wakesByReconnect.Load(),
		WakesByTimer:     c.stats.wakesByTimer.Load(),
		Renewals:         c.stats.renewals.Load(),
		Subscribes:       c.stats.subscribes.Load(),
		Unsubscribes:     c.stats.unsubscribes.Load(),
	}
}

// hashTag returns "lock:{name}:kind", the key of a lock of the given kind. The braces make
// Redis Cluster hash only the name, so every key of one lock lands in one slot (whatever
// braces the name holds, all its keys share the prefix up to the tag's end). The name must
// not be empty: Cluster hashes the whole key when the tag is empty.
func hashTag(name, kind string) string {
	return keyPrefix + "{" + name + "}:" + kind
}

// holdTerms is how a lock is held once taken: the lease its scripts set, and whether a
// watchdog renews that lease every lease/3 (else it is fixed and runs out).
type holdTerms struct {
	lease    time.Duration
	watchdog bool
}

// watchdogTerms are TryLock's terms: the watchdog renews lease. A lease under a millisecond
// is ErrInvalidTTL.
func watchdogTerms(lease time.Duration) (holdTerms, error) {
	if lease < time.Millisecond {
		return holdTerms{}, ErrInvalidTTL
	}
	return holdTerms{lease: lease, watchdog: true}, nil
}

// waitTerms are TryLockWait's terms: a positive lease is fixed, a negative one asks for the
// watchdog with Options.WatchdogLease. Zero and leases under a millisecond are ErrInvalidTTL.
func (c *Client) waitTerms(lease time.Duration) (holdTerms, error) {
	if lease < 0 {
		return holdTerms{lease: c.opts.WatchdogLease, watchdog: true}, nil
	}
	if lease < time.Millisecond {
		return holdTerms{}, ErrInvalidTTL
	}
	return holdTerms{lease: lease}, nil
}

// tryFunc is a lock's attempt under given terms: wait as in TryLockWait.
type tryFunc func(ctx context.Context, wait time.Duration, t holdTerms) (bool, error)

// tryWatched is TryLock of every Client lock: one attempt, held with the watchdog renewing lease.
func tryWatched(ctx context.Context, lease time.Duration, try tryFunc) (bool, error) {
	t, err := watchdogTerms(lease)
	if err != nil {
		return false, err
	}
	return try(ctx, 0, t)
}

// tryWait is TryLockWait of every Client lock.
func (c *Client) tryWait(ctx context.Context, wait, lease time.Duration, try tryFunc) (bool, error) {
	t, err := c.waitTerms(lease)
	if err != nil {
		return false, err
	}
	return try(ctx, wait, t)
}
