package app

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
	"github.com/seckill/seckill/scripts/lua"
)

// ackHold holds the writer's first acknowledgement (async_ack.lua, by EVALSHA or EVAL) until
// release is closed, and reports the deadline of its context, the batch's, on held; it records
// the deadline of Stop's first XPENDING of its consumer's entries, the stop's.
type ackHold struct {
	held    chan time.Time
	release chan struct{}
	once    sync.Once

	mu       sync.Mutex
	stopDead time.Time
}

func (*ackHold) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*ackHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *ackHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	ack := redis.NewScript(lua.AsyncAck)
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		switch name := cmd.Name(); {
		case (name == "evalsha" || name == "eval") && len(args) > 1 && (args[1] == ack.Hash() || args[1] == lua.AsyncAck):
			h.once.Do(func() {
				dl, _ := ctx.Deadline()
				h.held <- dl
				<-h.release
			})
		case name == "xpending" && len(args) > 3: // Stop's, of its consumer; the gauges' asks the group's summary
			h.mu.Lock()
			if h.stopDead.IsZero() {
				h.stopDead, _ = ctx.Deadline()
			}
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// TestStopOutlastsABatchInProgress: an instance's close gives its writer until past the
// deadline of the batch it is writing, plus what a batch that failed still does after it,
// however long the claim idle makes that deadline. With SECKILL_STREAM_CLAIM_IDLE=30s a batch
// has 17 s: a stop bounded by a fixed 10 s gave up on it (its entries claimed later, the stop
// reporting a deadline error). The batch is held at its acknowledgement (a Redis hook, a
// barrier) while the close begins; the hook reads the batch's deadline from the ack's context
// and the stop's from the context of Stop's XPENDING, so no wait as long as either is needed.
func TestStopOutlastsABatchInProgress(t *testing.T) {
	ctx := context.Background()
	st, err := OpenStores(ctx, StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	db, err := st.OpenDB(ctx, database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	rdb := st.OpenRedis(8, 0)
	t.Cleanup(func() { _ = rdb.Close() })
	hold := &ackHold{held: make(chan time.Time, 1), release: make(chan struct{})}
	rdb.AddHook(hold) // before the writer starts: its commands all pass the hook

	now := time.Now().UTC()
	v, err := voucher.NewStore(db.DB).Create(ctx, voucher.Voucher{Title: "t", Stock: 1,
		BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)})
	require.NoError(t, err)
	const claimIdle = 30 * time.Second
	cfg := Config{OrderMode: ModeAsync, Order: order.Config{Timeout: 2 * time.Second}, Async: async.Config{ClaimIdle: claimIdle}}
	a, err := newAsync(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, db, rdb,
		idgen.NewBlocks(rdb, "order", 10, time.Minute), prometheus.NewRegistry())
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			close(hold.release)
			_ = a.stop()
		}
	})
	_, err = a.Service.Place(ctx, 1, v.ID)
	require.NoError(t, err)

	var batchDead time.Time
	select {
	case batchDead = <-hold.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer did not reach the acknowledgement of the order's batch")
	}
	require.False(t, batchDead.IsZero(), "the batch's acknowledgement runs within its deadline")
	stopErr := make(chan error, 1)
	go func() { stopErr <- a.stop() }()
	// The stop's deadline counts from its start: released before or after the stop begins,
	// the batch's deadline is the same and the stop's no earlier.
	close(hold.release)
	stopped = true
	require.NoError(t, <-stopErr)

	hold.mu.Lock()
	stopDead := hold.stopDead
	hold.mu.Unlock()
	require.False(t, stopDead.IsZero(), "Stop asked whether its consumer may leave the group")
	// A batch that fails at its deadline still pings the database (1 s) and may record a dead
	// letter (2 s) before its loop ends.
	const tail = 3 * time.Second
	assert.False(t, stopDead.Before(batchDead.Add(tail)),
		"got the stop's deadline %s after the batch's, want at least %s (batch deadline %s with claim idle %s)",
		stopDead.Sub(batchDead), tail, async.BatchDeadline(claimIdle), claimIdle)
	b, err := async.Reconcile(ctx, rdb, a.Store, v.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1), b.Orders, "the batch held across the stop was written")
	assert.Zero(t, b.Pending, "nothing left in the stream")
}
