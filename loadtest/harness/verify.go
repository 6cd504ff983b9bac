package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seckill/seckill/internal/async"
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
	var av asyncVerify
	fs.StringVar(&av.redisAddr, "redis", "127.0.0.1:6379", "the instances' Redis (async runs: the books, the streams, the dead letters)")
	fs.StringVar(&av.url, "url", "", "async runs: where to ask GET /api/orders/{id} for every accepted order (nginx); empty: not asked")
	fs.DurationVar(&av.drainTimeout, "drain-timeout", 60*time.Second, "async runs: how long the writers may take to write every accepted order")
	timeout := stepTimeout(fs, "the writers' drain (-drain-timeout), every database and Redis read, the instances' /metrics and the GET poll")
	fs.Float64Var(&av.killedHolding, "killed-holding", -1, "async runs: an instance was killed holding this many delivered, unacknowledged orders; "+
		"the survivors must have claimed at least as many, and 0 fails (the claim went untested); < 0: no kill")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *timeout <= av.drainTimeout {
		return fmt.Errorf("verify: -timeout %s must exceed -drain-timeout %s: the drain is one of its waits", *timeout, av.drainTimeout)
	}
	// Every wait below has this deadline, besides the bounds of its own (the DSN's timeouts,
	// the drain's, a scrape's, the poll's).
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	wait, err := newDBWait(*dsn, *timeout)
	if err != nil {
		return fmt.Errorf("verify: -dsn: %w", err)
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
	db, err := wait.open(ctx)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer db.Close()

	asyncRun := summary.Mode == "async"
	rep := report{Lock: summary.Lock, Mode: summary.Mode, Facts: verdict.Facts{Client: "k6", Counts: order.Counts{Orders: map[string]float64{}}}}
	if asyncRun {
		rep.Accepted = "202"
		// The writers first: the database is read once every accepted order is written.
		defer av.connect()()
		if err := av.drain(ctx, stdout, summary.Vouchers); err != nil {
			return err
		}
	}
	if err := wait.facts(ctx, db, summary.Vouchers, orders, &rep.Facts); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	var ac asyncCounts
	for _, u := range urls {
		c, a, err := scrape(ctx, u)
		if err != nil {
			return err
		}
		rep.Counts = rep.Counts.Add(c)
		if asyncRun {
			rep.PerInstance = append(rep.PerInstance, a.Admissions)
		} else {
			rep.PerInstance = append(rep.PerInstance, c.Total())
		}
		rep.Instances++
		ac.DeadLettered += a.DeadLettered
		ac.Claimed += a.Claimed
	}
	checks := verdict.Evaluate(rep.Facts)
	if asyncRun {
		af, err := asyncFacts(ctx, av, db, summary.Vouchers, orders, ac)
		if err != nil {
			return fmt.Errorf("verify: %w", wait.err(ctx, "read the books from Redis at "+av.redisAddr+" and "+wait.db(), err))
		}
		checks = append(checks, verdict.EvaluateAsync(af)...)
	}
	if !printVerdict(stdout, rep, checks, *expectFailure) {
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

// scrape reads an instance's order counters from its /metrics, and the asynchronous mode's
// dead-lettered and claimed counters (zero when the instance has none).
func scrape(ctx context.Context, base string) (order.Counts, asyncCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return order.Counts{}, asyncCounts{}, fmt.Errorf("scrape %s: %w", base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return order.Counts{}, asyncCounts{}, fmt.Errorf("scrape %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return order.Counts{}, asyncCounts{}, fmt.Errorf("scrape %s: status %s", base, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return order.Counts{}, asyncCounts{}, fmt.Errorf("scrape %s: %w", base, err)
	}
	c, err := order.ReadCounts(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return slices.Collect(maps.Values(families)), nil
	}))
	if err != nil {
		return order.Counts{}, asyncCounts{}, fmt.Errorf("scrape %s: %w", base, err)
	}
	return c, asyncCounts{Admissions: counter(families, async.MetricAdmissions),
		DeadLettered: counter(families, async.MetricDeadLettered), Claimed: counter(families, async.MetricClaimed)}, nil
}

// asyncCounts are the asynchronous mode's counters of one instance, or summed over several.
type asyncCounts struct{ Admissions, DeadLettered, Claimed float64 }

// counter is the sum of the samples of the counter name (0 when absent).
func counter(families map[string]*dto.MetricFamily, name string) float64 {
	var sum float64
	for _, m := range families[name].GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
	}
	return sum
}

// dbFacts reads the run's vouchers and orders from the database and compares them with what
// k6 saw.
func dbFacts(ctx context.Context, db *database.DB, vouchers []k6Voucher, orders []k6Order, f *verdict.Facts) error {
	run := make([]verdict.Voucher, 0, len(vouchers))
	for _, v := range vouchers {
		run = append(run, verdict.Voucher{Scenario: v.Scenario, ID: v.ID, Stock: v.Stock, SoldOut: v.SoldOut, SellsOut: v.SellsOut})
	}
	answered := make([]verdict.Answered, 0, len(orders))
	for _, o := range orders {
		answered = append(answered, verdict.Answered{ID: o.ID, User: o.User, Voucher: o.Voucher})
	}
	return verdict.ReadDB(ctx, db, run, answered, f)
}
