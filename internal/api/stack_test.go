package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// stack is an instance wired by app.New, as `seckill serve` wires it: the embedded stores
// always, MariaDB and the real Redis in integration builds.
type stack struct {
	name   string
	h      http.Handler
	inst   *app.Instance
	stores *app.Stores
	// users are this stack's user ids: random, so that lock keys on a shared Redis never
	// collide with another run's.
	users int64
}

func stacks(t *testing.T) []*stack {
	t.Helper()
	var out []*stack
	if !testenv.RealOnly() {
		out = append(out, newStack(t, "embedded", app.StoresConfig{DataDir: t.TempDir()}))
	}
	if testenv.Integration {
		out = append(out, newStack(t, "real", app.StoresConfig{
			MySQLDSN:  testenv.MySQLDSN(t),
			RedisAddr: testenv.Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379"),
		}))
	}
	return out
}

func newStack(t *testing.T, name string, sc app.StoresConfig) *stack {
	t.Helper()
	ctx := context.Background()
	st, err := app.OpenStores(ctx, sc)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	if !st.Embedded {
		db, err := st.OpenDB(ctx, database.Pool{MaxOpen: 1})
		require.NoError(t, err)
		_, err = db.Migrate(ctx)
		require.NoError(t, err)
		require.NoError(t, db.Close())
	}
	// Errors go to the test's output: shown when a test fails, or with -v.
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	inst, err := app.New(ctx, log, app.Config{
		AdminToken: testToken,
		Lock:       "redis",
		// A small pool: the MariaDB is shared, and 100 concurrent orders must not take
		// connections from other suites (max_connections) and fail as 503.
		DBPool: database.Pool{MaxOpen: 8, MaxIdle: 8},
		// The concurrency tests fire 100 orders at once to test the lock, not the time
		// budgets: every one of them is admitted, and has time to queue for the embedded
		// database's one writer on a loaded -race build.
		Order: order.Config{MaxInflight: 128, Timeout: 5 * time.Second},
	}, st)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	return &stack{name: name, h: inst.Handler, inst: inst, stores: st, users: rand.Int64N(1<<40) + 1<<40}
}

// createVoucher creates a voucher through the API and returns its id.
func (s *stack) createVoucher(t *testing.T, stock int, begin, end time.Time) int64 {
	t.Helper()
	body := fmt.Sprintf(`{"title":"t","stock":%d,"beginTime":%q,"endTime":%q}`, stock, begin.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	w := serve(t, s.h, request{"POST", "/api/vouchers", admin, body})
	require.Equal(t, http.StatusCreated, w.Code, "create voucher; body %s", w.Body)
	id, ok := decodeJSON(t, w)["id"].(float64)
	require.True(t, ok, "id is not a number: %s", w.Body)
	return int64(id)
}

func (s *stack) order(t testing.TB, userID, voucherID int64) *httptest.ResponseRecorder {
	t.Helper()
	w, check := s.orderLater(t, userID, voucherID)
	check()
	return w
}

// orderLater is order with the check against the document returned to run later (serveLater).
func (s *stack) orderLater(t testing.TB, userID, voucherID int64) (*httptest.ResponseRecorder, func()) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/api/vouchers/%d/orders", voucherID), nil)
	req.Header.Set(api.HeaderUserID, strconv.FormatInt(userID, 10))
	return serveLater(t, s.h, req)
}

func (s *stack) getOrder(t testing.TB, userID int64, orderID string) *httptest.ResponseRecorder {
	t.Helper()
	return serve(t, s.h, request{"GET", "/api/orders/" + orderID, map[string]string{api.HeaderUserID: strconv.FormatInt(userID, 10)}, ""})
}

func (s *stack) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, s.inst.DB.Raw(query, args...).Scan(&n).Error)
	return n
}

func TestStackVoucherRoundTrip(t *testing.T) {
	for _, s := range stacks(t) {
		t.Run(s.name, func(t *testing.T) {
			body := `{"title":"秒杀 50 off","subTitle":"s","rules":"r","payValue":4750,"actualValue":5000,"stock":100,` +
				`"beginTime":"2026-11-22T08:00:00.123456+08:00","endTime":"2026-11-23T00:00:00Z"}`
			w := serve(t, s.h, request{"POST", "/api/vouchers", admin, body})
			require.Equal(t, http.StatusCreated, w.Code, "body %s", w.Body)
			created := decodeJSON(t, w)
			id, ok := created["id"].(float64)
			require.True(t, ok, "id %v is not a JSON number", created["id"])
			require.Positive(t, id)
			assert.Equal(t, "秒杀 50 off", created["title"])
			assert.Equal(t, float64(100), created["stock"])
			assert.Equal(t, float64(4750), created["payValue"])
			assert.Equal(t, "2026-11-22T00:00:00.123Z", created["beginTime"], "UTC, truncated to milliseconds")
			assert.Equal(t, "2026-11-23T00:00:00Z", created["endTime"])

			w = serve(t, s.h, request{"GET", fmt.Sprintf("/api/vouchers/%d", int64(id)), nil, ""})
			require.Equal(t, http.StatusOK, w.Code, "body %s", w.Body)
			assert.Equal(t, created, decodeJSON(t, w), "GET answers what POST answered")

			w = serve(t, s.h, request{"GET", fmt.Sprintf("/api/vouchers/%d", int64(id)+1000), nil, ""})
			require.Equal(t, http.StatusNotFound, w.Code)
			requireErrorBody(t, w, api.CodeNotFound)

			w = serve(t, s.h, request{"POST", "/api/vouchers", admin, `{"title":"t","stock":1,"beginTime":"2027-01-01T00:00:00Z","endTime":"2026-01-01T00:00:00Z"}`})
			require.Equal(t, http.StatusBadRequest, w.Code, "end before begin; body %s", w.Body)
			requireErrorBody(t, w, api.CodeInvalidArgument)
			assert.Equal(t, int64(1), s.count(t, "SELECT COUNT(*) FROM vouchers"), "vouchers stored")
		})
	}
}

func TestStackOrders(t *testing.T) {
	for _, s := range stacks(t) {
		t.Run(s.name, func(t *testing.T) {
			now := time.Now()
			open := s.createVoucher(t, 2, now.Add(-time.Hour), now.Add(time.Hour))
			future := s.createVoucher(t, 5, now.Add(time.Hour), now.Add(2*time.Hour))
			past := s.createVoucher(t, 5, now.Add(-2*time.Hour), now.Add(-time.Hour))
			empty := s.createVoucher(t, 0, now.Add(-time.Hour), now.Add(time.Hour))
			alice, bob, carol, dave := s.users+1, s.users+2, s.users+3, s.users+4

			// carol's lock is held by another owner (another process): her order must not proceed.
			held := lock.NewSimpleRedisLocks(s.inst.Redis, lock.NewProcessID(), lock.SimpleRedisOptions{}).New(order.LockName(carol))
			ok, err := held.TryLock(context.Background(), time.Minute)
			require.NoError(t, err)
			require.True(t, ok, "carol's lock was free")
			t.Cleanup(func() { _ = held.Unlock(context.Background()) })

			w := s.order(t, alice, open)
			require.Equal(t, http.StatusCreated, w.Code, "first order; body %s", w.Body)
			raw, ok := decodeJSON(t, w)["orderId"].(string)
			require.True(t, ok, "orderId is not a string: %s", w.Body)
			orderID, err := strconv.ParseInt(raw, 10, 64)
			require.NoError(t, err, "orderId %q is not a decimal int64", raw)
			assert.Equal(t, strconv.FormatInt(orderID, 10), raw, "orderId is canonical decimal")
			assert.Greater(t, orderID, int64(1)<<53, "ids exceed 2^53: the reason orderId is a string")
			assert.Equal(t, int64(1), s.count(t, "SELECT COUNT(*) FROM voucher_orders WHERE id = ? AND user_id = ? AND voucher_id = ?", orderID, alice, open))

			// The order reads back for its owner only; another user's answer is a missing one's.
			w = s.getOrder(t, alice, raw)
			require.Equal(t, http.StatusOK, w.Code, "GET own order; body %s", w.Body)
			got := decodeJSON(t, w)
			assert.Equal(t, map[string]any{"orderId": raw, "voucherId": float64(open), "userId": strconv.FormatInt(alice, 10), "status": "created"},
				map[string]any{"orderId": got["orderId"], "voucherId": got["voucherId"], "userId": got["userId"], "status": got["status"]})
			createdAt, _ := got["createdAt"].(string)
			assert.WithinDuration(t, now, mustTime(t, createdAt), time.Minute, "createdAt")
			other := s.getOrder(t, bob, raw)
			missing := s.getOrder(t, alice, strconv.FormatInt(orderID+1, 10))
			require.Equal(t, http.StatusNotFound, other.Code, "GET another user's order; body %s", other.Body)
			requireErrorBody(t, other, api.CodeNotFound)
			assert.Equal(t, missing.Code, other.Code)
			assert.Equal(t, missing.Body.String(), other.Body.String(), "another user's order must answer as a missing one")

			// A retry learns the order it placed.
			w = s.order(t, alice, open)
			require.Equal(t, http.StatusConflict, w.Code, "retry; body %s", w.Body)
			requireErrorBody(t, w, api.CodeAlreadyOrdered)
			assert.Equal(t, raw, decodeJSON(t, w)["error"].(map[string]any)["orderId"], "the retry names the order placed")

			steps := []struct {
				name            string
				user, voucherID int64
				want            int
				wantCode        string
			}{
				{"lock held elsewhere", carol, open, 409, api.CodeInProgress},
				{"another user takes the last one", bob, open, 201, ""},
				{"stock gone", dave, open, 409, api.CodeSoldOut},
				{"stock zero from the start", dave, empty, 409, api.CodeSoldOut},
				{"sale not begun", bob, future, 403, api.CodeSaleNotActive},
				{"sale over", bob, past, 403, api.CodeSaleNotActive},
				{"no such voucher", bob, open + 1000, 404, api.CodeNotFound},
			}
			for _, st := range steps {
				w := s.order(t, st.user, st.voucherID)
				require.Equal(t, st.want, w.Code, "%s; body %s", st.name, w.Body)
				if st.wantCode != "" {
					requireErrorBody(t, w, st.wantCode)
				}
			}
			assert.Equal(t, int64(2), s.count(t, "SELECT COUNT(*) FROM voucher_orders"), "orders stored")
			assert.Zero(t, s.count(t, "SELECT COUNT(*) FROM voucher_orders WHERE user_id IN (?, ?)", carol, dave), "orders of the refused users")
			assert.Equal(t, int64(0), s.count(t, "SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", open), "stock left")

			w = serve(t, s.h, request{"GET", "/metrics", nil, ""})
			require.Equal(t, http.StatusOK, w.Code)
			c, err := order.ReadCountsText(w.Body)
			require.NoError(t, err)
			assert.Equal(t, map[string]float64{
				order.ResultCreated: 2, order.ResultAlreadyOrdered: 1, order.ResultSoldOut: 2,
				order.ResultInProgress: 1, order.ResultSaleNotActive: 2, order.ResultError: 0, order.ResultDuplicateByDB: 0,
				order.ResultOverloaded: 0, order.ResultCanceled: 0, order.ResultFenced: 0,
			}, c.Orders, "metrics: every result is exported from the start")
			assert.Zero(t, c.LockLost)
			// A Prometheus that scrapes native histograms asks for the protobuf format, and the
			// instance negotiates it: the document must list it (serve checks the answer).
			w = serve(t, s.h, request{"GET", "/metrics", map[string]string{"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}, ""})
			require.Equal(t, http.StatusOK, w.Code)
			assert.Contains(t, w.Header().Get("Content-Type"), "application/vnd.google.protobuf")
			lockAcquire, err := s.inst.Registry.Gather()
			require.NoError(t, err)
			assert.True(t, slices.ContainsFunc(lockAcquire, func(mf *dto.MetricFamily) bool {
				return mf.GetName() == order.MetricLockAcquire && mf.GetType() == dto.MetricType_HISTOGRAM
			}), "%s is a histogram", order.MetricLockAcquire)
			assert.True(t, slices.ContainsFunc(lockAcquire, func(mf *dto.MetricFamily) bool {
				return mf.GetName() == api.MetricRequestDuration && mf.GetType() == dto.MetricType_HISTOGRAM
			}), "the instance times its requests (%s)", api.MetricRequestDuration)

			w = serve(t, s.h, request{"GET", "/readyz", nil, ""})
			require.Equal(t, http.StatusOK, w.Code, "readyz; body %s", w.Body)
		})
	}
}

// TestStackRedisDown checks that the service fails closed: with Redis gone an order answers
// 503 unavailable, no order is stored, no stock is taken, and /readyz names redis.
func TestStackRedisDown(t *testing.T) {
	// The embedded stores only: the shared real Redis must not be stopped.
	s := newStack(t, "embedded", app.StoresConfig{DataDir: t.TempDir()})
	now := time.Now()
	v := s.createVoucher(t, 3, now.Add(-time.Hour), now.Add(time.Hour))
	s.stores.Mini.Close()

	w := s.order(t, s.users+1, v)
	require.Equal(t, http.StatusServiceUnavailable, w.Code, "body %s", w.Body)
	requireErrorBody(t, w, api.CodeUnavailable)
	assert.Zero(t, s.count(t, "SELECT COUNT(*) FROM voucher_orders"), "orders stored")
	assert.Equal(t, int64(3), s.count(t, "SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", v), "stock left")

	s.inst.Ready.Refresh(context.Background()) // rather than wait for the background round
	w = serve(t, s.h, request{"GET", "/readyz", nil, ""})
	require.Equal(t, http.StatusServiceUnavailable, w.Code, "body %s", w.Body)
	checks, _ := decodeJSON(t, w)["checks"].(map[string]any)
	assert.Equal(t, "ok", checks["database"])
	assert.NotEqual(t, "ok", checks["redis"])
	assert.True(t, strings.Contains(w.Body.String(), `"ready":false`), "body %s", w.Body)

	w = serve(t, s.h, request{"GET", "/healthz", nil, ""})
	assert.Equal(t, http.StatusOK, w.Code, "healthz is the process, not its stores")
}

// TestStackDatabaseDown checks the same with the database closed under the service.
func TestStackDatabaseDown(t *testing.T) {
	s := newStack(t, "embedded", app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, s.inst.DB.Close())
	for _, r := range []request{
		{"POST", "/api/vouchers", admin, validVoucherBody},
		{"GET", "/api/vouchers/1", nil, ""},
		{"POST", "/api/vouchers/1/orders", user42, ""},
		{"GET", "/api/orders/1", user42, ""},
	} {
		w := serve(t, s.h, r)
		require.Equal(t, http.StatusServiceUnavailable, w.Code, "%s %s; body %s", r.method, r.path, w.Body)
		requireErrorBody(t, w, api.CodeUnavailable)
	}
	s.inst.Ready.Refresh(context.Background())
	w := serve(t, s.h, request{"GET", "/readyz", nil, ""})
	require.Equal(t, http.StatusServiceUnavailable, w.Code, "body %s", w.Body)
}
