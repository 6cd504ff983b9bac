package app

import (
	"context"
	"database/sql"
	"fmt"
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
	// Stores are the servers the instances share: RedLockAddrs, ZooKeeperAddrs, EtcdEndpoints.
	Stores *Stores
	// Fencing is whether the orders are fenced with the locks' tokens: a guard whose tokens
	// cost work of their own (ZooKeeper's SetData of the lock's parent node) does it only then.
	Fencing bool
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
	// Tokens is true for the guards whose locks hand out fencing tokens (lock.Fenced).
	Tokens bool
	// New builds the guard of one instance. The lease is not the guard's: the order service
	// passes order.Config.LockTTL (SECKILL_LOCK_TTL) to every TryLock. An error wrapping a
	// *LockBackendError says the guard's own backend did not answer.
	New func(env LockEnv) (Guard, error)
	// Validity, if set, is how long a lock taken for lease stays its holder's, when that is
	// less than the lease (RedLock's drift allowance): an order's deadline must be shorter
	// (OrderConfig). Nil: the whole lease.
	Validity func(lease time.Duration) time.Duration
}

// LockKinds are the guards by name (SECKILL_LOCK's values).
var LockKinds = map[string]LockKind{
	"redis": {Safe: true, Tokens: true, New: func(env LockEnv) (Guard, error) {
		return Guard{Locks: lock.NewSimpleRedisLocks(env.Redis, env.Process, lock.SimpleRedisOptions{NoTokens: !env.Fencing})}, nil
	}},
	// The Redisson-style locks hold with the watchdog: TryLock's lease, SECKILL_LOCK_TTL, is
	// renewed every TTL/3 while the order runs, so a slow order keeps its lock and a crashed
	// instance's lock expires within one TTL.
	"reentrant": {Safe: true, Tokens: true, New: func(env LockEnv) (Guard, error) {
		lc := lock.NewClient(env.Redis, lock.Options{Process: env.Process})
		return Guard{Locks: lock.NewReentrantLocks(lc), Close: lc.Close}, nil
	}},
	"fair": {Safe: true, Tokens: true, New: func(env LockEnv) (Guard, error) {
		lc := lock.NewClient(env.Redis, lock.Options{Process: env.Process})
		return Guard{Locks: lock.NewFairLocks(lc), Close: lc.Close}, nil
	}},
	"localremote": {Safe: true, Tokens: true, New: func(env LockEnv) (Guard, error) {
		lc := lock.NewClient(env.Redis, lock.Options{Process: env.Process})
		return Guard{Locks: lock.NewLocalRemoteLocks(lock.NewRegistry(lc)), Close: lc.Close}, nil
	}},
	// RedLock hands out no fencing token: no single store orders its grants.
	"redlock":   {Safe: true, New: newRedLockGuard, Validity: redLockOptions(0).Validity},
	"zookeeper": {Safe: true, Tokens: true, New: newZooKeeperGuard},
	"etcd":      {Safe: true, Tokens: true, New: newEtcdGuard},
	// The table lock runs on the instance's own database pool: its availability is the
	// database's, which /readyz checks already.
	"mysql": {Safe: true, Tokens: true, New: func(env LockEnv) (Guard, error) {
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
func LockKindNames() string { return kindNames(func(LockKind) bool { return true }) }

// TokenKindNames lists the guards whose locks hand out fencing tokens, sorted, "|"-separated.
func TokenKindNames() string { return kindNames(func(k LockKind) bool { return k.Tokens }) }

func kindNames(keep func(LockKind) bool) string {
	names := make([]string, 0, len(LockKinds))
	for n, k := range LockKinds {
		if keep(k) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

// The fencing modes of Config.Fencing (SECKILL_FENCING).
const (
	// FencingAuto (or empty) fences the orders of every guard whose locks hand out tokens.
	FencingAuto = "auto"
	FencingOn   = "on"
	FencingOff  = "off"
)

// Fences reports whether an instance with guard lock and fencing mode fences its orders'
// writes with the lock's tokens (order.Config.Fencing). It refuses on with a guard whose
// locks hand out no token, and a mode it does not know.
func Fences(lock, mode string) (bool, error) {
	kind, ok := LockKinds[lock]
	if !ok {
		return false, fmt.Errorf("app: unknown lock %q; want one of %s", lock, LockKindNames())
	}
	if err := CheckFencingMode(mode); err != nil {
		return false, err
	}
	switch mode {
	case FencingOff:
		return false, nil
	case FencingOn:
		if !kind.Tokens {
			return false, fmt.Errorf("fencing is on but lock %q hands out no fencing token; the locks that do: %s", lock, TokenKindNames())
		}
		return true, nil
	}
	return kind.Tokens, nil
}

// CheckFencingMode refuses a fencing mode that is none of FencingOn, FencingOff, FencingAuto
// and empty, whatever the lock (the asynchronous mode's check: it takes no lock).
func CheckFencingMode(mode string) error {
	switch mode {
	case "", FencingAuto, FencingOff, FencingOn:
		return nil
	}
	return fmt.Errorf("fencing %q: want %s, %s or %s", mode, FencingOn, FencingOff, FencingAuto)
}
