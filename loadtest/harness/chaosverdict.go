package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/verdict"
)

// chaosVerdict is `harness verify` for a chaos run: the same checks (in the asynchronous mode
// after the writers have drained, with the asynchronous ones added), with one addition a
// retrying client needs. A user whose 201 was lost (the instance died, nginx answered 502)
// and whose retry was answered 409 already_ordered with no id knows it has an order but not
// its id (one with the id is in orders.log: knownOrders); the id is looked up in the database by (user, voucher), as such a client would look up its
// orders, so that the row does not count as an order nobody was told of. Each is printed, and
// a user whose order is not found fails a threshold of c: it was told of an order it does not have.
// wait is the database's (-dsn): a failed call says what was waited for and which bound struck.
func chaosVerdict(ctx context.Context, w io.Writer, c *chaosCheck, f chaosFlags, wait dbWait, as []attempt) (bool, error) {
	summary, err := readSummary(filepath.Join(f.dir, "summary.json"))
	if err != nil {
		return false, err
	}
	orders, err := readOrdersFile(filepath.Join(f.dir, "orders.log"))
	if err != nil {
		return false, err
	}
	db, err := wait.open(ctx)
	if err != nil {
		return false, fmt.Errorf("chaos verdict: %w", err)
	}
	defer db.Close()
	v := summary.Vouchers[0]
	rep := report{Lock: summary.Lock, Facts: verdict.Facts{Client: "the chaos client", Counts: order.Counts{Orders: map[string]float64{}}}}
	if f.asyncMode() {
		rep.Mode, rep.Accepted = "async", statusOf(c.placed)
		// The writers first: the database is read once every accepted order is written.
		defer f.async.connect()()
		if err := f.async.drain(ctx, w, summary.Vouchers); err != nil {
			return false, fmt.Errorf("chaos verdict: %w", err)
		}
	}
	_, lost := knownOrders(as)
	if len(lost) > 0 {
		inDB, err := verdict.Orders(ctx, db, []int64{v.ID})
		if err != nil {
			return false, fmt.Errorf("chaos verdict: %w", wait.err(ctx, "look up the orders of the users answered already_ordered in "+wait.db(), err))
		}
		byUser := map[int64]string{}
		for id, o := range inDB {
			byUser[o.User] = id
		}
		found := 0
		for _, u := range lost {
			if id, ok := byUser[u]; ok {
				orders = append(orders, k6Order{ID: id, User: u, Voucher: v.ID, Scenario: v.Scenario})
				found++
			}
		}
		fmt.Fprintf(w, "  %d users were answered 409 already_ordered without a %s before (a lost reply); %d of their orders found by (user, voucher)\n", len(lost), statusOf(c.placed), found)
		// Each was told it has an order, and stopped: one not found ends with none, which no
		// check of the orders that do exist can see.
		c.threshold("users answered already_ordered with no order in the database", "0",
			fmt.Sprintf("%d of %d", len(lost)-found, len(lost)), found == len(lost))
	}
	if err := wait.facts(ctx, db, summary.Vouchers, orders, &rep.Facts); err != nil {
		return false, fmt.Errorf("chaos verdict: %w", err)
	}
	var ac asyncCounts
	if f.instancesFile != "" {
		urls, err := instanceURLs("", f.instancesFile)
		if err != nil {
			return false, err
		}
		for _, u := range urls {
			counts, a, err := scrape(ctx, u)
			if err != nil {
				return false, err
			}
			rep.Counts = rep.Counts.Add(counts)
			if f.asyncMode() {
				rep.PerInstance = append(rep.PerInstance, a.Admissions)
			} else {
				rep.PerInstance = append(rep.PerInstance, counts.Total())
			}
			rep.Instances++
			ac.DeadLettered += a.DeadLettered
			ac.Claimed += a.Claimed
		}
	}
	checks := verdict.Evaluate(rep.Facts)
	if f.asyncMode() {
		// A figure, not a check: at a light load a killed instance may hold no delivered,
		// unacknowledged order (make loadtest-ci's KILL=1 requires a claim).
		fmt.Fprintf(w, "  orders claimed from another consumer (%s, the instances' sum): %.0f\n", async.MetricClaimed, ac.Claimed)
		af, err := asyncFacts(ctx, f.async, db, summary.Vouchers, orders, ac)
		if err != nil {
			return false, fmt.Errorf("chaos verdict: %w", wait.err(ctx, "read the books from Redis at "+f.async.redisAddr+" and "+wait.db(), err))
		}
		checks = append(checks, verdict.EvaluateAsync(af)...)
	}
	return printVerdict(w, rep, checks, false), nil
}
