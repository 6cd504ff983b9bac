// Package lock holds the project's lock implementations, from article 003's SimpleRedisLock
// to the in-process and no-op guards that exist to show what goes wrong without one.
//
// Every lock meets Lock, the Go form of the article's ILock: try once, never block, and
// release only what you hold. Nothing here knows about vouchers or orders.
//
// The production locks of articles 000 and 001 go further: ReentrantLock (Redisson's RLock,
// with a watchdog and waiting on pub/sub), FairLock (first come, first served across
// processes) and LocalRemoteLock (a local lock in front of the remote one, after Spring's
// RedisLockRegistry). They come from a Client, which owns one process's subscription
// connection and watchdogs; their TryLock takes a wait and a lease, and Guards adapts them
// to Lock.
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
	// ErrInvalidTTL is returned by TryLock for a TTL that cannot be expressed to Redis.
	ErrInvalidTTL = errors.New("lock: ttl must be at least 1ms")
)

// Lock is a named mutual-exclusion lock.
type Lock interface {
	// TryLock tries once to take the lock for ttl. It reports false, nil when another owner
	// holds the lock, and an error when the lock's backend could not be asked.
	TryLock(ctx context.Context, ttl time.Duration) (bool, error)
	// Unlock releases the lock if the caller holds it. It returns ErrNotHeld when the lock
	// is no longer the caller's, and leaves another owner's lock untouched.
	Unlock(ctx context.Context) error
}
