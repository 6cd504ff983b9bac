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
	// new builds the guard of one instance; process is the instance's id and ttl the
	// lease (SECKILL_LOCK_TTL). The returned func releases what the guard holds open.
	new func(client redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error)
}

var lockKinds = map[string]lockKind{
	"redis": {safe: true, new: func(c redis.UniversalClient, process string, _ time.Duration) (order.Locks, func() error) {
		return lock.SimpleRedisLocks{Client: c, Process: process}, noClose
	}},
	// The Redisson-style locks hold with the watchdog: a lease of SECKILL_LOCK_TTL, renewed
	// every TTL/3 while the order runs, so a slow order keeps its lock and a crashed
	// instance's lock expires within one TTL.
	"reentrant": {safe: true, new: func(c redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process, WatchdogLease: ttl})
		return lock.ReentrantLocks(lc, true), lc.Close
	}},
	"fair": {safe: true, new: func(c redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process, WatchdogLease: ttl})
		return lock.FairLocks(lc, true), lc.Close
	}},
	"localremote": {safe: true, new: func(c redis.UniversalClient, process string, ttl time.Duration) (order.Locks, func() error) {
		lc := lock.NewClient(c, lock.Options{Process: process, WatchdogLease: ttl})
		return lock.LocalRemoteLocks(lock.NewRegistry(lc), true), lc.Close
	}},
	"local": {new: func(redis.UniversalClient, string, time.Duration) (order.Locks, func() error) {
		return lock.NewLocalLocks(), noClose
	}},
	"none": {new: func(redis.UniversalClient, string, time.Duration) (order.Locks, func() error) {
		return lock.NoLocks{}, noClose
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
