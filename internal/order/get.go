package order

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// State is where an order stands on its way to the database, as its owner sees it.
type State string

// The states of an order. The synchronous mode answers only once the row is committed, so
// its orders are always StateCreated; the asynchronous mode admits an order first
// (StatePending) and writes it later (StateCreated) or gives it up (StateFailed).
const (
	StatePending State = "pending"
	StateCreated State = "created"
	StateFailed  State = "failed"
)

// Summary is what the owner of an order may learn of it.
type Summary struct {
	ID        int64
	UserID    int64
	VoucherID int64
	State     State
	// Reason says why an order failed; empty unless State is StateFailed.
	Reason    string
	CreatedAt time.Time
}

// Pending knows the orders that are admitted but are no rows in the database (yet): in the
// asynchronous mode, the orders waiting for the stream writer and those it gave up on. The
// synchronous mode has none (Config.Pending is nil).
//
// The service asks Pending first and the database second, so an order must stay known to
// Pending's Lookup until its row is committed: then no lookup falls between the two. An order
// given up may leave Lookup (its sale's keys retired) once it is in Failed's record: asked
// last, after the database found no row, Failed finds it there.
type Pending interface {
	// Lookup returns orderID's summary (StatePending or StateFailed) and true, or false when
	// Pending knows nothing of orderID: then the database is asked.
	Lookup(ctx context.Context, orderID int64) (Summary, bool, error)
	// Failed returns orderID's summary (StateFailed) from the durable record of the orders
	// given up, which outlives Lookup's, and true; or false when it holds none. It is asked
	// only for an order that neither Lookup nor the database knows, so that a written order,
	// the common case, costs no read of it.
	Failed(ctx context.Context, orderID int64) (Summary, bool, error)
	// OrderOf returns the id of userID's admitted order of voucherID and true, or false when
	// Pending knows none: then the database is asked. A failed order is no longer the user's
	// order (its reservation was released): OrderOf answers false for it.
	OrderOf(ctx context.Context, userID, voucherID int64) (int64, bool, error)
}

// AlreadyOrderedError is the ErrAlreadyOrdered that Place returns when it could read the
// user's existing order of the voucher: errors.Is(err, ErrAlreadyOrdered) holds for both, and
// a client that retries after losing its answer learns its order from OrderID.
type AlreadyOrderedError struct {
	OrderID int64
}

func (e *AlreadyOrderedError) Error() string {
	return fmt.Sprintf("%v: order %d", ErrAlreadyOrdered, e.OrderID)
}

// Unwrap makes errors.Is(err, ErrAlreadyOrdered) hold.
func (e *AlreadyOrderedError) Unwrap() error { return ErrAlreadyOrdered }

// Get returns userID's order orderID: from Pending's Lookup if it knows the order, else from
// the database (then StateCreated), else from Pending's record of failed orders. It returns
// ErrNotFound when there is no such order and also when it is another user's, so that nobody
// learns which ids exist; an error wrapping ErrUnavailable when a store failed or did not
// answer within Config.Timeout.
func (s *Service) Get(ctx context.Context, userID, orderID int64) (Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if s.cfg.Pending != nil {
		if sum, ok, err := s.pending(ctx, "look up pending order", s.cfg.Pending.Lookup, userID, orderID); err != nil || ok {
			return sum, err
		}
	}
	o, err := s.store.Get(ctx, orderID)
	switch {
	case errors.Is(err, ErrNotFound) && s.cfg.Pending != nil:
		if sum, ok, err := s.pending(ctx, "look up failed order", s.cfg.Pending.Failed, userID, orderID); err != nil || ok {
			return sum, err
		}
		return Summary{}, ErrNotFound
	case errors.Is(err, ErrNotFound):
		return Summary{}, ErrNotFound
	case err != nil:
		return Summary{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case o.UserID != userID:
		return Summary{}, ErrNotFound
	}
	return Summary{ID: o.ID, UserID: o.UserID, VoucherID: o.VoucherID, State: StateCreated, CreatedAt: o.CreatedAt}, nil
}

// pending asks lookup, one of Pending's (op names it in errors), for orderID: its summary and
// true when it knows an order of userID's; ErrNotFound when it knows another user's.
func (s *Service) pending(ctx context.Context, op string, lookup func(context.Context, int64) (Summary, bool, error), userID, orderID int64) (Summary, bool, error) {
	sum, ok, err := lookup(ctx, orderID)
	switch {
	case err != nil:
		return Summary{}, false, fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	case ok && sum.UserID != userID:
		return Summary{}, false, ErrNotFound
	}
	return sum, ok, nil
}

// alreadyOrdered is Place's answer when userID already has an order of voucherID: an
// *AlreadyOrderedError with its id, or ErrAlreadyOrdered alone when the id could not be read
// within ctx (the answer is the same refusal; only the id is missing). It changes no count.
func (s *Service) alreadyOrdered(ctx context.Context, userID, voucherID int64) error {
	id, err := s.existing(ctx, userID, voucherID)
	if err != nil {
		s.log.Warn("already ordered, but the existing order could not be read; answered without its id",
			"user_id", userID, "voucher_id", voucherID, "err", err)
		return ErrAlreadyOrdered
	}
	return &AlreadyOrderedError{OrderID: id}
}

// existing returns the id of userID's order of voucherID: Pending's, else the database's.
func (s *Service) existing(ctx context.Context, userID, voucherID int64) (int64, error) {
	if s.cfg.Pending != nil {
		id, ok, err := s.cfg.Pending.OrderOf(ctx, userID, voucherID)
		switch {
		case err != nil:
			return 0, err
		case ok:
			return id, nil
		}
	}
	o, err := s.store.GetByUser(ctx, userID, voucherID)
	if err != nil {
		return 0, err
	}
	return o.ID, nil
}
