package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
)

// rawConn dials s on TCP, bounded: every read and write fails after limit.
func rawConn(t *testing.T, s *server, limit time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(limit)))
	return c, bufio.NewReader(c)
}

// trickle writes one byte of body every 50 ms until the connection fails: a client that
// sends its body slowly, but sends.
func trickle(c net.Conn) {
	for {
		if _, err := c.Write([]byte("x")); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeLimits drives `seckill serve` through run with raw connections: the header limit,
// the read timeout on a slow body, and an order whose body it refuses at once.
func TestServeLimits(t *testing.T) {
	s := startServe(t, withEnv(nil))
	vid := mustCreateVoucher(t, s.base, 10)

	t.Run("huge header refused", func(t *testing.T) {
		t.Parallel()
		c, r := rawConn(t, s, 10*time.Second)
		// Written while the answer is read: the server answers and hangs up before it has
		// read the whole header.
		go func() {
			_, _ = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 1<<20))
		}()
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	})

	t.Run("large but sane header accepted", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequest(http.MethodGet, s.base+"/healthz", nil)
		require.NoError(t, err)
		req.Header.Set("Cookie", strings.Repeat("a", maxHeaderBytes-1024))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	})

	t.Run("slow body cut off at the read timeout", func(t *testing.T) {
		t.Parallel()
		c, r := rawConn(t, s, readTimeout+5*time.Second)
		start := time.Now()
		// Within the 64 KiB body limit: a larger Content-Length is refused 413 before the body
		// is read (TestDeclaredBodyOverTheLimit), so it would never meet the read timeout.
		_, err := fmt.Fprintf(c, "POST /api/vouchers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"+
			"Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n{")
		require.NoError(t, err)
		go trickle(c)

		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err, "no answer within the bound: the body was not cut off")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		elapsed := time.Since(start)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "the handler's read of the body failed")
		assert.GreaterOrEqual(t, elapsed, readTimeout-200*time.Millisecond, "cut off before the read timeout: by what?")
		_, err = r.ReadByte()
		// Closed: EOF, or a reset when the server closed with trickled bytes still unread.
		assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET),
			"the connection is closed after the answer; got %v", err)
	})

	t.Run("order with a body refused without reading it", func(t *testing.T) {
		t.Parallel()
		c, r := rawConn(t, s, readTimeout+5*time.Second)
		start := time.Now()
		_, err := fmt.Fprintf(c, "POST /api/vouchers/%d/orders HTTP/1.1\r\nHost: x\r\nX-User-ID: 7\r\nContent-Length: 100000\r\n\r\n{", vid)
		require.NoError(t, err)
		go trickle(c)

		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.True(t, resp.Close, "Connection: close")
		assert.Less(t, time.Since(start), readTimeout/2, "the answer waited for the body")
		code, _ := postOrder(t, s.base, vid, 7)
		assert.Equal(t, "created", code, "the refused request placed no order")
	})
}

// TestServeReadTimeoutDoesNotCutOrders: the read timeout bounds reading a request, not
// running it. An order that takes longer than readTimeout is answered 201 (net/http lifts the
// read deadline once the request is read; if it did not, the order's context would be
// cancelled when the deadline passed).
func TestServeReadTimeoutDoesNotCutOrders(t *testing.T) {
	delay := readTimeout + 500*time.Millisecond
	s := startServe(t, withEnv(nil, "SECKILL_ORDER_DELAY", delay.String(), "SECKILL_LOCK_TTL", "30s", "SECKILL_ORDER_TIMEOUT", "10s"))
	vid := mustCreateVoucher(t, s.base, 1)
	start := time.Now()
	code, _ := postOrder(t, s.base, vid, 9)
	assert.Equal(t, "created", code)
	assert.GreaterOrEqual(t, time.Since(start), delay, "the order ran its delay")
}

// TestShutdownGraceCoversTheLongestOrder: a shutdown waits for in-flight orders at least
// shutdownGrace, and longer when an order's deadline is longer (explicit fencing lets
// SECKILL_ORDER_TIMEOUT exceed the lock TTL and the 15 s): cut off earlier, such an order
// would be abandoned inside its deadline and the instance would exit 1.
func TestShutdownGraceCoversTheLongestOrder(t *testing.T) {
	for _, tt := range []struct {
		span, want time.Duration
	}{
		{2 * time.Second, shutdownGrace},
		{10 * time.Second, shutdownGrace},
		{30 * time.Second, 30*time.Second + writeTimeoutSlack},
	} {
		assert.Equal(t, tt.want, graceFor(tt.span), "order span %s", tt.span)
	}
}

// TestStopWithinCoversTheWriter: the stop bound an instance states as it starts serving
// (stop_within, which scripts/cluster.sh allows before a SIGKILL) is the shutdown grace, and
// in the asynchronous mode the order writer's stop after it (async.StopTimeout), Go's longest
// duration where that sum would overflow. cluster.sh killed every instance 15 s after its
// SIGTERM, inside the 24.5 s an async instance may take by default.
func TestStopWithinCoversTheWriter(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want time.Duration
	}{
		{"sync", nil, shutdownGrace},
		{"async", []string{"-order-mode", "async"}, shutdownGrace + async.StopTimeout(0)},
		{"async, longer claim idle", []string{"-order-mode", "async", "-stream-claim-idle", "30s"}, shutdownGrace + async.StopTimeout(30*time.Second)},
		{"async, order deadline at the longest span", []string{"-order-mode", "async", "-order-timeout", maxOrderSpan.String()}, math.MaxInt64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseConfig("serve", tt.args, func(string) string { return "" }, io.Discard, nil)
			require.NoError(t, err)
			grace, writer, total := stopBounds(cfg)
			assert.Equal(t, tt.want, total, "grace %s, writer %s", grace, writer)
		})
	}
	assert.Equal(t, 24500*time.Millisecond, shutdownGrace+async.StopTimeout(0), "the default async stop README states")
}
