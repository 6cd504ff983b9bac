// Package lock holds the project's locks, from hmdp's SimpleRedisLock to the in-process and
// no-op guards that exist to show what goes wrong without one.
//
// Every lock meets Lock, the Go form of hmdp's ILock: try once, never block, and release
// only what you hold. Nothing here knows about vouchers or orders.
//
// The production locks go further: ReentrantLock (Redisson's RLock, with a watchdog and
// waiting on pub/sub), FairLock (first come, first served across processes) and
// LocalRemoteLock (a local lock in front of the remote one, after Spring's
// RedisLockRegistry). They come from a Client, which owns one process's subscription
// connection and watchdogs. Their TryLock tries once and holds with the watchdog, so they
// are Locks too; TryLockWait waits (Redisson's tryLock(waitTime, leaseTime)) and Lock waits
// as long as its context allows.
//
// MySQLLocks keeps its locks in a database table (MySQL, MariaDB or the embedded SQLite),
// with an owner, an expiry that another owner may take over, and a fencing token (Fenced);
// MySQLGetLocks uses MySQL's GET_LOCK on a pinned connection instead.
//
// ZooKeeperLocks (Curator's InterProcessMutex) and EtcdLocks (the recipe of etcd's
// concurrency.Mutex) queue in their coordination service, held by a session or lease whose
// loss they report to the holder, and hand out the node's or key's creation as fencing token.
//
// A service picks its guard from one family, each made the same way: NewSimpleRedisLocks,
// NewReentrantLocks, NewFairLocks, NewLocalRemoteLocks, NewLocalLocks or NewNoLocks returns a
// value whose New(name) is the Lock of that name.
package lock

import (
	"context"
	"errors"
	"time"
)

// Errors returned by the locks in this package.
var (
	// ErrNotHeld is returned by Unlock when the caller no longer holds the lock: it expired,
	// and maybe another owner has taken it since. Whatever the lock protected may have run
	// concurrently with another holder.
	ErrNotHeld = errors.New("lock: not held by this owner")
	// ErrInvalidTTL is returned by TryLock for a lease that cannot be expressed to Redis.
	ErrInvalidTTL = errors.New("lock: ttl must be at least 1ms")
)

// Lock is a named mutual-exclusion lock.
type Lock interface {
	// TryLock tries once to take the lock, and never waits. lease bounds how long the lock
	// outlives a holder that never releases it: a fixed lease for SimpleRedisLock, the
	// watchdog's lease (renewed every lease/3 while held) for the Client's locks. It reports
	// false, nil when another owner holds the lock, and an error when the lock's backend
	// could not be asked; a lock that keeps its lease in Redis returns ErrInvalidTTL for a
	// lease under a millisecond.
	TryLock(ctx context.Context, lease time.Duration) (bool, error)
	// Unlock releases the lock if the caller holds it. It returns an error wrapping
	// ErrNotHeld when the lock is no longer the caller's, and leaves another owner's lock
	// untouched.
	Unlock(ctx context.Context) error
}

// Fenced is implemented by locks that hand their holder a fencing token, increasing with
// every grant of the name (Kleppmann's fencing token): a store that remembers the largest
// token it has seen for the name can refuse the writes of a holder whose lock has since
// passed to another.
type Fenced interface {
	// Token returns the calling holder's token, or 0 when it holds nothing.
	Token() int64
}
