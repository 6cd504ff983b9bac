package async_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// TestLoadThatLostTheRaceRestoresNoReleasedUser: two instances reload one voucher at once
// (its sale hash deleted to change its stock, or lost). The one whose load creates the sale
// hash second read the stream before the first created it; an order it read there was
// dead-lettered since, which released its user. The second load restored that user's order
// all the same, after the release, and its script, finding the sale hash, changed nothing:
// the user stayed mapped to a failed order, refused already_ordered with it, unable to buy
// again, for the rest of the sale.
func TestLoadThatLostTheRaceRestoresNoReleasedUser(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 1})
			ctx := context.Background()
			vid := f.voucher(2)
			failed := f.place(vid, 1, 1)
			f.sellBehind(vid, 99)
			f.sellBehind(vid, 98) // the database's stock 0: the order of user 1 is refused
			sale, _, _, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale).Err())

			other := async.NewLoader(f.rdb, f.store, quiet)
			async.SetAfterBooks(other, func(int64) {
				// Between the other load's reads and its creation: this instance loads the
				// voucher, and a writer dead-letters the order of user 1, releasing the user.
				require.NoError(t, f.loader.Load(ctx, vid))
				w := f.writer("w", nil)
				require.Equal(t, []any{"returned"}, f.deadLetters(vid, 1), "the debt of a reload paid back")
				stopped(t, w)
				_, ok, err := f.statuses.OrderOf(ctx, 1, vid)
				require.NoError(t, err)
				require.False(t, ok, "the dead letter released user 1")
			})
			require.NoError(t, other.Load(ctx, vid))

			for id := range failed {
				o, ok, err := f.statuses.Lookup(ctx, id)
				require.NoError(t, err)
				require.True(t, ok && o.Failed, "order %d failed", id)
			}
			_, ok, err := f.statuses.OrderOf(ctx, 1, vid)
			require.NoError(t, err)
			assert.False(t, ok, "user 1 holds no order: theirs failed")
			_, err = f.svc.Place(ctx, 1, vid)
			assert.ErrorIs(t, err, order.ErrSoldOut, "user 1 is refused by the stock, not by a failed order")
			b := f.book(vid)
			assert.Zero(t, b.Drift(), "books %+v", b)
		})
	}
}

// TestStaleLoadAfterTheSaleHashWasDeletedAgain: a load reads a voucher's books while its sale
// hash is missing and is slow; meanwhile another instance loads the voucher, orders are
// admitted against that sale hash (pending, or written after the slow load read the
// database), and the sale hash is deleted again (by hand, to change the stock, or lost). The
// slow load then found its token's field still there and created the sale hash from books
// that count none of those orders: their units were sold a second time. A load whose books
// another load's creation made stale creates nothing now (ErrLoadLost), and the next load
// counts them.
func TestStaleLoadAfterTheSaleHashWasDeletedAgain(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(3)
			sale, _, _, _, _ := async.KeysOf(vid)

			slow := async.NewLoader(f.rdb, f.store, quiet)
			var admitted map[int64]int64
			async.SetAfterBooks(slow, func(int64) {
				require.NoError(t, f.loader.Load(ctx, vid), "another instance loads the voucher")
				admitted = f.place(vid, 1, 2)
				require.NoError(t, f.rdb.Del(ctx, sale).Err(), "and its sale hash is deleted again")
			})
			require.ErrorIs(t, slow.Load(ctx, vid), async.ErrLoadLost, "books read before another load's creation")
			require.NoError(t, f.loader.Load(ctx, vid), "the next load")

			b := f.book(vid)
			assert.Equal(t, int64(1), b.RedisStock, "the units of the two pending orders are not for sale again")
			assert.Zero(t, b.Drift(), "books %+v", b)
			f.writer("w", nil)
			f.eventually("the orders written", func() bool { return len(f.rows(vid)) == 2 })
			f.judge(vid, 3, admitted)
		})
	}
}

// TestOrderOfNoVoucherLeavesNoKey: an order of a voucher the database does not have (a made-up
// id, or one of no seckill) is answered not found, and leaves nothing in Redis. Its load read
// the books in Redis, which set the orders hash's field 'load' (the load's token, kept for the
// next load when one fails), before the database answered that there is no such voucher: the
// orders hash of a voucher that does not exist stayed for ever, one key per id anyone ordered.
func TestOrderOfNoVoucherLeavesNoKey(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			const none = int64(987654321)
			_, err := f.svc.Place(ctx, 1, none)
			require.ErrorIs(t, err, voucher.ErrNotFound)
			sale, users, orders, stream, dead := async.KeysOf(none)
			assert.Zero(t, f.rdb.Exists(ctx, sale, users, orders, stream, dead).Val(), "no key of the voucher that does not exist")
		})
	}
}
