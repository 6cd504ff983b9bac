package main

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/verdict"
)

// asyncRow names the demo's row of the asynchronous mode: the redis guard's storm, admitted in
// Redis (202) and written by the instances' stream writers.
const asyncRow = "async"

// drainTimeout bounds the demo's wait for the writers.
const drainTimeout = time.Minute

// drainAsync waits until the writers wrote the accepted orders of voucherID and its stream is
// empty, then returns the asynchronous mode's own checks: the books agree (Redis stock +
// pending + rows = initial) and nothing was dead-lettered.
func drainAsync(ctx context.Context, insts []*app.Instance, voucherID int64, accepted int) ([]verdict.Check, error) {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	a := insts[0].Async
	for {
		b, err := async.Reconcile(ctx, insts[0].Redis, a.Store, voucherID)
		if err != nil {
			return nil, err
		}
		if b.Pending == 0 && b.Orders >= int64(accepted) {
			dead, err := a.DeadLettered(ctx, voucherID)
			if err != nil {
				return nil, err
			}
			return verdict.EvaluateAsync(verdict.AsyncFacts{
				Vouchers: []verdict.AsyncVoucher{{Scenario: asyncRow, ID: voucherID, Initial: b.Initial,
					RedisStock: b.RedisStock, Pending: b.Pending, Orders: b.Orders, DeadLettered: dead}},
				Polled: -1,
			}), nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("async: the writers did not drain voucher %d within %s: %+v", voucherID, drainTimeout, b)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
