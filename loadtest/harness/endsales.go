package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/voucher"
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
	db, err := database.OpenMySQL(ctx, *dsn, database.Pool{MaxOpen: 1})
	if err != nil {
		return fmt.Errorf("end-sales: %w", err)
	}
	defer db.Close()
	n, err := voucher.NewStore(db.DB).EndSales(ctx, ids, time.Now())
	if err != nil {
		return fmt.Errorf("end-sales: %w", err)
	}
	fmt.Fprintf(stdout, "end-sales: %d of vouchers %v were on sale, now ended\n", n, ids)
	return nil
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
