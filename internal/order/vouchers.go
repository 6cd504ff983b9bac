package order

import (
	"context"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/voucher"
)

// voucherTTL is how long an instance answers from the voucher it last read.
const voucherTTL = time.Second

// voucherCache keeps the vouchers an instance has read for voucherTTL, so that the checks in
// front of an order (sale window, stock) cost no database round trip, and a storm on a sold-out
// voucher is answered without admission.
//
// The checks mean what they meant uncached: a voucher's sale window never changes, and its
// committed stock only goes down, so a cached "not on sale" or "sold out" is the truth; a
// cached positive stock may be stale, and then the transaction's conditional decrement says
// sold out. A voucher that is not found is not cached: it may be created the next moment.
type voucherCache struct {
	src Vouchers
	now func() time.Time

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

// get reads the voucher id from the store and caches it.
func (c *voucherCache) get(ctx context.Context, id int64) (voucher.Voucher, error) {
	v, err := c.src.Get(ctx, id)
	if err != nil {
		return v, err
	}
	now := c.now()
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
