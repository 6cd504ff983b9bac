package app

import (
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
)

// LockKind is one per-user guard an instance can run with.
type LockKind struct {
	// Safe is false for the guards that exist to show failure.
	Safe bool
	// New builds the guard of one instance; process is the instance's id. The lease is not
	// the guard's: the order service passes order.Config.LockTTL (SECKILL_LOCK_TTL) to every
	// TryLock. The returned func releases what the guard holds open.
	New func(client redis.UniversalClient, process string) (order.Locks, func() error)
}

// LockKinds are the guards by name (SECKILL_LOCK's values).
var LockKinds = map[string]LockKind{
	"redis": {Safe: true, New: func(c redis.UniversalClient, process string) (order.Locks, func() error) {
		return lock.NewSimpleRedisLocks(c, process), noClose
	}},
	// The Redisson-style locks hold with the watchdog: TryLock's lease, SECKILL_LOCK_TTL, is
	// renewed every TTL/3 while the order runs, so a slow order keeps its lock and a crashed
	// instance's lock expires within one TTL.
	"reentrant": {Safe: true, New: func(c redis.UniversalClient, process string) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process})
		return lock.NewReentrantLocks(lc), lc.Close
	}},
	"fair": {Safe: true, New: func(c redis.UniversalClient, process string) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process})
		return lock.NewFairLocks(lc), lc.Close
	}},
	"localremote": {Safe: true, New: func(c redis.UniversalClient, process string) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process})
		return lock.NewLocalRemoteLocks(lock.NewRegistry(lc)), lc.Close
	}},
	"local": {New: func(redis.UniversalClient, string) (order.Locks, func() error) {
		return lock.NewLocalLocks(), noClose
	}},
	"none": {New: func(redis.UniversalClient, string) (order.Locks, func() error) {
		return lock.NewNoLocks(), noClose
	}},
}

func noClose() error { return nil }

// LockKindNames lists the guards' names, sorted and separated by "|".
func LockKindNames() string {
	names := make([]string, 0, len(LockKinds))
	for n := range LockKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}
