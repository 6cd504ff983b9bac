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

// runEndSales ends now the sales of the vouchers its arguments name that are still on sale.
// scripts/scaling.sh calls it for the vouchers it created, once their points are done and at
// its exit (failed or interrupted too): a voucher left on sale is loaded into Redis, with its
// users (millions after a scaling run), by every asynchronous instance that starts on the
// database before the sale would have ended.
func runEndSales(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("end-sales", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "go-sql-driver DSN of the service's database")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" {
		return errors.New("end-sales: want -dsn and voucher ids")
	}
	ids := make([]int64, 0, fs.NArg())
	for _, a := range fs.Args() {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("end-sales: voucher id %q: want a positive number", a)
		}
		ids = append(ids, id)
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
