package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// sqlCount counts the SQL statements GORM runs with a context that carries it (withSQLCount):
// those of one request, not of the writers that run beside it.
type sqlCount struct{ n atomic.Int64 }

type sqlCountKey struct{}

func withSQLCount(ctx context.Context, c *sqlCount) context.Context {
	return context.WithValue(ctx, sqlCountKey{}, c)
}

// countSQL registers, on db, the callbacks that count a statement of every kind GORM runs for
// the context's sqlCount, if it has one. A statement counts whether it found rows or not.
func countSQL(t *testing.T, db *gorm.DB) {
	t.Helper()
	count := func(tx *gorm.DB) {
		if c, ok := tx.Statement.Context.Value(sqlCountKey{}).(*sqlCount); ok {
			c.n.Add(1)
		}
	}
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().After("gorm:create").Register("test:count_sql", count),
		cb.Query().After("gorm:query").Register("test:count_sql", count),
		cb.Update().After("gorm:update").Register("test:count_sql", count),
		cb.Delete().After("gorm:delete").Register("test:count_sql", count),
		cb.Row().After("gorm:row").Register("test:count_sql", count),
		cb.Raw().After("gorm:raw").Register("test:count_sql", count),
	} {
		require.NoError(t, err)
	}
}

// TestAsyncOrderLookupQueries: GET /api/orders/{id} in the asynchronous mode answers each state
// with no SQL statement more than it needs. An order pending, or failed while its voucher's
// Redis keys live, is answered by Redis alone; a written order, the common case once the
// writers caught up, by one read of the orders table. The durable record of failed orders
// (async_failed_orders) is read last, only when the order is neither in Redis nor a row: a
// failed order after its voucher was retired, or no order at all. Asked before the orders
// table, it cost every written order a second statement.
func TestAsyncOrderLookupQueries(t *testing.T) {
	ctx := context.Background()
	inst, retire := retiringInstance(t)
	countSQL(t, inst.DB.DB)
	vid := newVoucher(t, inst, 3)
	require.NoError(t, inst.Async.Loader.Load(ctx, vid))
	place := func(user int64) string {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/api/vouchers/%d/orders", vid), nil)
		r.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
		inst.Handler.ServeHTTP(w, r)
		require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
		var placed struct{ OrderID string }
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &placed))
		return placed.OrderID
	}
	// get answers orderID to user, and counts the request's SQL statements.
	get := func(orderID string, user int64) (code int, status string, statements int64) {
		t.Helper()
		c := &sqlCount{}
		w := httptest.NewRecorder()
		r := httptest.NewRequestWithContext(withSQLCount(ctx, c), http.MethodGet, "/api/orders/"+orderID, nil)
		r.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
		inst.Handler.ServeHTTP(w, r)
		var body struct{ Status string }
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		return w.Code, body.Status, c.n.Load()
	}

	refusedUser(t, inst, vid, 7)
	failed := place(7)
	created := place(1)
	// A pending order, as the admission script leaves it in the orders hash (docs/async.md,
	// Keys): no writer has it, for it is in no stream.
	const pending = "4242"
	ordersKey := fmt.Sprintf("seckill:{voucher:%d}:orders", vid)
	require.NoError(t, inst.Redis.HSet(ctx, ordersKey, pending, fmt.Sprintf("pending|5|%d", time.Now().UnixMilli())).Err())
	require.Eventually(t, func() bool {
		_, s, _ := get(failed, 7)
		_, c, _ := get(created, 1)
		return s == "failed" && c == "created"
	}, 30*time.Second, 20*time.Millisecond, "written and dead-lettered")

	type probe struct {
		name       string
		order      string
		user       int64
		code       int
		status     string
		statements int64
	}
	check := func(probes []probe) {
		t.Helper()
		for _, p := range probes {
			code, status, n := get(p.order, p.user)
			assert.Equal(t, p.code, code, p.name)
			assert.Equal(t, p.status, status, p.name)
			assert.Equal(t, p.statements, n, "%s: SQL statements of the lookup", p.name)
		}
	}
	check([]probe{
		{"pending in Redis", pending, 5, http.StatusOK, "pending", 0},
		{"written", created, 1, http.StatusOK, "created", 1},
		{"failed, in Redis", failed, 7, http.StatusOK, "failed", 0},
		{"no such order", "999999", 1, http.StatusNotFound, "", 2},
	})
	require.NoError(t, inst.Redis.HDel(ctx, ordersKey, pending).Err())

	retire(vid)
	check([]probe{
		{"written, the voucher retired", created, 1, http.StatusOK, "created", 1},
		{"failed, the voucher retired", failed, 7, http.StatusOK, "failed", 2},
		{"failed, the voucher retired, asked by another user", failed, 8, http.StatusNotFound, "", 2},
	})
}
