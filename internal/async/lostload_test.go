package async_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
)

// TestRedisLostDuringALoad: Redis restarts empty (or loses the voucher's keys) while a load
// runs, after the loader read the stream and before it created the sale hash. The load
// counted the orders it had read there as pending and created the sale hash with the
// database's stock less them, and mapped their users to them: but those orders were lost with
// the stream and no writer writes them. Their units were never sold again (the books drifted
// by one per order, an under-sale), and their users were refused already_ordered with an
// order that answers 404. The load now finds that Redis lost what it read, creates nothing,
// and the next load starts from what Redis holds.
func TestRedisLostDuringALoad(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(3)
			lost := f.place(vid, 1, 2) // pending: no writer runs
			sale, _, _, _, _ := async.KeysOf(vid)
			require.NoError(t, f.rdb.Del(ctx, sale).Err(), "the sale hash deleted: the next admission reloads it")

			async.SetAfterBooks(f.loader, func(int64) {
				// Redis restarts empty: the voucher's keys and the registry are gone.
				require.NoError(t, f.rdb.Del(ctx, append(async.AllKeysOf(vid), async.RegistryKey)...).Err())
			})
			require.ErrorIs(t, f.loader.Load(ctx, vid), async.ErrLoadLost)
			async.SetAfterBooks(f.loader, nil)
			require.NoError(t, f.loader.Load(ctx, vid), "the next load, from what Redis holds")

			b := f.book(vid)
			assert.Equal(t, int64(3), b.RedisStock, "every unit for sale: the lost orders took none the database counts")
			assert.Zero(t, b.Drift(), "books %+v", b)
			for id, u := range lost {
				o, ok, err := f.statuses.OrderOf(ctx, u, vid)
				require.NoError(t, err)
				assert.False(t, ok, "user %d holds no order: %d was lost (it holds %d)", u, id, o)
			}
			admitted := f.place(vid, 1, 3)
			f.writer("w", nil)
			f.eventually("the orders since written", func() bool { return len(f.rows(vid)) == 3 })
			f.judge(vid, 3, admitted)
		})
	}
}
