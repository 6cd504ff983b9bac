package app_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/voucher"
)

// storesUnderTest are the embedded stores (unless testenv.RealOnly) and, in integration builds,
// a fresh database on the real MariaDB (migrated) with the real Redis.
func storesUnderTest(t *testing.T) map[string]*app.Stores {
	t.Helper()
	out := map[string]*app.Stores{}
	if !testenv.RealOnly() {
		st, err := app.OpenStores(context.Background(), app.StoresConfig{DataDir: t.TempDir()})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		out["embedded"] = st
	}
	if testenv.Integration {
		out["real"] = realStores(t, testenv.MySQLDSN(t), testenv.Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379"))
	}
	return out
}

// realStores opens the real stores at dsn and addr and migrates the database.
func realStores(t *testing.T, dsn, redisAddr string) *app.Stores {
	t.Helper()
	ctx := context.Background()
	st, err := app.OpenStores(ctx, app.StoresConfig{MySQLDSN: dsn, RedisAddr: redisAddr})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	db, err := st.OpenDB(ctx, database.Pool{MaxOpen: 1})
	require.NoError(t, err)
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	return st
}

// newVoucher stores a voucher on sale with stock through inst's database.
func newVoucher(t *testing.T, inst *app.Instance, stock int) int64 {
	t.Helper()
	now := time.Now()
	v, err := voucher.NewStore(inst.DB.DB).Create(context.Background(), voucher.Voucher{
		Title: "budget", Stock: stock, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)})
	require.NoError(t, err)
	return v.ID
}

// answer is one request's HTTP answer.
type answer struct {
	status  int
	code    string // the error code; "" for 201
	orderID int64  // the order a 201 or 202 placed, or a 409 already_ordered names; 0 for none
	took    time.Duration
}

func placeOrder(h http.Handler, voucherID, userID int64) answer {
	r := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/api/vouchers/%d/orders", voucherID), nil)
	r.Header.Set(api.HeaderUserID, strconv.FormatInt(userID, 10))
	return serveTimed(h, r)
}

// serveTimed serves r with h and returns its answer and how long it took.
func serveTimed(h http.Handler, r *http.Request) answer {
	start := time.Now()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := answer{status: w.Code, took: time.Since(start)}
	var body struct {
		OrderID string `json:"orderId"`
		Error   struct {
			Code    string
			OrderID string `json:"orderId"`
		}
	}
	if json.Unmarshal(w.Body.Bytes(), &body) == nil {
		a.code = body.Error.Code
		// Order ids are decimal strings (they exceed 2^53); one that is not leaves orderID 0.
		a.orderID, _ = strconv.ParseInt(cmp.Or(body.OrderID, body.Error.OrderID), 10, 64)
	}
	return a
}

// randomUsers returns a base for user ids no other run uses: lock keys on a shared Redis
// never collide.
func randomUsers() int64 { return rand.Int64N(1<<40) + 1<<40 }

// TestOrderPastItsDeadlineRollsBack: an order whose business step outlives the order's
// deadline, and then carries on as if nothing happened, writes nothing: the transaction is
// refused and rolled back, the stock is untouched, and the lock is released by its holder,
// not lost to expiry; the client is answered 503 unavailable.
func TestOrderPastItsDeadlineRollsBack(t *testing.T) {
	for name, st := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inst, err := app.New(ctx, discard, app.Config{Lock: "redis", Order: order.Config{
				LockTTL: 2 * time.Second, Timeout: 200 * time.Millisecond,
				Process: func(ctx context.Context, _ int64) error {
					<-ctx.Done() // longer than the order may take…
					return nil   // …and then it goes on to write
				},
			}}, st)
			require.NoError(t, err)
			t.Cleanup(func() { _ = inst.Close() })
			vid, user := newVoucher(t, inst, 5), randomUsers()

			a := placeOrder(inst.Handler, vid, user)
			assert.Equal(t, http.StatusServiceUnavailable, a.status)
			assert.Equal(t, "unavailable", a.code)

			var orders, stock int64
			require.NoError(t, inst.DB.Raw("SELECT COUNT(*) FROM voucher_orders WHERE voucher_id = ?", vid).Scan(&orders).Error)
			require.NoError(t, inst.DB.Raw("SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", vid).Scan(&stock).Error)
			assert.Zero(t, orders, "orders stored")
			assert.Equal(t, int64(5), stock, "stock left")
			assert.Zero(t, inst.Redis.Exists(ctx, "lock:"+order.LockName(user)).Val(), "the lock is released")
			c, err := order.ReadCounts(inst.Registry)
			require.NoError(t, err)
			assert.Zero(t, c.LockLost, "the lock was still ours when released")
			assert.Zero(t, c.UnlockErrors)
			assert.Equal(t, 1.0, c.Orders[order.ResultError])
		})
	}
}

// TestNewRefusesADeadlineBeyondTheLease: an instance whose orders may outlive their lock does
// not start.
func TestNewRefusesADeadlineBeyondTheLease(t *testing.T) {
	st, err := app.OpenStores(context.Background(), app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	_, err = app.New(context.Background(), discard, app.Config{Lock: "redis",
		Order: order.Config{LockTTL: time.Second, Timeout: time.Second}}, st)
	assert.ErrorContains(t, err, "shorter than the lock TTL")
}
