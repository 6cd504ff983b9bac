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
// The dead letters whose unit Redis kept are shown, not added: each already brought the two
// sides together by a unit (see async.Book.Kept), so a voucher with kept units and no drift
// passes, with a note that says what they were. A voucher retired from Redis (its sale over
// for SECKILL_STREAM_RETENTION) is checked the same way, from the stock its sale hash kept,
// with its kept units counted in the database, and marked "(retired)".
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
	rdb := st.OpenRedis(2, 0)
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
	fmt.Fprintln(tw, "voucher\tinitial\tredis stock\tpending\tdb orders\tdb stock\tkept\tdrift\t\t")
	drifted := 0
	var notes []string
	for _, id := range ids {
		b, err := async.ReconcileSettled(ctx, rdb, store, id, reconcileTries)
		if err != nil {
			return err
		}
		if !b.Loaded {
			fmt.Fprintf(tw, "%d\t%d\t-\t-\t%d\t%d\t%d\t-\tnot in redis\t\n", id, b.Initial, b.Orders, b.DBStock, b.Kept)
			continue
		}
		verdict := "ok"
		if b.Drift() != 0 {
			verdict = "DRIFT"
			drifted++
		}
		if b.Retired {
			verdict += " (retired)"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%+d\t%s\t\n", id, b.Initial, b.RedisStock, b.Pending, b.Orders, b.DBStock, b.Kept, b.Drift(), verdict)
		notes = append(notes, bookNotes(b)...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	if drifted > 0 {
		return fmt.Errorf("%w: %d of %d vouchers drifted (redis stock + pending + db orders != db stock + db orders)", errDrift, drifted, len(ids))
	}
	return nil
}

// bookNotes says what a loaded voucher's drift and kept units mean, and what to do.
func bookNotes(b async.Book) []string {
	var notes []string
	dead := "seckill:{voucher:" + strconv.FormatInt(b.VoucherID, 10) + "}:dead"
	switch d := b.Drift(); {
	case d != 0 && b.Retired:
		notes = append(notes, fmt.Sprintf("voucher %d: retired from Redis with a drift of %+d: its sale is over, so nothing more is "+
			"admitted against it; the books disagreed when it ended (the database's stock changed, or an order written, behind Redis)", b.VoucherID, d))
	case d > 0:
		notes = append(notes, fmt.Sprintf("voucher %d: Redis counts %d unit(s) the database lacks (its stock was cut, or an order written, "+
			"behind Redis): each admits an order the database refuses, dead-lettered with its unit kept, until the drift is 0; "+
			"to stop that now, reload the voucher (docs/async.md, Changing a voucher's stock)", b.VoucherID, d))
	case d < 0:
		notes = append(notes, fmt.Sprintf("voucher %d: %d unit(s) lost: the database has them and Redis will not sell them "+
			"(the database's stock was raised behind Redis?); reload the voucher (docs/async.md, Changing a voucher's stock)", b.VoucherID, -d))
	}
	where := "XRANGE " + dead + " - +"
	if b.Retired {
		// Its dead letters left Redis with its other keys; the database has them.
		where = fmt.Sprintf("SELECT * FROM async_failed_orders WHERE voucher_id = %d AND unit = 'kept'", b.VoucherID)
	}
	if b.Kept > 0 {
		notes = append(notes, fmt.Sprintf("voucher %d: %d kept: dead letters of orders the database's stock was short of, each "+
			"taking off a unit Redis had counted and the database never had (drift %+d before them); they are not lost "+
			"units, and the orders are in %s", b.VoucherID, b.Kept, b.Drift()+b.Kept, where))
	}
	return notes
}
