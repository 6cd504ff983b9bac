package lock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults for RedLockOptions fields left zero.
const (
	// DefaultDriftFactor is the clock drift a RedLock allows for, as a fraction of the lease
	// (the Redis documentation's 0.01); 2 ms more are added for the resolution of the nodes'
	// expiry.
	DefaultDriftFactor = 0.01
	// DefaultNodeTimeout bounds how long one attempt waits for one node: the upper end of
	// the "5-50 ms for a 10 s lease" the Redis documentation suggests.
	DefaultNodeTimeout = 50 * time.Millisecond
	// DefaultRetryDelay is the mean pause between two attempts of TryLockWait.
	DefaultRetryDelay = 50 * time.Millisecond
)

// redLockExtraDrift is added to the drift allowance whatever the lease: the nodes' expiry
// has millisecond resolution.
const redLockExtraDrift = 2 * time.Millisecond

// ErrNoQuorum is returned (wrapped, with the nodes' errors) by a RedLock attempt that could
// not reach a quorum of nodes at all: fewer than N/2+1 of them answered in time.
var ErrNoQuorum = errors.New("lock: redlock quorum unreachable")

// RedLockOptions configures RedLocks. The zero value is usable.
type RedLockOptions struct {
	// DriftFactor is the clock drift allowed for, as a fraction of the lease: a lock taken
	// for lease L at time t is valid until t + L - (L*DriftFactor + 2ms). DefaultDriftFactor
	// when zero or negative.
	DriftFactor float64
	// NodeTimeout bounds how long an attempt waits for each node, so that a dead or hung node
	// cannot stall acquisition or release; it is further capped at the lease less the drift.
	// Keep it well below the lease. DefaultNodeTimeout when zero or negative.
	NodeTimeout time.Duration
	// RetryDelay is the mean pause between two attempts of TryLockWait; each pause is drawn
	// uniformly from [RetryDelay/2, RetryDelay*3/2) so that contenders that failed together
	// do not retry together. DefaultRetryDelay when zero or negative.
	RetryDelay time.Duration
}

// RedLocks makes RedLocks over one set of independent Redis nodes for one process: the
// Redlock algorithm of the Redis documentation, as go-redsync/redsync implements it.
//
// The nodes must be independent masters (no replication between them, no Cluster): the
// algorithm's safety rests on a majority of them agreeing, and a replica promoted without
// the key would be a node that forgot. A node that restarts without persistence forgets its
// keys too; the Redis documentation's answer is to keep it down for one lease (delayed
// restart) or to fsync every write.
//
// Give each node's client ContextTimeoutEnabled, or a short ReadTimeout: an attempt stops
// waiting for a node after NodeTimeout whatever the client does, but the abandoned call
// goes on until the client gives it up.
type RedLocks struct {
	nodes   []RedisClient
	process string
	quorum  int
	drift   float64
	timeout time.Duration
	retry   time.Duration
	now     func() time.Time // the clock validity is measured by; tests replace it
}

// NewRedLocks returns the RedLocks over clients, one per independent Redis node, for the
// given process id (NewProcessID() when empty). The quorum is len(clients)/2+1; use an odd
// number of nodes, five by default. It panics when clients is empty.
func NewRedLocks(clients []RedisClient, process string, opts RedLockOptions) *RedLocks {
	if len(clients) == 0 {
		panic("lock: NewRedLocks needs at least one Redis client")
	}
	if process == "" {
		process = NewProcessID()
	}
	if opts.DriftFactor <= 0 {
		opts.DriftFactor = DefaultDriftFactor
	}
	if opts.NodeTimeout <= 0 {
		opts.NodeTimeout = DefaultNodeTimeout
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	return &RedLocks{
		nodes:   append([]RedisClient(nil), clients...),
		process: process,
		quorum:  len(clients)/2 + 1,
		drift:   opts.DriftFactor,
		timeout: opts.NodeTimeout,
		retry:   opts.RetryDelay,
		now:     time.Now,
	}
}

// Quorum returns how many nodes a RedLock must hold: len(clients)/2+1.
func (s *RedLocks) Quorum() int { return s.quorum }

// New returns the RedLock named name as a Lock.
func (s *RedLocks) New(name string) Lock { return s.RedLock(name) }

// RedLock returns the RedLock named name: key "lock:"+name on every node.
func (s *RedLocks) RedLock(name string) *RedLock {
	return &RedLock{s: s, key: keyPrefix + name}
}

// RedLock is one named lock over RedLocks' nodes. It is held when a quorum of nodes hold
// its key with this acquisition's value, and only until its validity ends (Until): the
// lease, less the time the acquisition took, less the drift allowance. After that the
// algorithm promises nothing, whatever the nodes still hold, so Valid reports false and
// Unlock returns ErrNotHeld.
//
// The value is a fresh random token per acquisition (prefixed with the process id, to show
// who holds a key), not a goroutine id: any goroutine may Unlock. A RedLock is not
// reentrant, and its methods may be called concurrently.
//
// RedLock hands its holder no fencing token (Kleppmann's cure for a holder that pauses
// past its lease: a number that grows with every grant and that the storage checks). Such
// a number needs one counter that every grant agrees on, and RedLock's nodes agree on
// nothing. Counters kept per node would not do: two grants are known to share only one
// node, which may have restarted and forgotten, and the numbers one client collects from
// the majority it happened to reach are not comparable with another's. A monotonic token
// is a consensus problem (ZooKeeper's zxid, etcd's revision); RedLock solves none and
// rests its safety on timing instead: bounded network delay, process pauses and clock
// drift (Martin Kleppmann, "How to do distributed locking").
type RedLock struct {
	s   *RedLocks
	key string

	mu    sync.Mutex
	value string    // this acquisition's token; empty when not held
	until time.Time // end of validity
}

// Key returns the lock's key on every node.
func (l *RedLock) Key() string { return l.key }

// TryLock makes one attempt: SET key token NX PX lease on every node in parallel, each
// bounded by the node timeout. The lock is taken when a quorum of nodes set the key and
// validity remains. Otherwise every node is released at once with the compare-and-delete
// script, and TryLock reports false, nil when a quorum of nodes answered (the lock is held
// elsewhere, or the attempt was too slow), or an error wrapping ErrNoQuorum when fewer than
// a quorum answered. A lease below 1 ms, or too short to outlast the drift allowance, is
// ErrInvalidTTL.
//
// Unlike a lock on one server, simultaneous TryLocks may all report false with nobody holding
// the lock: they split the nodes (2, 2 and 1 of 5), none reaches a quorum, and each gives its
// nodes back. TryLockWait's jittered retries are the algorithm's answer to that split vote.
func (l *RedLock) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	if err := l.s.checkLease(lease); err != nil {
		return false, fmt.Errorf("redlock %s: %w", l.key, err)
	}
	return l.attempt(ctx, lease)
}

// TryLockWait tries, and while it fails tries again after a jittered pause (RetryDelay on
// average) until it succeeds, wait runs out or ctx ends. wait == 0 tries once, wait < 0
// waits as long as ctx allows. A wait running out is not an error, but when the last
// attempt could not reach a quorum its error (wrapping ErrNoQuorum) is returned; the end
// of ctx returns ctx's error.
func (l *RedLock) TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if err := l.s.checkLease(lease); err != nil {
		return false, fmt.Errorf("redlock %s: %w", l.key, err)
	}
	return retry(ctx, wait, l.s.retryPause, isNoQuorum, func() (bool, error) {
		return l.attempt(ctx, lease)
	})
}

func isNoQuorum(err error) bool { return errors.Is(err, ErrNoQuorum) }

// Unlock releases the key on every node with the compare-and-delete script, this
// acquisition's token as the value, and forgets the acquisition: nodes it cannot reach keep
// the key until the lease ends. It returns an error wrapping ErrNotHeld when the lock was
// not held, when its validity had run out (the nodes are still cleaned), or when fewer than
// a quorum of nodes still held the key (a node restarted and forgot it); an error of the
// nodes when too few answered to tell.
func (l *RedLock) Unlock(ctx context.Context) error {
	l.mu.Lock()
	value, until := l.value, l.until
	l.value, l.until = "", time.Time{}
	l.mu.Unlock()
	if value == "" {
		return fmt.Errorf("unlock %s: %w", l.key, ErrNotHeld)
	}
	expired := !l.s.now().Before(until)
	deleted, failed, errs := l.s.release(ctx, l.key, value)
	switch {
	case expired:
		return fmt.Errorf("unlock %s: validity ran out at %s: %w", l.key, until.Format(time.RFC3339Nano), ErrNotHeld)
	case deleted >= l.s.quorum:
		return nil
	case deleted+failed < l.s.quorum:
		return fmt.Errorf("unlock %s: only %d of %d nodes still held it: %w", l.key, deleted, len(l.s.nodes), ErrNotHeld)
	default:
		return fmt.Errorf("unlock %s: %d of %d nodes released, %d did not answer: %w",
			l.key, deleted, len(l.s.nodes), failed, errors.Join(errs...))
	}
}

// Valid reports whether the lock is held and its validity has not run out.
func (l *RedLock) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value != "" && l.s.now().Before(l.until)
}

// Until returns the end of the current acquisition's validity, or the zero time when the
// lock is not held. Work under the lock must finish before it.
func (l *RedLock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// attempt is one round of the algorithm.
func (l *RedLock) attempt(ctx context.Context, lease time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	value, err := l.s.newValue()
	if err != nil {
		return false, fmt.Errorf("redlock %s: %w", l.key, err)
	}
	drift := l.s.driftFor(lease)
	start := l.s.now()
	results := l.s.each(ctx, min(l.s.timeout, lease-drift), func(ctx context.Context, _ int, c RedisClient) (bool, error) {
		return c.SetNX(ctx, l.key, value, lease).Result()
	})
	validity := lease - l.s.now().Sub(start) - drift
	got, answered, errs := tally(results)
	if got >= l.s.quorum && validity > 0 {
		l.mu.Lock()
		l.value, l.until = value, start.Add(lease-drift)
		l.mu.Unlock()
		return true, nil
	}
	// Release at once on every node, as the Redis documentation says: "even the instances
	// it believed it was not able to lock". An error or the node timeout may hide a SET
	// that ran, and even "exists" may be this attempt's own key: a client that resends a
	// command whose reply was lost (go-redis does, unless MaxRetries is -1) gets "exists"
	// from its own first SET. The value is fresh, so the compare-and-delete leaves another
	// owner's key alone. The caller's ctx may be what ended the attempt, so the release
	// does not depend on it.
	_, _, _ = l.s.release(context.WithoutCancel(ctx), l.key, value)
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if answered < l.s.quorum {
		return false, fmt.Errorf("redlock %s: %d of %d nodes answered: %w", l.key, answered, len(l.s.nodes),
			errors.Join(append([]error{ErrNoQuorum}, errs...)...))
	}
	return false, nil
}

// release runs the compare-and-delete script on every node; it counts the nodes that
// deleted the key and those that did not answer.
func (s *RedLocks) release(ctx context.Context, key, value string) (deleted, failed int, errs []error) {
	results := s.each(ctx, s.timeout, func(ctx context.Context, _ int, c RedisClient) (bool, error) {
		n, err := unlockScript.Run(ctx, c, []string{key}, value).Int()
		return n == 1, err
	})
	deleted, answered, errs := tally(results)
	return deleted, len(s.nodes) - answered, errs
}

func (s *RedLocks) checkLease(lease time.Duration) error {
	if lease < time.Millisecond {
		return ErrInvalidTTL
	}
	if lease <= s.driftFor(lease) {
		return fmt.Errorf("%w: a %s lease leaves no validity after the %s drift allowance", ErrInvalidTTL, lease, s.driftFor(lease))
	}
	return nil
}

// driftFor is the Redis documentation's drift allowance: lease × factor + 2 ms.
func (s *RedLocks) driftFor(lease time.Duration) time.Duration { return driftAllowance(lease, s.drift) }

func driftAllowance(lease time.Duration, factor float64) time.Duration {
	return time.Duration(float64(lease)*factor) + redLockExtraDrift
}

// Validity is the longest a RedLock of these options taken for lease stays valid, from the
// start of its attempt: the lease less the drift allowance (lease × DriftFactor + 2 ms). A
// caller that must finish while it holds the lock has that long, not the lease; at zero or
// below, TryLock refuses the lease.
func (o RedLockOptions) Validity(lease time.Duration) time.Duration {
	factor := o.DriftFactor
	if factor <= 0 {
		factor = DefaultDriftFactor
	}
	return lease - driftAllowance(lease, factor)
}

// retryPause draws a pause from [retry/2, retry*3/2).
func (s *RedLocks) retryPause() time.Duration { return jitter(s.retry) }

// newValue returns a fresh value for one acquisition: the process id and 128 random bits.
func (s *RedLocks) newValue() (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", err
	}
	return s.process + "-" + hex.EncodeToString(b[:]), nil
}
