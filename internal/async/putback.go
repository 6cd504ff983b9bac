package async

import (
	"context"
	"errors"

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

// putBackLeft checks again the vouchers whose retirement failed after they may have left the
// registry, where no writer reads a stream and no discovery, which reads the registry, would
// try them again. A sale hash without the retired mark is a reopened sale: back into the
// registry. Marked retired, the voucher stays out; without a sale hash, the reload that
// recreates it registers it. Either way the voucher leaves the set of those leaving the
// registry, which lookups read with it, and is forgotten; one whose check, put-back or SREM
// from that set fails is kept for the next round. Its Redis work is one pipeline, at most one
// SADD and one SREM.
func (w *Writer) putBackLeft() {
	w.mu.Lock()
	seen := make(map[int64]uint64, len(w.left))
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
	sales := make([]*redis.SliceCmd, 0, len(seen))
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id := range seen {
			ids = append(ids, id)
			sales = append(sales, p.HMGet(ctx, keysOf(id).sale, "end", "retired"))
		}
		return nil
	})
	var reply redis.Error
	if err != nil && !errors.As(err, &reply) {
		w.log.Warn("writer: check the vouchers that may have left the registry; checked again next round", "err", err)
		return
	}
	var settled, reopened []int64
	for i, id := range ids {
		v, err := sales[i].Result()
		switch {
		case err != nil:
			w.log.Warn("writer: check a voucher that may have left the registry; checked again next round", "voucher_id", id, "err", err)
		case v[0] != nil && v[1] == nil:
			reopened = append(reopened, id)
		default:
			settled = append(settled, id)
		}
	}
	if len(reopened) > 0 {
		if err := w.rdb.SAdd(ctx, registryKey, members(reopened)...).Err(); err != nil {
			w.log.Warn("writer: put reopened vouchers back into the registry; tried again next round", "voucher_ids", reopened, "err", err)
		} else {
			w.log.Info("writer: reopened vouchers put back into the registry", "voucher_ids", reopened)
			settled = append(settled, reopened...)
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
		// A retirement that failed again since the check is checked again.
		if w.left[id] == seen[id] {
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
