package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

const testToken = "s3cret-admin-token"

// fakeVouchers is a Vouchers that answers from fields: Create echoes its input with id 7,
// Get answers a voucher with the id asked for, each unless err is set.
type fakeVouchers struct {
	mu      sync.Mutex
	err     error
	created []voucher.Voucher
	got     []int64
}

func (f *fakeVouchers) Create(_ context.Context, v voucher.Voucher) (voucher.Voucher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, v)
	if f.err != nil {
		return voucher.Voucher{}, f.err
	}
	v.ID = 7
	return v, nil
}

func (f *fakeVouchers) Get(_ context.Context, id int64) (voucher.Voucher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, id)
	if f.err != nil {
		return voucher.Voucher{}, f.err
	}
	return voucher.Voucher{ID: id, Title: "t", Stock: 3,
		BeginTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), EndTime: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}, nil
}

// placed is one call of fakeOrders.Place.
type placed struct{ userID, voucherID int64 }

// fakeOrders is an Orders that answers id, or err when set, and records its calls.
type fakeOrders struct {
	mu    sync.Mutex
	id    int64
	err   error
	calls []placed
	got   []placed // calls of Get: user and order id
}

func (f *fakeOrders) Place(_ context.Context, userID, voucherID int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, placed{userID, voucherID})
	if f.err != nil {
		return 0, f.err
	}
	return f.id, nil
}

// Get answers the order a Place of the fake would have made: id, of userID, voucher 3,
// created; or err when set.
func (f *fakeOrders) Get(_ context.Context, userID, orderID int64) (order.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, placed{userID, orderID})
	if f.err != nil {
		return order.Summary{}, f.err
	}
	return order.Summary{ID: orderID, UserID: userID, VoucherID: 3, State: order.StateCreated,
		CreatedAt: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)}, nil
}

// discardLog drops the handlers' logs; the tests look at the answers.
func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// request is one HTTP request to the handler under test.
type request struct {
	method, path string
	header       map[string]string
	body         string
}

// serve serves r with h, and checks both against docs/openapi.yaml (serveRequest).
func serve(t testing.TB, h http.Handler, r request) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(r.method, "/", bytes.NewBufferString(r.body))
	// Set the path directly so that any string (the fuzzers' included) reaches the router.
	req.URL.Path = r.path
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	return serveRequest(t, h, req)
}

// requireErrorBody checks that w carries {"error": {"code": wantCode, "message": …}} and
// nothing else, with a non-empty message.
func requireErrorBody(t testing.TB, w *httptest.ResponseRecorder, wantCode string) {
	t.Helper()
	require.Contains(t, w.Header().Get("Content-Type"), "application/json", "error content type; body %s", w.Body)
	var body map[string]map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), "error body %q is not JSON", w.Body)
	require.Len(t, body, 1, "error body %s: want only the key error", w.Body)
	e, ok := body["error"]
	require.True(t, ok, "error body %s has no key error", w.Body)
	assert.Equal(t, wantCode, e["code"], "error code; body %s", w.Body)
	if _, ok := e["orderId"]; ok && wantCode == api.CodeAlreadyOrdered {
		delete(e, "orderId") // the existing order, checked by the tests that expect it
	}
	assert.Len(t, e, 2, "error object %v: want exactly code and message", e)
	msg, _ := e["message"].(string)
	assert.NotEmpty(t, msg, "error message; body %s", w.Body)
}

func decodeJSON(t testing.TB, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m), "body %q is not a JSON object", w.Body)
	return m
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return tm
}
