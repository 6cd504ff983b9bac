//go:build integration

package async_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/testenv"
)

// TestHeldCheckReadsABatchInOneRange: a writer's held check reads a batch that is nearly
// contiguous in the stream with one XRANGE, whatever the order of the batch's entries, and looks
// up one by one only the ids that range did not see. A lookup per id cost Redis as much as the
// admission's own writes. It counts the XRANGE calls in INFO commandstats of a redis-server of
// its own, so only the real Redis runs it.
func TestHeldCheckReadsABatchInOneRange(t *testing.T) {
	t.Parallel()
	const vid = 7
	_, _, _, stream, _ := async.KeysOf(vid)
	contiguous := append(idRange(9, 5, 11, 1), idRange(10, 0, 6, 1)...)
	interleaved := append(append(idRange(9, 0, 11, 2), idRange(10, 1, 11, 2)...), idRange(11, 0, 11, 2)...)
	for _, c := range []struct {
		name    string
		batch   []string
		deleted []string
		gone    int
		xranges int64 // want: 1 for the range, and one per id it did not see
	}{
		{name: "contiguous, in reverse", batch: reversed(contiguous), xranges: 1},
		{name: "interleaved, in reverse", batch: reversed(interleaved), xranges: 1},
		{name: "contiguous, three deleted", batch: contiguous, deleted: []string{"9-5", "9-10", "10-3"}, gone: 3, xranges: 1 + 3},
		// The range reads twice as many entries as the batch has ids, 20-0 to 20-9: it sees the
		// first id only.
		{name: "spread beyond the bound", batch: idRange(20, 0, 199, 40), xranges: 1 + 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := testenv.StartRedisServer(t).Client()
			for _, id := range heldStream() {
				require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: id, Values: []any{"order", "1"}}).Err())
			}
			if len(c.deleted) > 0 {
				require.NoError(t, rdb.XDel(ctx, stream, c.deleted...).Err())
			}
			es := make([]async.Entry, len(c.batch))
			for i, id := range c.batch {
				es[i] = async.Entry{StreamID: id, VoucherID: vid}
			}
			held := async.HeldOf(async.NewWriter(rdb, nil, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, async.Config{Consumer: "w"}), vid)
			require.NoError(t, rdb.ConfigResetStat(ctx).Err())

			err := held(ctx, es)
			if c.gone == 0 {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, async.ErrEntriesGone)
				assert.ErrorContains(t, err, fmt.Sprintf("%d of %d", c.gone, len(es)))
			}
			calls, _ := commandStat(t, rdb, "xrange")
			assert.Equal(t, c.xranges, calls, "XRANGE calls of the held check of %d entries", len(es))
		})
	}
}
