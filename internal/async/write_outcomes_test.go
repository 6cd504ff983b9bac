package async_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
)

// TestWriteOutcomes: Store.Write writes a batch of new orders without reading first, and falls
// back to reading which entries are written when the INSERT, the stock or the held check
// refuses. Whichever path a batch takes, each entry's outcome, the rows and the stock are those
// of the read-first write: a redelivered entry is Existed and takes no second unit (even when
// the stock is spent), another order of the user is a Conflict, an entry gone from the stream
// that is already written does not hold back the new ones, and a short stock or a new entry
// gone writes nothing.
func TestWriteOutcomes(t *testing.T) {
	t.Parallel()
	const (
		u1, u2, u3, u4 = 1, 2, 3, 4
		o1, o2, o3, o4 = 101, 102, 103, 104
	)
	entry := func(order, user int64) async.Entry {
		return async.Entry{StreamID: fmt.Sprintf("1-%d", order), OrderID: order, UserID: user, At: time.Now()}
	}
	// goneIf is a held check that finds gone every entry of es whose order is in orders.
	goneIf := func(orders ...int64) async.Held {
		return func(_ context.Context, es []async.Entry) error {
			for _, e := range es {
				if slices.Contains(orders, e.OrderID) {
					return async.ErrEntriesGone
				}
			}
			return nil
		}
	}
	for _, c := range []struct {
		name    string
		stock   int           // after before is written
		before  []async.Entry // written first, all new
		batch   []async.Entry
		held    async.Held
		want    []async.Outcome
		wantErr error
		rows    map[int64]int64 // order -> user after the batch
		left    int             // stock after the batch
	}{
		{name: "all new", stock: 5, batch: []async.Entry{entry(o1, u1), entry(o2, u2), entry(o3, u3)},
			want: []async.Outcome{async.Written, async.Written, async.Written}, rows: map[int64]int64{o1: u1, o2: u2, o3: u3}, left: 2},
		{name: "redelivered with a new one", stock: 5, before: []async.Entry{entry(o1, u1)},
			batch: []async.Entry{entry(o1, u1), entry(o2, u2)},
			want:  []async.Outcome{async.Existed, async.Written}, rows: map[int64]int64{o1: u1, o2: u2}, left: 4},
		{name: "redelivered when the stock is spent", stock: 0, before: []async.Entry{entry(o1, u1), entry(o2, u2)},
			batch: []async.Entry{entry(o2, u2), entry(o1, u1)},
			want:  []async.Outcome{async.Existed, async.Existed}, rows: map[int64]int64{o1: u1, o2: u2}, left: 0},
		{name: "another order of the user", stock: 5, before: []async.Entry{entry(o1, u1)},
			batch: []async.Entry{entry(o3, u3), entry(o2, u1)},
			want:  []async.Outcome{async.Written, async.Conflict}, rows: map[int64]int64{o1: u1, o3: u3}, left: 4},
		{name: "one user twice in the batch", stock: 5, batch: []async.Entry{entry(o1, u1), entry(o2, u1)},
			want: []async.Outcome{async.Written, async.Conflict}, rows: map[int64]int64{o1: u1}, left: 4},
		{name: "a written entry gone from the stream", stock: 5, before: []async.Entry{entry(o1, u1)},
			batch: []async.Entry{entry(o1, u1), entry(o4, u4)}, held: goneIf(o1),
			want: []async.Outcome{async.Existed, async.Written}, rows: map[int64]int64{o1: u1, o4: u4}, left: 4},
		{name: "a new entry gone from the stream", stock: 5, batch: []async.Entry{entry(o1, u1), entry(o2, u2)}, held: goneIf(o2),
			wantErr: async.ErrEntriesGone, rows: map[int64]int64{}, left: 5},
		{name: "stock short of the new ones", stock: 1, batch: []async.Entry{entry(o1, u1), entry(o2, u2)},
			wantErr: async.ErrStockShort, rows: map[int64]int64{}, left: 1},
		{name: "no entries", stock: 1, want: []async.Outcome{}, rows: map[int64]int64{}, left: 1},
	} {
		for _, s := range stores(t) {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				f := newFixture(t, s, async.Config{})
				ctx := context.Background()
				vid := f.voucher(c.stock + len(c.before))
				if len(c.before) > 0 {
					_, err := f.store.Write(ctx, vid, c.before, nil)
					require.NoError(t, err)
				}
				got, err := f.store.Write(ctx, vid, c.batch, c.held)
				if c.wantErr != nil {
					require.ErrorIs(t, err, c.wantErr)
				} else {
					require.NoError(t, err)
					assert.Equal(t, c.want, got, "outcomes")
				}
				before := map[int64]int64{}
				for _, e := range c.before {
					before[e.OrderID] = e.UserID
				}
				want := c.rows
				if c.wantErr != nil {
					want = before
				}
				assert.Equal(t, want, f.rows(vid), "rows")
				var stock int
				require.NoError(t, f.db.Raw("SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", vid).Scan(&stock).Error)
				assert.Equal(t, c.left, stock, "stock")
			})
		}
	}
}
