package async

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/order"
)

// An admission waits here, with the other admissions of its voucher that arrived at this
// instance meanwhile, for one call of async_admit.lua that decides all of them (a group
// commit): while one call of a voucher is on its way to Redis and back, the orders that arrive
// queue, and the next call carries them all, up to Config.AdmitBatch. Nothing waits for a
// batch to fill: an order that finds no call of its voucher under way is sent at once, alone.
// So a quiet voucher pays one round trip per order as before, and a busy one pays Redis's
// script overhead, the sale hash's reads and the stock's update once per batch instead of once
// per order, and go-redis's per-command work once per batch. The calls of different vouchers
// still share the automatic pipeliner's writes.
//
// One call per voucher is under way at a time from an instance: a second would carry half the
// orders at the same cost per call. Each admission waits within its own context. One whose
// context ends while it is still queued takes itself out of the queue before it returns (not
// sent, nothing admitted: Place answers 503 without asking Redis), so the queues hold only
// admissions that hold one of Place's slots and are bounded by Config.MaxInflight. One whose
// context ends while its call is under way is settled by Place as any call without an answer
// (async_settle.lua voids its id unless the script admitted it, and the script, should it run
// after that, admits nothing). Each order also carries its deadline, on Redis's clock as the
// answers tell it (redisClock): a call that reaches Redis after an order's deadline, because
// Redis hung with the call in its socket and Place answered while it did, admits nothing of it,
// even when the settling call could not reach Redis either.

var (
	// errNotSent: the admission's context ended before its call was sent; nothing was admitted.
	errNotSent = errors.New("admit: not sent before the admission's deadline")
	// errLate: the call ran in Redis after the admission's deadline; nothing was admitted.
	errLate = errors.New("admit: the call reached Redis after the admission's deadline; nothing was admitted")
)

// queued is one admission waiting for its batch's answer. It keeps its request's context, as an
// envelope does: the call that carries it reads its deadline and whether it ended.
type queued struct {
	ctx         context.Context
	user, order int64
	// Set before done is closed: the script's answer for this order, or the call's error.
	code int64
	id   string
	err  error
	done chan struct{}
}

// admitQueue holds the admissions of one voucher waiting for the next call.
type admitQueue struct {
	waiting []*queued
}

// submit queues q for voucherID's next call, starting the voucher's sender when none runs.
func (s *Service) submit(voucherID int64, q *queued) {
	s.mu.Lock()
	defer s.mu.Unlock()
	aq := s.queues[voucherID]
	if aq == nil {
		aq = &admitQueue{}
		s.queues[voucherID] = aq
		go s.send(voucherID, aq)
	}
	aq.waiting = append(aq.waiting, q)
}

// send calls the script for voucherID's queued admissions, a batch at a time, until none is
// left; then it forgets the voucher, so that the map holds the vouchers being ordered only.
func (s *Service) send(voucherID int64, aq *admitQueue) {
	for {
		batch := s.nextBatch(voucherID, aq)
		if batch == nil {
			return
		}
		s.admitBatch(voucherID, batch)
	}
}

// nextBatch takes up to Config.AdmitBatch of aq's admissions whose deadline has not run out
// (it answers the others with their context's error); nil when none is left, once it has
// removed aq from the map under the same lock that submit takes.
func (s *Service) nextBatch(voucherID int64, aq *admitQueue) []*queued {
	s.mu.Lock()
	defer s.mu.Unlock()
	var batch []*queued
	n := 0
	for _, q := range aq.waiting {
		n++
		if err := context.Cause(q.ctx); err != nil {
			q.err = fmt.Errorf("%w: %w", errNotSent, err)
			close(q.done)
			continue
		}
		batch = append(batch, q)
		if len(batch) == s.cfg.AdmitBatch {
			break
		}
	}
	rest := aq.waiting[n:]
	clear(aq.waiting[:n]) // no reference kept to an answered admission
	aq.waiting = rest
	if len(batch) == 0 && len(aq.waiting) == 0 {
		delete(s.queues, voucherID)
		return nil
	}
	return batch
}

// admitBatch runs the script once for batch and answers each of its admissions. The call's
// deadline is the latest of theirs: an admission whose own deadline comes first stops waiting
// and is settled by Place, while the others keep the time each was given.
func (s *Service) admitBatch(voucherID int64, batch []*queued) {
	last := time.Time{}
	for _, q := range batch {
		if d, ok := q.ctx.Deadline(); ok && d.After(last) {
			last = d
		}
	}
	if last.IsZero() {
		last = time.Now().Add(s.cfg.Timeout)
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(batch[0].ctx), last)
	defer cancel()
	s.metrics.admitBatch.Observe(float64(len(batch)))
	k := keysOf(voucherID)
	args := make([]any, 0, 1+3*len(batch))
	args = append(args, voucherID)
	offset, known := s.clock.estimate()
	if !known {
		// The instance's first call: read Redis's clock first, so that it too carries its
		// orders' deadlines. A Redis that does not answer this fails the call before it is sent.
		now, err := s.rdb.Time(ctx).Result()
		if err != nil {
			for _, q := range batch {
				q.err = fmt.Errorf("%w: read Redis's clock: %w", errNotSent, err)
				close(q.done)
			}
			return
		}
		s.clock.observe(now.UnixMilli(), time.Now())
		offset, _ = s.clock.estimate()
	}
	for _, q := range batch {
		d, _ := q.ctx.Deadline()
		args = append(args, q.user, q.order, onRedis(d, offset))
	}
	start := time.Now()
	res, err := admitScript.Run(ctx, s.scripts, []string{k.sale, k.users, k.orders, k.stream}, args...).Slice()
	s.metrics.admitCall.Observe(time.Since(start).Seconds())
	if err == nil && len(res) == 2*len(batch)+1 {
		if at, ok := res[len(res)-1].(string); ok {
			if ms, perr := strconv.ParseInt(at, 10, 64); perr == nil {
				s.clock.observe(ms, time.Now())
			}
		}
	}
	for i, q := range batch {
		switch {
		case err != nil:
			q.err = fmt.Errorf("admit: %w", err)
		case len(res) == 1:
			q.code = 1 // not loaded: nothing was decided
		case len(res) != 2*len(batch)+1:
			q.err = fmt.Errorf("admit: script returned %d values for %d orders", len(res), len(batch))
		default:
			code, ok := res[2*i].(int64)
			id, idOK := res[2*i+1].(string)
			if !ok || !idOK {
				q.err = fmt.Errorf("admit: script returned %v, %v for order %d", res[2*i], res[2*i+1], q.order)
				break
			}
			q.code, q.id = code, id
		}
		close(q.done)
	}
}

// withdraw is what an admission whose context ended does: still queued, it leaves the queue
// and returns errNotSent; answered meanwhile (its call came back, or nextBatch left it out), it
// returns nil and the answer stands; in a call under way, it returns the context's error, which
// Place settles.
func (s *Service) withdraw(voucherID int64, q *queued) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-q.done:
		return nil
	default:
	}
	if aq := s.queues[voucherID]; aq != nil {
		if i := slices.Index(aq.waiting, q); i >= 0 {
			aq.waiting = slices.Delete(aq.waiting, i, i+1)
			return fmt.Errorf("%w: %w", errNotSent, context.Cause(q.ctx))
		}
	}
	return fmt.Errorf("admit: %w", context.Cause(q.ctx))
}

// admit decides userID's order orderID of voucherID: in a batch with the other admissions of
// the voucher waiting at this instance (one call when Config.AdmitBatch is 1), within ctx.
func (s *Service) admit(ctx context.Context, userID, voucherID, orderID int64) (int64, error) {
	q := &queued{ctx: ctx, user: userID, order: orderID, done: make(chan struct{})}
	if s.cfg.AdmitBatch == 1 {
		s.admitBatch(voucherID, []*queued{q})
	} else {
		s.submit(voucherID, q)
		select {
		case <-q.done:
		case <-ctx.Done():
			if err := s.withdraw(voucherID, q); err != nil {
				return 0, err
			}
		}
	}
	if q.err != nil {
		return 0, q.err
	}
	switch q.code {
	case 0:
		return orderID, nil
	case 1:
		return 0, errNotLoaded
	case 2:
		return 0, order.ErrSaleNotActive
	case 3:
		earlier, err := strconv.ParseInt(q.id, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("admit: earlier order id %q: %w", q.id, err)
		}
		return earlier, &order.AlreadyOrderedError{OrderID: earlier}
	case 4:
		return 0, order.ErrSoldOut
	case 5:
		return 0, fmt.Errorf("admit: order id %d already in the orders hash (void, or admitted by an earlier run of this call)", orderID)
	case 6:
		return 0, errLate
	}
	return 0, fmt.Errorf("admit: unknown answer %d %q", q.code, q.id)
}
