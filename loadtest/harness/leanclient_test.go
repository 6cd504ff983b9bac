package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeanClient: the order POST as the service sees it, answers read whole, connections
// reused while the server keeps them, and no answer reported as an error.
func TestLeanClient(t *testing.T) {
	var conns atomic.Int32
	release := make(chan struct{}) // /slow answers only when the test ends
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method != http.MethodPost || r.Header.Get("X-User-ID") == "" || r.ContentLength != 0:
			w.WriteHeader(http.StatusBadRequest)
		case r.URL.Path == "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"overloaded"}}`))
		case r.URL.Path == "/chunked":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"orderId":`))
			w.(http.Flusher).Flush() // no Content-Length: chunked
			_, _ = w.Write([]byte(`"7"}`))
		case r.URL.Path == "/hangup":
			c, _, _ := w.(http.Hijacker).Hijack()
			_ = c.Close()
		case r.URL.Path == "/slow":
			<-release
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"orderId":"` + r.Header.Get("X-User-ID") + `"}`))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for /slow

	l, err := newLeanClient(srv.URL, time.Second, 4, 0)
	require.NoError(t, err)
	for i := range 5 {
		status, body, err := l.post("/api/vouchers/1/orders", int64(40+i))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, status)
		code, id := classifyAnswer(status, body)
		assert.Equal(t, codeCreated, code)
		assert.Equal(t, "4"+string(rune('0'+i)), id)
	}
	assert.EqualValues(t, 1, conns.Load(), "one keep-alive connection for sequential requests")

	status, body, err := l.post("/chunked", 1)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, status)
	assert.JSONEq(t, `{"orderId":"7"}`, string(body))

	status, body, err = l.post("/close", 1)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.True(t, strings.Contains(string(body), "overloaded"))
	before := conns.Load()
	_, _, err = l.post("/", 2)
	require.NoError(t, err)
	assert.Equal(t, before+1, conns.Load(), "Connection: close was not honoured")

	_, _, err = l.post("/hangup", 3)
	assert.Error(t, err, "a server that hung up without an answer")
	_, _, err = l.post("/slow", 4)
	assert.Error(t, err, "an answer later than the timeout")

	_, err = newLeanClient("https://example.test", time.Second, 1, 0)
	assert.Error(t, err)
}

// TestReadAnswer: the answers the lean client reads, whole, and what it makes of the
// connection after each; and the malformed ones it refuses rather than misread.
func TestReadAnswer(t *testing.T) {
	for _, c := range []struct {
		name, in   string
		status     int
		body       string
		keep       bool
		err        bool
		leftBehind string // what the next answer on the connection starts with
	}{
		{name: "length", in: "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{\"a\"NEXT", status: 202, body: `{"a"`, keep: true, leftBehind: "NEXT"},
		{name: "close", in: "HTTP/1.1 503 Service Unavailable\r\nconnection: Close\r\ncontent-length: 2\r\n\r\n{}", status: 503, body: "{}"},
		{name: "chunked with a trailer", in: "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\nNEXT", status: 201, body: "abcde", keep: true, leftBehind: "NEXT"},
		{name: "chunked", in: "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\nNEXT", status: 201, body: "z", keep: true, leftBehind: "NEXT"},
		{name: "no content", in: "HTTP/1.1 204 No Content\r\n\r\nNEXT", status: 204, keep: true, leftBehind: "NEXT"},
		{name: "interim", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", status: 100, leftBehind: "HTTP/1.1 200 OK\r\n"},
		{name: "to the end", in: "HTTP/1.1 200 OK\r\n\r\nall of it", status: 200, body: "all of it"},
		{name: "HTTP/1.0", in: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", status: 200},
		{name: "HTTP/1.0 kept", in: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", status: 200, keep: true},
		{name: "cut in the body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", status: 200, err: true},
		{name: "cut in the header", in: "HTTP/1.1 200 OK\r\nContent-Len", status: 200, err: true},
		{name: "not HTTP", in: "SSH-2.0-OpenSSH\r\n", err: true},
		{name: "bad status", in: "HTTP/1.1 2x2 What\r\n\r\n", err: true},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", status: 200, err: true},
		{name: "too long", in: "HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n", status: 200, err: true},
		{name: "unknown encoding", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", status: 200, err: true},
		{name: "empty", in: "", err: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(c.in))
			status, body, keep, err := readAnswer(r)
			assert.Equal(t, c.status, status)
			if c.err {
				require.Error(t, err)
				assert.False(t, keep, "a connection with a misread answer on it is not reused")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.body, string(body))
			assert.Equal(t, c.keep, keep)
			rest, _ := io.ReadAll(r)
			assert.Equal(t, c.leftBehind, string(rest))
		})
	}
}
