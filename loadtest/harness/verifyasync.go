package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/verdict"
)

// Bounds of the asynchronous verdict's reads.
const (
	drainPoll     = 100 * time.Millisecond
	pollWorkers   = 16               // GET /api/orders/{id} in flight at once
	pollTimeout   = 5 * time.Second  // one GET
	pollAllBound  = 3 * time.Minute  // every GET
	reconcileRead = 3                // ReconcileSettled's tries
	drainReport   = 10 * time.Second // how often the drain says how far it is
)

// asyncVerify is what the verdict of an asynchronous run reads besides the database: the
// instances' Redis, and the service's order lookup through nginx.
type asyncVerify struct {
	redisAddr     string
	url           string
	drainTimeout  time.Duration
	killedHolding float64 // < 0: no instance was killed
	rdb           *redis.Client
	statuses      *async.Statuses
}

// connect opens the Redis client the drain and the books read; the returned func closes it.
func (a *asyncVerify) connect() (closeRedis func() error) {
	a.rdb = redis.NewClient(&redis.Options{Addr: a.redisAddr})
	a.statuses = async.NewStatuses(a.rdb, nil)
	return a.rdb.Close
}

// drain waits until the streams of the run's vouchers are empty: every accepted order written
// and acknowledged (the writer deletes an entry after its commit). A killed instance's entries
// count too, until a survivor claims and writes them.
func (a *asyncVerify) drain(ctx context.Context, w io.Writer, vouchers []k6Voucher) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, a.drainTimeout)
	defer cancel()
	lastReport := start
	// undrained is the bound's error, with the backlog of the last complete read: the bound
	// may strike inside a read, and "backlog: context deadline exceeded" would then read as
	// a Redis failure instead of writers that did not keep up.
	last := int64(-1)
	undrained := func() error {
		return fmt.Errorf("verify: the writers did not drain within %s: %d orders still in the streams", a.drainTimeout, last)
	}
	for {
		var backlog int64
		for _, v := range vouchers {
			n, err := a.statuses.Backlog(ctx, v.ID)
			if err != nil && ctx.Err() != nil && last >= 0 {
				return undrained()
			}
			if err != nil {
				return fmt.Errorf("verify: drain: %w", err)
			}
			backlog += n
		}
		last = backlog
		if backlog == 0 {
			fmt.Fprintf(w, "drain: every accepted order written and acknowledged %.1fs after the load\n", time.Since(start).Seconds())
			return nil
		}
		if time.Since(lastReport) >= drainReport {
			fmt.Fprintf(w, "drain: %d orders still in the streams after %.0fs\n", backlog, time.Since(start).Seconds())
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return undrained()
		case <-time.After(drainPoll):
		}
	}
}

// asyncFacts reads the books and dead letters of every voucher of the run, and asks the
// service for every accepted order.
func asyncFacts(ctx context.Context, a asyncVerify, db *database.DB, vouchers []k6Voucher, orders []k6Order, ac asyncCounts) (verdict.AsyncFacts, error) {
	f := verdict.AsyncFacts{DeadLetteredMetric: ac.DeadLettered, Claimed: ac.Claimed, Polled: -1,
		ExpectClaimed: a.killedHolding >= 0, Held: a.killedHolding}
	store := async.NewStore(db)
	for _, v := range vouchers {
		b, err := async.ReconcileSettled(ctx, a.rdb, store, v.ID, reconcileRead)
		if err != nil {
			return f, fmt.Errorf("voucher %d: %w", v.ID, err)
		}
		if !b.Loaded {
			return f, fmt.Errorf("voucher %d is not in Redis at %s: is -redis the instances' Redis?", v.ID, a.redisAddr)
		}
		dead, err := a.statuses.DeadLettered(ctx, v.ID)
		if err != nil {
			return f, fmt.Errorf("voucher %d: dead letters: %w", v.ID, err)
		}
		f.Vouchers = append(f.Vouchers, verdict.AsyncVoucher{Scenario: v.Scenario, ID: v.ID, Initial: v.Stock,
			RedisStock: b.RedisStock, Pending: b.Pending, Orders: b.Orders, DeadLettered: dead})
	}
	if a.url != "" {
		f.Polled = len(orders)
		f.NotCreated = pollOrders(ctx, a.url, orders)
	}
	return f, nil
}

// pollOrders asks GET /api/orders/{id} for every order as its user and counts the answers
// that are not 200 created with that user and voucher.
func pollOrders(ctx context.Context, base string, orders []k6Order) int {
	ctx, cancel := context.WithTimeout(ctx, pollAllBound)
	defer cancel()
	client := &http.Client{Timeout: pollTimeout}
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	for range pollWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(orders) {
					return
				}
				if !orderCreated(ctx, client, base, orders[i]) {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(bad.Load())
}

// orderCreated reports whether the service answers o as created, with o's user and voucher.
func orderCreated(ctx context.Context, client *http.Client, base string, o k6Order) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/orders/"+o.ID, nil)
	if err != nil {
		return false
	}
	req.Header.Set("X-User-ID", strconv.FormatInt(o.User, 10))
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var got struct {
		OrderID   string `json:"orderId"`
		VoucherID int64  `json:"voucherId"`
		UserID    string `json:"userId"`
		Status    string `json:"status"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&got) != nil {
		return false
	}
	return got.Status == "created" && got.OrderID == o.ID && got.VoucherID == o.Voucher && got.UserID == strconv.FormatInt(o.User, 10)
}
