//go:build integration

package async_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/testenv"
)

// TestLockWaitPastReadTimeoutIsNotARefusal: another transaction holds the voucher's row while a
// writer writes an admitted order, longer than the DSN's readTimeout (loaderReadTimeout, 1 s)
// and shorter than the batch's deadline (4.5 s with a claim idle of 5 s): the writer's wait
// fails with go-sql-driver's "invalid connection" while the database answers a ping. That is
// a wait, not the order's fault: the order stays pending, no failed attempt is counted (with
// MaxAttempts 1 a count dead-letters it), and it is written once the row is free. The row is
// held until the writer has begun its third wait for it, two having failed: the batch's and,
// before, the single order's that counted an attempt.
func TestLockWaitPastReadTimeoutIsNotARefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	// The DSN's own lock wait timeout, InnoDB's default, is kept: the readTimeout, not the
	// server, cuts the wait.
	f := startFixture(t, dsn+"&innodb_lock_wait_timeout=50", async.Config{ClaimIdle: 5 * time.Second, MaxAttempts: 1})
	vid := f.voucher(10)
	require.NoError(t, f.loader.Load(ctx, vid))

	other, hold := holdVoucherRow(t, dsn, vid)

	admitted := f.place(vid, 1, 1)
	_, _, _, stream, dead := async.KeysOf(vid)
	entries, err := f.rdb.XRange(ctx, stream, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	f.writer("w", nil)

	// A wait the driver gave up on stays on the server until the row is free (or InnoDB's
	// lock wait timeout): each of the writer's waits is one more statement running there.
	waiting := func() int { return rowWaits(t, other, vid) }
	deadN := func() int64 {
		n, err := f.rdb.XLen(ctx, dead).Result()
		require.NoError(t, err)
		return n
	}
	f.eventually("the writer's third wait for the row, or a dead letter", func() bool { return waiting() >= 3 || deadN() > 0 })
	require.NoError(t, hold.Rollback())

	f.eventually("the order written", func() bool { return len(f.rows(vid)) == 1 || deadN() > 0 })
	assert.Zero(t, deadN(), "dead-lettered after waits for the row")
	assert.Equal(t, admitted, f.rows(vid))
	n, err := f.rdb.HGet(ctx, async.AttemptsOf(vid), entries[0].ID).Result()
	if err != redis.Nil {
		require.NoError(t, err)
		t.Errorf("%s refused attempts counted for waits for the row; want none", n)
	}
}

// rowWaits counts the statements waiting on the server, seen from other (a connection to the
// writer's database), for voucherID's row, as a writer's batch takes it (Store.Write's stock
// UPDATE, or the UPDATE that changes nothing).
func rowWaits(t *testing.T, other *sql.DB, voucherID int64) int {
	t.Helper()
	var n int
	require.NoError(t, other.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND (INFO = ? OR INFO LIKE ?)",
		fmt.Sprintf("UPDATE seckill_vouchers SET stock = stock WHERE voucher_id = %d", voucherID),
		fmt.Sprintf("UPDATE seckill_vouchers SET stock = stock - %% WHERE voucher_id = %d AND stock >= %%", voucherID)).Scan(&n))
	return n
}

// patientDSN is dsn with a readTimeout of 30 s and InnoDB's own lock wait timeout of 50 s:
// neither the driver nor the server ends a writer's wait for a row before its batch's
// deadline (4.5 s with the default claim idle) does.
func patientDSN(t *testing.T, dsn string) string {
	t.Helper()
	dc, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	dc.ReadTimeout = 30 * time.Second
	if dc.Params == nil {
		dc.Params = map[string]string{}
	}
	dc.Params["innodb_lock_wait_timeout"] = "50"
	return dc.FormatDSN()
}

// batchFailure is what a writer logged of its first batch that stayed pending, and whether it
// held the database for unreachable as it logged it.
type batchFailure struct {
	line string
	down bool
}

// watchBatchFailures makes the writers f starts from now on log to a watcher, and returns the
// channel on which it hands over the first batch failure logged (notRefused's log: the batch
// stays pending) and a setup for f.writer that lets it see the writer's state.
func watchBatchFailures(f *fixture) (<-chan batchFailure, func(*async.Writer)) {
	failed := make(chan batchFailure, 1)
	var w *async.Writer
	f.log = slog.New(slog.NewTextHandler(logLines(func(line string) {
		if strings.Contains(line, "the batch stays pending") || strings.Contains(line, "it stays pending") {
			select {
			case failed <- batchFailure{line: line, down: async.DBDown(w)}:
			default:
			}
		}
	}), nil))
	// Set before Start: the writer's goroutines, which log, see it.
	return failed, func(sw *async.Writer) { w = sw }
}

// logLines is a log's output handed to a func, a record at a time (slog's handlers write
// each record whole, one at a time).
type logLines func(line string)

func (f logLines) Write(p []byte) (int, error) {
	f(string(p))
	return len(p), nil
}

// firstFailure waits, up to eventuallyBound, for the first batch failure on failed.
func firstFailure(t *testing.T, failed <-chan batchFailure) batchFailure {
	t.Helper()
	select {
	case got := <-failed:
		return got
	case <-time.After(eventuallyBound):
		t.Fatalf("no batch failed within %s", eventuallyBound)
		return batchFailure{}
	}
}

// TestLockWaitPastTheBatchDeadlineIsNotAnOutage: another transaction holds the voucher's row
// across a writer's batch deadline (4.5 s with the default claim idle), and the DSN leaves
// neither the driver (readTimeout 30 s) nor InnoDB (50 s) to end the wait first, as a DSN that
// sets its own innodb_lock_wait_timeout does, or a statement that starts late in its batch: the
// batch fails on its context's deadline while the database answers. That is a wait, not an
// outage: the writer does not hold the database for unreachable (Ready fails once that lasts
// SECKILL_STREAM_DB_DOWN), logs the batch as given up on and pending, and writes the order once
// the row is free.
func TestLockWaitPastTheBatchDeadlineIsNotAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	f := startFixture(t, patientDSN(t, dsn), async.Config{ClaimIdle: async.DefaultClaimIdle})
	vid := f.voucher(10)
	require.NoError(t, f.loader.Load(ctx, vid))
	_, hold := holdVoucherRow(t, dsn, vid)
	admitted := f.place(vid, 1, 1)

	failed, setup := watchBatchFailures(f)
	f.writer("w", setup)
	got := firstFailure(t, failed)
	t.Logf("logged: %s", got.line)
	require.Contains(t, got.line, context.DeadlineExceeded.Error(), "the batch ended at its deadline, not at the server's or the driver's")
	assert.False(t, got.down, "the database held for unreachable while it answered")
	assert.Contains(t, got.line, "the database gave up on the batch", "logged as a failure that leaves the batch pending")
	assert.NotContains(t, got.line, "unreachable")

	require.NoError(t, hold.Rollback())
	f.eventually("the order written", func() bool { return len(f.rows(vid)) == 1 })
	assert.Equal(t, admitted, f.rows(vid))
}

// TestHungDatabaseStopsTheWriterWithinThePingBound: the database (a mariadbd of the test's own,
// its DSN as patientDSN's) hangs while a writer's batch waits for the voucher's row, held by
// another transaction. The batch fails at its deadline; the ping that then asks whether the
// database answers has a bound of its own, past that deadline, shorter than the driver's
// readTimeout: the writer logs the database unreachable, the batch pending, and a Stop begun
// during the wait returns within the 10 s an instance's close gives it (the batch's deadline
// plus the ping's bound, 5.5 s), where a ping bounded by the readTimeout alone would hold the
// writer's loop for 30 s.
func TestHungDatabaseStopsTheWriterWithinThePingBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	maria := testenv.StartMariaDB(t)
	dsn := maria.CreateDatabase("seckill_async_hang")
	f := startFixture(t, patientDSN(t, dsn), async.Config{ClaimIdle: async.DefaultClaimIdle})
	vid := f.voucher(10)
	require.NoError(t, f.loader.Load(ctx, vid))
	other, _ := holdVoucherRow(t, dsn, vid)
	f.place(vid, 1, 1)

	failed, setup := watchBatchFailures(f)
	w := f.writer("w", setup)
	f.eventually("the writer's batch waiting for the row", func() bool { return rowWaits(t, other, vid) > 0 })
	maria.Freeze()
	t.Cleanup(maria.Thaw)

	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, w.Stop(sctx), "the writer's loop ended within the batch's deadline and the ping's bound")
	got := firstFailure(t, failed)
	t.Logf("logged: %s", got.line)
	assert.Contains(t, got.line, context.DeadlineExceeded.Error(), "the batch ended at its deadline")
	assert.Contains(t, got.line, "database unreachable; the batch stays pending")
	assert.True(t, got.down, "the database, which answers nothing, held for unreachable")
}
