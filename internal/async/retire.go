package async

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/scripts/lua"
)

var retireScript = redis.NewScript(lua.AsyncRetire)

// Retirement's bounds.
const (
	// retirePerRound is the most vouchers one round of retirement takes: after an upgrade a
	// registry may hold hundreds of old vouchers, retired a round each discovery.
	retirePerRound = 16
	// retireTimeout bounds the retirement of one voucher: its dead letters copied to the
	// database a page at a time, and its script. Leaving the registry has redisCallTimeout
	// of its own.
	retireTimeout = 30 * time.Second
)

// What async_retire.lua answers.
const (
	retireKept    = 0 // the voucher must stay: see the script
	retireNow     = 1
	retireAlready = 2
)

// startRetiring retires ids, at most retirePerRound of them, in a goroutine of its own, unless
// a round is still running: a retirement copies dead letters to the database, which must not
// hold up the discovery of new vouchers. The caller holds w.mu.
func (w *Writer) startRetiring(ids []int64) {
	if len(ids) == 0 || !w.retiring.CompareAndSwap(false, true) {
		return
	}
	ids = ids[:min(len(ids), retirePerRound)]
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.retiring.Store(false)
		for _, id := range ids {
			if w.ctx.Err() != nil {
				return
			}
			ctx, cancel := context.WithTimeout(w.ctx, retireTimeout)
			retired, err := w.retire(ctx, id)
			cancel()
			switch {
			case errors.Is(err, errCheckedAgain):
				w.log.Warn("writer: retire a finished voucher: it may be out of the registry; the next discovery puts it back if its sale was reopened",
					"voucher_id", id, "err", err)
			case err != nil:
				w.log.Warn("writer: retire a finished voucher; it stays in redis and is tried again", "voucher_id", id, "err", err)
			case retired:
				w.log.Info("writer: voucher retired from redis: its dead letters are in the database, its users, statuses and streams deleted",
					"voucher_id", id, "retention", w.cfg.Retention)
			}
		}
	}()
}

// retire retires voucherID if it still may be: it copies the voucher's dead letters to the
// database, then async_retire.lua deletes its keys, checking in the same step that the sale
// ended over Config.Retention ago, that its stream is empty (no order pending) and that no dead
// letter came after the copy; then it leaves the registry. It reports whether this call
// retired it.
//
// The order matters to GET /api/orders/{id}, which asks the registry's vouchers in Redis
// first and the database second: the failed statuses are in the database before their
// Redis copies go, and the voucher leaves the registry after them. A load that brings the
// voucher back (its sale hash deleted by hand, to reopen the sale) recreates the sale hash
// without the mark and registers it: a voucher whose mark is gone after it left the registry
// is registered again, so that its stream is read.
func (w *Writer) retire(ctx context.Context, voucherID int64) (bool, error) {
	k := keysOf(voucherID)
	copied, err := copyDead(ctx, w.rdb, w.store, k.dead)
	if err != nil {
		return false, fmt.Errorf("retire voucher %d: %w", voucherID, err)
	}
	if w.beforeRetire != nil {
		w.beforeRetire(voucherID)
	}
	now := w.cfg.Now()
	code, err := retireScript.Run(ctx, w.rdb, []string{k.sale, k.users, k.orders, k.stream, k.dead, k.attempts},
		now.Add(-w.cfg.Retention).UnixMilli(), now.UnixMilli(), copied).Int()
	if err != nil {
		return false, fmt.Errorf("retire voucher %d: %w", voucherID, err)
	}
	if code == retireKept {
		return false, nil
	}
	marked, err := w.leaveRegistry(ctx, voucherID, func(ctx context.Context) (bool, error) {
		return w.rdb.HExists(ctx, k.sale, "retired").Result()
	})
	if err != nil {
		return false, fmt.Errorf("retire voucher %d: %w", voucherID, err)
	}
	if !marked {
		return false, nil
	}
	return code == retireNow, nil
}

// leaveRegistry takes voucherID out of the registry, and puts it back unless gone, asked once it
// is out, reports that it is to stay out (a retired sale, a voucher the database does not have):
// a voucher reloaded meanwhile goes back, where discovery reads it. It reports gone's answer.
//
// Once the voucher may leave the registry, the rest runs whole, whether the writer stops or
// ctx ran out: a voucher reopened meanwhile and left out after the SREM is read by no writer,
// and no discovery, which reads the registry, tries it again. Lookups read the leaving vouchers
// with the registry: a sale reopened meanwhile has its orders found while it is out of the
// registry, until it is settled. The member is this call's own: another's of the voucher,
// settled, removes its own while this one may still be between its SREM and its put-back. An
// error after the SADD wraps errCheckedAgain when the voucher may be out of the registry: the
// writer remembers the member, and discovery checks it again (putBackLeft).
func (w *Writer) leaveRegistry(ctx context.Context, voucherID int64, gone func(context.Context) (bool, error)) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisCallTimeout)
	defer cancel()
	member := leavingMember(voucherID, strconv.FormatUint(rand.Uint64(), 36))
	if err := w.rdb.SAdd(ctx, leavingKey, member).Err(); err != nil {
		// Still registered: the next discovery tries again. The SADD may have been applied
		// (its reply lost): discovery takes the member out again.
		w.leftRegistry(voucherID, member)
		return false, fmt.Errorf("mark it leaving the registry: %w", err)
	}
	// A failure from here on may leave a reopened sale out of the registry (an SREM whose reply
	// was lost may have been applied): discovery checks the voucher again (putBackLeft), and
	// takes it out of the leaving ones once settled.
	if err := w.rdb.SRem(ctx, registryKey, voucherID).Err(); err != nil {
		w.leftRegistry(voucherID, member)
		return false, fmt.Errorf("leave the registry: %w: %w", errCheckedAgain, err)
	}
	out, err := gone(ctx)
	if err != nil || !out {
		// Reloaded meanwhile (or unknown): back into the registry, where discovery reads it.
		// A voucher that was to leave after all leaves at a later discovery.
		out = false
		if err := w.rdb.SAdd(ctx, registryKey, voucherID).Err(); err != nil {
			w.leftRegistry(voucherID, member)
			return false, fmt.Errorf("register the reloaded voucher again: %w: %w", errCheckedAgain, err)
		}
	}
	if err := w.rdb.SRem(ctx, leavingKey, member).Err(); err != nil {
		w.leftRegistry(voucherID, member)
		return false, fmt.Errorf("settled, leave the leaving vouchers: %w: %w", errCheckedAgain, err)
	}
	return out, nil
}
