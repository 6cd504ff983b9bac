package async

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/voucher"
	"github.com/seckill/seckill/scripts/lua"
)

var unregisterScript = redis.NewScript(lua.AsyncUnregister)

// Bounds of discovery's loads of stranded vouchers.
const (
	// strandedMaxPause caps the back-off of a stranded voucher whose loads fail: the pause
	// after its first failure is discoverInterval, doubled after each failure up to this, so
	// that a voucher that cannot be loaded costs the database one read a minute, not one a
	// discovery.
	strandedMaxPause = time.Minute
	// strandedLoadWait bounds how long a reload's goroutine waits for the load: the first step
	// of a load (loadBounds.step). The load itself, shared with the admissions of the voucher
	// (Loader.Load), goes on within its own bounds; one that outlasts the wait is counted
	// failed, and the next attempt joins it or finds the sale hash.
	strandedLoadWait = 30 * time.Second
)

// reload is discovery's back-off of one stranded voucher's loads.
type reload struct {
	next  time.Time     // no attempt before (Config.Now)
	pause time.Duration // the back-off after the next failure
	busy  bool          // an attempt is under way
}

// reloadStranded starts a load of each stranded voucher (w.stranded) that has none under way and
// whose back-off has passed, each in a goroutine of its own: discovery does not wait for a load.
// It forgets the back-off of a voucher no longer stranded. Only discovery calls it.
func (w *Writer) reloadStranded(now time.Time) {
	if w.loader == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, r := range w.reloads {
		if !w.stranded[id] && !r.busy {
			delete(w.reloads, id)
		}
	}
	for id := range w.stranded {
		r := w.reloads[id]
		if r == nil {
			r = &reload{pause: discoverInterval}
			w.reloads[id] = r
		}
		if r.busy || now.Before(r.next) || w.ctx.Err() != nil {
			continue
		}
		r.busy = true
		if w.startedReload != nil {
			w.startedReload(id)
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.reload(id)
		}()
	}
}

// reload loads stranded voucherID, or removes it from Redis when the database has no such
// voucher and nothing in Redis needs it (unregister), counts and logs the outcome, and sets the
// voucher's back-off when it failed.
func (w *Writer) reload(voucherID int64) {
	ctx, cancel := context.WithTimeout(w.ctx, strandedLoadWait)
	err := w.loader.Load(ctx, voucherID)
	cancel()
	result := StrandedLoaded
	switch {
	case err == nil:
		w.log.Info("writer: stranded voucher loaded into redis", "voucher_id", voucherID)
	case errors.Is(err, voucher.ErrNotFound):
		removed, uerr := w.unregister(voucherID)
		switch {
		case uerr != nil:
			result, err = StrandedFailed, uerr
		case !removed:
			result, err = StrandedFailed, fmt.Errorf("%w: its keys kept: an order's status, a dead letter, an entry or a load is still there", err)
		default:
			result = StrandedRemoved
			w.log.Warn("writer: stranded voucher the database does not have: its keys deleted, out of the registry", "voucher_id", voucherID)
		}
	default:
		result = StrandedFailed
	}
	w.metrics.reloads.WithLabelValues(result).Inc()
	w.mu.Lock()
	r := w.reloads[voucherID]
	r.busy = false
	pause := r.pause
	if result == StrandedFailed {
		r.next = w.cfg.Now().Add(pause)
		r.pause = min(2*pause, strandedMaxPause)
	} else {
		delete(w.reloads, voucherID)
	}
	w.mu.Unlock()
	if result == StrandedFailed && w.ctx.Err() == nil {
		w.log.Warn("writer: stranded voucher not loaded; tried again after a pause", "voucher_id", voucherID, "pause", pause, "err", err)
	}
	if w.afterReload != nil {
		w.afterReload(voucherID, result)
	}
}

// unregister deletes the Redis keys of voucherID, which the database does not have, and takes it
// out of the registry, unless an order or a load still needs them (async_unregister.lua). It
// reports whether the voucher left the registry.
//
// A voucher the database does not have has no order there, and nothing admits to it without a
// sale hash, which a load creates only from the database's row; so a lookup has nothing to
// find of it once the script found no order's status, no dead letter and no entry in Redis. A
// load under way (its token in the orders hash) keeps it, and one that reads the books after
// the script registers the voucher again (before it creates the sale hash): the voucher goes
// back into the registry unless, once out, it still has neither (leaveRegistry).
func (w *Writer) unregister(voucherID int64) (bool, error) {
	if w.ctx.Err() != nil {
		return false, w.ctx.Err()
	}
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	k := keysOf(voucherID)
	n, err := unregisterScript.Run(ctx, w.rdb, []string{k.sale, k.users, k.orders, k.stream, k.dead, k.attempts}).Int()
	if err != nil {
		return false, fmt.Errorf("unregister voucher %d: %w", voucherID, err)
	}
	if n == 0 {
		return false, nil
	}
	out, err := w.leaveRegistry(ctx, voucherID, func(ctx context.Context) (bool, error) {
		// The script deleted the orders hash: one there now holds a load's token or an order.
		var sale, orders *redis.IntCmd
		if _, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			sale, orders = p.Exists(ctx, k.sale), p.Exists(ctx, k.orders)
			return nil
		}); err != nil {
			return false, err
		}
		return sale.Val() == 0 && orders.Val() == 0, nil
	})
	if err != nil {
		return false, fmt.Errorf("unregister voucher %d: %w", voucherID, err)
	}
	return out, nil
}
