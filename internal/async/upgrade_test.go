package async_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// TestLoadFieldsOfAnEarlierVersion: what an earlier version's loads left in an orders hash
// does not confuse this one's load, reconcile, lookups or retirement. A load of that version
// marked itself with a field 'load:' .. its token and deleted it; one that crashed between the
// two left it. And an instance of that version, side by side with this one during an upgrade,
// creates the sale hash without deleting the field 'load' this version's loads share, which
// stays while the sale hash exists. Here the sale hash is deleted again (an operator reopens or
// restocks the sale): the next load reuses the token left in 'load', creates the sale hash
// from the books as they are, and deletes it; nothing is sold twice, every order is found and
// written, and the retirement takes the orders hash with the old field.
func TestLoadFieldsOfAnEarlierVersion(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid := f.voucher(3)
		admitted := f.place(vid, 1, 2) // pending: no writer runs yet
		sale, _, orders, _, _ := async.KeysOf(vid)
		require.NoError(t, f.rdb.HSet(ctx, orders, "load:1k2j3h", 1, "load", "tokenofaloadanolderinstancebeat").Err())
		require.NoError(t, f.rdb.Del(ctx, sale).Err(), "the sale hash deleted: the next admission reloads it")

		for id, u := range f.place(vid, 3, 3) {
			admitted[id] = u
		}
		assert.False(t, f.rdb.HExists(ctx, orders, "load").Val(), "the creation deleted the token it reused")
		_, err := f.svc.Place(ctx, 4, vid)
		require.ErrorIs(t, err, order.ErrSoldOut, "the units of the pending orders are not sold again")
		for id, u := range admitted {
			assert.Equal(t, order.StatePending, f.state(u, id), "order %d", id)
		}
		assert.Equal(t, int64(3), f.book(vid).Pending, "reconcile counts the pending orders, not the fields")

		w := f.writer("w", nil)
		f.eventually("every order written", func() bool { return len(f.rows(vid)) == 3 && f.backlog(vid) == 0 })
		stopped(t, w)
		f.judge(vid, 3, admitted)
		for id, u := range admitted {
			assert.Equal(t, order.StateCreated, f.state(u, id), "order %d", id)
		}

		c.advance(pastRetention)
		retired, err := async.Retire(ctx, f.idleWriter(), vid)
		require.NoError(t, err)
		assert.True(t, retired, "retired")
		assert.Zero(t, f.keysLeft(vid), "no key left but the sale hash: the old field went with the orders hash")
	})
}
