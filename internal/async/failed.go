package async

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/migrations"
)

// FailedOrder is an order the writer gave up (dead-lettered), as the database keeps it in
// async_failed_orders: the durable copy of its `failed` status, which outlives the voucher's
// Redis keys (Config.Retention) and a Redis that restarted empty.
type FailedOrder struct {
	OrderID, UserID, VoucherID int64
	Reason                     string
	// Unit is what became of the order's reserved unit: returned, kept or none (async_dead.lua).
	Unit string
	// At is when the order was admitted.
	At time.Time
}

// RecordFailed stores fs, skipping the orders already stored: it is called when an order is
// dead-lettered and again, for every dead letter of the voucher, before its keys are retired,
// so a second record of one order is the rule, not an error.
func (s *Store) RecordFailed(ctx context.Context, fs []FailedOrder) error {
	if len(fs) == 0 {
		return nil
	}
	values := make([]string, len(fs))
	args := make([]any, 0, 6*len(fs))
	for i, f := range fs {
		values[i] = "(?, ?, ?, ?, ?, ?)"
		args = append(args, f.OrderID, f.UserID, f.VoucherID, f.Reason, f.Unit, f.At.UTC())
	}
	q := "INSERT INTO async_failed_orders (order_id, user_id, voucher_id, reason, unit, created_at) VALUES " + strings.Join(values, ", ")
	if s.dialect == migrations.MySQL {
		q += " ON DUPLICATE KEY UPDATE order_id = order_id"
	} else {
		q += " ON CONFLICT (order_id) DO NOTHING"
	}
	if err := s.db.WithContext(ctx).Exec(q, args...).Error; err != nil {
		return fmt.Errorf("record failed orders: %w", err)
	}
	return nil
}

// Failed returns orderID as async_failed_orders holds it and true, or false when it holds no
// such order.
func (s *Store) Failed(ctx context.Context, orderID int64) (FailedOrder, bool, error) {
	var rows []struct {
		UserID, VoucherID int64
		Reason, Unit      string
		CreatedAt         time.Time
	}
	if err := s.db.WithContext(ctx).Raw("SELECT user_id, voucher_id, reason, unit, created_at FROM async_failed_orders WHERE order_id = ?",
		orderID).Scan(&rows).Error; err != nil {
		return FailedOrder{}, false, fmt.Errorf("read failed order: %w", err)
	}
	if len(rows) == 0 {
		return FailedOrder{}, false, nil
	}
	r := rows[0]
	return FailedOrder{OrderID: orderID, UserID: r.UserID, VoucherID: r.VoucherID, Reason: r.Reason, Unit: r.Unit, At: r.CreatedAt.UTC()}, true, nil
}

// KeptOf counts voucherID's failed orders whose unit Redis kept: reconcile's Kept once the
// voucher's dead-letter stream was retired.
func (s *Store) KeptOf(ctx context.Context, voucherID int64) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM async_failed_orders WHERE voucher_id = ? AND unit = 'kept'",
		voucherID).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count kept units: %w", err)
	}
	return n, nil
}

// deadPage is how many dead letters one read of a dead-letter stream takes.
const deadPage = 1000

// errMalformedDead is parseDead's error for a dead letter without an order (a malformed stream
// entry, dead-lettered as such): there is no order to answer for.
var errMalformedDead = errors.New("dead letter without an order")

// parseDead reads a dead letter as async_dead.lua writes it.
func parseDead(m redis.XMessage) (FailedOrder, error) {
	str := func(name string) string { s, _ := m.Values[name].(string); return s }
	var n [4]int64
	for i, name := range []string{"order", "user", "voucher", "at"} {
		v, err := strconv.ParseInt(str(name), 10, 64)
		if err != nil {
			return FailedOrder{}, fmt.Errorf("%w: field %s=%q", errMalformedDead, name, str(name))
		}
		n[i] = v
	}
	return FailedOrder{OrderID: n[0], UserID: n[1], VoucherID: n[2], At: time.UnixMilli(n[3]).UTC(),
		Reason: str("reason"), Unit: str("unit")}, nil
}

// copyDead stores every dead letter of dead in async_failed_orders, a page at a time, and
// returns how many dead letters it read (those without an order included): the length the
// retirement script checks, so that a dead letter added after this read keeps the keys.
func copyDead(ctx context.Context, rdb redis.UniversalClient, store *Store, dead string) (int64, error) {
	var seen int64
	start := "-"
	for {
		msgs, err := rdb.XRangeN(ctx, dead, start, "+", deadPage).Result()
		if err != nil {
			return 0, fmt.Errorf("read dead letters: %w", err)
		}
		fs := make([]FailedOrder, 0, len(msgs))
		for _, m := range msgs {
			if f, err := parseDead(m); err == nil {
				fs = append(fs, f)
			}
		}
		if err := store.RecordFailed(ctx, fs); err != nil {
			return 0, err
		}
		seen += int64(len(msgs))
		if len(msgs) < deadPage {
			return seen, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}
