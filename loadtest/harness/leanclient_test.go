package main

import (
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
			time.Sleep(300 * time.Millisecond)
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

	l, err := newLeanClient(srv.URL, 100*time.Millisecond, 4, 0)
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
