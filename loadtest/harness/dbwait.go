package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/verdict"
)

// defaultStepTimeout is -timeout's default for a verdict step (verify, chaos-check): more than
// verify's -drain-timeout (60 s) plus its order poll's bound (3 min).
const defaultStepTimeout = 5 * time.Minute

// stepTimeout defines -timeout on fs: the deadline of a whole verdict step, which bounds what
// (the waits it names) besides their own bounds. Without it a store that answers, slowly,
// every read just inside its timeout would hold the verdict without end.
func stepTimeout(fs *flag.FlagSet, what string) *time.Duration {
	return fs.Duration("timeout", defaultStepTimeout, "bound on the whole step: "+what+
		"; a store that hangs fails the verdict, naming what was waited for")
}

// dbWait names what a verdict step was waiting for when a database call failed. A hung server
// (SIGSTOPped, its host gone) ends a call in one of three ways, none of which says so by
// itself: go-sql-driver's bare "invalid connection" once the DSN's readTimeout passes without
// a byte, "i/o timeout" once the dial's timeout passes, or the step's own deadline.
type dbWait struct {
	dsn      string
	addr     string
	timeouts database.Timeouts // what OpenMySQL gives the DSN's connections
	bound    string            // the step's deadline as its flag says it: "-timeout 5m0s"
}

// newDBWait returns the dbWait of a step that reads dsn under a deadline of timeout, its
// -timeout. It refuses a DSN that OpenMySQL would refuse.
func newDBWait(dsn string, timeout time.Duration) (dbWait, error) {
	t, err := database.MySQLTimeouts(dsn)
	if err != nil {
		return dbWait{}, err
	}
	cfg, _ := mysql.ParseDSN(dsn) // MySQLTimeouts parsed it
	return dbWait{dsn: dsn, addr: cfg.Addr, timeouts: t, bound: fmt.Sprintf("-timeout %s", timeout)}, nil
}

// open opens the database a verdict reads, within ctx (the step's deadline).
func (w dbWait) open(ctx context.Context) (*database.DB, error) {
	db, err := database.OpenMySQL(ctx, w.dsn, database.Pool{MaxOpen: 2})
	if err != nil {
		return nil, w.err(ctx, "open "+w.db(), err)
	}
	return db, nil
}

// facts is dbFacts, its failure named.
func (w dbWait) facts(ctx context.Context, db *database.DB, vouchers []k6Voucher, orders []k6Order, f *verdict.Facts) error {
	if err := dbFacts(ctx, db, vouchers, orders, f); err != nil {
		return w.err(ctx, "read the run's vouchers and orders from "+w.db(), err)
	}
	return nil
}

// err wraps err, the failure of a call made with ctx while doing what (which names the
// stores it reads), with the bound that ended it when that was a timeout.
func (w dbWait) err(ctx context.Context, what string, err error) error {
	var oe *net.OpError
	switch {
	case ctx.Err() != nil:
		// The dial reports the context's deadline as a net timeout, not as ctx.Err().
		return fmt.Errorf("%s: no answer before the deadline (%s): is it hung? (%w)", what, w.bound, err)
	case errors.Is(err, mysql.ErrInvalidConn):
		return fmt.Errorf("%s: the database did not answer within the DSN's readTimeout (%s), or dropped the connection: is it hung? (%w)",
			what, w.timeouts.Read, err)
	case errors.As(err, &oe) && oe.Op == "dial" && oe.Timeout() && oe.Addr != nil && oe.Addr.String() == w.addr:
		return fmt.Errorf("%s: the database did not accept a connection within the DSN's timeout (%s): is it up? (%w)", what, w.timeouts.Dial, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// db names the database in a what.
func (w dbWait) db() string { return "the database at " + w.addr }
