package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
)

// TestHeadOnGetRoutes: docs/openapi.yaml says a known path with another method answers 405
// "except HEAD on a GET route", and RFC 9110 asks every general-purpose server for HEAD
// wherever it serves GET: load balancers and uptime probes often check /healthz with HEAD.
// HEAD must answer what GET answers, without the body, on every GET route.
func TestHeadOnGetRoutes(t *testing.T) {
	h := api.NewServer(discardLog(), api.Config{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "seckill_up 1\n")
	})}, &fakeVouchers{}, &fakeOrders{id: 5})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		path   string
		header map[string]string
	}{
		{"/healthz", nil},
		{"/readyz", nil},
		{"/metrics", nil},
		{"/api/openapi.yaml", nil},
		{"/api/vouchers/1", nil},
		{"/api/vouchers/abc", nil},
		{"/api/orders/5", user42},
		{"/api/orders/5", nil},
	} {
		t.Run(tt.path, func(t *testing.T) {
			do := func(method string) (*http.Response, []byte) {
				req, err := http.NewRequest(method, srv.URL+tt.path, nil)
				require.NoError(t, err)
				for k, v := range tt.header {
					req.Header.Set(k, v)
				}
				resp, err := srv.Client().Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp, body
			}
			get, _ := do(http.MethodGet)
			head, body := do(http.MethodHead)
			assert.Equal(t, get.StatusCode, head.StatusCode, "HEAD answers GET's status")
			assert.Equal(t, get.Header.Get("Content-Type"), head.Header.Get("Content-Type"))
			assert.Empty(t, body)
		})
	}
}
