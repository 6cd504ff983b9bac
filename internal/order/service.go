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

// Store places an order in one database transaction (see SQLStore.Create) and reads orders
// back; the reads return ErrNotFound when there is no such order.
type Store interface {
	Create(ctx context.Context, o Order, fence Fence, process func(context.Context) error) error
	Get(ctx context.Context, id int64) (Order, error)
	GetByUser(ctx context.Context, userID, voucherID int64) (Order, error)
}

// Locks hands out the per-user lock.
type Locks interface {
	New(name string) lock.Lock
}

// IDs generates order ids.
type IDs interface {
	Next(ctx context.Context) (int64, error)
}

// Service places orders.
type Service struct {
	vouchers *voucherCache
	store    Store
	locks    Locks
	ids      IDs
	metrics  *Metrics
	log      *slog.Logger
	cfg      Config
	// slots holds one token per order in progress; nil when MaxInflight is zero.
	slots chan struct{}
}

// NewService returns an order service. Zero fields of cfg take their defaults; app.New
// refuses a cfg that Validate refuses.
func NewService(vouchers Vouchers, store Store, locks Locks, ids IDs, metrics *Metrics, log *slog.Logger, cfg Config) *Service {
	cfg = cfg.withDefaults()
	s := &Service{vouchers: newVoucherCache(vouchers, cfg.Now), store: store, locks: locks, ids: ids, metrics: metrics, log: log, cfg: cfg}
	if cfg.MaxInflight > 0 {
		s.slots = make(chan struct{}, cfg.MaxInflight)
	}
	return s
}

// LockName returns the name of the lock that serialises userID's orders ("order:42", Redis
// key "lock:order:42").
func LockName(userID int64) string { return "order:" + strconv.FormatInt(userID, 10) }

// Place orders voucherID for userID and returns the new order's id.
//
// It returns voucher.ErrNotFound, ErrSaleNotActive, ErrSoldOut, ErrAlreadyOrdered (also when
// the unique key caught a duplicate the lock let through, which is counted as
// duplicate_blocked_by_db; an *AlreadyOrderedError with the existing order's id when it
// could be read), ErrInProgress when another request of the user holds the lock, ErrFenced
// when fencing is on and a newer holder of the user's lock fenced this order off (its lease
// ran out mid-order; nothing was written), ErrOverloaded when the instance already works on MaxInflight orders, and an error wrapping
// ErrUnavailable when Redis or the database failed or did not answer within the order's
// deadline (Config.Timeout), or ctx was cancelled; then no order was placed, unless a commit
// whose answer was lost went through, which a retry learns as ErrAlreadyOrdered.
func (s *Service) Place(ctx context.Context, userID, voucherID int64) (int64, error) {
	id, result, err := s.place(ctx, userID, voucherID)
	if result == ResultError && errors.Is(ctx.Err(), context.Canceled) {
		result = ResultCanceled // the client went away: not a failure of the stores
	}
	if result != "" {
		s.metrics.orders.WithLabelValues(result).Inc()
	}
	return id, err
}

func (s *Service) place(ctx context.Context, userID, voucherID int64) (int64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	// The cheap check comes first, from the cache: a storm on a voucher not on sale takes no
	// slot. Everything that talks to a store runs inside a slot, so the slots bound the
	// goroutines and connections a hung store can hold; that includes the read that tells a
	// sold-out voucher's buyer (already_ordered) from everyone else (sold_out).
	v, cached := s.vouchers.cached(voucherID)
	if cached && !v.OnSale(s.vouchers.clock()) {
		return 0, ResultSaleNotActive, ErrSaleNotActive
	}
	if !s.admit() {
		return 0, ResultOverloaded, ErrOverloaded
	}
	defer s.leave()
	if !cached {
		var err error
		v, err = s.vouchers.get(ctx, voucherID)
		switch {
		case errors.Is(err, voucher.ErrNotFound):
			return 0, "", err
		case err != nil:
			return 0, ResultError, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	at := s.vouchers.clock() // the order's date (see create)
	if result, err := s.check(v, at); err != nil {
		if errors.Is(err, ErrSoldOut) {
			return s.soldOut(ctx, userID, voucherID)
		}
		return 0, result, err
	}

	// The lock is taken last, once the order can proceed: its lease starts after the
	// deadline did, so the order ends (commits or rolls back) while the lock is still ours.
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
	fence, err := s.fence(l, userID)
	if err != nil {
		return 0, ResultError, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return s.create(ctx, userID, voucherID, fence, at)
}

// fence returns the fence of userID's order under l, just granted: none unless Fencing is
// on; with it, l's token, read once, now, so that it stays the token of this grant.
func (s *Service) fence(l lock.Lock, userID int64) (Fence, error) {
	if !s.cfg.Fencing {
		return Fence{}, nil
	}
	f, ok := l.(lock.Fenced)
	if !ok {
		return Fence{}, fmt.Errorf("fencing is on but the lock %T issues no fencing token", l)
	}
	t := f.Token()
	if t <= 0 {
		return Fence{}, fmt.Errorf("fencing is on but the lock %T granted no fencing token", l)
	}
	return Fence{Name: fenceName(s.cfg.TokenSource, LockName(userID)), Token: t}, nil
}

// soldOut answers an order of a voucher without stock: already_ordered with the user's order
// when the user has one (the order that took a unit, whose answer may have been lost: its
// retry must learn it, as in the asynchronous mode, whose script checks the user before the
// stock), else sold_out. One indexed read, inside the order's slot and deadline; when it fails
// the answer is unavailable: sold_out could hide the user's order.
func (s *Service) soldOut(ctx context.Context, userID, voucherID int64) (int64, string, error) {
	id, err := s.existing(ctx, userID, voucherID)
	switch {
	case err == nil:
		return 0, ResultAlreadyOrdered, &AlreadyOrderedError{OrderID: id}
	case errors.Is(err, ErrNotFound):
		return 0, ResultSoldOut, ErrSoldOut
	default:
		return 0, ResultError, fmt.Errorf("%w: read the user's order of a sold-out voucher: %w", ErrUnavailable, err)
	}
}

// check refuses an order of v outside its sale window at at, or without stock.
func (s *Service) check(v voucher.Voucher, at time.Time) (string, error) {
	switch {
	case !v.OnSale(at):
		return ResultSaleNotActive, ErrSaleNotActive
	case v.Stock <= 0:
		return ResultSoldOut, ErrSoldOut
	}
	return "", nil
}

// admit takes a slot if one is free; it never waits: a queue in front of a slow store only
// makes every order in it slower, until they all time out.
func (s *Service) admit() bool {
	if s.slots == nil {
		return true
	}
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// leave frees the slot admit took.
func (s *Service) leave() {
	if s.slots != nil {
		<-s.slots
	}
}

// create writes userID's order, dated at: the database's time when its sale window was judged.
func (s *Service) create(ctx context.Context, userID, voucherID int64, fence Fence, at time.Time) (int64, string, error) {
	id, err := s.ids.Next(ctx)
	if err != nil {
		return 0, ResultError, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// created_at on the database's clock, at the instant the sale window was judged, as the
	// asynchronous mode's script dates its orders: neither an instance whose clock is off nor
	// an order let in at the sale's last moment (its lock, id and connection may come after
	// the end) is dated outside the sale it was sold in. In whole milliseconds, as the sale's
	// times are: Oracle's MySQL rounds to the column's (MariaDB truncates), which could take
	// the sale's last moment to its end.
	o := Order{ID: id, UserID: userID, VoucherID: voucherID, Status: StatusUnpaid, CreatedAt: at.UTC().Truncate(time.Millisecond)}
	err = s.store.Create(ctx, o, fence, s.process(userID))
	switch {
	case err == nil:
		return id, ResultCreated, nil
	case errors.Is(err, ErrAlreadyOrdered):
		return 0, ResultAlreadyOrdered, s.alreadyOrdered(ctx, userID, voucherID)
	case errors.Is(err, ErrSoldOut):
		return 0, ResultSoldOut, ErrSoldOut
	case errors.Is(err, ErrFenced):
		s.log.Warn("order fenced off: its lock expired and a newer holder claimed it; nothing was written",
			"user_id", userID, "voucher_id", voucherID, "token", fence.Token, "lock_ttl", s.cfg.LockTTL)
		return 0, ResultFenced, ErrFenced
	case errors.Is(err, ErrDuplicate):
		s.log.Warn("duplicate order reached the database; uk_user_voucher refused it",
			"user_id", userID, "voucher_id", voucherID)
		return 0, ResultDuplicateByDB, s.alreadyOrdered(ctx, userID, voucherID)
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
