// Package order places seckill orders: one per user per voucher, never beyond the stock,
// guarded by a lock named after the user so that concurrent requests of one user, on any
// instance, run the check-and-insert one at a time.
package order

import (
	"errors"
	"time"
)

// Errors returned by Service.Place and Service.Get. voucher.ErrNotFound passes through unchanged.
var (
	ErrSaleNotActive  = errors.New("order: sale not active")
	ErrSoldOut        = errors.New("order: sold out")
	ErrAlreadyOrdered = errors.New("order: already ordered")
	ErrInProgress     = errors.New("order: another order of this user is in progress")
	// ErrOverloaded is returned at once when the instance already works on as many orders
	// as Config.MaxInflight allows: nothing was tried, and the caller may retry shortly.
	ErrOverloaded = errors.New("order: overloaded")
	// ErrUnavailable wraps an infrastructure failure (Redis, the database): no order was
	// placed, and the caller may retry.
	ErrUnavailable = errors.New("order: unavailable")
	// ErrDuplicate is returned by a Store when the unique key uk_user_voucher refused the
	// insert: a duplicate got past the lock and only the database stopped it.
	ErrDuplicate = errors.New("order: duplicate blocked by uk_user_voucher")
	// ErrNotFound is returned by Service.Get for an order that does not exist or is another
	// user's, and by a Store's reads for an order that does not exist.
	ErrNotFound = errors.New("order: not found")
)

// Status of an order, as hmdp's tb_voucher_order numbers them.
const (
	StatusUnpaid = 1
)

// Order is one user's order of one voucher.
type Order struct {
	ID        int64
	UserID    int64
	VoucherID int64
	Status    int
	CreatedAt time.Time
}
