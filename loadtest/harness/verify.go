package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
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
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer db.Close()

	f := facts{Lock: summary.Lock}
	if err := dbFacts(ctx, db, summary.Vouchers, orders, &f); err != nil {
		return err
	}
	f.Metrics = map[string]float64{}
	for _, u := range urls {
		m, err := scrape(ctx, u)
		if err != nil {
			return err
		}
		var total float64
		for k, v := range m {
			f.Metrics[k] += v
			total += v
		}
		f.PerInstance = append(f.PerInstance, total)
		f.Instances++
	}
	if !printVerdict(stdout, f, evaluate(f), *expectFailure) {
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

func scrape(ctx context.Context, base string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %s", base, resp.Status)
	}
	m, err := ordersByResult(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", base, err)
	}
	return m, nil
}

// dbFacts reads the run's vouchers and orders from the database and compares them with what
// k6 saw.
func dbFacts(ctx context.Context, db *sql.DB, vouchers []k6Voucher, orders []k6Order, f *facts) error {
	ids := make([]any, 0, len(vouchers))
	for _, v := range vouchers {
		vf := voucherFacts{k6Voucher: v}
		err := db.QueryRowContext(ctx, "SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", v.ID).Scan(&vf.StockLeft)
		if err != nil {
			return fmt.Errorf("verify: stock of voucher %d: %w", v.ID, err)
		}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM voucher_orders WHERE voucher_id = ?", v.ID).Scan(&vf.Orders); err != nil {
			return fmt.Errorf("verify: orders of voucher %d: %w", v.ID, err)
		}
		f.Vouchers = append(f.Vouchers, vf)
		ids = append(ids, v.ID)
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"

	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (
		SELECT user_id, voucher_id FROM voucher_orders WHERE voucher_id IN `+in+`
		GROUP BY user_id, voucher_id HAVING COUNT(*) > 1) d`, ids...).Scan(&f.DuplicateGroups)
	if err != nil {
		return fmt.Errorf("verify: duplicate rows: %w", err)
	}
	var uk int
	err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'voucher_orders'
		AND index_name = 'uk_user_voucher' AND non_unique = 0`).Scan(&uk)
	if err != nil {
		return fmt.Errorf("verify: unique key: %w", err)
	}
	f.UniqueKey = uk > 0

	rows, err := db.QueryContext(ctx, "SELECT id, user_id, voucher_id FROM voucher_orders WHERE voucher_id IN "+in, ids...)
	if err != nil {
		return fmt.Errorf("verify: orders: %w", err)
	}
	defer rows.Close()
	inDB := map[string]orderOwner{}
	for rows.Next() {
		var id uint64
		var o orderOwner
		if err := rows.Scan(&id, &o.user, &o.voucher); err != nil {
			return fmt.Errorf("verify: orders: %w", err)
		}
		inDB[strconv.FormatUint(id, 10)] = o
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("verify: orders: %w", err)
	}
	compareOrders(orders, inDB, f)
	return nil
}

// orderOwner is who a voucher_orders row belongs to.
type orderOwner struct{ user, voucher int64 }

// compareOrders checks every 201 that k6 logged against the rows of the run's vouchers
// (inDB, keyed by decimal order id), and counts the rows that k6 never saw answered.
func compareOrders(orders []k6Order, inDB map[string]orderOwner, f *facts) {
	type pair struct{ user, voucher int64 }
	perUser := map[pair]int{}
	logged := make(map[string]bool, len(orders))
	f.Orders201 = len(orders)
	for _, o := range orders {
		perUser[pair{o.User, o.Voucher}]++
		logged[o.ID] = true
		row, ok := inDB[o.ID]
		switch {
		case !ok:
			f.Missing201++
		case row.user != o.User || row.voucher != o.Voucher:
			f.WrongOwner201++
		}
	}
	for _, n := range perUser {
		if n > 1 {
			f.Repeated201++
		}
	}
	for id := range inDB {
		if !logged[id] {
			f.Unanswered++
		}
	}
}
