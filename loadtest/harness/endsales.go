package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// runEndSales ends now the sales of the vouchers its arguments name that are still on sale,
// and of those that the k6 console output -k6-log records as created. The load scripts call
// it for the vouchers they created, once the cluster that sold them is down and at their exit
// (failed or interrupted too): scripts/scaling.sh and scripts/capacity.sh with the ids they
// hold, scripts/loadtest.sh with the console output of the k6 script, whose setup() created
// them. A voucher left on sale is loaded into Redis, with its users (millions after a scaling
// run), by every asynchronous instance that starts on the database before the sale would have
// ended.
func runEndSales(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("end-sales", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "go-sql-driver DSN of the service's database")
	k6Log := fs.String("k6-log", "", "also the vouchers that this console output of loadtest/k6/seckill.js (--console-output) records as created")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" {
		return errors.New("end-sales: want -dsn and voucher ids, or -k6-log")
	}
	ids, err := endSalesIDs(fs.Args(), *k6Log)
	if err != nil {
		return fmt.Errorf("end-sales: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		return fmt.Errorf("end-sales: %w", err)
	}
	defer db.Close()
	n, err := endSales(ctx, db, ids, time.Now())
	if err != nil {
		return fmt.Errorf("end-sales: %w", err)
	}
	fmt.Fprintf(stdout, "end-sales: %d of vouchers %v were on sale, now ended\n", n, ids)
	return nil
}

// endSales sets the end of the sales of ids still on sale at now to now, and returns how many
// it ended. The service has no means of its own to end a sale (no admin endpoint changes a
// voucher, and its stores never write end_time after the voucher's creation), so this is the
// statement on seckill_vouchers (migrations/*/00001_create_vouchers.sql); a voucher is on sale
// to the asynchronous mode's start while end_time > now (async.Store.OnSale).
func endSales(ctx context.Context, db *sql.DB, ids []int64, now time.Time) (int64, error) {
	now = now.UTC()
	args := []any{now, now, now}
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := db.ExecContext(ctx, "UPDATE seckill_vouchers SET end_time = ?, updated_at = ? WHERE end_time > ? AND voucher_id IN (?"+
		strings.Repeat(", ?", len(ids)-1)+")", args...)
	if err != nil {
		return 0, fmt.Errorf("end the sales of vouchers %v: %w", ids, err)
	}
	return res.RowsAffected()
}

// endSalesIDs is the voucher ids of args, then those that the k6 console output at k6Log
// records as created (none when k6Log is empty).
func endSalesIDs(args []string, k6Log string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("voucher id %q: want a positive number", a)
		}
		ids = append(ids, id)
	}
	if k6Log == "" {
		return ids, nil
	}
	created, err := readCreatedVouchers(k6Log)
	return append(ids, created...), err
}
