package main

import (
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
)

// lockKind is one value of SECKILL_LOCK.
type lockKind struct {
	// safe is false for the guards that exist to show failure.
	safe bool
	// new builds the guard of one instance; process is the instance's id. The lease,
	// SECKILL_LOCK_TTL, is not the guard's: the order service passes it to every TryLock. The
	// returned func releases what the guard holds open.
	new func(client redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error)
}

var lockKinds = map[string]lockKind{
	"redis": {safe: true, new: func(c redis.UniversalClient, process string, _ time.Duration) (order.Locks, func() error) {
		return lock.NewSimpleRedisLocks(c, process), noClose
	}},
	// The Redisson-style locks hold with the watchdog: TryLock's lease, SECKILL_LOCK_TTL, is
	// renewed every TTL/3 while the order runs, so a slow order keeps its lock and a crashed
	// instance's lock expires within one TTL.
	"reentrant": {safe: true, new: func(c redis.UniversalClient, process string, _ time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process})
		return lock.NewReentrantLocks(lc), lc.Close
	}},
	"fair": {safe: true, new: func(c redis.UniversalClient, process string, _ time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process})
		return lock.NewFairLocks(lc), lc.Close
	}},
	"localremote": {safe: true, new: func(c redis.UniversalClient, process string, _ time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process})
		return lock.NewLocalRemoteLocks(lock.NewRegistry(lc)), lc.Close
	}},
	"local": {new: func(redis.UniversalClient, string, time.Duration) (order.Locks, func() error) {
		return lock.NewLocalLocks(), noClose
	}},
	"none": {new: func(redis.UniversalClient, string, time.Duration) (order.Locks, func() error) {
		return lock.NewNoLocks(), noClose
	}},
}

func noClose() error { return nil }

func lockKindsUsage() string {
	names := make([]string, 0, len(lockKinds))
	for n := range lockKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}
