//go:build integration

package nginx_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// instanceHeaderLimit is the most an instance reads of a request line and its headers before
// net/http answers 431 in plain text: its MaxHeaderBytes (16 KiB, cmd/seckill/serve.go) plus
// the 4 KiB net/http allows beyond it.
const instanceHeaderLimit = 16<<10 + 4<<10

// rawAnswer writes req to nginx as it is, on a connection of its own, and reads the answer.
// The write runs beside the read: nginx may answer and close before it has read all of req.
// The answer to a HEAD request is read as one: its Content-Length announces no body.
func rawAnswer(t *testing.T, base, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	go func() { _, _ = io.WriteString(c, req) }()
	var asked *http.Request
	if strings.HasPrefix(req, "HEAD ") {
		asked = &http.Request{Method: http.MethodHead}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), asked)
	require.NoError(t, err, "no answer to %.80q", req)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// assertAPIError checks that nginx answered status with the API's error body and code.
func assertAPIError(t *testing.T, resp *http.Response, body string, status int, code string) {
	t.Helper()
	assert.Equal(t, status, resp.StatusCode, "body %q", body)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assertErrorCode(t, body, code)
}

// headerLines is n header lines X-Pad-i of size bytes each, CRLF included.
func headerLines(n, size int) string {
	var b strings.Builder
	for i := range n {
		name := fmt.Sprintf("X-Pad-%d: ", i)
		b.WriteString(name + strings.Repeat("a", size-len(name)-2) + "\r\n")
	}
	return b.String()
}

// TestNginxRefusesRequestsInJSON: a request nginx refuses for its form, before any
// instance, is answered in the API's error shape with a status and code of
// docs/openapi.yaml, never with nginx's HTML page, and reaches no instance.
func TestNginxRefusesRequestsInJSON(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	base := startNginx(t, []string{answering(t, "answering", s)}, unchanged)
	tag := func(name string) string { return tagHeader + ": " + name + "\r\n" }
	tests := []struct {
		name   string
		req    string
		status int
		code   string // empty: the request must reach the instance
	}{
		{"malformed request line", "GARBAGE\r\n\r\n", 400, "bad_request"},
		{"malformed header line", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + tag("hdr") + "Bad Header: y\r\n\r\n", 400, "bad_request"},
		{"HTTP/1.1 without Host", "GET /healthz HTTP/1.1\r\n" + tag("host") + "\r\n", 400, "bad_request"},
		{"a header line over nginx's buffer", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + tag("line") +
			"Cookie: " + strings.Repeat("a", 5000) + "\r\n\r\n", 431, "header_too_large"},
		// Each line fits, the block is over what an instance reads: nginx must refuse it,
		// or the client gets net/http's plain-text 431 through nginx.
		{"a header block over the instance's limit", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + tag("block") +
			headerLines(7, instanceHeaderLimit/6) + "\r\n", 431, "header_too_large"},
		{"a header block of short lines over the instance's limit", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + tag("short") +
			headerLines(instanceHeaderLimit/100+1, 100) + "\r\n", 431, "header_too_large"},
		{"a request line over nginx's buffer", "GET /" + strings.Repeat("a", 5000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"},
		{"TRACE", "TRACE /healthz HTTP/1.1\r\nHost: x\r\n" + tag("trace") + "\r\n", 405, "method_not_allowed"},
		{"unknown Transfer-Encoding", "POST /api/vouchers HTTP/1.1\r\nHost: x\r\n" + tag("te") +
			"Transfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"},
		{"HTTP/2.0 request line", "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"},
		{"HTTP/3.0 request line", "GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"},
		{"HTTP/0.9 request line", "GET /healthz HTTP/0.9\r\nHost: x\r\n\r\n", 400, "bad_request"},
		// nginx takes these Host values, net/http does not (httpguts.ValidHostHeader): passed
		// on, they reached the instance's plain-text "400 Bad Request: malformed Host header".
		{"a Host with a quote", "GET /healthz HTTP/1.1\r\nHost: a\"b\r\n" + tag("quote") + "\r\n", 400, "bad_request"},
		{"a Host with user info", "GET /healthz HTTP/1.1\r\nHost: user@x\r\n" + tag("userinfo") + "\r\n", 400, "bad_request"},
		{"a Host with a non-ASCII byte", "GET /healthz HTTP/1.1\r\nHost: caf\xc3\xa9\r\n" + tag("utf8") + "\r\n", 400, "bad_request"},
		{"an order with such a Host", "POST /api/vouchers/1/orders HTTP/1.1\r\nHost: {x}\r\n" + tag("order") +
			"X-User-ID: 1\r\nContent-Length: 0\r\n\r\n", 400, "bad_request"},
		{"nginx's internal error location", "GET /_nginx/bad_gateway HTTP/1.1\r\nHost: x\r\n" + tag("internal") + "\r\n", 404, "not_found"},
		// The control: headers of the size a client may send (10 KiB) pass.
		{"a header block within the limit", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + tag("within") +
			headerLines(10, 1024) + "Connection: close\r\n\r\n", 201, ""},
		// A later HTTP/1 minor version is read as HTTP/1.1 (RFC 9110, 2.5), not refused 505.
		{"HTTP/1.2 request line", "GET /healthz HTTP/1.2\r\nHost: x\r\n" + tag("http12") + "Connection: close\r\n\r\n", 201, ""},
		// HTTP/1.0 needs no Host, and an instance reached directly answers without one; nginx
		// passed its $host, then empty, and so no Host: the instance's plain-text "400 Bad
		// Request: missing required Host header" to HTTP/1.1.
		{"HTTP/1.0 without Host", "GET /healthz HTTP/1.0\r\n" + tag("http10") + "\r\n", 201, ""},
		{"a Host with a port and upper case", "GET /healthz HTTP/1.1\r\nHost: X.Example:8080\r\n" + tag("port") +
			"Connection: close\r\n\r\n", 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := rawAnswer(t, base, tt.req)
			if tt.code == "" {
				assert.Equal(t, tt.status, resp.StatusCode, "body %q", body)
				return
			}
			assertAPIError(t, resp, body, tt.status, tt.code)
		})
	}
	for _, tags := range s.tags {
		assert.Equal(t, []string{"within", "http12", "http10", "port"}, tags, "requests nginx refused reached the instance")
	}
}

// TestNginxBadGatewayInJSON: with no instance reachable, or an instance that hangs up with
// the order in its hands, nginx answers 502 bad_gateway in JSON, saying that the outcome is
// unknown and a retry safe (docs/openapi.yaml, "Retrying").
func TestNginxBadGatewayInJSON(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	for _, tt := range []struct {
		name     string
		upstream string
	}{
		{"no instance reachable", refusing(t)},
		{"the instance hung up", dropping(t, "dropping", s)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := startNginx(t, []string{tt.upstream}, unchanged)
			status, body, _ := postAnswer(t, base, tt.name)
			assert.Equal(t, http.StatusBadGateway, status)
			assertErrorCode(t, body, "bad_gateway")
			assert.Contains(t, body, "retrying is safe")
		})
	}
}

// TestNginxGatewayTimeoutInJSON: an instance that does not answer within proxy_read_timeout
// (1 s here) gets the client a 504 gateway_timeout in JSON.
func TestNginxGatewayTimeoutInJSON(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	addr, _, _ := holding(t, "holding", s)
	base := startNginx(t, []string{addr}, func(conf string) string {
		edited := strings.Replace(conf, "proxy_read_timeout 30s;", "proxy_read_timeout 1s;", 1)
		require.NotEqual(t, conf, edited, "nginx.conf has no 'proxy_read_timeout 30s;'")
		return edited
	})
	status, body, _ := postAnswer(t, base, "slow")
	assert.Equal(t, http.StatusGatewayTimeout, status)
	assertErrorCode(t, body, "gateway_timeout")
	assert.Contains(t, body, "retrying is safe")
}

// TestNginxInternalErrorInJSON: nginx failing itself (here: it cannot write a body larger
// than its buffer to client_body_temp) answers 500 internal in JSON.
func TestNginxInternalErrorInJSON(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	gate, err := os.ReadFile("order-gate.conf")
	require.NoError(t, err)
	base, prefix := startNginxPrefix(t, []string{answering(t, "answering", s)}, string(gate), unchanged)
	require.NoError(t, os.Chmod(filepath.Join(prefix, "client_body_temp"), 0))
	// Over client_body_buffer_size (16 KiB), within client_max_body_size.
	body := strings.Repeat(" ", 32<<10)
	resp, answer := rawAnswer(t, base, fmt.Sprintf("POST /api/vouchers HTTP/1.1\r\nHost: x\r\n%s: big\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tagHeader, len(body), body))
	assertAPIError(t, resp, answer, http.StatusInternalServerError, "internal")
	byTag, _ := s.count("", "big")
	assert.Zero(t, byTag)
}

// TestNginxPassesEveryUserIDLine: X-User-ID sent twice reaches the instance as sent, both
// lines, so that the instance refuses it (400 invalid_argument) as it does without nginx.
// nginx must not pick one of them (1.22's $http_x_user_id is the first line only) nor join
// them (1.23's).
func TestNginxPassesEveryUserIDLine(t *testing.T) {
	srv, got := recording(t, func(r *http.Request) []string { return r.Header.Values("X-User-ID") })
	base := startNginx(t, []string{srv}, unchanged)
	resp, body := rawAnswer(t, base, "POST /api/vouchers/1/orders HTTP/1.1\r\nHost: x\r\n"+
		"X-User-ID: 1\r\nX-User-ID: 2\r\nContent-Length: 0\r\n\r\n")
	require.Equal(t, http.StatusCreated, resp.StatusCode, "body %q", body)
	assert.Equal(t, [][]string{{"1", "2"}}, got())
}

// TestNginxPassesAChunkedBodyWithItsLength: nginx reads a chunked body whole before it passes
// it on, with Content-Length. So through nginx an order whose chunked body carries nothing
// ("0\r\n\r\n") reaches the instance as an order without a body, and is placed, while an
// instance reached directly refuses any chunked order (it cannot know the body is empty
// without reading it); one with something in it arrives with its length and is refused.
// README and docs/openapi.yaml say so.
func TestNginxPassesAChunkedBodyWithItsLength(t *testing.T) {
	srv, got := recording(t, func(r *http.Request) int64 {
		assert.Empty(t, r.TransferEncoding, "Transfer-Encoding passed on")
		return r.ContentLength
	})
	base := startNginx(t, []string{srv}, unchanged)
	for _, body := range []string{"0\r\n\r\n", "1\r\nx\r\n0\r\n\r\n"} {
		resp, answer := rawAnswer(t, base, "POST /api/vouchers/1/orders HTTP/1.1\r\nHost: x\r\n"+
			"X-User-ID: 1\r\nTransfer-Encoding: chunked\r\n\r\n"+body)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "body %q", answer)
	}
	assert.Equal(t, []int64{0, 1}, got(), "Content-Length as the instance saw it")
}

// recording is an upstream that answers 201 and keeps what of makes of each request; got
// returns those, in the order the requests arrived.
func recording[T any](t *testing.T, of func(*http.Request) T) (addr string, got func() []T) {
	var (
		mu   sync.Mutex
		kept []T
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := of(r)
		mu.Lock()
		kept = append(kept, v)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), func() []T {
		mu.Lock()
		defer mu.Unlock()
		return append([]T(nil), kept...)
	}
}

// TestExpectContinue: a client that sends "Expect: 100-continue" and a Content-Length over
// the instances' limit has nginx's 413 payload_too_large at once, without a "100 Continue"
// that invites the body, and nothing reaches an instance. Within the limit nginx invites the
// body itself, reads it, and passes it on without the Expect header: an instance never
// answers one behind nginx.
func TestExpectContinue(t *testing.T) {
	srv, expect := recording(t, func(r *http.Request) string { return r.Header.Get("Expect") })
	base := startNginx(t, []string{srv}, unchanged)
	head := func(size int) string {
		return fmt.Sprintf("POST /api/vouchers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", size)
	}

	resp, body := rawAnswer(t, base, head(64<<10+1))
	assertAPIError(t, resp, body, http.StatusRequestEntityTooLarge, "payload_too_large")

	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, head(2))
	require.NoError(t, err)
	r := bufio.NewReader(c)
	resp, err = http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, resp.StatusCode, "nginx's answer to the headers within the limit")
	_, err = io.WriteString(c, "{}")
	require.NoError(t, err)
	resp, err = http.ReadResponse(r, nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, []string{""}, expect(), "the Expect header each request reached the instance with")
}
