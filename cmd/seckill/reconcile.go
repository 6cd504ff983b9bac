package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
)

// reconcileTimeout bounds the whole reconcile.
const reconcileTimeout = time.Minute

// reconcileTries is how often a voucher's books are read before a drift counts: an order
// written between the Redis read and the database read shows as a transient drift.
const reconcileTries = 3

// errDrift is returned when a voucher's books disagree.
var errDrift = errors.New("reconcile: the books disagree")

// runReconcile prints the asynchronous mode's books per voucher (all seckill vouchers, or the
// one named) and fails when Redis stock + pending + database orders is not the initial stock.
func runReconcile(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var fs *flag.FlagSet // the parsed set: its Args are the voucher id
	cfg, err := parseConfig("reconcile", args, getenv, stderr, func(set *flag.FlagSet) {
		fs = set
		fs.Usage = func() {
			fmt.Fprintln(fs.Output(), "usage: seckill reconcile [flags] [voucher-id]")
			fs.PrintDefaults()
		}
	})
	if err != nil {
		return err
	}
	if cfg.mysqlDSN == "" {
		// The embedded stores would be this process's own: a Redis that has never seen an
		// order, so every voucher is "not in redis" and the books could never disagree.
		return fmt.Errorf("reconcile: set SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDR (or SECKILL_REDIS_SENTINEL) of the instances; " +
			"the embedded stores live and die with each process, so there are no books to check")
	}
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	st, err := openStores(ctx, log, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	db, err := st.OpenDB(ctx, database.Pool{MaxOpen: 2})
	if err != nil {
		return err
	}
	defer db.Close()
	rdb := st.OpenRedis(2)
	defer rdb.Close()
	store := async.NewStore(db)

	var ids []int64
	switch fs.NArg() {
	case 0:
		if ids, err = store.All(ctx); err != nil {
			return err
		}
	case 1:
		id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("reconcile: voucher id %q: want a positive integer", fs.Arg(0))
		}
		ids = []int64{id}
	default:
		return fmt.Errorf("reconcile: at most one voucher id, got %d arguments", fs.NArg())
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "voucher\tinitial\tredis stock\tpending\tdb orders\tdb stock\tdrift\t\t")
	drifted := 0
	for _, id := range ids {
		b, err := async.ReconcileSettled(ctx, rdb, store, id, reconcileTries)
		if err != nil {
			return err
		}
		if !b.Loaded {
			fmt.Fprintf(tw, "%d\t%d\t-\t-\t%d\t%d\t-\tnot in redis\t\n", id, b.Initial, b.Orders, b.DBStock)
			continue
		}
		verdict := "ok"
		if b.Drift() != 0 {
			verdict = "DRIFT"
			drifted++
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%+d\t%s\t\n", id, b.Initial, b.RedisStock, b.Pending, b.Orders, b.DBStock, b.Drift(), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if drifted > 0 {
		return fmt.Errorf("%w: %d of %d vouchers drifted (redis stock + pending + db orders != db stock + db orders)", errDrift, drifted, len(ids))
	}
	return nil
}
