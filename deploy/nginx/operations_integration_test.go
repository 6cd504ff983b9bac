//go:build integration

package nginx_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNginxKeepsOperationsToTheInstances: /metrics (the processes' internals) and /readyz
// (whose 503 carries a store's error text, internal addresses included) are for Prometheus
// and orchestrators, which ask each instance directly. nginx, the public entry, answers both
// itself, for any method and query string and however the path is spelt, and everything
// under them ("/metrics/", "/readyz/mysql"), with the instances' 404 not_found, and passes
// none of them on. /healthz still passes: make scaling
// measures it through nginx.
func TestNginxKeepsOperationsToTheInstances(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	base := startNginx(t, []string{answering(t, "answering", s)}, unchanged)
	tests := []struct {
		name   string
		method string
		target string
		status int // http.StatusCreated: it must reach the instance
	}{
		{"GET /metrics", http.MethodGet, "/metrics", 404},
		{"GET /readyz", http.MethodGet, "/readyz", 404},
		{"HEAD /metrics", http.MethodHead, "/metrics", 404},
		{"HEAD /readyz", http.MethodHead, "/readyz", 404},
		{"POST /metrics", http.MethodPost, "/metrics", 404},
		{"DELETE /readyz", http.MethodDelete, "/readyz", 404},
		{"/metrics with a query string", http.MethodGet, "/metrics?name[]=go_goroutines", 404},
		{"/readyz with a query string", http.MethodGet, "/readyz?verbose=1", 404},
		// nginx matches a location against the path normalised (slashes merged, dot segments
		// resolved, percent-escapes decoded), and passes the path on as the client sent it.
		{"a doubled slash", http.MethodGet, "//metrics", 404},
		{"a dot-dot segment", http.MethodGet, "/api/../readyz", 404},
		{"a percent-encoded letter", http.MethodGet, "/%6detrics", 404},
		// Everything under them too: nothing there is for the public, and whatever nginx
		// passes on reaches an instance.
		{"GET /metrics/", http.MethodGet, "/metrics/", 404},
		{"GET /readyz/", http.MethodGet, "/readyz/", 404},
		{"HEAD /readyz/", http.MethodHead, "/readyz/", 404},
		{"POST /metrics/", http.MethodPost, "/metrics/", 404},
		{"a path under /metrics", http.MethodGet, "/metrics/x/y?z=1", 404},
		{"a path under /readyz", http.MethodGet, "/readyz/mysql", 404},
		{"a percent-encoded slash", http.MethodGet, "/readyz%2F", 404},
		{"a doubled slash after /metrics", http.MethodGet, "/metrics//", 404},
		{"GET /healthz", http.MethodGet, "/healthz", http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := rawAnswer(t, base, tt.method+" "+tt.target+" HTTP/1.1\r\nHost: x\r\n"+
				tagHeader+": "+tt.name+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			switch {
			case tt.status == http.StatusCreated:
				assert.Equal(t, tt.status, resp.StatusCode, "body %q", body)
			case tt.method == http.MethodHead:
				assert.Equal(t, tt.status, resp.StatusCode)
				assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			default:
				assertAPIError(t, resp, body, tt.status, "not_found")
			}
		})
	}
	for upstream, tags := range s.tags {
		assert.Equal(t, []string{"GET /healthz"}, tags, "requests that reached %s", upstream)
	}
}
