package async_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/async"
)

// TestServerRefusingEveryWriteIsNotARefusalOfTheOrders: for a while the database answers every
// write with an error that says nothing against the orders: it is read-only (a failover in
// progress: 1290, 1836), out of connections (1040, 1203), shutting down (1053), or the
// statement was killed or timed out (1317, 1927, 1969). It answers a ping all the while. The
// writer took each such error for a refusal of the orders, counted an attempt for each, and
// dead-lettered them at MaxAttempts: orders answered 202 were lost (failed) for a second of
// read-only. They stay pending now, as for a lock wait, and are written once the database
// writes again.
func TestServerRefusingEveryWriteIsNotARefusalOfTheOrders(t *testing.T) {
	t.Parallel()
	errs := []*mysqldriver.MySQLError{
		{Number: 1290, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"},
		{Number: 1836, Message: "Running in read-only mode"},
		{Number: 1040, Message: "Too many connections"},
		{Number: 1203, Message: "User seckill already has more than 'max_user_connections' active connections"},
		{Number: 1053, Message: "Server shutdown in progress"},
		{Number: 1317, Message: "Query execution was interrupted"},
		{Number: 1927, Message: "Connection was killed"},
		{Number: 1969, Message: "Query execution was interrupted (max_statement_time exceeded)"},
	}
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 2})
			ctx := context.Background()
			vid := f.voucher(3)
			require.NoError(t, f.loader.Load(ctx, vid))
			admitted := f.place(vid, 1, 2)

			// Every write of the voucher's row fails with the next error, once each.
			var refused atomic.Int32
			require.NoError(t, f.db.Callback().Raw().Before("gorm:raw").Register("test:read_only", func(tx *gorm.DB) {
				if !takesVoucherRow(tx.Statement.SQL.String()) {
					return
				}
				if n := refused.Add(1); int(n) <= len(errs) {
					_ = tx.AddError(errs[n-1])
				}
			}))
			f.writer("w", nil)
			f.eventually("the stream settled", func() bool { return f.backlog(vid) == 0 })

			assert.Greater(t, int(refused.Load()), len(errs), "every error was met")
			n, err := f.statuses.DeadLettered(ctx, vid)
			require.NoError(t, err)
			assert.Zero(t, n, "orders dead-lettered for errors that say nothing against them")
			f.judge(vid, 3, admitted)
		})
	}
}

// TestBatchRetriedForEverIsReported: the database answers a ping but refuses every write with
// an error of its state (read-only, here: a failover that does not end). The writer keeps the
// orders pending and retries them, as it must (no error of the database's state is a refusal
// of the orders), for as long as that lasts; but nothing said so: /readyz passed (the
// database answered its pings) and no metric moved, while the orders stayed pending. Ready
// now fails once a voucher's batches have failed so for longer than DBDownBound, and
// seckill_async_batches_retried_total counts each retry by its cause; once the database
// writes again, the orders are written and Ready passes.
func TestBatchRetriedForEverIsReported(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f := newFixture(t, s, async.Config{MaxAttempts: 2, DBDownBound: 300 * time.Millisecond})
			ctx := context.Background()
			vid := f.voucher(3)
			require.NoError(t, f.loader.Load(ctx, vid))
			admitted := f.place(vid, 1, 2)

			var readOnly atomic.Bool
			readOnly.Store(true)
			w, metrics := rowTakeFailing(t, f, &readOnly,
				&mysqldriver.MySQLError{Number: 1290, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"})

			f.eventually("Ready fails while the batches keep failing", func() bool { return w.Ready(ctx) != nil })
			assert.Positive(t, metrics.Retried(async.RetryDatabaseState), "the retries counted")
			assert.Equal(t, int64(2), f.backlog(vid), "the orders still pending")
			n, err := f.statuses.DeadLettered(ctx, vid)
			require.NoError(t, err)
			assert.Zero(t, n, "nothing dead-lettered")

			readOnly.Store(false)
			f.eventually("the orders written once the database writes again", func() bool { return f.backlog(vid) == 0 })
			assert.NoError(t, w.Ready(ctx), "ready again")
			f.judge(vid, 3, admitted)
		})
	}
}

// TestRowWaitIsNotUnready: a voucher's batches keep failing because the database gave up
// waiting for its row (InnoDB's lock wait timeout, 1205: another transaction holds the row, an
// operator's session left open, say), chose them as a deadlock's victim, or ended the
// statement (killed, or past max_statement_time, which a row wait ends in under such a limit).
// That is one voucher's trouble, not the service's: Ready failed for it (on every instance,
// whose writers all meet the same row), which takes every instance out of service, for every
// voucher, for one row. It is counted (cause transient) and shows in the oldest pending age;
// Ready passes, and the orders are written once the row is free.
func TestRowWaitIsNotUnready(t *testing.T) {
	t.Parallel()
	errs := []*mysqldriver.MySQLError{
		{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"},
		{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"},
		{Number: 1317, Message: "Query execution was interrupted"},
		{Number: 1969, Message: "Query execution was interrupted (max_statement_time exceeded)"},
		{Number: 3024, Message: "Query execution was interrupted, maximum statement execution time exceeded"},
	}
	for _, s := range stores(t) {
		for _, rowErr := range errs {
			t.Run(fmt.Sprintf("%s/%d", s.name, rowErr.Number), func(t *testing.T) {
				bound := 300 * time.Millisecond
				f := newFixture(t, s, async.Config{MaxAttempts: 2, DBDownBound: bound})
				ctx := context.Background()
				vid := f.voucher(3)
				require.NoError(t, f.loader.Load(ctx, vid))
				admitted := f.place(vid, 1, 2)

				var held atomic.Bool
				held.Store(true)
				w, metrics := rowTakeFailing(t, f, &held, rowErr)

				// Retries keep coming for longer than the bound: the first one, then one that
				// began after the bound had passed since it.
				f.eventually("a first retry", func() bool { return metrics.Retried(async.RetryTransient) > 0 })
				first, n := time.Now(), metrics.Retried(async.RetryTransient)
				f.eventually("a retry past the bound", func() bool {
					return time.Since(first) > 2*bound && metrics.Retried(async.RetryTransient) > n+1
				})
				assert.NoError(t, w.Ready(ctx), "one voucher's row wait takes the instance out of service")
				assert.Zero(t, metrics.Retried(async.RetryDatabaseState), "no error of the database's state")
				assert.Equal(t, int64(2), f.backlog(vid), "the orders still pending")

				held.Store(false)
				f.eventually("the orders written once the row is free", func() bool { return f.backlog(vid) == 0 })
				f.judge(vid, 3, admitted)
			})
		}
	}
}

// rowTakeFailing starts writer "w", with metrics of its own, on f, whose batches' take of the
// voucher's row fails with err while failing holds.
func rowTakeFailing(t *testing.T, f *fixture, failing *atomic.Bool, err error) (*async.Writer, *async.Metrics) {
	t.Helper()
	require.NoError(t, f.db.Callback().Raw().Before("gorm:raw").Register("test:row_take_failing", func(tx *gorm.DB) {
		if failing.Load() && takesVoucherRow(tx.Statement.SQL.String()) {
			_ = tx.AddError(err)
		}
	}))
	metrics := async.NewMetrics(prometheus.NewRegistry())
	cfg := f.cfg
	cfg.Consumer = "w"
	w := async.NewWriter(f.rdb, f.store, nil, metrics, quiet, cfg)
	w.Start()
	t.Cleanup(func() { stopped(t, w) })
	return w, metrics
}

// takesVoucherRow reports whether sql is the first statement of a writer's batch, the one
// that takes the voucher's row: Store.Write's stock UPDATE (a batch of new orders) or the
// UPDATE that changes nothing (before the read of the orders already written).
func takesVoucherRow(sql string) bool {
	return strings.HasPrefix(sql, "UPDATE seckill_vouchers SET stock = stock WHERE") ||
		strings.HasPrefix(sql, "UPDATE seckill_vouchers SET stock = stock - ")
}
