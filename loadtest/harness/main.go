// Command harness is the load test's companion: it creates the load-test database, gives the
// verdict on a k6 run from the database and the instances' metrics, and measures the
// database's own limit for the order transaction (the baseline the k6 figures are compared
// with). The Makefile's loadtest targets and scripts/cluster.sh drive it; see docs/loadtest.md.
//
//	harness createdb -dsn DSN
//	harness verify   -dsn DSN -summary run/loadtest/summary.json -orders run/loadtest/orders.log -instances run/cluster/instances [-expect-failure] [-timeout 5m]
//	harness baseline -dsn DSN [-workers 64] [-duration 20s]
//	harness load -url URL -out DIR [-mode open -rate 50 | -mode closed -workers 64] [-retry]
//	harness chaos-check -experiment NAME -dir DIR -events FILE -dsn DSN [-timeout 5m] ...
//	harness rate     -url URL -voucher ID -rate 5000 -duration 10s [-out FILE]
//	harness drain    -dsn DSN -redis ADDR -voucher ID [-timeout 2m]
//	harness end-sales -dsn DSN [-k6-log run/loadtest/orders.log] [ID...]
//	harness chart    -in run/scaling/points.csv -out docs/loadtest-scaling.svg
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: harness <command> [flags]

commands:
  createdb   create the database named in -dsn if it does not exist
  verify     check a k6 run against the database and the instances' /metrics; a verdict table
  baseline   drive the order transaction straight at the database: its orders/s, no HTTP, no lock
  load       drive orders through nginx (open or closed loop, retrying as a client should) for make chaos
  chaos-check  one chaos experiment's figures and thresholds, and the SQL verdict (scripts/chaos.sh)
  rate       an open loop of orders at a fixed rate, every request a new user: answers and latency (scripts/scaling.sh)
  drain      wait until an async voucher's admitted orders are all in MySQL; the writers' rate
  end-sales  end now the sales of the vouchers named, or a k6 run created, that are still on sale (the load scripts)
  chart      draw scripts/scaling.sh's measurements as an SVG chart
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command")
	}
	cmd, rest := args[1], args[2:]
	switch cmd {
	case "createdb":
		return runCreateDB(ctx, rest, stdout, stderr)
	case "verify":
		return runVerify(ctx, rest, stdout, stderr)
	case "baseline":
		return runBaseline(ctx, rest, stdout, stderr)
	case "load":
		return runLoad(ctx, rest, stdout, stderr)
	case "chaos-check":
		return runChaosCheck(ctx, rest, stdout, stderr)
	case "rate":
		return runRate(ctx, rest, stdout, stderr)
	case "drain":
		return runDrain(ctx, rest, stdout, stderr)
	case "end-sales":
		return runEndSales(ctx, rest, stdout, stderr)
	case "chart":
		return runChart(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
