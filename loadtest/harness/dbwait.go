package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/database"
)

// dbWait names what the verifier was waiting for when a database call failed. A hung server
// (SIGSTOPped, its host gone) ends a call in one of three ways, none of which says so by
// itself: go-sql-driver's bare "invalid connection" once the DSN's readTimeout passes without
// a byte, "i/o timeout" once the dial's timeout passes, or the step's own deadline.
type dbWait struct {
	addr     string
	timeouts database.Timeouts // what OpenMySQL gives the DSN's connections
	bound    string            // the step's deadline as its flag says it: "-timeout 5m0s"
}

func newDBWait(dsn, bound string) (dbWait, error) {
	t, err := database.MySQLTimeouts(dsn)
	if err != nil {
		return dbWait{}, err
	}
	cfg, _ := mysql.ParseDSN(dsn) // MySQLTimeouts parsed it
	return dbWait{addr: cfg.Addr, timeouts: t, bound: bound}, nil
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
