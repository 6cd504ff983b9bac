package async_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/scripts/lua"
)

// TestDeadLetterOfAnEntryClaimedMeanwhileIsNotMade: writer a's last refused attempt of an
// order is counted, and before a's dead letter reaches Redis another consumer, b, claims the
// entry (a stalled past the claim idle). The entry is b's now: a's dead letter must change
// nothing (async_dead.lua checks the owner in its step): no dead letter, no unit given back,
// the user still holding the order, the entry pending for b. (No other test covers that check;
// this one passed before it was written.)
func TestDeadLetterOfAnEntryClaimedMeanwhileIsNotMade(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 1})
			ctx := context.Background()
			vid := f.voucher(5)
			id := f.refusedOrder(vid, 7)
			sale, _, _, _, dead := async.KeysOf(vid)
			entry := f.onlyEntry(vid)
			stock, err := f.rdb.HGet(ctx, sale, "stock").Int64()
			require.NoError(t, err)

			gate := &countGate{script: lua.AsyncDead, held: make(chan struct{}), release: make(chan struct{})}
			cfg := f.cfg
			cfg.Consumer, cfg.ClaimIdle = "a", time.Minute
			a := async.NewWriter(f.hookedClient(gate), f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg)
			a.Start()
			f.claimedMeanwhile(a, gate, vid, entry) // a's batch, and its dead letter, are over

			n, err := f.rdb.XLen(ctx, dead).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "dead-lettered by a consumer that no longer owned the entry")
			after, err := f.rdb.HGet(ctx, sale, "stock").Int64()
			require.NoError(t, err)
			assert.Equal(t, stock, after, "no unit given back")
			held, ok, err := f.statuses.OrderOf(ctx, 7, vid)
			require.NoError(t, err)
			assert.True(t, ok && held == id, "user 7 still holds order %d", id)
			assert.Equal(t, order.StatePending, f.state(7, id))
			assert.Equal(t, "b", f.pendingFor(vid, entry), "the entry is b's")
		})
	}
}
