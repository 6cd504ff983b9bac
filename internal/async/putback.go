package async

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/redis/go-redis/v9"
)

// errCheckedAgain marks a retirement that failed after its voucher may have left the
// registry: the writer remembers the voucher and its discovery checks it again.
var errCheckedAgain = errors.New("async: discovery checks again whether the voucher goes back into the registry")

// leftRegistry remembers the retirement of voucherID whose member of the leaving set is
// member (leavingMember), for putBackLeft.
func (w *Writer) leftRegistry(voucherID int64, member string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.left[member] = voucherID
}

// putBackLeft settles the retirements that stopped after their voucher may have left the
// registry: those that failed here there (w.left), where no writer reads a stream and no
// discovery, which reads the registry, would try them again, and leftovers, members another
// writer's retirement left among those leaving the registry when it stopped or crashed before
// it settled them (see leftovers), each a member of the leaving set (leavingMember) with its
// voucher. A sale hash marked retired stays out of the registry; any other voucher goes back
// into it, as the retirement's own put-back does: a reopened sale, and one whose sale hash is
// missing, which a reload may be creating (its registration after the creation comes later,
// and orders admitted meanwhile would be found by no lookup). Either way the retirement's
// member, and only that one, leaves the set of those leaving the registry, which lookups read
// with it, and is forgotten: another retirement of the voucher under way keeps its own. One
// whose check, put-back or SREM from that set fails is kept for the next round. Its Redis work
// is one pipeline, at most one SADD and one SREM.
func (w *Writer) putBackLeft(leftovers map[string]int64) {
	w.mu.Lock()
	left := maps.Clone(w.left)
	w.mu.Unlock()
	maps.Copy(left, leftovers)
	if len(left) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	// A voucher may have more than one member: one check each.
	sales := make(map[int64]*redis.StringCmd, len(left))
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range left {
			if sales[id] == nil {
				sales[id] = p.HGet(ctx, keysOf(id).sale, "retired")
			}
		}
		return nil
	})
	var reply redis.Error
	if err != nil && !errors.As(err, &reply) {
		w.log.Warn("writer: check the vouchers that may have left the registry; checked again next round", "err", err)
		return
	}
	settled := map[int64]bool{}
	var back []int64
	for id, sale := range sales {
		err := sale.Err()
		switch {
		case errors.Is(err, redis.Nil):
			back = append(back, id)
		case err != nil:
			w.log.Warn("writer: check a voucher that may have left the registry; checked again next round", "voucher_id", id, "err", err)
		default:
			settled[id] = true
		}
	}
	if len(back) > 0 {
		if err := w.rdb.SAdd(ctx, registryKey, members(back)...).Err(); err != nil {
			w.log.Warn("writer: put vouchers not retired back into the registry; tried again next round", "voucher_ids", back, "err", err)
		} else {
			w.log.Info("writer: vouchers not retired (reopened, or without a sale hash) put back into the registry", "voucher_ids", back)
			for _, id := range back {
				settled[id] = true
			}
		}
	}
	var done []any
	for m, id := range left {
		if settled[id] {
			done = append(done, m)
		}
	}
	if len(done) == 0 {
		return
	}
	if err := w.rdb.SRem(ctx, leavingKey, done...).Err(); err != nil {
		w.log.Warn("writer: settled vouchers still among those leaving the registry; tried again next round", "members", done, "err", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// A member is one retirement's: one that failed since the check has another, checked next
	// round. A leftover is in w.left only when it failed here too.
	for _, m := range done {
		delete(w.left, m.(string))
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

// leftovers returns the members among those leaving the registry (leavingMember), each with
// its voucher, that this writer's discoveries have seen there, round after round, for
// leftoverAfter: a retirement settles its member within redisCallTimeout of putting it there
// (its last steps run on one such deadline), so one still there is a leftover of a retirement
// that stopped before it settled it (its writer stopped, or crashed), which no writer
// remembers, and every lookup would ask its voucher's orders hash for ever. A member younger
// than that may be a retirement under way, which a settlement here would race: it is not
// settled, and settling a leftover removes that member only, never another retirement's of
// the same voucher, which keeps the voucher found by lookups between that retirement's SREM
// and its put-back. A bare voucher id, which a retirement before members were its own left,
// is a member too. A member missing from one round starts again from nothing. Its Redis work
// is one SMEMBERS of a set that is empty but for retirements under way.
func (w *Writer) leftovers() map[string]int64 {
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
	seen := make(map[string]time.Time, len(ms))
	out := map[string]int64{}
	for _, m := range ms {
		id, err := leavingVoucher(m)
		if err != nil {
			continue
		}
		since, ok := w.leavingSeen[m]
		if !ok {
			since = now
		}
		seen[m] = since
		if now.Sub(since) >= w.leftoverAfter {
			out[m] = id
		}
	}
	w.leavingSeen = seen
	if len(out) > 0 {
		w.log.Warn("writer: members left among those leaving the registry by a retirement that stopped; settled now",
			"members", out, "after", w.leftoverAfter)
	}
	return out
}
