package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// The order modes (SECKILL_ORDER_MODE).
const (
	// ModeSync places each order in one database transaction behind the per-user lock: 201.
	ModeSync = "sync"
	// ModeAsync admits orders in Redis (202 pending) and writes them with the stream writer.
	ModeAsync = "async"
)

// asyncLoadTimeout bounds loading the vouchers on sale into Redis at start.
const asyncLoadTimeout = 2 * time.Minute

// Async is the asynchronous mode's side of an instance; nil in the synchronous mode.
type Async struct {
	Service  *async.Service
	Writer   *async.Writer
	Loader   *async.Loader
	Statuses *async.Statuses
	Store    *async.Store
}

// newAsync wires the asynchronous mode over the instance's pools: it loads the vouchers on
// sale that Redis lacks and starts the writer.
func newAsync(ctx context.Context, log *slog.Logger, cfg Config, db *database.DB, rdb redis.UniversalClient, ids async.IDs, reg prometheus.Registerer) (*Async, error) {
	acfg := cfg.Async
	if acfg.Timeout == 0 {
		acfg.Timeout = cfg.Order.EffectiveTimeout()
	}
	if acfg.Now == nil {
		acfg.Now = cfg.Order.Now
	}
	st := async.NewStore(db)
	loader := async.NewLoader(rdb, st, log)
	lctx, cancel := context.WithTimeout(ctx, asyncLoadTimeout)
	defer cancel()
	now := time.Now()
	if acfg.Now != nil {
		now = acfg.Now()
	}
	if err := loader.LoadOnSale(lctx, now); err != nil {
		return nil, fmt.Errorf("async: load the vouchers on sale into redis: %w", err)
	}
	metrics := async.NewMetrics(reg)
	a := &Async{
		Service:  async.NewService(rdb, ids, loader, metrics, log, acfg),
		Writer:   async.NewWriter(rdb, st, loader, metrics, log, acfg),
		Loader:   loader,
		Statuses: async.NewStatuses(rdb, st),
		Store:    st,
	}
	a.Writer.Start()
	return a, nil
}

// stop drains the writer within its StopTimeout, which grows with the claim idle as the
// batch's deadline does: a batch in progress commits and acknowledges; what the writer read
// and did not write is claimed later.
func (a *Async) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.Writer.StopTimeout())
	defer cancel()
	return a.Writer.Stop(ctx)
}

// loadOnCreate loads a new voucher into Redis as soon as the database has it. A load that
// fails is logged: the first admission of the voucher loads it then.
type loadOnCreate struct {
	api.Vouchers
	loader *async.Loader
	log    *slog.Logger
}

func (v loadOnCreate) Create(ctx context.Context, in voucher.Voucher) (voucher.Voucher, error) {
	out, err := v.Vouchers.Create(ctx, in)
	if err != nil {
		return out, err
	}
	if err := v.loader.Load(ctx, out.ID); err != nil {
		v.log.Warn("new voucher not loaded into redis; its first order loads it", "voucher_id", out.ID, "err", err)
	}
	return out, nil
}

// DeadLettered returns how many orders of voucherID are in its dead-letter stream.
func (a *Async) DeadLettered(ctx context.Context, voucherID int64) (int64, error) {
	return a.Statuses.DeadLettered(ctx, voucherID)
}

// asyncOrders places orders by admission in Redis and reads them through the order service,
// which asks the pending orders first.
type asyncOrders struct {
	*async.Service
	get *order.Service
}

// Get returns userID's order orderID: pending, failed or written.
func (o asyncOrders) Get(ctx context.Context, userID, orderID int64) (order.Summary, error) {
	return o.get.Get(ctx, userID, orderID)
}
