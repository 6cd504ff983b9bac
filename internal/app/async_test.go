package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// TestAsyncMode: two instances in the asynchronous mode over the embedded stores. A voucher
// created on one is loaded into Redis at once; orders on both answer 202 pending until the
// stock is gone, then 409 sold_out; a second order of a user 409 already_ordered; the writers
// turn every 202 into exactly one row with its id, user and voucher, and the books agree.
func TestAsyncMode(t *testing.T) {
	ctx := context.Background()
	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	cfg := app.Config{AdminToken: "s", Lock: "redis", OrderMode: app.ModeAsync,
		Order: order.Config{Timeout: 5 * time.Second, LockTTL: 10 * time.Second},
		Async: async.Config{Batch: 8, ClaimIdle: time.Second}}
	var insts []*app.Instance
	for range 2 {
		inst, err := app.New(ctx, discard, cfg, st)
		require.NoError(t, err)
		t.Cleanup(func() { _ = inst.Close() })
		insts = append(insts, inst)
	}
	require.NotEqual(t, insts[0].Async.Writer.Consumer(), insts[1].Async.Writer.Consumer(), "consumer names are per instance")

	body := fmt.Sprintf(`{"title":"t","stock":20,"beginTime":%q,"endTime":%q}`,
		time.Now().Add(-time.Hour).Format(time.RFC3339), time.Now().Add(time.Hour).Format(time.RFC3339))
	req := httptest.NewRequest(http.MethodPost, "/api/vouchers", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s")
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	insts[0].Handler.ServeHTTP(w, req)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	var v struct{ ID int64 }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
	b, err := async.Reconcile(ctx, insts[0].Redis, insts[0].Async.Store, v.ID)
	require.NoError(t, err)
	require.True(t, b.Loaded, "loaded into Redis when created")

	var mu sync.Mutex
	accepted := map[int64]int64{} // order id → user
	codes := map[string]int{}
	conflicts := map[int64]string{} // user → the order id its 409 already_ordered named
	var wg sync.WaitGroup
	for u := int64(1); u <= 40; u++ {
		for try := range 2 {
			wg.Go(func() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/api/vouchers/%d/orders", v.ID), nil)
				r.Header.Set("X-User-ID", strconv.FormatInt(u, 10))
				insts[(int(u)+try)%2].Handler.ServeHTTP(w, r)
				var resp struct {
					OrderID string `json:"orderId"`
					Status  string `json:"status"`
					Error   struct {
						Code    string
						OrderID string `json:"orderId"`
					}
				}
				assert.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp), w.Body.String())
				mu.Lock()
				defer mu.Unlock()
				switch w.Code {
				case http.StatusAccepted:
					assert.Equal(t, "pending", resp.Status)
					id, err := strconv.ParseInt(resp.OrderID, 10, 64)
					assert.NoError(t, err)
					accepted[id] = u
					codes["202"]++
				case http.StatusConflict:
					codes[resp.Error.Code]++
					if resp.Error.Code == "already_ordered" {
						conflicts[u] = resp.Error.OrderID
					}
				default:
					t.Errorf("order: %d %s", w.Code, w.Body)
				}
			})
		}
	}
	wg.Wait()
	require.Len(t, accepted, 20, "codes %v", codes)
	assert.Equal(t, 80, codes["202"]+codes["sold_out"]+codes["already_ordered"])

	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err = async.Reconcile(ctx, insts[0].Redis, insts[0].Async.Store, v.ID)
		require.NoError(t, err)
		// Pending counts the stream's entries that are not rows yet: it reaches 0 at the
		// commit, a moment before the acknowledgement takes the orders out of the pending
		// hash, which GET /api/orders/{id} reads first. The stream empties with the
		// acknowledgement: wait for that too, or a lookup below may still find "pending".
		backlog, err := insts[0].Async.Statuses.Backlog(ctx, v.ID)
		require.NoError(t, err)
		if b.Orders == 20 && b.Pending == 0 && backlog == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not drained: %+v", b)
		time.Sleep(20 * time.Millisecond)
	}
	assert.Zero(t, b.Drift(), "books %+v", b)
	var rows []struct{ ID, UserID, VoucherID int64 }
	require.NoError(t, insts[1].DB.Raw("SELECT id, user_id, voucher_id FROM voucher_orders").Scan(&rows).Error)
	got := map[int64]int64{}
	for _, r := range rows {
		assert.Equal(t, v.ID, r.VoucherID)
		got[r.ID] = r.UserID
	}
	assert.Equal(t, accepted, got, "every 202 is exactly one row with its id and user")
	for id, u := range accepted {
		if c, ok := conflicts[u]; ok {
			assert.Equal(t, strconv.FormatInt(id, 10), c, "user %d's already_ordered names its order", u)
		}
		for _, probe := range []struct {
			user int64
			code int
		}{{u, http.StatusOK}, {u + 1000, http.StatusNotFound}} {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/api/orders/"+strconv.FormatInt(id, 10), nil)
			r.Header.Set("X-User-ID", strconv.FormatInt(probe.user, 10))
			insts[int(u)%2].Handler.ServeHTTP(w, r)
			require.Equal(t, probe.code, w.Code, w.Body.String())
			if probe.code == http.StatusOK {
				assert.Contains(t, w.Body.String(), `"status":"created"`)
			}
		}
	}

	checks := readyChecks(t, insts[0], http.StatusOK)
	assert.Contains(t, checks, "writer")
	m := httptest.NewRecorder()
	insts[0].Handler.ServeHTTP(m, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Contains(t, m.Body.String(), async.MetricWritten)
}

func TestUnknownOrderMode(t *testing.T) {
	st, err := app.OpenStores(context.Background(), app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	_, err = app.New(context.Background(), discard, app.Config{Lock: "redis", OrderMode: "later"}, st)
	assert.ErrorContains(t, err, "unknown order mode")
}

// TestAsyncModeTakesNoLock: the asynchronous mode admits an order in one Redis script and no
// order takes the per-user lock, so the guard's backend is no dependency of the instance: it
// starts, and is ready, with SECKILL_LOCK=redlock and not one of RedLock's nodes answering,
// has no check "lock", and claims no fencing of its writes.
func TestAsyncModeTakesNoLock(t *testing.T) {
	ctx := context.Background()
	dead := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"} // nothing listens below 1024 here
	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir(), RedLockAddrs: dead})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	var logged strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil))
	inst, err := app.New(ctx, log, app.Config{Lock: "redlock", OrderMode: app.ModeAsync, Order: order.Config{LockTTL: 10 * time.Second}}, st)
	require.NoError(t, err, "the asynchronous mode needs no lock server")
	t.Cleanup(func() { _ = inst.Close() })
	checks := readyChecks(t, inst, http.StatusOK)
	assert.NotContains(t, checks, "lock", "readiness checks a lock no order takes")
	mu.Lock()
	defer mu.Unlock()
	assert.NotContains(t, logged.String(), "fenced", "the log claims fencing of writes that take no lock")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
