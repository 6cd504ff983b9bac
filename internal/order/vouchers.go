package order

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/voucher"
)

// voucherTTL is how long an instance answers from the voucher it last read.
const voucherTTL = time.Second

// voucherCache keeps the vouchers an instance has read for voucherTTL, so that the checks in
// front of an order (sale window, stock) cost no database round trip, and a storm on a sold-out
// voucher is answered without admission.
//
// The sale window is judged on the database's clock, which every instance shares, not on the
// instance's own: each read from the database brings the database's time (voucher.ReadAt), and
// the cache keeps the instance's offset to it (clock). An instance whose clock runs ahead would
// otherwise sell before the sale began and refuse its last moments, and one behind the reverse
// (the pitfall of a deadline on a client's clock; the asynchronous mode reads Redis's TIME for the
// same reason).
//
// The checks mean what they meant uncached: a voucher's sale window never changes, and its
// committed stock only goes down, so a cached "not on sale" or "sold out" is the truth; a
// cached positive stock may be stale, and then the transaction's conditional decrement says
// sold out. A voucher that is not found is not cached: it may be created the next moment.
type voucherCache struct {
	src Vouchers
	now func() time.Time
	// offset is the database's clock less the instance's at the last read that brought the
	// database's time, in nanoseconds (0 before any).
	offset atomic.Int64

	mu sync.Mutex
	m  map[int64]cachedVoucher
}

type cachedVoucher struct {
	v       voucher.Voucher
	expires time.Time
}

func newVoucherCache(src Vouchers, now func() time.Time) *voucherCache {
	return &voucherCache{src: src, now: now, m: map[int64]cachedVoucher{}}
}

// cached returns the voucher id if it was read within voucherTTL.
func (c *voucherCache) cached(id int64) (voucher.Voucher, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || !c.now().Before(e.expires) {
		return voucher.Voucher{}, false
	}
	return e.v, true
}

// clock is the database's time as this instance reckons it: its own clock plus the offset the
// last read measured.
func (c *voucherCache) clock() time.Time {
	return c.now().Add(time.Duration(c.offset.Load()))
}

// get reads the voucher id from the store and caches it, and measures the instance's offset to
// the database's clock: the database read its clock between the instance's two readings
// around the call, taken as their midpoint.
func (c *voucherCache) get(ctx context.Context, id int64) (voucher.Voucher, error) {
	sent := c.now()
	v, err := c.src.Get(ctx, id)
	if err != nil {
		return v, err
	}
	now := c.now()
	if !v.ReadAt.IsZero() {
		c.offset.Store(int64(v.ReadAt.Sub(sent.Add(now.Sub(sent) / 2))))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= 1024 { // vouchers come and go: forget the expired ones
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
	}
	c.m[id] = cachedVoucher{v: v, expires: now.Add(voucherTTL)}
	return v, nil
}
