package async_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// sellBehind sells one unit of voucherID in the database outside the stream (a row of user's
// and the stock taken, as an order of another channel would): Redis still counts the unit.
func (f *fixture) sellBehind(voucherID, user int64) {
	f.t.Helper()
	now := time.Now().UTC()
	require.NoError(f.t, f.db.Exec("UPDATE seckill_vouchers SET stock = stock - 1 WHERE voucher_id = ?", voucherID).Error)
	require.NoError(f.t, f.db.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)",
		user, user, voucherID, now, now).Error)
}

// deadLetters waits until voucherID's dead-letter stream holds n entries and returns the
// 'unit' field of each.
func (f *fixture) deadLetters(voucherID int64, n int) []any {
	f.t.Helper()
	ctx := context.Background()
	_, _, _, _, dead := async.KeysOf(voucherID)
	f.eventually("dead-lettered", func() bool {
		l, err := f.rdb.XLen(ctx, dead).Result()
		return err == nil && l == int64(n)
	})
	msgs, err := f.rdb.XRange(ctx, dead, "-", "+").Result()
	require.NoError(f.t, err)
	units := make([]any, len(msgs))
	for i, m := range msgs {
		units[i] = m.Values["unit"]
	}
	return units
}

// keptSale sells a voucher of stock 3 that had one unit sold behind Redis (sellBehind) to
// users 1 to 3, with a writer that dead-letters at the first refusal (the fixture's
// MaxAttempts 1): two orders are written and the third, which the database's stock is short
// of, is dead-lettered with its unit kept. It returns the voucher and the admitted orders.
func (f *fixture) keptSale() (int64, map[int64]int64) {
	f.t.Helper()
	vid := f.voucher(3)
	require.NoError(f.t, f.loader.Load(context.Background(), vid))
	f.sellBehind(vid, 99)
	admitted := f.place(vid, 1, 3)
	require.Equal(f.t, int64(1), f.book(vid).Drift(), "Redis counts the unit sold behind it")
	f.writer("w", nil)
	require.Equal(f.t, []any{"kept"}, f.deadLetters(vid, 1))
	f.eventually("the others written", func() bool { return len(f.rows(vid)) == 3 })
	return vid, admitted
}

// TestDeadLetterStockShortKeepsTheUnit: the database's stock is one unit short of what Redis
// counts (a unit sold outside the stream). The order the database cannot cover is
// dead-lettered without giving its unit back: given back, it would admit another order that
// the database refuses too, one false 202-then-failed per unit until the sale ends. Kept,
// Redis comes down to the database: sold out, the books balanced. (A conflict's unit goes
// back: TestDeadLetter.)
func TestDeadLetterStockShortKeepsTheUnit(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 1})
			ctx := context.Background()
			vid, admitted := f.keptSale()
			b := f.book(vid)
			assert.Zero(t, b.RedisStock, "the stock-short order's unit is not given back")
			assert.Zero(t, b.Drift(), "books %+v", b)
			assert.Equal(t, int64(1), b.Kept, "the books show the unit kept")
			var failed int64
			for id := range admitted {
				if p, ok, err := f.statuses.Lookup(ctx, id); err == nil && ok && p.Failed {
					failed = id
					assert.Contains(t, p.Reason, async.ErrStockShort.Error())
				}
			}
			require.NotZero(t, failed, "one admitted order failed")
			_, err := f.svc.Place(ctx, 4, vid)
			assert.ErrorIs(t, err, order.ErrSoldOut, "no unit the database lacks is sold again")
			_, err = f.svc.Place(ctx, admitted[failed], vid)
			assert.ErrorIs(t, err, order.ErrSoldOut, "the failed order's user is released, and finds the sale sold out")
		})
	}
}

// TestDeadLetterStockShortAfterReload: Redis reloads a voucher whose database stock cannot
// cover the orders pending (one unit was sold outside the stream): the loaded stock is below
// zero, the database's stock less the orders pending, and already counts the unit of the
// order the database will refuse. That order's dead letter gives its unit back to settle the
// debt, so the stock ends at zero and the books balance; kept, the stock would stay at -1
// and the books show a unit lost.
func TestDeadLetterStockShortAfterReload(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 1})
			ctx := context.Background()
			vid := f.voucher(2)
			require.NoError(t, f.loader.Load(ctx, vid))
			f.place(vid, 1, 2)
			f.sellBehind(vid, 99)
			sale, users, _, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale, users).Err())
			require.NoError(t, f.loader.Load(ctx, vid))
			b := f.book(vid)
			require.Equal(t, int64(-1), b.RedisStock, "database stock 1 less 2 orders pending")
			require.Zero(t, b.Drift(), "books %+v", b)

			f.writer("w", nil)
			assert.Equal(t, []any{"returned"}, f.deadLetters(vid, 1))
			f.eventually("the other written", func() bool { return len(f.rows(vid)) == 2 })
			b = f.book(vid)
			assert.Zero(t, b.RedisStock, "the debt settled, no unit to sell")
			assert.Zero(t, b.Drift(), "books %+v", b)
			assert.Zero(t, b.Kept, "the unit went back: none kept")
			_, err := f.svc.Place(ctx, 3, vid)
			assert.ErrorIs(t, err, order.ErrSoldOut)
		})
	}
}

// TestStockChangedBehindRedis: there is no API to change a voucher's stock; an operator who
// changes it in the database and then deletes the sale hash (docs/async.md, "Changing a
// voucher's stock") has the next admission reload it: stock = the database's stock less the
// orders pending. After a stock-short dead letter kept its unit, that reload counts neither the
// kept unit (the database never had it) nor the raise twice: the raise is sold exactly, and
// the books agree with the kept unit still shown.
func TestStockChangedBehindRedis(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 1})
			ctx := context.Background()
			vid, _ := f.keptSale()

			require.NoError(t, f.db.Exec("UPDATE seckill_vouchers SET stock = stock + 2 WHERE voucher_id = ?", vid).Error)
			b := f.book(vid)
			require.Equal(t, int64(-2), b.Drift(), "Redis does not know of the raise: books %+v", b)
			sale, _, _, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale).Err())
			admitted := f.place(vid, 10, 11) // the first finds the sale hash missing and reloads it
			_, err := f.svc.Place(ctx, 12, vid)
			assert.ErrorIs(t, err, order.ErrSoldOut, "the raise of 2 is sold, no more")
			f.eventually("the raise written", func() bool { return len(f.rows(vid)) == 5 })
			rows := f.rows(vid)
			for id := range admitted {
				assert.Contains(t, rows, id)
			}
			b = f.book(vid)
			assert.Equal(t, async.Book{VoucherID: vid, Loaded: true, Initial: 5, Orders: 5, Kept: 1}, b)
			assert.Equal(t, []any{"kept"}, f.deadLetters(vid, 1), "no other dead letter")
		})
	}
}
