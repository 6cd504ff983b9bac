package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// TestAsyncRetiredSaleAnswersItsFailedOrder: an order the writer gave up is answered failed by
// GET /api/orders/{id}, to its owner only, before and after its voucher is retired from Redis
// (its sale over for the retention): then from the database.
func TestAsyncRetiredSaleAnswersItsFailedOrder(t *testing.T) {
	ctx := context.Background()
	inst, retire := retiringInstance(t)
	vid := newVoucher(t, inst, 3)
	require.NoError(t, inst.Async.Loader.Load(ctx, vid))
	refusedUser(t, inst, vid, 7)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/api/vouchers/%d/orders", vid), nil)
	r.Header.Set("X-User-ID", "7")
	inst.Handler.ServeHTTP(w, r)
	require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
	var placed struct{ OrderID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &placed))

	get := func(user int64) (int, string) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/api/orders/"+placed.OrderID, nil)
		r.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
		inst.Handler.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	require.Eventually(t, func() bool {
		_, body := get(7)
		return strings.Contains(body, `"status":"failed"`)
	}, 30*time.Second, 20*time.Millisecond, "dead-lettered")

	retire(vid)
	prefix := fmt.Sprintf("seckill:{voucher:%d}:", vid) // docs/async.md, Keys
	n, err := inst.Redis.Exists(ctx, prefix+"orders", prefix+"dead").Result()
	require.NoError(t, err)
	require.Zero(t, n, "the statuses and dead letters left Redis")

	code, body := get(7)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"status":"failed"`)
	assert.Contains(t, body, "the user already has another order of this voucher")
	code, body = get(8)
	assert.Equal(t, http.StatusNotFound, code, "another user's order: %s", body)
}

// TestAsyncDiscoveryLoadsStrandedVoucher: an instance's writer loads a voucher left registered
// without a sale hash (a load that failed after registering it) with the instance's loader:
// before, only the next start or the next order loaded it.
func TestAsyncDiscoveryLoadsStrandedVoucher(t *testing.T) {
	ctx := context.Background()
	inst, _ := retiringInstance(t)
	vid := newVoucher(t, inst, 3)
	require.NoError(t, inst.Async.Loader.Load(ctx, vid))
	sale := fmt.Sprintf("seckill:{voucher:%d}:sale", vid) // docs/async.md, Keys
	require.NoError(t, inst.Redis.Del(ctx, sale).Err(), "registered, its sale hash gone: stranded")
	require.Eventually(t, func() bool { return inst.Redis.Exists(ctx, sale).Val() == 1 },
		10*time.Second, 20*time.Millisecond, "loaded again by the writer's discovery (every second)")
}

// retiringInstance starts an instance in the asynchronous mode over the embedded stores whose
// writer dead-letters an order at its first refusal. retire moves the instance's clock of sales
// and retention three hours ahead, past the sale of a voucher newVoucher made and past the
// default retention, and waits until the writer retired the voucher.
func retiringInstance(t *testing.T) (inst *app.Instance, retire func(voucherID int64)) {
	t.Helper()
	ctx := context.Background()
	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	var offset atomic.Int64
	cfg := app.Config{Lock: "redis", OrderMode: app.ModeAsync,
		Order: order.Config{Timeout: 5 * time.Second, LockTTL: 10 * time.Second},
		Async: async.Config{MaxAttempts: 1, ClaimIdle: time.Second,
			Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }}}
	inst, err = app.New(ctx, discard, cfg, st)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	return inst, func(voucherID int64) {
		t.Helper()
		offset.Store(int64(3 * time.Hour))
		require.Eventually(t, func() bool {
			b, err := async.Reconcile(ctx, inst.Redis, inst.Async.Store, voucherID)
			return err == nil && b.Retired
		}, 30*time.Second, 20*time.Millisecond, "retired by the writer")
	}
}

// refusedUser gives user a row of voucherID that Redis does not know of: the user's order is
// admitted, then refused by the database.
func refusedUser(t *testing.T, inst *app.Instance, voucherID, user int64) {
	t.Helper()
	now := time.Now().UTC()
	require.NoError(t, inst.DB.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)",
		user, user, voucherID, now, now).Error)
}
