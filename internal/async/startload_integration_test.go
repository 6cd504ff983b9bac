//go:build integration

package async_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
)

// loaderReadTimeout is the readTimeout of the loader's DSN in these tests: a wait for the
// voucher's row longer than this fails the load as a reload of millions of rows by another
// instance fails one with the default 5 s.
const loaderReadTimeout = time.Second

// startFixture is the asynchronous mode over the database at dsn, migrated, opened with
// loaderReadTimeout unless dsn sets a readTimeout, and a redis-server of the test's own,
// configured with cfg.
func startFixture(t *testing.T, dsn string, cfg async.Config) *fixture {
	t.Helper()
	dc, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	if dc.ReadTimeout == 0 {
		dc.ReadTimeout = loaderReadTimeout
	}
	ctx := context.Background()
	// Migrated on a connection of dsn's own timeouts: a migration's DDL on a busy Oracle MySQL
	// can outlast a short read timeout (one outlasted 500 ms in a CI run, in migrations' test),
	// and migrating is not what these tests are about.
	mig, err := database.OpenMySQL(ctx, dsn, database.Pool{MaxOpen: 2})
	require.NoError(t, err)
	_, err = mig.Migrate(ctx)
	require.NoError(t, err)
	require.NoError(t, mig.Close())
	db, err := database.OpenMySQL(ctx, dc.FormatDSN(), database.Pool{MaxOpen: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return newFixture(t, store{name: "real", rdb: testenv.StartRedisServer(t).Client(), db: db}, cfg)
}

// holdVoucherRow takes voucherID's row, as a writer or a load does, in a transaction of its own
// on a connection to dsn (other), and holds it until hold ends (rolled back when t ends).
func holdVoucherRow(t *testing.T, dsn string, voucherID int64) (other *sql.DB, hold *sql.Tx) {
	t.Helper()
	ctx := context.Background()
	other, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	hold, err = other.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = hold.Rollback() })
	_, err = hold.ExecContext(ctx, "UPDATE seckill_vouchers SET stock = stock WHERE voucher_id = ?", voucherID)
	require.NoError(t, err)
	return other, hold
}

// TestLoadOnSaleOutlastsAnotherInstancesLoad: another instance's load of the same voucher
// (here a transaction of the test's own) holds the voucher's row past the loader's readTimeout,
// so the start's first load of the voucher fails. The hold ends once that attempt has failed;
// LoadOnSale tries again, loads the voucher and registers it, and the start succeeds.
func TestLoadOnSaleOutlastsAnotherInstancesLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	f := startFixture(t, dsn, async.Config{})
	vid := f.voucher(10)

	_, hold := holdVoucherRow(t, dsn, vid)

	var failures atomic.Int32
	async.SetStartFailed(f.loader, func(voucherID int64, attempt int, err error) {
		failures.Add(1)
		t.Logf("attempt %d of voucher %d failed: %v", attempt, voucherID, err)
		if attempt == 1 {
			// The other instance's load ends: its transaction ends, the row is free.
			require.NoError(t, hold.Rollback())
		}
	})
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	require.NoError(t, f.loader.LoadOnSale(lctx, time.Now()))
	assert.Equal(t, int32(1), failures.Load(), "the first attempt waited on the held row past readTimeout and failed")
	sale, _, _, _, _ := async.KeysOf(vid)
	stock, err := f.rdb.HGet(ctx, sale, "stock").Int64()
	require.NoError(t, err, "the sale hash was created")
	assert.Equal(t, int64(10), stock)
	registered, err := async.Registered(ctx, f.rdb, vid)
	require.NoError(t, err)
	assert.True(t, registered, "the voucher is registered for the writers")
}

// onCommand is a go-redis hook that runs f before each command named name.
type onCommand struct {
	hookBase
	name string
	f    func()
}

func (h onCommand) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == h.name {
			h.f()
		}
		return next(ctx, cmd)
	}
}

// TestLoadOnSaleFailsOnADatabaseThatHangs: the database (a mariadbd of the test's own) hangs
// (SIGSTOP) before the start loads its voucher on sale. The load fails on the loader's
// readTimeout, the database does not answer the ping that would allow another attempt, and
// LoadOnSale fails after that one attempt, long before the start's deadline.
func TestLoadOnSaleFailsOnADatabaseThatHangs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	maria := testenv.StartMariaDB(t)
	dsn := maria.CreateDatabase("seckill_async_start")
	f := startFixture(t, dsn, async.Config{})
	vid := f.voucher(10)
	var failures atomic.Int32
	async.SetStartFailed(f.loader, func(int64, int, error) { failures.Add(1) })

	// The hang comes after OnSale's read, at the load's first command (Redis's EXISTS of the
	// sale hash): the start finds the voucher, then cannot read its books.
	var frozen atomic.Bool
	f.rdb.AddHook(onCommand{name: "exists", f: func() {
		if !frozen.Swap(true) {
			maria.Freeze()
		}
	}})
	t.Cleanup(func() {
		if frozen.Load() {
			maria.Thaw()
		}
	})
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	began := time.Now()
	err := f.loader.LoadOnSale(lctx, time.Now())
	took := time.Since(began)
	require.Error(t, err, "a start on a database that hangs fails")
	t.Logf("LoadOnSale failed after %s: %v", took.Round(time.Millisecond), err)
	assert.Equal(t, int32(1), failures.Load(), "no second attempt on a database that does not answer")
	assert.Less(t, took, 30*time.Second, "failed well before the retries' window and the start's deadline")
	sale, _, _, _, _ := async.KeysOf(vid)
	n, err := f.rdb.Exists(ctx, sale).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing loaded")
}
