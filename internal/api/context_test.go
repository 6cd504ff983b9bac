package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

type ctxKey struct{}

// ctxVouchers and ctxOrders keep the contexts the handlers hand them.
type ctxVouchers struct {
	fakeVouchers
	ctxs []context.Context
}

func (f *ctxVouchers) Get(ctx context.Context, id int64) (voucher.Voucher, error) {
	f.ctxs = append(f.ctxs, ctx)
	return f.fakeVouchers.Get(ctx, id)
}

type ctxOrders struct {
	fakeOrders
	ctxs []context.Context
}

func (f *ctxOrders) Place(ctx context.Context, _, _ int64) (int64, error) {
	f.ctxs = append(f.ctxs, ctx)
	return 1, nil
}

func (f *ctxOrders) Get(ctx context.Context, userID, orderID int64) (order.Summary, error) {
	f.ctxs = append(f.ctxs, ctx)
	return f.fakeOrders.Get(ctx, userID, orderID)
}

// TestServiceContextOutlivesRequest checks that the context a service gets stays the
// request's own after the handler returns. database/sql, for one, watches it from a
// goroutine of its own. gin recycles its *gin.Context for later requests, so a handler that
// passes c instead of c.Request.Context() gives the service a context that turns into
// another request's: a data race, and a later request's cancellation reaching an earlier
// request's queries.
func TestServiceContextOutlivesRequest(t *testing.T) {
	vs, os := &ctxVouchers{}, &ctxOrders{}
	h := api.NewServer(discardLog(), api.Config{}, vs, os)
	const n = 20
	for i := range n {
		for _, r := range []struct{ method, path string }{
			{http.MethodGet, "/api/vouchers/1"}, {http.MethodPost, "/api/vouchers/1/orders"}, {http.MethodGet, "/api/orders/1"},
		} {
			req := httptest.NewRequest(r.method, r.path, nil)
			req.Header.Set(api.HeaderUserID, "1")
			req = req.WithContext(context.WithValue(req.Context(), ctxKey{}, i))
			w := serveRequest(t, h, req)
			require.Less(t, w.Code, 300, "%s %s: body %s", r.method, r.path, w.Body)
		}
	}
	require.Len(t, vs.ctxs, n)
	require.Len(t, os.ctxs, 2*n)
	for i := range n {
		assert.Equal(t, i, vs.ctxs[i].Value(ctxKey{}), fmt.Sprintf("GET voucher %d: the context became another request's", i))
		assert.Equal(t, i, os.ctxs[2*i].Value(ctxKey{}), fmt.Sprintf("POST order %d: the context became another request's", i))
		assert.Equal(t, i, os.ctxs[2*i+1].Value(ctxKey{}), fmt.Sprintf("GET order %d: the context became another request's", i))
	}
}
