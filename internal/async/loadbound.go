package async

import (
	"context"
	"errors"
	"sync"
	"time"
)

// loadBounds bound one load of a voucher by its progress rather than by one deadline, which a
// voucher with enough orders would outlast on every attempt (see Loader.Load).
type loadBounds struct {
	// step bounds each step of a load, from the end of the one before: the first (the sale
	// hash's check, Redis's books, the voucher's row and the database's snapshot, and the first
	// page of rows), each page of rows read and restored after it, and the last (the sale hash
	// created, with the users of the pending orders, in one script).
	step time.Duration
	// perOrder bounds the whole: a load ends within step plus perOrder for each order it has
	// restored so far.
	perOrder time.Duration
	// page is how many orders one step reads from the database and restores.
	page int
}

// defaultLoadBounds: a step of 30 s is far beyond what a page of 20,000 orders takes (tens of
// milliseconds: docs/async.md, Loading and restarts), so a step cut by it met a store that
// stopped answering; 30 µs an order is about ten times or more what a load of millions of orders took
// per order on the 2-core machines measured (1.1–3.2 µs), so a load slower than that is stuck
// in a store that answers too slowly to serve a sale.
var defaultLoadBounds = loadBounds{step: 30 * time.Second, perOrder: 30 * time.Microsecond, page: restoreChunk * restorePipeline}

// Errors of a load cut by its bounds; the load's error wraps one of them.
var (
	// ErrLoadStalled: a step of the load took longer than its bound.
	ErrLoadStalled = errors.New("async: load made no progress within its step bound")
	// ErrLoadTooSlow: the load took longer than its bound for the orders it had restored.
	ErrLoadTooSlow = errors.New("async: load slower than its bound per order")
)

// loadDeadline ends a load's context when a step outlasts b.step, or the whole outlasts
// b.step + b.perOrder × the orders restored so far, with ErrLoadStalled or ErrLoadTooSlow as
// its cause.
type loadDeadline struct {
	b      loadBounds
	start  time.Time
	cancel context.CancelCauseFunc
	timer  *time.Timer

	mu     sync.Mutex
	orders int
	cause  error // what the timer's firing means
}

// withLoadDeadline returns ctx bounded by b from now, the deadline whose progress moves the
// bound, and a function that releases both.
func withLoadDeadline(parent context.Context, b loadBounds) (context.Context, *loadDeadline, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	d := &loadDeadline{b: b, start: time.Now(), cancel: cancel, cause: ErrLoadStalled}
	d.timer = time.AfterFunc(b.step, d.fire)
	return ctx, d, func() {
		d.timer.Stop()
		cancel(nil)
	}
}

func (d *loadDeadline) fire() {
	d.mu.Lock()
	cause := d.cause
	d.mu.Unlock()
	d.cancel(cause)
}

// progress records that a step ended, having restored orders more orders: the next step is
// given b.step, or what is left of the whole's bound when that is less.
func (d *loadDeadline) progress(orders int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.orders += orders
	now := time.Now()
	next, cause := now.Add(d.b.step), ErrLoadStalled
	if whole := d.start.Add(d.b.step + time.Duration(d.orders)*d.b.perOrder); whole.Before(next) {
		next, cause = whole, ErrLoadTooSlow
	}
	d.cause = cause
	d.timer.Reset(next.Sub(now)) // at once when the whole's bound has passed
}
