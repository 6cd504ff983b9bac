package async

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
)

// PendingOrder is an order Redis knows and the database does not (yet): admitted and waiting
// for a writer, or given up (Failed, with the Reason).
type PendingOrder struct {
	ID, UserID, VoucherID int64
	Failed                bool
	Reason                string
	CreatedAt             time.Time
}

// Statuses answers for the orders that are not rows in the database: it is the asynchronous
// mode's side of order lookup (GET /api/orders/{id}). An order stays in its voucher's orders
// hash until the writer's acknowledgement, which follows the commit, so a reader that asks
// Statuses first and the database second never falls between the two. A failed order is also
// in the database's async_failed_orders, where it outlives the Redis copy.
type Statuses struct {
	rdb   redis.UniversalClient
	store *Store
}

// NewStatuses returns the pending and failed orders of rdb and, unless store is nil, the
// failed orders store keeps once Redis no longer does.
func NewStatuses(rdb redis.UniversalClient, store *Store) *Statuses {
	return &Statuses{rdb: rdb, store: store}
}

// Lookup returns orderID as Redis or the failed orders know it and true, or false when neither
// knows it (never admitted, or written: ask the database). It is InRedis, then Failed: one
// SUNION (the registry and the vouchers leaving it), one pipeline of the vouchers of recent
// sales (a voucher leaves the registry when it is retired, Config.Retention after its sale)
// and one indexed read, however many sales there were before.
//
// Redis comes first: a retirement writes a voucher's failed orders to the database before it
// deletes their Redis copies, so a lookup that reads Redis before the deletion finds the status
// there, and one that reads it after finds it in the database. Read the other way round, a
// lookup could miss the database's copy (not yet written) and then Redis's (deleted).
func (s *Statuses) Lookup(ctx context.Context, orderID int64) (PendingOrder, bool, error) {
	o, ok, err := s.InRedis(ctx, orderID)
	if err != nil || ok {
		return o, ok, err
	}
	return s.Failed(ctx, orderID)
}

// InRedis returns orderID as the orders hash of a registered voucher (or one leaving the
// registry) holds it (pending, or failed until the voucher is retired) and true, or false when
// none does. It asks them all in one pipeline.
func (s *Statuses) InRedis(ctx context.Context, orderID int64) (PendingOrder, bool, error) {
	// With the vouchers leaving the registry, in the same step: a sale reopened during its
	// retirement is out of the registry for a moment, or until a discovery when the put-back
	// failed, and its pending orders would read as none.
	members, err := s.rdb.SUnion(ctx, registryKey, leavingKey).Result()
	if err != nil {
		return PendingOrder{}, false, fmt.Errorf("lookup order: %w", err)
	}
	if len(members) == 0 {
		return PendingOrder{}, false, nil
	}
	// A voucher may be there more than once: registered, and leaving for one retirement or
	// more (leavingMember).
	vouchers := make([]int64, 0, len(members))
	seen := make(map[int64]bool, len(members))
	for _, m := range members {
		if id, err := leavingVoucher(m); err == nil && !seen[id] {
			seen[id] = true
			vouchers = append(vouchers, id)
		}
	}
	field := strconv.FormatInt(orderID, 10)
	cmds := make([]*redis.StringCmd, len(vouchers))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range vouchers {
			cmds[i] = p.HGet(ctx, keysOf(id).orders, field)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return PendingOrder{}, false, fmt.Errorf("lookup order: %w", err)
	}
	for i, c := range cmds {
		v, err := c.Result()
		if err == redis.Nil || v == voidStatus {
			continue
		}
		if err != nil {
			return PendingOrder{}, false, fmt.Errorf("lookup order: %w", err)
		}
		o, err := parseStatus(v)
		if err != nil {
			return PendingOrder{}, false, fmt.Errorf("lookup order %d: %w", orderID, err)
		}
		o.ID, o.VoucherID = orderID, vouchers[i]
		return o, true, nil
	}
	return PendingOrder{}, false, nil
}

// Failed returns orderID as async_failed_orders holds it and true, or false when it holds none
// or the Statuses have no store. The record outlives Redis's copy of a failed order (its
// voucher retired, or Redis restarted empty); it is one indexed read.
func (s *Statuses) Failed(ctx context.Context, orderID int64) (PendingOrder, bool, error) {
	if s.store == nil {
		return PendingOrder{}, false, nil
	}
	f, ok, err := s.store.Failed(ctx, orderID)
	if err != nil || !ok {
		return PendingOrder{}, false, err
	}
	return PendingOrder{ID: orderID, UserID: f.UserID, VoucherID: f.VoucherID, Failed: true, Reason: f.Reason, CreatedAt: f.At}, true, nil
}

// OrderOf returns the id of userID's order of voucherID that Redis holds (pending or
// written) and true, or false when it holds none. A failed order's user was released: false.
func (s *Statuses) OrderOf(ctx context.Context, userID, voucherID int64) (int64, bool, error) {
	v, err := s.rdb.HGet(ctx, keysOf(voucherID).users, strconv.FormatInt(userID, 10)).Result()
	if err == redis.Nil {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("order of user: %w", err)
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("order of user: %q: %w", v, err)
	}
	return id, true, nil
}

// voidStatus is the orders-hash value of an order id that async_settle.lua settled as not
// admitted: no order.
const voidStatus = "void"

// pendingValue is an orders-hash value as async_admit.lua writes it.
func pendingValue(userID, atMs int64) string {
	return "pending|" + strconv.FormatInt(userID, 10) + "|" + strconv.FormatInt(atMs, 10)
}

// parseStatus reads "pending|user|at" or "failed|user|at|reason".
func parseStatus(v string) (PendingOrder, error) {
	parts := strings.SplitN(v, "|", 4)
	if len(parts) < 3 || (parts[0] != "pending" && parts[0] != "failed") {
		return PendingOrder{}, fmt.Errorf("malformed status %q", v)
	}
	user, err1 := strconv.ParseInt(parts[1], 10, 64)
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return PendingOrder{}, fmt.Errorf("malformed status %q", v)
	}
	o := PendingOrder{UserID: user, CreatedAt: time.UnixMilli(at).UTC(), Failed: parts[0] == "failed"}
	if o.Failed && len(parts) == 4 {
		o.Reason = parts[3]
	}
	return o, nil
}

// DeadLettered returns how many orders of voucherID were dead-lettered (its dead-letter
// stream's length): none once the voucher was retired, whose dead letters are then rows of
// async_failed_orders.
func (s *Statuses) DeadLettered(ctx context.Context, voucherID int64) (int64, error) {
	n, err := s.rdb.XLen(ctx, keysOf(voucherID).dead).Result()
	if err != nil {
		return 0, fmt.Errorf("dead letters: %w", err)
	}
	return n, nil
}

// Backlog returns how many orders of voucherID are admitted and not yet written and
// acknowledged: its stream's length (the writer deletes an entry once its order committed).
func (s *Statuses) Backlog(ctx context.Context, voucherID int64) (int64, error) {
	n, err := s.rdb.XLen(ctx, keysOf(voucherID).stream).Result()
	if err != nil {
		return 0, fmt.Errorf("backlog: %w", err)
	}
	return n, nil
}

// OrderPending is Statuses as the order service's Pending (order.Config.Pending), so that
// GET /api/orders/{id} and already_ordered answers see the orders the writer has not
// written yet, and the failed ones.
type OrderPending struct{ *Statuses }

// Lookup returns orderID's summary, pending or failed, and true when Redis knows it; false
// when it does not: the order service then asks the database, and Failed after it.
func (p OrderPending) Lookup(ctx context.Context, orderID int64) (order.Summary, bool, error) {
	return summaryOf(p.Statuses.InRedis(ctx, orderID))
}

// Failed returns orderID's summary, failed, and true when async_failed_orders holds it.
func (p OrderPending) Failed(ctx context.Context, orderID int64) (order.Summary, bool, error) {
	return summaryOf(p.Statuses.Failed(ctx, orderID))
}

// summaryOf is the order service's summary of a Statuses answer.
func summaryOf(o PendingOrder, ok bool, err error) (order.Summary, bool, error) {
	if err != nil || !ok {
		return order.Summary{}, ok, err
	}
	sum := order.Summary{ID: o.ID, UserID: o.UserID, VoucherID: o.VoucherID, State: order.StatePending, CreatedAt: o.CreatedAt}
	if o.Failed {
		sum.State, sum.Reason = order.StateFailed, o.Reason
	}
	return sum, true, nil
}
