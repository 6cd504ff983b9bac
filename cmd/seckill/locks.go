package main

import (
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
)

// lockKind is one value of SECKILL_LOCK.
type lockKind struct {
	// safe is false for the guards that exist to show failure.
	safe bool
	// new builds the guard of one instance; process is the instance's id.
	new func(client redis.UniversalClient, process string) (order.Locks, func() error)
}

var lockKinds = map[string]lockKind{
	"redis": {safe: true, new: func(c redis.UniversalClient, process string) (order.Locks, func() error) {
		return lock.SimpleRedisLocks{Client: c, Process: process}, noClose
	}},
	"local": {new: func(redis.UniversalClient, string) (order.Locks, func() error) {
		return lock.NewLocalLocks(), noClose
	}},
	"none": {new: func(redis.UniversalClient, string) (order.Locks, func() error) {
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
