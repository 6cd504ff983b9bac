//go:build integration

package async_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	waiting := func() int {
		var n int
		require.NoError(t, other.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO = ?",
			fmt.Sprintf("UPDATE seckill_vouchers SET stock = stock WHERE voucher_id = %d", vid)).Scan(&n))
		return n
	}
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
