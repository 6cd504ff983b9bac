package async_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/migrations"
)

// TestWriteWaitsForAWriterOfTheSameEntryInCommit: writer b holds the voucher's row for a batch
// of order E (its stock UPDATE done, its held check passed, its commit on the way) when writer
// a, which claimed E because b was slow, writes E too. The stock is exactly E's unit, which b
// took. a must wait for b's commit and then find E written (Existed). Had a read the existing
// orders before it took the row, its snapshot would predate b's commit: E would look new, and
// a's stock UPDATE, run after b's commit against the stock b lowered, would find none left and
// refuse the batch with ErrStockShort, a refused attempt of E that can dead-letter it (unit
// given back to Redis, user freed, order failed) while its row exists.
//
// On SQLite, whose transactions take the write lock at BEGIN, a cannot begin before b commits:
// the test passes whatever Write's order of statements.
func TestWriteWaitsForAWriterOfTheSameEntryInCommit(t *testing.T) {
	t.Parallel()
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, e := inFlight(t, s, 1)
			ctx, cancel := context.WithTimeout(context.Background(), eventuallyBound)
			defer cancel()

			holding, release := make(chan struct{}), make(chan struct{})
			type result struct {
				outs []async.Outcome
				err  error
			}
			b := make(chan result, 1)
			go func() {
				outs, err := f.store.Write(ctx, vid, []async.Entry{e}, func(ctx context.Context, es []async.Entry) error {
					close(holding)
					select {
					case <-release:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				b <- result{outs, err}
			}()
			select {
			case <-holding:
			case r := <-b:
				t.Fatalf("b's Write returned %v, %v without running its held check", r.outs, r.err)
			}

			a := make(chan result, 1)
			go func() {
				outs, err := f.store.Write(ctx, vid, []async.Entry{e}, nil)
				a <- result{outs, err}
			}()
			waitBehindWriter(t, f.db)
			close(release)

			rb := <-b
			require.NoError(t, rb.err, "b's Write")
			require.Equal(t, []async.Outcome{async.Written}, rb.outs, "b's Write")
			ra := <-a
			require.NoError(t, ra.err, "a's Write of the entry b committed while a waited for the voucher's row")
			assert.Equal(t, []async.Outcome{async.Existed}, ra.outs, "a's Write")
			assert.Equal(t, map[int64]int64{e.OrderID: 1}, f.rows(vid))
			assert.Equal(t, async.Book{VoucherID: vid, Loaded: true, Initial: 1, DBStock: 0, RedisStock: 0, Pending: 0, Orders: 1}, f.book(vid))
		})
	}
}

// waitBehindWriter returns once a second transaction on db waits for the one holding the
// voucher's row: on MySQL, when InnoDB reports a transaction of this test's database waiting
// for a lock on seckill_vouchers. On SQLite it returns once a second connection is in use: its
// BEGIN IMMEDIATE waits for the write lock before the transaction reads anything, so the
// moment it reaches the wait does not matter.
func waitBehindWriter(t *testing.T, db *database.DB) {
	t.Helper()
	sqlDB, err := db.DB.DB()
	require.NoError(t, err)
	if db.Dialect == migrations.SQLite {
		require.Eventually(t, func() bool { return sqlDB.Stats().InUse >= 2 }, eventuallyBound, 10*time.Millisecond,
			"a second transaction begins")
		return
	}
	require.Eventually(t, func() bool {
		var n int
		err := sqlDB.QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX t
			JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE() AND t.trx_query LIKE '%seckill_vouchers%'`).Scan(&n)
		return err == nil && n == 1
		// InnoDB refreshes INNODB_TRX only when it was not read for 100 ms: polling faster
		// would read the same snapshot for ever.
	}, eventuallyBound, 200*time.Millisecond, "a second writer waits for the voucher's row")
}
