// Package voucher owns seckill vouchers: the coupon, its stock and its sale window.
package voucher

import (
	"errors"
	"time"
)

// Errors returned by the voucher service and store.
var (
	ErrNotFound = errors.New("voucher: not found")
	ErrInvalid  = errors.New("voucher: invalid")
)

// Voucher is a seckill voucher as the API shows it. Money is in cents; times are UTC.
type Voucher struct {
	ID          int64
	Title       string
	SubTitle    string
	Rules       string
	PayValue    int64
	ActualValue int64
	Stock       int
	BeginTime   time.Time
	EndTime     time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// ReadAt is the database's clock when Store.Get read the voucher (zero for a voucher not
	// read from the database): the clock every instance shares, on which the synchronous
	// mode judges the sale window (order.Service), as the asynchronous one judges it on Redis's.
	// Not part of the API.
	ReadAt time.Time
}

// OnSale reports whether now falls in the sale window: BeginTime <= now < EndTime.
func (v Voucher) OnSale(now time.Time) bool {
	return !now.Before(v.BeginTime) && now.Before(v.EndTime)
}

// Limits on what a voucher may hold.
const (
	MaxTitleLen = 255
	MaxRulesLen = 1024
	MaxStock    = 100_000_000
)
