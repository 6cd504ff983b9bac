package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/verdict"
)

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "go-sql-driver DSN of the service's database")
	summaryPath := fs.String("summary", "run/loadtest/summary.json", "JSON written by the k6 script's handleSummary")
	ordersPath := fs.String("orders", "run/loadtest/orders.log", "k6 console output (--log-format=json) with one line per 201")
	instancesFile := fs.String("instances-file", "", "file listing the instances' base URLs, one a line (scripts/cluster.sh writes run/cluster/instances)")
	instances := fs.String("instances", "", "comma-separated base URLs of the instances (instead of -instances-file)")
	expectFailure := fs.Bool("expect-failure", false, "a broken guard (SECKILL_LOCK=local|none) is under test: succeed only if its failure is detected")
	if err := fs.Parse(args); err != nil {
		return err
	}
	urls, err := instanceURLs(*instances, *instancesFile)
	if err != nil {
		return err
	}
	summary, err := readSummary(*summaryPath)
	if err != nil {
		return err
	}
	orders, err := readOrdersFile(*ordersPath)
	if err != nil {
		return err
	}
	db, err := database.OpenMySQL(ctx, *dsn, database.Pool{MaxOpen: 2})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer db.Close()

	rep := report{Lock: summary.Lock, Facts: verdict.Facts{Client: "k6", Counts: order.Counts{Orders: map[string]float64{}}}}
	if err := dbFacts(ctx, db, summary.Vouchers, orders, &rep.Facts); err != nil {
		return err
	}
	for _, u := range urls {
		c, err := scrape(ctx, u)
		if err != nil {
			return err
		}
		rep.Counts = rep.Counts.Add(c)
		rep.PerInstance = append(rep.PerInstance, c.Total())
		rep.Instances++
	}
	if !printVerdict(stdout, rep, verdict.Evaluate(rep.Facts), *expectFailure) {
		return errors.New("verify: verdict FAIL")
	}
	return nil
}

func instanceURLs(list, file string) ([]string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("verify: instances: %w", err)
		}
		list = strings.Join(strings.Fields(string(b)), ",")
	}
	var urls []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return nil, errors.New("verify: no instances: give -instances or -instances-file (their /metrics carry duplicate_blocked_by_db)")
	}
	return urls, nil
}

// scrape reads an instance's order counters from its /metrics.
func scrape(ctx context.Context, base string) (order.Counts, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return order.Counts{}, fmt.Errorf("scrape %s: %w", base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return order.Counts{}, fmt.Errorf("scrape %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return order.Counts{}, fmt.Errorf("scrape %s: status %s", base, resp.Status)
	}
	c, err := order.ReadCountsText(resp.Body)
	if err != nil {
		return order.Counts{}, fmt.Errorf("scrape %s: %w", base, err)
	}
	return c, nil
}

// dbFacts reads the run's vouchers and orders from the database and compares them with what
// k6 saw.
func dbFacts(ctx context.Context, db *database.DB, vouchers []k6Voucher, orders []k6Order, f *verdict.Facts) error {
	run := make([]verdict.Voucher, 0, len(vouchers))
	for _, v := range vouchers {
		run = append(run, verdict.Voucher{Scenario: v.Scenario, ID: v.ID, Stock: v.Stock})
	}
	answered := make([]verdict.Answered, 0, len(orders))
	for _, o := range orders {
		answered = append(answered, verdict.Answered{ID: o.ID, User: o.User, Voucher: o.Voucher})
	}
	if err := verdict.ReadDB(ctx, db, run, answered, f); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return nil
}
