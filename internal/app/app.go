// Package app wires one service instance: its database and Redis pools, the per-user guard,
// the voucher and order services, the metrics and the HTTP handler. `seckill serve`, the
// demo and the API's stack tests all build their instances here, so that what is tested is
// what runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// Config is what an instance is built from besides its stores.
type Config struct {
	// AdminToken guards POST /api/vouchers; empty refuses every caller.
	AdminToken string
	// Lock names the per-user guard: a key of LockKinds.
	Lock string
	// Order tunes the order service; Order.LockTTL is the lease every guard's TryLock gets
	// (the watchdog guards renew it every LockTTL/3). Order.MaxInflight zero takes
	// InflightPerConn times the database pool; as set, it is also Async.MaxInflight when that
	// is zero. Order.Fencing and Order.TokenSource are set from Fencing and Lock (see
	// OrderConfig).
	Order order.Config
	// Fencing is FencingOn, FencingOff or FencingAuto (empty is auto): see Fences.
	Fencing string
	// DBPool sizes the instance's database pool; zero fields take 32.
	DBPool database.Pool
	// RedisPool is the size of the instance's Redis pool; zero takes 128.
	RedisPool int
	// OrderMode is ModeSync (also when empty) or ModeAsync.
	OrderMode string
	// Async tunes the asynchronous mode; its zero Timeout takes the order timeout.
	Async async.Config
	// FenceRetention is how long a lock_fences row outlives its last admitted claim before
	// the instance's janitor deletes it (with fencing on); zero takes DefaultFenceRetention.
	// It must span at least a minute and ten order deadlines.
	FenceRetention time.Duration
}

// InflightPerConn is the default bound on an instance's orders in progress, per connection
// of its database pool: a connection serves one transaction at a time, and an order spends
// part of its time in Redis (the lock, the id) and answering; more orders than that would
// only queue for a connection.
const InflightPerConn = 2

// Order ids come from blocks (idgen.Blocks): one Redis round trip per orderIDBlock orders
// instead of one per order, and an id's time part at most orderIDBlockAge behind its order.
const (
	orderIDBlock    = 256
	orderIDBlockAge = time.Second
)

// Instance is one service instance: its own pools, process id, guard and metrics.
type Instance struct {
	// Handler serves the HTTP API, /healthz, /readyz and /metrics.
	Handler http.Handler
	// DB and Redis are the instance's pools.
	DB    *database.DB
	Redis redis.UniversalClient
	// Registry holds the instance's metrics: the order service's and the Go collectors.
	Registry *prometheus.Registry
	// Ready checks the stores in the background for /readyz; Refresh checks them now.
	Ready *api.Readiness
	// Process identifies the instance in the lock values it writes.
	Process string
	// Async is the asynchronous mode's admission, writer and order statuses; nil in sync.
	Async   *Async
	closers []func() error
}

// New wires one instance over st with the guard cfg.Lock. It refuses a database whose schema
// has not been migrated. Close releases what it opened.
func New(ctx context.Context, log *slog.Logger, cfg Config, st *Stores) (*Instance, error) {
	kind, ok := LockKinds[cfg.Lock]
	if !ok {
		return nil, fmt.Errorf("app: unknown lock %q; want one of %s", cfg.Lock, LockKindNames())
	}
	var err error
	if cfg.Order, err = cfg.OrderConfig(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if cfg.OrderMode == "" {
		cfg.OrderMode = ModeSync
	}
	if cfg.OrderMode != ModeSync && cfg.OrderMode != ModeAsync {
		return nil, fmt.Errorf("app: unknown order mode %q; want %s or %s", cfg.OrderMode, ModeSync, ModeAsync)
	}
	retention, err := cfg.EffectiveFenceRetention()
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if cfg.Order.Fencing {
		log.Info("order writes are fenced with the lock's fencing tokens", "lock", cfg.Lock,
			"lock_ttl", cfg.Order.LockTTL, "order_timeout", cfg.Order.EffectiveTimeout(), "fence_retention", retention)
	}
	pool := cfg.DBPool
	if pool.MaxOpen <= 0 {
		pool.MaxOpen = 32
	}
	if cfg.Async.MaxInflight == 0 {
		// SECKILL_MAX_INFLIGHT bounds the admissions too; unset, the asynchronous mode has a
		// default of its own (async.DefaultMaxInflight): its orders hold no connection.
		cfg.Async.MaxInflight = cfg.Order.MaxInflight
	}
	if cfg.Order.MaxInflight == 0 {
		cfg.Order.MaxInflight = InflightPerConn * pool.MaxOpen
	}
	if pool.MaxIdle <= 0 {
		pool.MaxIdle = pool.MaxOpen
	}
	if cfg.RedisPool <= 0 {
		cfg.RedisPool = 128
	}
	// InnoDB's wait for a row lock ends before the deadline of whoever waits for it: an
	// order's, or a writer's batch.
	pool.LockWait = cfg.Order.EffectiveTimeout()
	if cfg.OrderMode == ModeAsync {
		pool.LockWait = async.BatchDeadline(cfg.Async.ClaimIdle)
	}
	db, err := st.OpenDB(ctx, pool)
	if err != nil {
		return nil, err
	}
	rdb := st.OpenRedis(cfg.RedisPool, redisDials(cfg.OrderMode))
	inst := &Instance{DB: db, Redis: rdb, Registry: prometheus.NewRegistry(), Process: lock.NewProcessID()}
	inst.closers = append(inst.closers, rdb.Close, db.Close)
	if err := checkSchema(ctx, db); err != nil {
		_ = inst.Close()
		return nil, err
	}

	inst.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sqlDB, err := db.DB.DB()
	if err != nil {
		_ = inst.Close()
		return nil, err
	}
	// The asynchronous mode takes no per-user lock (its order service only reads orders):
	// the guard's backend is then no dependency of the instance, at start or in /readyz.
	guard := Guard{Locks: lock.NewNoLocks()}
	if cfg.OrderMode != ModeAsync {
		lctx, cancel := context.WithTimeout(ctx, LockConnectTimeout)
		guard, err = kind.New(LockEnv{Ctx: lctx, Log: log, Redis: rdb, RedisPool: cfg.RedisPool, DB: sqlDB,
			Dialect: db.Dialect, Process: inst.Process, OrderTimeout: cfg.Order.EffectiveTimeout(), Stores: st,
			Fencing: cfg.Order.Fencing})
		cancel()
		if err != nil {
			_ = inst.Close()
			return nil, err
		}
	}
	if guard.Close != nil {
		inst.closers = append([]func() error{guard.Close}, inst.closers...)
	}
	checks := map[string]api.Check{
		"database": db.Ping,
		"redis":    func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
	}
	if guard.Ready != nil {
		checks["lock"] = guard.Ready
	}

	var vouchers api.Vouchers = voucher.NewService(voucher.NewStore(db.DB))
	ids := idgen.NewBlocks(rdb, "order", orderIDBlock, orderIDBlockAge)
	var a *Async
	if cfg.OrderMode == ModeAsync {
		if a, err = newAsync(ctx, log, cfg, db, rdb, ids, inst.Registry); err != nil {
			_ = inst.Close()
			return nil, err
		}
		// Reads of an order ask Redis's pending and failed orders before the database, and
		// the database's record of failed orders after its order rows.
		cfg.Order.Pending = async.OrderPending{Statuses: a.Statuses}
	}
	store := order.NewSQLStore(db)
	svc := order.NewService(vouchers, store, guard.Locks, ids, order.NewMetrics(inst.Registry), log, cfg.Order)
	if cfg.Order.Fencing {
		inst.closers = append([]func() error{startFenceJanitor(log, store, retention)}, inst.closers...)
	}
	var orders api.Orders = svc
	if a != nil {
		inst.Async = a
		inst.closers = append([]func() error{func() error {
			// Said in the log, so that an operator sees when the writer let go of its batch
			// and whether it did within its bound.
			if err := a.stop(); err != nil {
				log.Error("order writer not stopped within its bound; its unacknowledged orders stay pending and another writer claims them", "err", err)
				return err
			}
			log.Info("order writer stopped")
			return nil
		}}, inst.closers...)
		checks["writer"] = a.Writer.Ready
		vouchers = loadOnCreate{Vouchers: vouchers, loader: a.Loader, log: log}
		orders = asyncOrders{Service: a.Service, get: svc}
	}
	inst.Ready = api.NewReadiness(log, checks)
	inst.Ready.Start(api.ReadyInterval)
	inst.closers = append([]func() error{inst.Ready.Close}, inst.closers...)
	inst.Handler = api.NewServer(log, api.Config{
		AdminToken: cfg.AdminToken,
		Ready:      inst.Ready,
		Metrics:    promhttp.HandlerFor(inst.Registry, promhttp.HandlerOpts{}),
		Timing:     api.NewMetrics(inst.Registry),
		Pending:    cfg.OrderMode == ModeAsync,
		// A voucher request is bounded as an order is: by SECKILL_ORDER_TIMEOUT, within the
		// server's WriteTimeout and shutdown grace, which cover the longest order.
		VoucherTimeout: cfg.Order.EffectiveTimeout(),
	}, vouchers, orders)
	return inst, nil
}

// OrderConfig is c.Order with fencing decided by c.Lock and c.Fencing (Fences), the token
// source named after the lock, and validated. Fencing set on explicitly (FencingOn, not the
// default) also lets an order's deadline exceed the lock's lease (order.Config.OutliveLease):
// the fence refuses the write of an order that outlived it. Otherwise the deadline must also
// be shorter than the lock's validity where that is less than the lease (RedLock's).
//
// In the asynchronous mode the admission script decides every order and no order takes the
// per-user lock: there is no lease for the deadline to stay inside, no critical section for
// ProcessingDelay to simulate work in (it is zero) and no write for a fencing token to guard
// (Fencing is off, whatever the lock). Of those rules only c.Fencing's being a mode at all
// holds, and of Order's only what the admissions use (the deadline, MaxInflight).
func (c Config) OrderConfig() (order.Config, error) {
	if c.OrderMode == ModeAsync {
		if err := CheckFencingMode(c.Fencing); err != nil {
			return order.Config{}, err
		}
		o := c.Order
		o.TokenSource, o.Fencing, o.OutliveLease, o.ProcessingDelay = c.Lock, false, true, 0
		return o, o.Validate()
	}
	on, err := Fences(c.Lock, c.Fencing)
	if err != nil {
		return order.Config{}, err
	}
	o := c.Order
	o.Fencing, o.TokenSource = on, c.Lock
	o.OutliveLease = o.OutliveLease || c.Fencing == FencingOn
	if err := o.Validate(); err != nil {
		return o, err
	}
	validity := LockKinds[c.Lock].Validity
	if validity == nil || o.OutliveLease {
		return o, nil
	}
	lease := o.LockTTL
	if lease <= 0 {
		lease = order.DefaultLockTTL
	}
	// RedLock's TryLock refuses a lease with no validity left: every order would fail.
	if v, t := validity(lease), o.EffectiveTimeout(); v <= 0 || t >= v {
		return o, &ValidityError{Lock: c.Lock, Lease: lease, Validity: v, Timeout: t}
	}
	return o, nil
}

// ValidityError reports a lock whose lease, less what its validity takes off (RedLock's drift
// allowance), does not outlast the order deadline: Validity is nothing (every attempt to take
// the lock would be refused), or not longer than Timeout.
type ValidityError struct {
	Lock                     string
	Lease, Validity, Timeout time.Duration
}

func (e *ValidityError) Error() string {
	drift := e.Lease - e.Validity
	if e.Validity <= 0 {
		return fmt.Sprintf("a %s lease of %s is valid for %s, nothing after its drift allowance (%s): every attempt to take the lock would be refused",
			e.Lock, e.Lease, e.Validity, drift)
	}
	return fmt.Sprintf("order timeout %s must be shorter than %s: a %s lease of %s is valid for that long (the rest, %s, is its drift allowance), and the lock must outlive every order that holds it",
		e.Timeout, e.Validity, e.Lock, e.Lease, drift)
}

// checkSchema fails early, and says what to do, when the migrations have not been applied,
// or not all of them: the order flow relies on each (a schema without 00004's CHECK lets a
// sold-out voucher's stock go below zero).
func checkSchema(ctx context.Context, db *database.DB) error {
	if err := db.WithContext(ctx).Exec("SELECT 1 FROM voucher_orders WHERE 1 = 0").Error; err != nil {
		return fmt.Errorf("database schema missing (run `seckill migrate` first): %w", err)
	}
	if err := db.CheckMigrated(ctx); err != nil {
		return fmt.Errorf("database schema out of date (run `seckill migrate` first): %w", err)
	}
	return nil
}

// Close stops the guard's background work and closes the pools.
func (i *Instance) Close() error {
	var errs []error
	for _, c := range i.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
