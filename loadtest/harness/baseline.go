package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// baselineResult is one baseline measurement.
type baselineResult struct {
	Workers      int     `json:"workers"`
	Delay        string  `json:"delay"`
	DurationSec  float64 `json:"durationSec"`
	Orders       int64   `json:"orders"`
	OrdersPerSec float64 `json:"ordersPerSec"`
	P50Ms        float64 `json:"p50Ms"`
	P95Ms        float64 `json:"p95Ms"`
	P99Ms        float64 `json:"p99Ms"`
}

func runBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "go-sql-driver DSN; the database is created and migrated if needed")
	workersList := fs.String("workers", "64", "concurrent order transactions; a comma-separated list measures each")
	duration := fs.Duration("duration", 20*time.Second, "measuring time per worker count")
	delay := fs.Duration("delay", 0, "sleep inside the critical section before the order's writes, as SECKILL_ORDER_DELAY does in the service")
	k6Summary := fs.String("k6-summary", "", "k6 summary JSON: print the service's sell-out orders/s as a ratio of the baseline")
	out := fs.String("out", "", "write the results as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var workers []int
	for _, w := range strings.Split(*workersList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 || n > 512 {
			return fmt.Errorf("baseline: -workers %q: want integers in 1..512", *workersList)
		}
		workers = append(workers, n)
	}
	if _, err := createDatabase(ctx, *dsn); err != nil {
		return err
	}
	db, err := database.OpenMySQL(ctx, *dsn, database.Pool{MaxOpen: slices.Max(workers)})
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}

	fmt.Fprintf(stdout, "DB baseline: the order transaction straight at the database, no HTTP, no lock, ids from a counter, delay %s\n", *delay)
	fmt.Fprintln(stdout, "workers  duration  orders  orders/s  p50ms  p95ms  p99ms")
	var results []baselineResult
	for _, w := range workers {
		r, err := measureBaseline(ctx, db, w, *duration, *delay)
		if err != nil {
			return err
		}
		results = append(results, r)
		fmt.Fprintf(stdout, "%7d  %7.1fs  %6d  %8.1f  %5.1f  %5.1f  %5.1f\n", r.Workers, r.DurationSec, r.Orders, r.OrdersPerSec, r.P50Ms, r.P95Ms, r.P99Ms)
	}
	best := slices.MaxFunc(results, func(a, b baselineResult) int { return int(a.OrdersPerSec - b.OrdersPerSec) })
	if *k6Summary != "" {
		svc, err := selloutOrdersPerSec(*k6Summary)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "service sell-out: %.1f orders/s = %.0f%% of the DB baseline (%.1f orders/s at %d workers)\n",
			svc, 100*svc/best.OrdersPerSec, best.OrdersPerSec, best.Workers)
	}
	if *out != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
	}
	return nil
}

func selloutOrdersPerSec(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	var s struct {
		Scenarios map[string]struct {
			OrdersPerSec float64 `json:"ordersPerSec"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("baseline: %s: %w", path, err)
	}
	v := s.Scenarios["sellout"].OrdersPerSec
	if v <= 0 {
		return 0, fmt.Errorf("baseline: %s: no sell-out orders/s", path)
	}
	return v, nil
}

// baselineUsers and baselineIDs keep user and order ids unique across the measurements of one
// process (each measurement has its own voucher, but ids are global).
var (
	baselineUsers atomic.Int64
	baselineIDs   counterIDs
)

// measureBaseline creates a voucher with more stock than can sell in d, then runs workers
// goroutines placing orders of distinct users for d.
func measureBaseline(ctx context.Context, db *database.DB, workers int, d, delay time.Duration) (baselineResult, error) {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return baselineResult{}, fmt.Errorf("baseline: %w", err)
	}
	sqlDB.SetMaxOpenConns(workers)
	sqlDB.SetMaxIdleConns(workers)
	st := newBaselineStores(db)
	voucherID, err := st.voucher(ctx)
	if err != nil {
		return baselineResult{}, err
	}
	// Workers stop starting transactions at the deadline but finish the one they are in, so
	// every counted order is committed and every committed order is counted.
	deadline := time.Now().Add(d)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		firstErr  error
		failed    atomic.Bool
		wg        sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) && !failed.Load() && ctx.Err() == nil {
				t := time.Now()
				if err := st.place(ctx, baselineUsers.Add(1), voucherID, baselineIDs.next(), delay); err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					failed.Store(true)
					break
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return baselineResult{}, fmt.Errorf("baseline: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return baselineResult{}, fmt.Errorf("baseline: %w", err)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	return baselineResult{
		Workers: workers, Delay: delay.String(), DurationSec: elapsed.Seconds(),
		Orders: int64(len(latencies)), OrdersPerSec: float64(len(latencies)) / elapsed.Seconds(),
		P50Ms: pct(0.50), P95Ms: pct(0.95), P99Ms: pct(0.99),
	}, nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// baselineStores are the service's own stores: the baseline measures the statements the
// service sends because it sends them through the same code.
type baselineStores struct {
	vouchers *voucher.Store
	orders   *order.SQLStore
}

func newBaselineStores(db *database.DB) baselineStores {
	return baselineStores{vouchers: voucher.NewStore(db.DB), orders: order.NewSQLStore(db)}
}

// voucher creates a voucher on sale with more stock than any measurement sells.
func (s baselineStores) voucher(ctx context.Context) (int64, error) {
	now := time.Now().UTC()
	v, err := s.vouchers.Create(ctx, voucher.Voucher{Title: "db baseline " + now.Format(time.RFC3339),
		Stock: 1 << 30, BeginTime: now.Add(-time.Minute), EndTime: now.Add(time.Hour)})
	if err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	return v.ID, nil
}

var errBaselineRefused = errors.New("baseline: order refused")

// place is the service's database work for one order: order.SQLStore.Create with delay as
// the business step inside the transaction, fenced as the service's default guard fences
// (SECKILL_FENCING=auto with the redis lock: two claims of the user's lock_fences row). (The service reads the voucher from a cache that
// each instance refreshes once a second, not once per order.) An order the service would
// refuse (already ordered, sold out) returns an error wrapping errBaselineRefused: the
// baseline's users and stock are sized so that none is.
func (s baselineStores) place(ctx context.Context, userID, voucherID, orderID int64, delay time.Duration) error {
	o := order.Order{ID: orderID, UserID: userID, VoucherID: voucherID, Status: order.StatusUnpaid, CreatedAt: time.Now().UTC()}
	fence := order.Fence{Name: "baseline/" + order.LockName(userID), Token: 1}
	err := s.orders.Create(ctx, o, fence, func(ctx context.Context) error {
		if delay <= 0 {
			return nil
		}
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	switch {
	case errors.Is(err, order.ErrAlreadyOrdered), errors.Is(err, order.ErrSoldOut), errors.Is(err, order.ErrDuplicate):
		return fmt.Errorf("%w: user %d: %w", errBaselineRefused, userID, err)
	case err != nil:
		return fmt.Errorf("place order: %w", err)
	}
	return nil
}

// counterIDs mimics the service's id layout (seconds since an epoch << 32 | a sequence) with
// an in-process counter instead of Redis INCR: the baseline measures the database alone. The
// sequence never restarts within a process, and two processes never share a second of ids
// because each measurement runs for seconds.
type counterIDs struct{ seq atomic.Int64 }

var baselineEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

func (c *counterIDs) next() int64 {
	return (time.Now().Unix()-baselineEpoch)<<32 | (c.seq.Add(1) & (1<<32 - 1))
}
