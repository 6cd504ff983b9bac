package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// instance is one service instance: its own pools, process id, locks and metrics.
type instance struct {
	handler  http.Handler
	db       *database.DB
	redis    redis.UniversalClient
	registry *prometheus.Registry
	process  string
	closers  []func() error
}

// newInstance wires one instance over st with the guard cfg.lock.
func newInstance(ctx context.Context, log *slog.Logger, cfg config, st *stores) (*instance, error) {
	db, err := st.openDB(ctx, database.Pool{MaxOpen: 32, MaxIdle: 32})
	if err != nil {
		return nil, err
	}
	rdb := st.openRedis(128)
	inst := &instance{db: db, redis: rdb, registry: prometheus.NewRegistry(), process: lock.NewProcessID()}
	inst.closers = append(inst.closers, rdb.Close, db.Close)
	if err := checkSchema(ctx, db); err != nil {
		_ = inst.close()
		return nil, err
	}

	inst.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	locks, closeLocks := lockKinds[cfg.lock].new(rdb, inst.process, cfg.lockTTL)
	inst.closers = append([]func() error{closeLocks}, inst.closers...)

	vouchers := voucher.NewService(voucher.NewStore(db.DB))
	orders := order.NewService(vouchers, order.NewSQLStore(db), locks, idgen.New(rdb, "order"),
		order.NewMetrics(inst.registry), log, order.Config{LockTTL: cfg.lockTTL, ProcessingDelay: cfg.orderDelay})
	inst.handler = api.NewServer(log, api.Config{
		AdminToken: cfg.adminToken,
		Ready: map[string]api.Check{
			"database": db.Ping,
			"redis":    func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		},
		Metrics: promhttp.HandlerFor(inst.registry, promhttp.HandlerOpts{}),
	}, vouchers, orders)
	return inst, nil
}

// checkSchema fails early, and says what to do, when the migrations have not been applied.
func checkSchema(ctx context.Context, db *database.DB) error {
	if err := db.WithContext(ctx).Exec("SELECT 1 FROM voucher_orders WHERE 1 = 0").Error; err != nil {
		return fmt.Errorf("database schema missing (run `seckill migrate` first): %w", err)
	}
	return nil
}

func (i *instance) close() error {
	var errs []error
	for _, c := range i.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
