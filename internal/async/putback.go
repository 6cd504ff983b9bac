package async

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// errCheckedAgain marks a retirement that failed after its voucher may have left the
// registry: the writer remembers the voucher and its discovery checks it again.
var errCheckedAgain = errors.New("async: discovery checks again whether the voucher goes back into the registry")

// leftRegistry remembers voucherID for putBackLeft.
func (w *Writer) leftRegistry(voucherID int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.leftSeq++
	w.left[voucherID] = w.leftSeq
}

// putBackLeft settles the vouchers whose retirement stopped after they may have left the
// registry: those whose retirement here failed there (w.left), where no writer reads a stream
// and no discovery, which reads the registry, would try them again, and leftovers, vouchers
// another writer's retirement left among those leaving the registry when it stopped or
// crashed before it settled them (see leftovers). A sale hash marked retired stays out of the
// registry; any other voucher goes back into it, as the retirement's own put-back does: a
// reopened sale, and one whose sale hash is missing, which a reload may be creating (its
// registration after the creation comes later, and orders admitted meanwhile would be found by
// no lookup). Either way the voucher leaves the set of those leaving the registry, which
// lookups read with it, and is forgotten; one whose check, put-back or SREM from that set
// fails is kept for the next round. Its Redis work is one pipeline, at most one SADD and one
// SREM.
func (w *Writer) putBackLeft(leftovers []int64) {
	w.mu.Lock()
	seen := make(map[int64]uint64, len(w.left)+len(leftovers))
	for _, id := range leftovers {
		seen[id] = 0
	}
	for id, seq := range w.left {
		seen[id] = seq
	}
	w.mu.Unlock()
	if len(seen) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	ids := make([]int64, 0, len(seen))
	sales := make([]*redis.StringCmd, 0, len(seen))
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id := range seen {
			ids = append(ids, id)
			sales = append(sales, p.HGet(ctx, keysOf(id).sale, "retired"))
		}
		return nil
	})
	var reply redis.Error
	if err != nil && !errors.As(err, &reply) {
		w.log.Warn("writer: check the vouchers that may have left the registry; checked again next round", "err", err)
		return
	}
	var settled, back []int64
	for i, id := range ids {
		err := sales[i].Err()
		switch {
		case errors.Is(err, redis.Nil):
			back = append(back, id)
		case err != nil:
			w.log.Warn("writer: check a voucher that may have left the registry; checked again next round", "voucher_id", id, "err", err)
		default:
			settled = append(settled, id)
		}
	}
	if len(back) > 0 {
		if err := w.rdb.SAdd(ctx, registryKey, members(back)...).Err(); err != nil {
			w.log.Warn("writer: put vouchers not retired back into the registry; tried again next round", "voucher_ids", back, "err", err)
		} else {
			w.log.Info("writer: vouchers not retired (reopened, or without a sale hash) put back into the registry", "voucher_ids", back)
			settled = append(settled, back...)
		}
	}
	if len(settled) > 0 {
		if err := w.rdb.SRem(ctx, leavingKey, members(settled)...).Err(); err != nil {
			w.log.Warn("writer: settled vouchers still among those leaving the registry; tried again next round", "voucher_ids", settled, "err", err)
			return
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range settled {
		// A retirement that failed again since the check is checked again (a leftover's 0
		// matches no failure here).
		if seq, ok := w.left[id]; ok && seq == seen[id] {
			delete(w.left, id)
		}
	}
}

// members is ids as a set command's members.
func members(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// leftovers returns the vouchers among those leaving the registry that this writer's
// discoveries have seen there, round after round, for leftoverAfter: a retirement settles the
// voucher within redisCallTimeout of putting it there (its last step runs on one such
// deadline), so one still there is a leftover of a retirement that stopped before it settled
// it (its writer stopped, or crashed), which no writer remembers, and every lookup would ask
// its orders hash for ever. A voucher younger than that may be another writer's retirement
// under way, which a settlement here would race: taken out of the set between that
// retirement's SREM and its put-back, a reopened sale's orders would answer 404. A voucher
// missing from one round starts again from nothing. Its Redis work is one SMEMBERS of a set
// that is empty but for retirements under way.
func (w *Writer) leftovers() []int64 {
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	ms, err := w.rdb.SMembers(ctx, leavingKey).Result()
	if err != nil {
		if w.ctx.Err() == nil {
			w.log.Warn("writer: list the vouchers leaving the registry", "err", err)
		}
		return nil
	}
	now := time.Now()
	seen := make(map[int64]time.Time, len(ms))
	var out []int64
	for _, m := range ms {
		id, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			continue
		}
		since, ok := w.leavingSeen[id]
		if !ok {
			since = now
		}
		seen[id] = since
		if now.Sub(since) >= w.leftoverAfter {
			out = append(out, id)
		}
	}
	w.leavingSeen = seen
	if len(out) > 0 {
		w.log.Warn("writer: vouchers left among those leaving the registry by a retirement that stopped; settled now",
			"voucher_ids", out, "after", w.leftoverAfter)
	}
	return out
}
