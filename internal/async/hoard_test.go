package async_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
)

// TestWriterCutOffFromTheDatabaseLetsOthersClaim: one instance loses its way to the database
// (a partition, a bad DSN pushed to it, its own network) while Redis and the other instances
// are fine. Its writer had been delivered a batch; after each failure it read its own pending
// entries again, which restarted their idle time in Redis, so that no other writer ever
// claimed them (and it claimed others' idle entries too): the orders stayed pending for as
// long as that instance could not reach the database. It now reads nothing until the database
// answers it again, and a writer that reaches the database claims the batch past ClaimIdle.
func TestWriterCutOffFromTheDatabaseLetsOthersClaim(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{})
			ctx := context.Background()
			vid := f.voucher(3)
			require.NoError(t, f.loader.Load(ctx, vid))
			admitted := f.place(vid, 1, 2)

			// Writer a's database is out of its reach: every statement and every ping fails.
			cut, err := database.OpenSQLite(ctx, t.TempDir(), database.Pool{MaxOpen: 1})
			require.NoError(t, err)
			require.NoError(t, cut.Close())
			cfg := f.cfg
			cfg.Consumer = "a"
			a := async.NewWriter(f.rdb, async.NewStore(cut), nil, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg)
			a.Start()
			t.Cleanup(func() { stopped(t, a) })
			_, _, _, stream, _ := async.KeysOf(vid)
			f.eventually("writer a holds both orders and finds the database out of reach", func() bool {
				p, err := f.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: async.DefaultGroup,
					Start: "-", End: "+", Count: 10, Consumer: "a"}).Result()
				return err == nil && len(p) == 2 && async.DBDown(a)
			})

			f.writer("b", nil)
			f.eventually("writer b claimed and wrote them", func() bool { return len(f.rows(vid)) == 2 && f.backlog(vid) == 0 })
			assert.True(t, async.DBDown(a), "a still cannot reach its database")
			f.judge(vid, 3, admitted)
		})
	}
}
