package app

import (
	"context"
	"database/sql"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/migrations"
)

// LockEnv is what a guard may be built from: the instance's own pools and process id, and the
// shared servers of the backends that have their own.
type LockEnv struct {
	// Ctx bounds connecting to a backend of the guard's own (LockConnectTimeout): an
	// unreachable one fails the instance at start.
	Ctx context.Context
	// Log receives the backend client's own messages (ZooKeeper's connections).
	Log *slog.Logger
	// Redis is the instance's Redis pool; RedisPool its size, which each RedLock node's pool
	// gets too.
	Redis     redis.UniversalClient
	RedisPool int
	// DB is the instance's database pool, in SQL dialect Dialect, migrated.
	DB      *sql.DB
	Dialect migrations.Dialect
	// Process identifies the instance in the lock values it writes.
	Process string
	// OrderTimeout is each order's deadline, which a guard's TryLock runs within.
	OrderTimeout time.Duration
	// Stores are the servers the instances share: RedLockAddrs, ZooKeeperAddrs.
	Stores *Stores
}

// Guard is one instance's per-user guard.
type Guard struct {
	Locks order.Locks
	// Close releases what the guard holds open; nil when nothing.
	Close func() error
	// Ready checks a backend of the guard's own for /readyz (the check "lock"); nil when the
	// guard has none besides the instance's database and Redis, which are checked anyway.
	Ready api.Check
}

// LockKind is one per-user guard an instance can run with.
type LockKind struct {
	// Safe is false for the guards that exist to show failure.
	Safe bool
	// New builds the guard of one instance. The lease is not the guard's: the order service
	// passes order.Config.LockTTL (SECKILL_LOCK_TTL) to every TryLock. An error wrapping a
	// *LockBackendError says the guard's own backend did not answer.
	New func(env LockEnv) (Guard, error)
}

// LockKinds are the guards by name (SECKILL_LOCK's values).
var LockKinds = map[string]LockKind{
	"redis": {Safe: true, New: func(env LockEnv) (Guard, error) {
		return Guard{Locks: lock.NewSimpleRedisLocks(env.Redis, env.Process)}, nil
	}},
	// The Redisson-style locks hold with the watchdog: TryLock's lease, SECKILL_LOCK_TTL, is
	// renewed every TTL/3 while the order runs, so a slow order keeps its lock and a crashed
	// instance's lock expires within one TTL.
	"reentrant": {Safe: true, New: func(env LockEnv) (Guard, error) {
		lc := lock.NewClient(env.Redis, lock.Options{Process: env.Process})
		return Guard{Locks: lock.NewReentrantLocks(lc), Close: lc.Close}, nil
	}},
	"fair": {Safe: true, New: func(env LockEnv) (Guard, error) {
		lc := lock.NewClient(env.Redis, lock.Options{Process: env.Process})
		return Guard{Locks: lock.NewFairLocks(lc), Close: lc.Close}, nil
	}},
	"localremote": {Safe: true, New: func(env LockEnv) (Guard, error) {
		lc := lock.NewClient(env.Redis, lock.Options{Process: env.Process})
		return Guard{Locks: lock.NewLocalRemoteLocks(lock.NewRegistry(lc)), Close: lc.Close}, nil
	}},
	"redlock":   {Safe: true, New: newRedLockGuard},
	"zookeeper": {Safe: true, New: newZooKeeperGuard},
	// The table lock runs on the instance's own database pool: its availability is the
	// database's, which /readyz checks already.
	"mysql": {Safe: true, New: func(env LockEnv) (Guard, error) {
		return Guard{Locks: lock.NewMySQLLocks(env.DB, lock.SQLDialect(env.Dialect), env.Process, lock.MySQLLockOptions{})}, nil
	}},
	"local": {New: func(LockEnv) (Guard, error) {
		return Guard{Locks: lock.NewLocalLocks()}, nil
	}},
	"none": {New: func(LockEnv) (Guard, error) {
		return Guard{Locks: lock.NewNoLocks()}, nil
	}},
}

// LockKindNames lists the guards' names, sorted and separated by "|".
func LockKindNames() string {
	names := make([]string, 0, len(LockKinds))
	for n := range LockKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}
