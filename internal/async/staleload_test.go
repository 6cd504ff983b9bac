package async_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// TestLoadThatLostTheRaceRestoresNoReleasedUser: two instances reload one voucher at once
// (its sale hash deleted to change its stock, or lost). The one whose load creates the sale
// hash second read the stream before the first created it; an order it read there was
// dead-lettered since, which released its user. The second load restored that user's order
// all the same, after the release, and its script, finding the sale hash, changed nothing:
// the user stayed mapped to a failed order, refused already_ordered with it, unable to buy
// again, for the rest of the sale.
func TestLoadThatLostTheRaceRestoresNoReleasedUser(t *testing.T) {
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
