package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// contestant is one lock implementation under test. acquire blocks (with the
// implementation's own way of waiting) until it holds key or ctx ends, and returns the
// release.
type contestant struct {
	name string
	peer bool // a library we compare with, not one of ours
	// setup makes the acquire function for one run on rdb and a cleanup (closing
	// subscriptions) for after it. stats reports our Client's counters (zero for peers): the
	// SUBSCRIBE and UNSUBSCRIBE commands the client's hooks cannot see, and the wake-ups.
	setup func(rdb *redis.Client) (acquire acquireFunc, stats func() lock.Stats, cleanup func())
}

type acquireFunc func(ctx context.Context, key string) (release func(context.Context) error, err error)

// lease is the lease (TTL) every lock is taken with: long enough never to expire in a run.
const lease = 10 * time.Second

func contestants() []contestant {
	return []contestant{
		{name: "SimpleRedisLock (SET NX PX, 1 ms retry)", setup: simple},
		{name: "ReentrantLock (pub/sub wait)", setup: ours(func(c *lock.Client, _ *lock.Registry, key string) waitLock {
			return c.ReentrantLock(key)
		})},
		{name: "FairLock (queue + handover)", setup: ours(func(c *lock.Client, _ *lock.Registry, key string) waitLock {
			return c.FairLock(key)
		})},
		{name: "LocalRemoteLock (local queue + remote)", setup: ours(func(_ *lock.Client, r *lock.Registry, key string) waitLock {
			return r.Obtain(key)
		})},
		{name: "bsm/redislock v0.9.4 (1 ms linear retry)", peer: true, setup: bsm},
		{name: "redsync v4.18.1 (default retry)", peer: true, setup: redsyncMutex},
	}
}

// simple retries SimpleRedisLock's single attempt every millisecond, the way hmdp's
// callers (and bsm/redislock with a linear backoff) wait.
func simple(rdb *redis.Client) (acquireFunc, func() lock.Stats, func()) {
	process := lock.NewProcessID()
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		l := lock.NewSimpleRedisLock(rdb, process, key)
		for {
			ok, err := l.TryLock(ctx, lease)
			if err != nil {
				return nil, err
			}
			if ok {
				return l.Unlock, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}, none, func() {}
}

type waitLock interface {
	TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
}

// ours runs one of the waiting locks: one Client (one subscription connection) per run, as
// one per process in a service.
func ours(make func(*lock.Client, *lock.Registry, string) waitLock) func(*redis.Client) (acquireFunc, func() lock.Stats, func()) {
	return func(rdb *redis.Client) (acquireFunc, func() lock.Stats, func()) {
		c := lock.NewClient(rdb, lock.Options{})
		r := lock.NewRegistry(c)
		return func(ctx context.Context, key string) (func(context.Context) error, error) {
			l := make(c, r, key)
			ok, err := l.TryLockWait(ctx, -1, lease)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errors.New("not acquired")
			}
			return l.Unlock, nil
		}, c.Stats, func() { _ = c.Close() }
	}
}

func bsm(rdb *redis.Client) (acquireFunc, func() lock.Stats, func()) {
	c := redislock.New(rdb)
	opts := &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)}
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		l, err := c.Obtain(ctx, key, lease, opts)
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}, none, func() {}
}

func redsyncMutex(rdb *redis.Client) (acquireFunc, func() lock.Stats, func()) {
	rs := redsync.New(goredis.NewPool(rdb))
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		m := rs.NewMutex(key, redsync.WithExpiry(lease))
		for {
			// The default gives up after 32 tries (up to ~8 s); a caller that must have the
			// lock tries again, and the time counts as acquire latency.
			err := m.LockContext(ctx)
			if err == nil {
				return func(ctx context.Context) error {
					ok, err := m.UnlockContext(ctx)
					if err == nil && !ok {
						err = fmt.Errorf("redsync: unlock failed")
					}
					return err
				}, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var taken *redsync.ErrTaken
			if !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken) {
				return nil, err
			}
		}
	}, none, func() {}
}

func none() lock.Stats { return lock.Stats{} }
