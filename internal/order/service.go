package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/voucher"
)

// Vouchers reads the voucher an order is for.
type Vouchers interface {
	Get(ctx context.Context, id int64) (voucher.Voucher, error)
}

// Store places an order in one database transaction (see SQLStore.Create).
type Store interface {
	Create(ctx context.Context, o Order, process func(context.Context) error) error
}

// Locks hands out the per-user lock.
type Locks interface {
	New(name string) lock.Lock
}

// IDs generates order ids.
type IDs interface {
	Next(ctx context.Context) (int64, error)
}

// Config tunes the order service.
type Config struct {
	// LockTTL is how long the per-user lock lives if its holder never releases it.
	LockTTL time.Duration
	// ProcessingDelay simulates business work inside the critical section, between the
	// existing-order check and the writes. Zero in production; the demo and load test set a
	// few milliseconds so that the unguarded race shows reliably.
	ProcessingDelay time.Duration
	// Process, if set, replaces ProcessingDelay as the business step inside the critical
	// section: it runs between the existing-order check and the writes of userID's order and
	// must return well within LockTTL. The demo sets it to hold a broken guard's window open
	// until a second request of the same user is inside.
	Process func(ctx context.Context, userID int64) error
	// Now is the clock for the sale window; nil means time.Now.
	Now func() time.Time
}

// Service places orders.
type Service struct {
	vouchers Vouchers
	store    Store
	locks    Locks
	ids      IDs
	metrics  *Metrics
	log      *slog.Logger
	cfg      Config
}

// NewService returns an order service.
func NewService(vouchers Vouchers, store Store, locks Locks, ids IDs, metrics *Metrics, log *slog.Logger, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = 10 * time.Second
	}
	return &Service{vouchers: vouchers, store: store, locks: locks, ids: ids, metrics: metrics, log: log, cfg: cfg}
}

// LockName returns the name of the lock that serialises userID's orders ("order:42", Redis
// key "lock:order:42").
func LockName(userID int64) string { return "order:" + strconv.FormatInt(userID, 10) }

// Place orders voucherID for userID and returns the new order's id.
//
// It returns voucher.ErrNotFound, ErrSaleNotActive, ErrSoldOut, ErrAlreadyOrdered (also when
// the unique key caught a duplicate the lock let through, which is counted as
// duplicate_blocked_by_db), ErrInProgress when another request of the user holds the lock, and
// an error wrapping ErrUnavailable when Redis or the database failed; then no order exists.
func (s *Service) Place(ctx context.Context, userID, voucherID int64) (int64, error) {
	id, result, err := s.place(ctx, userID, voucherID)
	if result != "" {
		s.metrics.orders.WithLabelValues(result).Inc()
	}
	return id, err
}

func (s *Service) place(ctx context.Context, userID, voucherID int64) (int64, string, error) {
	v, err := s.vouchers.Get(ctx, voucherID)
	switch {
	case errors.Is(err, voucher.ErrNotFound):
		return 0, "", err
	case err != nil:
		return 0, ResultError, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case !v.OnSale(s.cfg.Now()):
		return 0, ResultSaleNotActive, ErrSaleNotActive
	case v.Stock <= 0:
		return 0, ResultSoldOut, ErrSoldOut
	}

	l := s.locks.New(LockName(userID))
	start := time.Now()
	ok, err := l.TryLock(ctx, s.cfg.LockTTL)
	elapsed := time.Since(start).Seconds()
	switch {
	case err != nil:
		s.metrics.lockAcquire.WithLabelValues(lockError).Observe(elapsed)
		return 0, ResultError, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case !ok:
		s.metrics.lockAcquire.WithLabelValues(lockBusy).Observe(elapsed)
		return 0, ResultInProgress, ErrInProgress
	}
	s.metrics.lockAcquire.WithLabelValues(lockAcquired).Observe(elapsed)
	// Unlock only after create returned, that is after the commit: released inside the
	// transaction, the lock would let a second request read before the first commits.
	defer s.unlock(ctx, l, userID, voucherID)
	return s.create(ctx, userID, voucherID)
}

func (s *Service) create(ctx context.Context, userID, voucherID int64) (int64, string, error) {
	id, err := s.ids.Next(ctx)
	if err != nil {
		return 0, ResultError, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	o := Order{ID: id, UserID: userID, VoucherID: voucherID, Status: StatusUnpaid, CreatedAt: s.cfg.Now().UTC()}
	err = s.store.Create(ctx, o, s.process(userID))
	switch {
	case err == nil:
		return id, ResultCreated, nil
	case errors.Is(err, ErrAlreadyOrdered):
		return 0, ResultAlreadyOrdered, ErrAlreadyOrdered
	case errors.Is(err, ErrSoldOut):
		return 0, ResultSoldOut, ErrSoldOut
	case errors.Is(err, ErrDuplicate):
		s.log.Warn("duplicate order reached the database; uk_user_voucher refused it",
			"user_id", userID, "voucher_id", voucherID)
		return 0, ResultDuplicateByDB, ErrAlreadyOrdered
	default:
		return 0, ResultError, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
}

// process returns the business step inside the critical section of userID's order.
func (s *Service) process(userID int64) func(context.Context) error {
	if s.cfg.Process != nil {
		return func(ctx context.Context) error { return s.cfg.Process(ctx, userID) }
	}
	return s.delay
}

// delay is the simulated business step: ProcessingDelay of waiting.
func (s *Service) delay(ctx context.Context) error {
	if s.cfg.ProcessingDelay <= 0 {
		return nil
	}
	t := time.NewTimer(s.cfg.ProcessingDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlock releases the lock even if the request's context is gone: a client that hung up
// must not leave its lock to expire.
func (s *Service) unlock(ctx context.Context, l lock.Lock, userID, voucherID int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	err := l.Unlock(ctx)
	switch {
	case err == nil:
	case errors.Is(err, lock.ErrNotHeld):
		s.metrics.lockLost.Inc()
		s.log.Error("order lock was no longer ours at unlock (expired or taken): the critical section may have been violated",
			"user_id", userID, "voucher_id", voucherID, "lock_ttl", s.cfg.LockTTL, "err", err)
	default:
		s.metrics.unlockErrors.Inc()
		s.log.Warn("unlock failed; the lock will expire on its own", "user_id", userID, "err", err)
	}
}
