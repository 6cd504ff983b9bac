package order_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// ageFence moves the last claim of the fence row name back by age, on the database's clock.
func ageFence(t *testing.T, db *database.DB, name string, age time.Duration) {
	t.Helper()
	q := map[migrations.Dialect]string{
		migrations.MySQL:  "UPDATE lock_fences SET claimed_at = UTC_TIMESTAMP(3) - INTERVAL ? SECOND WHERE name = ?",
		migrations.SQLite: "UPDATE lock_fences SET claimed_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || ? || ' seconds') WHERE name = ?",
	}[db.Dialect]
	res := db.Exec(q, int64(age.Seconds()), name)
	require.NoError(t, res.Error)
	require.Equal(t, int64(1), res.RowsAffected, "fence row %s", name)
}

// TestSQLStorePruneFences: rows whose last admitted claim is older than the retention are
// deleted, a batch at a time, and the others stay; a claim refreshes its row's age; a name
// whose row was pruned starts a fresh one at its next claim.
func TestSQLStorePruneFences(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := order.NewSQLStore(db)
			vid := newVoucher(t, db, 100)
			prefix := testenv.Unique("prune/order:")
			fences := make([]string, 7)
			for i := range fences {
				fences[i] = prefix + string(rune('a'+i))
				require.NoError(t, s.Create(ctx, newOrder(int64(2000+i), int64(200+i), vid), order.Fence{Name: fences[i], Token: 10}, nil))
			}
			for _, f := range fences[:5] {
				ageFence(t, db, f, 48*time.Hour)
			}
			ageFence(t, db, fences[5], 23*time.Hour) // within the retention
			// fences[4] is claimed again: its age starts over.
			require.NoError(t, s.Create(ctx, newOrder(2100, 300, vid), order.Fence{Name: fences[4], Token: 11}, nil))

			n, err := s.PruneFences(ctx, 24*time.Hour, 2)
			require.NoError(t, err)
			assert.Equal(t, int64(4), n, "the four rows unclaimed for two days, two at a time")
			var left []string
			require.NoError(t, db.Raw("SELECT name FROM lock_fences WHERE name LIKE ? ORDER BY name", prefix+"%").Scan(&left).Error)
			assert.Equal(t, fences[4:], left, "the reclaimed row, the younger one and the fresh one stay")

			n, err = s.PruneFences(ctx, 24*time.Hour, 2)
			require.NoError(t, err)
			assert.Zero(t, n, "nothing old is left")
			require.NoError(t, s.Create(ctx, newOrder(2200, 400, vid), order.Fence{Name: fences[0], Token: 12}, nil),
				"a pruned name's next claim starts a fresh row")
			_, err = s.PruneFences(ctx, 0, 2)
			assert.Error(t, err, "no retention")
		})
	}
}
