package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
)

// slowOrders takes handlerTime to place an order.
type slowOrders struct{ fakeOrders }

const handlerTime = 20 * time.Millisecond

func (s *slowOrders) Place(ctx context.Context, userID, voucherID int64) (int64, error) {
	time.Sleep(handlerTime)
	return s.fakeOrders.Place(ctx, userID, voucherID)
}

// TestRequestDuration: every request is timed under its route's pattern and its status code,
// a request no route took under "unmatched" (whatever its path or method), a panic's 500
// too, and the time includes the service's.
func TestRequestDuration(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := api.NewServer(discardLog(), api.Config{Timing: api.NewMetrics(reg)}, &panicVouchers{}, &slowOrders{fakeOrders{id: 42}})
	for _, r := range []request{
		{"POST", "/api/vouchers/1/orders", map[string]string{api.HeaderUserID: "7"}, ""},
		{"POST", "/api/vouchers/2/orders", map[string]string{api.HeaderUserID: "8"}, ""},
		{"HEAD", "/healthz", nil, ""},
		{"GET", "/api/vouchers/1", nil, ""},
		{"GET", "/no/such/route", nil, ""},
		{"PURGE", "/also/none", nil, ""},
		{"DELETE", "/healthz", nil, ""},
	} {
		serve(t, h, r)
	}

	type series struct{ route, code string }
	got := map[series]uint64{}
	var orderSeconds float64
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		require.Equal(t, api.MetricRequestDuration, mf.GetName())
		for _, m := range mf.GetMetric() {
			s := series{}
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					s.route = l.GetValue()
				case "code":
					s.code = l.GetValue()
				}
			}
			got[s] = m.GetHistogram().GetSampleCount()
			if s.route == "POST /api/vouchers/:id/orders" {
				orderSeconds = m.GetHistogram().GetSampleSum()
			}
		}
	}
	assert.Equal(t, map[series]uint64{
		{"POST /api/vouchers/:id/orders", "201"}: 2,
		{"HEAD /healthz", "200"}:                 1,
		{"GET /api/vouchers/:id", "500"}:         1,
		{api.RouteUnmatched, "404"}:              2,
		{api.RouteUnmatched, "405"}:              1,
	}, got)
	assert.GreaterOrEqual(t, orderSeconds, 2*handlerTime.Seconds(), "the orders' time includes the service's")
}

// BenchmarkRequestTiming: what timing a request costs the handler chain, against the same
// server untimed, on an order answered by a fake service (docs/loadtest.md, "Where the
// admission's own tail is").
func BenchmarkRequestTiming(b *testing.B) {
	for _, timed := range []bool{false, true} {
		name := "untimed"
		cfg := api.Config{}
		if timed {
			name, cfg.Timing = "timed", api.NewMetrics(prometheus.NewRegistry())
		}
		b.Run(name, func(b *testing.B) {
			h := api.NewServer(discardLog(), cfg, &fakeVouchers{}, &fakeOrders{id: 1})
			req := httptest.NewRequest(http.MethodPost, "/api/vouchers/1/orders", nil)
			req.Header.Set(api.HeaderUserID, "7")
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
