package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncpool "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// The backends a contestant runs on; each has its own round trip (the "limit").
const (
	famRedis   = "Redis"
	famRedLock = "RedLock×5"
	famMySQL   = "MySQL"
	famZK      = "ZooKeeper"
	famEtcd    = "etcd"
)

// contestant is one lock implementation under test. acquire blocks (with the
// implementation's own way of waiting) until it holds key or ctx ends, and returns the
// release.
type contestant struct {
	name   string
	family string
	peer   bool     // a library we compare with, not one of ours
	peers  []string // for ours: the peers (name prefixes) its throughput is compared with
	// Facts from the code, for the reliability table.
	reentrant, fencing string
	idx                int // place in contestants(), for its keys
	// setup makes the acquire function for one run, with fresh connections. Every lock is
	// taken with e.lease.
	setup func(ctx context.Context, e *env) (*instance, error)
}

// instance is a contestant set up for one run.
type instance struct {
	acquire acquireFunc
	// stats reports our Client's counters (nil for the others): the SUBSCRIBE and
	// UNSUBSCRIBE commands the client's hooks cannot see, and the wake-ups.
	stats func() lock.Stats
	// commands counts the Redis commands sent so far (nil where there is no Redis).
	commands func() int64
	close    func()
}

// lease is the lease (TTL) every lock is taken with in the throughput runs: long enough
// never to expire in a run.
const lease = 10 * time.Second

type acquireFunc func(ctx context.Context, key string) (release func(context.Context) error, err error)

func contestants() []contestant {
	cs := allContestants()
	for i := range cs {
		cs[i].idx = i
	}
	return cs
}

// keySeq numbers the scenarios of a run, so that no scenario meets keys an earlier one left
// behind (a redsync acquisition cut by its context leaves its keys until they expire).
var keySeq atomic.Int64

// keys returns a fresh key prefix for one scenario of c.
func (c contestant) keys(e *env) string {
	return fmt.Sprintf("%s%d.%d:", e.prefix, c.idx, keySeq.Add(1))
}

func allContestants() []contestant {
	redisPeers := []string{"bsm/redislock", "redsync v4.18.1 (1 node"}
	return []contestant{
		{name: "SimpleRedisLock (SET NX PX, 1 ms retry)", family: famRedis, peers: []string{"bsm/redislock"},
			reentrant: "no (SET NX: the holder's second TryLock fails)",
			fencing:   "yes (INCR of a counter per name)", setup: simple(false)},
		{name: "SimpleRedisLock (NoTokens: as SECKILL_FENCING=off runs it)", family: famRedis, peers: []string{"bsm/redislock"},
			reentrant: "no (SET NX: the holder's second TryLock fails)",
			fencing:   "no (a bare SET NX PX)", setup: simple(true)},
		{name: "ReentrantLock (pub/sub wait)", family: famRedis, peers: redisPeers,
			reentrant: "yes (hold count per goroutine)", fencing: "yes (the grant counter per name)", setup: ours(func(c *lock.Client, _ *lock.Registry, key string) waitLock {
				return c.ReentrantLock(key)
			})},
		{name: "FairLock (queue + handover)", family: famRedis, peers: redisPeers,
			reentrant: "yes (hold count per goroutine)", fencing: "yes (the grant counter per name)", setup: ours(func(c *lock.Client, _ *lock.Registry, key string) waitLock {
				return c.FairLock(key)
			})},
		{name: "LocalRemoteLock (local queue + remote)", family: famRedis, peers: redisPeers,
			reentrant: "yes (local lock, per goroutine)", fencing: "yes (the grant counter per name)", setup: ours(func(_ *lock.Client, r *lock.Registry, key string) waitLock {
				return r.Obtain(key)
			})},
		{name: "bsm/redislock v0.9.4 (1 ms linear retry)", family: famRedis, peer: true,
			reentrant: "no", fencing: "no", setup: bsm},
		{name: "redsync v4.18.1 (1 node, default retry)", family: famRedis, peer: true,
			reentrant: "no", fencing: "no", setup: redsyncMutex(false)},
		{name: "RedLock ×5 (ours, 500 ms node timeout, 50 ms retry)", family: famRedLock, peers: []string{"redsync v4.18.1 (5 nodes"},
			reentrant: "no (one acquisition per RedLock value)", fencing: "no (cannot: independent nodes agree on no counter)", setup: redLock},
		{name: "redsync v4.18.1 (5 nodes, default retry)", family: famRedLock, peer: true,
			reentrant: "no", fencing: "no", setup: redsyncMutex(true)},
		{name: "MySQL table lock (poll 10→200 ms)", family: famMySQL,
			reentrant: "yes (owner column, hold count)", fencing: "yes (row version)", setup: mysqlTable},
		{name: "GET_LOCK (ours, server waits)", family: famMySQL, peers: []string{"bare GET_LOCK"},
			reentrant: "yes (per session = per goroutine)", fencing: "no", setup: getLock},
		{name: "bare GET_LOCK (harness, no library)", family: famMySQL, peer: true,
			reentrant: "per session", fencing: "no", setup: bareGetLock},
		{name: "ZooKeeperLock (ours, Curator-style)", family: famZK, peers: []string{"go-zookeeper/zk"},
			reentrant: "yes (count per goroutine)", fencing: "yes (czxid)", setup: zooKeeper(false)},
		{name: "ZooKeeperLock (ours, NoTokens: as SECKILL_FENCING=off runs it)", family: famZK, peers: []string{"go-zookeeper/zk"},
			reentrant: "yes (count per goroutine)", fencing: "no (a plain create, no SetData of the parent)", setup: zooKeeper(true)},
		{name: "go-zookeeper/zk v1.0.4 zk.Lock", family: famZK, peer: true,
			reentrant: "no (ErrDeadlock)", fencing: "no (the node's sequence is unexported)", setup: zkPeer},
		{name: "EtcdLock (ours, one lease per process)", family: famEtcd, peers: []string{"etcd concurrency.Mutex"},
			reentrant: "yes (count per goroutine)", fencing: "yes (the key's create revision)", setup: etcdOurs},
		{name: "etcd concurrency.Mutex v3.5.21", family: famEtcd, peer: true,
			reentrant: "no (one key per session)", fencing: "yes (Header().Revision / the key's create revision)", setup: etcdMutex},
	}
}

func (e *env) redisClient(addr string) (*redis.Client, *commandCounter) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, ContextTimeoutEnabled: true})
	h := &commandCounter{}
	rdb.AddHook(h)
	return rdb, h
}

// simple retries SimpleRedisLock's single attempt every millisecond, the way hmdp's
// callers (and bsm/redislock with a linear backoff) wait. The locks are made as the service
// makes them (SimpleRedisLocks: the grant counter seeded and kept a day), without tokens when
// noTokens.
func simple(noTokens bool) func(context.Context, *env) (*instance, error) {
	return func(_ context.Context, e *env) (*instance, error) {
		rdb, h := e.redisClient(e.redisAddr)
		locks := lock.NewSimpleRedisLocks(rdb, lock.NewProcessID(), lock.SimpleRedisOptions{NoTokens: noTokens})
		lease := e.lease
		return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
			l := locks.New(key)
			for {
				ok, err := l.TryLock(ctx, lease)
				if err != nil {
					return nil, err
				}
				if ok {
					return l.Unlock, nil
				}
				if err := sleep(ctx, time.Millisecond); err != nil {
					return nil, err
				}
			}
		}, commands: h.n.Load, close: func() { _ = rdb.Close() }}, nil
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

type waitLock interface {
	TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
}

// acquireWait waits with l's own TryLockWait as long as ctx allows.
func acquireWait(ctx context.Context, l waitLock, lease time.Duration) (func(context.Context) error, error) {
	ok, err := l.TryLockWait(ctx, -1, lease)
	if err != nil {
		return nil, err
	}
	if !ok {
		// A wait cut by the end of the run, or (GET_LOCK's server-side wait is bounded by
		// ctx's deadline) ending a moment before it: not a failure.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d, has := ctx.Deadline(); has && time.Until(d) < 100*time.Millisecond {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, errors.New("not acquired")
	}
	return l.Unlock, nil
}

// ours runs one of the waiting locks: one Client (one subscription connection) per run, as
// one per process in a service.
func ours(make func(*lock.Client, *lock.Registry, string) waitLock) func(context.Context, *env) (*instance, error) {
	return func(_ context.Context, e *env) (*instance, error) {
		rdb, h := e.redisClient(e.redisAddr)
		c := lock.NewClient(rdb, lock.Options{})
		r := lock.NewRegistry(c)
		lease := e.lease
		return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
			return acquireWait(ctx, make(c, r, key), lease)
		}, stats: c.Stats, commands: h.n.Load, close: func() { _ = c.Close(); _ = rdb.Close() }}, nil
	}
}

func bsm(_ context.Context, e *env) (*instance, error) {
	rdb, h := e.redisClient(e.redisAddr)
	c := redislock.New(rdb)
	opts := &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)}
	lease := e.lease
	return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
		l, err := c.Obtain(ctx, key, lease, opts)
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}, commands: h.n.Load, close: func() { _ = rdb.Close() }}, nil
}

// nodes connects to the RedLock nodes, one client each, configured as the service does
// (internal/app): deadlines from the context, never a resend; a refused dial is not retried,
// so that a node that is down fails at once.
func (e *env) nodes(addrs []string) (clients []*redis.Client, count func() int64, closeAll func()) {
	var hooks []*commandCounter
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a, PoolSize: 64, ContextTimeoutEnabled: true,
			MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
		h := &commandCounter{}
		rdb.AddHook(h)
		clients = append(clients, rdb)
		hooks = append(hooks, h)
	}
	return clients, func() int64 {
			var n int64
			for _, h := range hooks {
				n += h.n.Load()
			}
			return n
		}, func() {
			for _, c := range clients {
				_ = c.Close()
			}
		}
}

func redsyncMutex(five bool) func(context.Context, *env) (*instance, error) {
	return func(_ context.Context, e *env) (*instance, error) {
		addrs := []string{e.redisAddr}
		if five {
			addrs = e.redlockAddrs
		}
		clients, count, closeAll := e.nodes(addrs)
		var pools []redsyncpool.Pool
		for _, c := range clients {
			pools = append(pools, goredis.NewPool(c))
		}
		rs := redsync.New(pools...)
		lease := e.lease
		return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
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
		}, commands: count, close: closeAll}, nil
	}
}

func redLock(_ context.Context, e *env) (*instance, error) {
	clients, count, closeAll := e.nodes(e.redlockAddrs)
	rc := make([]lock.RedisClient, len(clients))
	for i, c := range clients {
		rc[i] = c
	}
	// The service's node timeout (internal/app: the 2 s order deadline / 4), which is also
	// redsync's per-attempt timeout (0.05 × the 10 s expiry); the package default, 50 ms,
	// fails attempts when 32 goroutines share two loaded CPUs.
	locks := lock.NewRedLocks(rc, "", lock.RedLockOptions{NodeTimeout: 500 * time.Millisecond})
	lease := e.lease
	return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
		return acquireWait(ctx, locks.RedLock(key), lease)
	}, commands: count, close: closeAll}, nil
}

func mysqlTable(_ context.Context, e *env) (*instance, error) {
	db, err := e.openMySQL()
	if err != nil {
		return nil, err
	}
	locks := lock.NewMySQLLocks(db, lock.SQLDialect("mysql"), "", lock.MySQLLockOptions{})
	lease := e.lease
	return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
		return acquireWait(ctx, locks.MySQLLock(key), lease)
	}, close: func() { _ = db.Close() }}, nil
}

func getLock(_ context.Context, e *env) (*instance, error) {
	db, err := e.openMySQL()
	if err != nil {
		return nil, err
	}
	locks := lock.NewMySQLGetLocks(db, "")
	return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
		return acquireWait(ctx, locks.GetLock(key), 0)
	}, close: func() { _ = db.Close() }}, nil
}

// bareGetLock is GET_LOCK as the libraries do it (a connection pinned from the pool, the
// server waits), with nothing else: the baseline our MySQLGetLock's bookkeeping is
// measured against. No GET_LOCK library could be fetched here (see docs/locks.md).
func bareGetLock(_ context.Context, e *env) (*instance, error) {
	db, err := e.openMySQL()
	if err != nil {
		return nil, err
	}
	return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		for {
			wait := 10.0
			if d, ok := ctx.Deadline(); ok {
				wait = min(wait, max(time.Until(d).Seconds(), 0))
			}
			var got sql.NullInt64
			if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", key, wait).Scan(&got); err != nil {
				_ = conn.Close()
				return nil, err
			}
			if got.Valid && got.Int64 == 1 {
				break
			}
			if err := ctx.Err(); err != nil {
				_ = conn.Close()
				return nil, err
			}
		}
		return func(ctx context.Context) error {
			defer conn.Close()
			var released sql.NullInt64
			if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", key).Scan(&released); err != nil {
				return err
			}
			if released.Int64 != 1 {
				return errors.New("RELEASE_LOCK: not held")
			}
			return nil
		}, nil
	}, close: func() { _ = db.Close() }}, nil
}

// zooKeeper runs our ZooKeeperLock; noTokens creates its nodes without the SetData of the
// parent that brings each node's czxid (its fencing token).
func zooKeeper(noTokens bool) func(ctx context.Context, e *env) (*instance, error) {
	return func(ctx context.Context, e *env) (*instance, error) {
		zc, err := lock.NewZooKeeperClient(ctx, e.zkAddrs, lock.ZooKeeperOptions{SessionTimeout: e.zkSession,
			Root: e.zkRoot + "/ours", NoTokens: noTokens})
		if err != nil {
			return nil, err
		}
		locks := lock.NewZooKeeperLocks(zc)
		return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
			return acquireWait(ctx, locks.ZooKeeperLock(key), 0)
		}, close: func() { _ = zc.Close() }}, nil
	}
}

// zkPeer runs go-zookeeper's own zk.Lock: a new Lock per acquisition (it is not
// reentrant), one session per run. Its Lock takes no context and waits until it holds the
// lock.
func zkPeer(ctx context.Context, e *env) (*instance, error) {
	conn, err := e.zkConnect(ctx)
	if err != nil {
		return nil, err
	}
	acl := zk.WorldACL(zk.PermAll)
	return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l := zk.NewLock(conn, e.zkRoot+"/peer/"+strings.ReplaceAll(key, ":", "_"), acl)
		if err := l.Lock(); err != nil {
			return nil, err
		}
		return func(context.Context) error { return l.Unlock() }, nil
	}, close: conn.Close}, nil
}
