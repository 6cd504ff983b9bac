package app

import (
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
)

// LockKind is one per-user guard an instance can run with.
type LockKind struct {
	// Safe is false for the guards that exist to show failure.
	Safe bool
	// New builds the guard of one instance; process is the instance's id and ttl the
	// lease (order.Config.LockTTL). The returned func releases what the guard holds open.
	New func(client redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error)
}

// LockKinds are the guards by name (SECKILL_LOCK's values).
var LockKinds = map[string]LockKind{
	"redis": {Safe: true, New: func(c redis.UniversalClient, process string, _ time.Duration) (order.Locks, func() error) {
		return lock.SimpleRedisLocks{Client: c, Process: process}, noClose
	}},
	// The Redisson-style locks hold with the watchdog: a lease of the lock TTL, renewed
	// every TTL/3 while the order runs, so a slow order keeps its lock and a crashed
	// instance's lock expires within one TTL.
	"reentrant": {Safe: true, New: func(c redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process, WatchdogLease: ttl})
		return lock.ReentrantLocks(lc, true), lc.Close
	}},
	"fair": {Safe: true, New: func(c redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process, WatchdogLease: ttl})
		return lock.FairLocks(lc, true), lc.Close
	}},
	"localremote": {Safe: true, New: func(c redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process, WatchdogLease: ttl})
		return lock.LocalRemoteLocks(lock.NewRegistry(lc), true), lc.Close
	}},
	"local": {New: func(redis.UniversalClient, string, time.Duration) (order.Locks, func() error) {
		return lock.NewLocalLocks(), noClose
	}},
	"none": {New: func(redis.UniversalClient, string, time.Duration) (order.Locks, func() error) {
		return lock.NoLocks{}, noClose
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
