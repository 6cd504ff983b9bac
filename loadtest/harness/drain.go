package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver of -dsn
	"github.com/redis/go-redis/v9"
)

// drainResult is what `harness drain` saw: the asynchronous mode's backlog of one voucher
// (orders admitted in Redis, not yet written to MySQL) when it started, and how fast the
// writers emptied it.
type drainResult struct {
	Admitted   int64   `json:"admitted"`
	Written0   int64   `json:"writtenAtStart"`
	Backlog    int64   `json:"backlogAtStart"`
	Seconds    float64 `json:"seconds"`
	RatePerSec float64 `json:"ratePerSec"`
}

// runDrain waits, bounded, until every order admitted for a voucher in the asynchronous mode
// is a row in MySQL, and reports the writers' rate over that wait. Admitted orders are the
// entries of the voucher's users hash (seckill:{voucher:ID}:users): a dead-lettered order
// leaves it, so a drained voucher has as many rows as entries. The rate is only the writers'
// own when nothing else ran during the wait (scripts/scaling.sh calls it after the load).
func runDrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "go-sql-driver DSN of the service's database")
	addr := fs.String("redis", "127.0.0.1:6379", "the service's Redis")
	vid := fs.Int64("voucher", 0, "the voucher")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	peek := fs.Bool("peek", false, "print the backlog once and return, without waiting")
	out := fs.String("out", "", "write the result as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" || *vid <= 0 {
		return errors.New("drain: want -dsn and -voucher")
	}
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	defer db.Close()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()

	users := "seckill:{voucher:" + strconv.FormatInt(*vid, 10) + "}:users"
	books := func() (admitted, written int64, err error) {
		if admitted, err = rdb.HLen(ctx, users).Result(); err != nil {
			return 0, 0, fmt.Errorf("drain: HLEN %s: %w", users, err)
		}
		err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM voucher_orders WHERE voucher_id = ?", *vid).Scan(&written)
		if err != nil {
			return 0, 0, fmt.Errorf("drain: count the orders: %w", err)
		}
		return admitted, written, nil
	}
	start := time.Now()
	admitted, written, err := books()
	if err != nil {
		return err
	}
	res := drainResult{Admitted: admitted, Written0: written, Backlog: admitted - written}
	if *peek {
		fmt.Fprintf(stdout, "drain: voucher %d: backlog %d of %d admitted\n", *vid, res.Backlog, res.Admitted)
		return nil
	}
	deadline := start.Add(*timeout)
	for written < admitted {
		if time.Now().After(deadline) {
			return fmt.Errorf("drain: voucher %d: %d of %d admitted orders written after %s", *vid, written, admitted, *timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if admitted, written, err = books(); err != nil {
			return err
		}
	}
	if written > admitted {
		return fmt.Errorf("drain: voucher %d: %d rows for %d admitted orders", *vid, written, admitted)
	}
	res.Admitted = admitted
	res.Seconds = time.Since(start).Seconds()
	if res.Backlog > 0 {
		res.RatePerSec = float64(written-res.Written0) / res.Seconds
	}
	fmt.Fprintf(stdout, "drain: voucher %d: backlog %d of %d admitted, written in %.2f s (%.0f orders/s)\n",
		*vid, res.Backlog, res.Admitted, res.Seconds, res.RatePerSec)
	if *out != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
	}
	return nil
}
