package order

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	// DefaultLockTTL is the per-user lock's lease when Config.LockTTL is zero.
	DefaultLockTTL = 10 * time.Second
	// DefaultTimeout is an order's deadline when Config.Timeout is zero, unless half the
	// lease is shorter (then half the lease).
	DefaultTimeout = 2 * time.Second
)

// Config tunes the order service.
type Config struct {
	// LockTTL is how long the per-user lock lives if its holder never releases it.
	LockTTL time.Duration
	// Timeout is each order's deadline, from its arrival to its commit or rollback: every
	// Redis and database call of the order (a wait for a pooled connection too) ends by
	// then. It must be shorter than LockTTL, so that an order that cannot finish gives up
	// and rolls back while its lock is still its own. Zero takes DefaultTimeout or half
	// LockTTL, whichever is shorter.
	Timeout time.Duration
	// MaxInflight bounds the orders the instance works on at once; an order beyond it is
	// refused at once with ErrOverloaded. Zero means no bound.
	MaxInflight int
	// ProcessingDelay simulates business work inside the critical section, before the
	// order's writes (SQLStore.Create). Zero in production; the demo and load test set a
	// few milliseconds so that the unguarded race shows reliably.
	ProcessingDelay time.Duration
	// Process, if set, replaces ProcessingDelay as the business step inside the critical
	// section: it runs before the writes of userID's order (SQLStore.Create) and
	// must return when ctx, which carries the order's deadline, is done. The demo sets it to
	// hold a broken guard's window open until a second request of the same user is inside.
	Process func(ctx context.Context, userID int64) error
	// Now is the clock for the sale window and the voucher cache; nil means time.Now.
	Now func() time.Time
	// Pending knows the orders admitted but not yet in the database; Get and the
	// already-ordered answer ask it before the database (and Get its record of failed orders
	// after). Nil in the synchronous mode, where an order is a committed row or nothing.
	Pending Pending
	// Fencing fences every order write with its lock's fencing token (Kleppmann's): the
	// write presents the token to the lock_fences row of the lock, and one older than a
	// token already presented is refused with ErrFenced. The locks must implement
	// lock.Fenced.
	Fencing bool
	// TokenSource names the sequence the locks' tokens come from (app passes the lock kind):
	// fences of different sources are different rows, for their tokens cannot be compared.
	TokenSource string
	// OutliveLease lets Timeout reach or exceed LockTTL. With Fencing that is safe: an order
	// that outlives its lease is refused at the write (app sets it for an explicit
	// SECKILL_FENCING=on, never by default). Without, only the fencing experiment sets it, to
	// show what an order outliving its lease does unfenced, and app in the asynchronous mode,
	// whose orders take no lock and so have no lease to outlive.
	OutliveLease bool
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LockTTL <= 0 {
		c.LockTTL = DefaultLockTTL
	}
	if c.Timeout <= 0 {
		c.Timeout = min(DefaultTimeout, c.LockTTL/2)
	}
	return c
}

// EffectiveTimeout is each order's deadline: Timeout, or its default when zero.
func (c Config) EffectiveTimeout() time.Duration { return c.withDefaults().Timeout }

// Validate reports a configuration the service must not run with: an order deadline that is
// not shorter than the lock's lease unless OutliveLease (the lock could lapse while its order
// still writes), a processing delay that no order could finish within its deadline, or a
// negative bound.
func (c Config) Validate() error {
	d := c.withDefaults()
	var errs []error
	if d.Timeout >= d.LockTTL && !c.OutliveLease {
		errs = append(errs, fmt.Errorf("order timeout %s must be shorter than the lock TTL %s: the lock must outlive every order that holds it (unless fencing is set on explicitly)", d.Timeout, d.LockTTL))
	}
	if c.ProcessingDelay >= d.Timeout {
		errs = append(errs, fmt.Errorf("order delay %s must be shorter than the order timeout %s", c.ProcessingDelay, d.Timeout))
	}
	if c.MaxInflight < 0 {
		errs = append(errs, fmt.Errorf("max in-flight orders %d must not be negative", c.MaxInflight))
	}
	return errors.Join(errs...)
}
