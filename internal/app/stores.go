package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/database"
)

// StoresConfig says where the data lives: MySQLDSN and one Redis (RedisAddr or RedisSentinel)
// set (the real stores), or none of them (embedded ones); and where the servers of the lock
// backends that have their own are.
type StoresConfig struct {
	MySQLDSN  string // go-sql-driver DSN of MySQL/MariaDB
	RedisAddr string // host:port of Redis
	// RedisSentinel, instead of RedisAddr, names a Redis primary that Sentinel watches: the
	// instances follow it to a promoted replica on failover.
	RedisSentinel RedisSentinel
	DataDir       string // the embedded database's directory; empty: a new temporary one
	// RedLockAddrs are the host:port of RedLock's independent Redis nodes. Empty:
	// DefaultRedLockAddrs with the real stores, five embedded Redis servers with the
	// embedded ones.
	RedLockAddrs []string
	// ZooKeeperAddrs are the host:port of the ZooKeeper ensemble; there is no embedded one.
	ZooKeeperAddrs []string
	// EtcdEndpoints are the host:port of the etcd cluster; there is no embedded one.
	EtcdEndpoints []string
}

// DefaultRedLockAddrs are the RedLock nodes that scripts/services.sh runs.
var DefaultRedLockAddrs = []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"}

// embeddedRedLockNodes is how many embedded Redis servers stand in for RedLock's nodes.
const embeddedRedLockNodes = 5

// RedisSentinel names a Redis primary through Sentinel: the master name the sentinels
// monitor and the host:port of some of them (the client learns of the others from them).
type RedisSentinel struct {
	Master string
	Addrs  []string
}

// String is the setting's form, master-name@host:port,host:port.
func (r RedisSentinel) String() string { return r.Master + "@" + strings.Join(r.Addrs, ",") }

// ErrRedisTwice is returned by OpenStores when both a Redis address and a Sentinel are
// configured: which one the instances would use would be a guess.
var ErrRedisTwice = errors.New("app: set a Redis address or a Sentinel, not both")

// ErrHalfEmbedded is returned by OpenStores when only one of the real stores is configured.
// Instances that share MySQL but each run their own Redis share neither the lock nor the
// order-id counter: the guard excludes nothing across them and order ids repeat.
var ErrHalfEmbedded = errors.New("app: MySQL and Redis must both be configured or both be embedded")

// Stores are the database and Redis that instances share: the configured MySQL/MariaDB and
// Redis, or an embedded SQLite database and Redis server that this process runs.
type Stores struct {
	// Embedded reports whether the stores live in this process.
	Embedded bool
	// Mini is the embedded Redis server; nil for a real one.
	Mini      *miniredis.Miniredis
	mysqlDSN  string
	redisAddr string
	sentinel  RedisSentinel
	dataDir   string
	cleanup   func()

	zkAddrs   []string
	etcdAddrs []string
	mu        sync.Mutex // guards redlock and rlNodes
	redlock   []string
	rlNodes   []*miniredis.Miniredis // the embedded RedLock nodes, started on first use
}

// OpenStores returns the real stores when cfg names both, and otherwise starts the embedded
// ones: a Redis server on loopback and a SQLite database in cfg.DataDir, migrated. It returns
// ErrHalfEmbedded when cfg names only one. Close stops what it started.
func OpenStores(ctx context.Context, cfg StoresConfig) (*Stores, error) {
	lockServers := func(s *Stores) *Stores {
		s.redlock = append([]string(nil), cfg.RedLockAddrs...)
		s.zkAddrs = append([]string(nil), cfg.ZooKeeperAddrs...)
		s.etcdAddrs = append([]string(nil), cfg.EtcdEndpoints...)
		return s
	}
	sentinel := cfg.RedisSentinel.Master != "" || len(cfg.RedisSentinel.Addrs) > 0
	realRedis := cfg.RedisAddr != "" || sentinel
	switch {
	case cfg.RedisAddr != "" && sentinel:
		return nil, ErrRedisTwice
	case sentinel && (cfg.RedisSentinel.Master == "" || len(cfg.RedisSentinel.Addrs) == 0):
		return nil, fmt.Errorf("app: Redis Sentinel %q: want a master name and at least one sentinel address", cfg.RedisSentinel)
	case cfg.MySQLDSN != "" && realRedis:
		s := lockServers(&Stores{mysqlDSN: cfg.MySQLDSN, redisAddr: cfg.RedisAddr, cleanup: func() {}})
		s.sentinel = RedisSentinel{Master: cfg.RedisSentinel.Master, Addrs: append([]string(nil), cfg.RedisSentinel.Addrs...)}
		if len(s.redlock) == 0 {
			s.redlock = append(s.redlock, DefaultRedLockAddrs...)
		}
		return s, nil
	case cfg.MySQLDSN != "" || realRedis:
		return nil, ErrHalfEmbedded
	}
	s := lockServers(&Stores{Embedded: true, dataDir: cfg.DataDir, cleanup: func() {}})
	if s.dataDir == "" {
		dir, err := os.MkdirTemp("", "seckill-")
		if err != nil {
			return nil, fmt.Errorf("embedded database dir: %w", err)
		}
		s.dataDir, s.cleanup = dir, func() { _ = os.RemoveAll(dir) }
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	s.Mini, s.redisAddr = m, m.Addr()
	removeDir := s.cleanup
	s.cleanup = func() { m.Close(); removeDir() }
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// migrate brings the embedded database's schema up to date; a real database is migrated
// only by `seckill migrate`.
func (s *Stores) migrate(ctx context.Context) error {
	db, err := s.OpenDB(ctx, database.Pool{MaxOpen: 1})
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Migrate(ctx)
	return err
}

// String says where the data lives.
func (s *Stores) String() string {
	if s.Embedded {
		return "embedded SQLite in " + s.dataDir + " + embedded Redis (miniredis) at " + s.redisAddr
	}
	if s.sentinel.Master != "" {
		return "MySQL/MariaDB + the Redis primary of Sentinel " + s.sentinel.String()
	}
	return "MySQL/MariaDB + Redis at " + s.redisAddr
}

// OpenDB opens a new connection pool to the database.
func (s *Stores) OpenDB(ctx context.Context, pool database.Pool) (*database.DB, error) {
	if s.Embedded {
		return database.OpenSQLite(ctx, s.dataDir, pool)
	}
	return database.OpenMySQL(ctx, s.mysqlDSN, pool)
}

// The Redis client's timeouts: a dial, a wait for a pooled connection, each read and write.
// A call whose context has an earlier deadline (an order's) ends at that deadline instead.
const (
	RedisDialTimeout = time.Second
	RedisPoolTimeout = time.Second
	RedisIOTimeout   = time.Second
	// EmbeddedRedisIOTimeout bounds the reads and writes to the embedded Redis instead. That
	// server runs in this process: it cannot hang while the process runs, and a read that
	// takes a second there is the whole process starved of CPU (a loaded test machine), which
	// the order's own deadline bounds already.
	EmbeddedRedisIOTimeout = 5 * time.Second
)

// redisDials is how many times an instance's Redis client dials for one call (zero: go-redis's
// default, five dials 100 ms apart). A call that cannot dial fails, and the client retries
// the whole order; what the further dials change is how long a dead Redis holds each caller,
// and how soon go-redis's dial breaker opens (once as many dials have failed as the pool has
// connections it fails every dial at once and probes the address once a second, so the first
// order after Redis is back may wait up to that second):
//   - the asynchronous mode dials once. Nothing in front of its admissions bounds how many
//     are in flight, so under load five slow dials each held the pool's connections; an
//     admission's settling call then timed out waiting for one instead of finding the
//     connection refused, and waited for the order's deadline: answers of 2.0-2.4 s for the
//     first 2.5 s of a Redis killed under 1,000 orders a second, against 50-158 ms at most
//     with one dial; and the first order came 0.60-0.75 s after Redis was back with five
//     dials, 78-116 ms with one;
//   - the synchronous mode keeps five: nginx's order gate bounds its orders in flight, and at
//     a light load (make chaos's sentinel experiment, 50 users a second) the slow failures
//     kept the breaker shut, so the first order after a Sentinel failover came 18 ms after the
//     switch, against 0.1-0.76 s with one dial, which opened it.
//
// docs/chaos.md, "One dial a Redis call", has the runs.
func redisDials(mode string) int {
	if mode == ModeAsync {
		return 1
	}
	return 0
}

// OpenRedis returns a new client, with its own pool, to the Redis server, dialling up to dials
// times a call (zero: go-redis's default, five dials 100 ms apart): with a Sentinel
// configured, go-redis's failover client, which asks the sentinels for the primary's address
// on every dial and, on their +switch-master, drops its connections to the old primary. While
// the primary is down and not yet replaced, its calls fail (the orders 503) within the same
// bounds as the plain client's.
//
// Every call is bounded (RedisDialTimeout, RedisPoolTimeout, RedisIOTimeout, and the
// context's deadline), and a command is never sent a second time: none of the lock commands
// is idempotent. A SET NX resent after its reply was lost finds its own key and reports the
// lock busy, leaving it taken until its TTL; an unlock resent reports the lock lost. The order
// fails instead (503) and the client retries the whole order.
func (s *Stores) OpenRedis(poolSize, dials int) redis.UniversalClient {
	io := RedisIOTimeout
	if s.Mini != nil {
		io = EmbeddedRedisIOTimeout
	}
	opts := &redis.UniversalOptions{
		Addrs:                 []string{s.redisAddr},
		PoolSize:              poolSize,
		DialTimeout:           RedisDialTimeout,
		PoolTimeout:           RedisPoolTimeout,
		ReadTimeout:           io,
		WriteTimeout:          io,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         dials,
		// RESP2: the service uses no RESP3 feature (push notifications, client-side caching),
		// and on RESP3 go-redis looks for pending push notifications on the connection before
		// every command: a read system call per command, 9% of an instance's CPU when async
		// admissions ran at 8,000/s (docs/loadtest-journal.md, the `make scaling` run of
		// 2026-11-22 12:13).
		Protocol: 2,
	}
	if s.sentinel.Master != "" {
		// The same timeouts hold for the calls to the sentinels.
		opts.MasterName, opts.Addrs = s.sentinel.Master, s.sentinel.Addrs
	}
	return redis.NewUniversalClient(opts)
}

// RedLockAddrs returns the addresses of RedLock's nodes: those configured, else with the
// embedded stores five embedded Redis servers, which it starts on first use (every instance
// over these stores then shares them), else DefaultRedLockAddrs.
func (s *Stores) RedLockAddrs() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.redlock) > 0 {
		return s.redlock, nil
	}
	var nodes []*miniredis.Miniredis
	for range embeddedRedLockNodes {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			for _, n := range nodes {
				n.Close()
			}
			return nil, fmt.Errorf("start embedded RedLock node: %w", err)
		}
		nodes = append(nodes, m)
	}
	s.rlNodes = nodes
	for _, m := range nodes {
		s.redlock = append(s.redlock, m.Addr())
	}
	return s.redlock, nil
}

// ZooKeeperAddrs returns the addresses of the ZooKeeper ensemble; empty when none is configured.
func (s *Stores) ZooKeeperAddrs() []string { return s.zkAddrs }

// EtcdEndpoints returns the addresses of the etcd cluster; empty when none is configured.
func (s *Stores) EtcdEndpoints() []string { return s.etcdAddrs }

// WithZooKeeperAddrs returns a view of s whose ZooKeeper ensemble is addrs (a proxy in front
// of s's, say) and which shares everything else with s: its servers, its database, the
// RedLock nodes s started so far. Closing the view closes nothing; close s.
func (s *Stores) WithZooKeeperAddrs(addrs []string) *Stores {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Stores{Embedded: s.Embedded, Mini: s.Mini, mysqlDSN: s.mysqlDSN, redisAddr: s.redisAddr,
		sentinel: s.sentinel, dataDir: s.dataDir, cleanup: func() {},
		zkAddrs: append([]string(nil), addrs...), etcdAddrs: s.etcdAddrs, redlock: s.redlock}
}

// Close stops the embedded stores and removes a temporary database directory.
func (s *Stores) Close() {
	s.mu.Lock()
	for _, m := range s.rlNodes {
		m.Close()
	}
	s.rlNodes = nil
	s.mu.Unlock()
	s.cleanup()
}
