package app

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/seckill/seckill/internal/order"
)

// DefaultFenceRetention is how long a fence row outlives its last admitted claim
// (SECKILL_FENCE_RETENTION).
const DefaultFenceRetention = 24 * time.Hour

// minFenceRetention is the shortest retention accepted, and fenceRetentionPerTimeout how
// many order deadlines it must span at least: a row may go only once no order that could
// present its name's older tokens can still be running (order.SQLStore.PruneFences).
const (
	minFenceRetention        = time.Minute
	fenceRetentionPerTimeout = 10
)

// pruneBatch is how many fence rows one statement deletes, and pruneTimeout bounds one round.
const (
	pruneBatch   = 1000
	pruneTimeout = time.Minute
)

// EffectiveFenceRetention is c.FenceRetention or its default, checked against the order deadline
// that c.OrderConfig gives when the orders are fenced. When they are not (fencing off, a lock
// that hands out no token, the asynchronous mode), no fence row is written or deleted: the
// retention is not used, and not checked.
func (c Config) EffectiveFenceRetention() (time.Duration, error) {
	o, err := c.OrderConfig()
	if err != nil {
		return 0, err
	}
	r := c.FenceRetention
	if r == 0 {
		r = DefaultFenceRetention
	}
	if !o.Fencing {
		return r, nil
	}
	orderTimeout := o.EffectiveTimeout()
	if orderTimeout > math.MaxInt64/fenceRetentionPerTimeout {
		// Their product would wrap around, negative or short, and pass any retention.
		return 0, fmt.Errorf("fence retention %s: %d order deadlines of %s exceed the longest duration (%s): no retention spans them",
			r, fenceRetentionPerTimeout, orderTimeout, time.Duration(math.MaxInt64))
	}
	if floor := max(minFenceRetention, fenceRetentionPerTimeout*orderTimeout); r < floor {
		return 0, fmt.Errorf("fence retention %s: must be at least %s (a minute, and %d order deadlines of %s)",
			r, floor, fenceRetentionPerTimeout, orderTimeout)
	}
	return r, nil
}

// pruneEvery is how often the janitor looks: a 24th of the retention, between a minute and
// an hour, so that a row outlives its retention by at most that much.
func pruneEvery(retention time.Duration) time.Duration {
	return min(max(retention/24, time.Minute), time.Hour)
}

// startFenceJanitor deletes, at start and then every pruneEvery(retention), the fence rows
// that admitted no claim for retention. Every instance runs one; their deletes of the same
// rows are harmless. The returned stop ends it and waits for a round in progress.
func startFenceJanitor(log *slog.Logger, store *order.SQLStore, retention time.Duration) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(pruneEvery(retention))
		defer t.Stop()
		for {
			rctx, rcancel := context.WithTimeout(ctx, pruneTimeout)
			n, err := store.PruneFences(rctx, retention, pruneBatch)
			rcancel()
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("fence janitor: prune failed; the next round tries again", "err", err, "deleted", n)
			case n > 0:
				log.Info("fence janitor: deleted fence rows unclaimed for the retention", "deleted", n, "retention", retention)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() error {
		cancel()
		<-done
		return nil
	}
}
