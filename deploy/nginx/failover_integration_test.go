//go:build integration

package nginx_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/order"
)

// unreachable is an instance whose accept queue is full: a listening socket with a backlog of
// 0 whose queue the test fills and never accepts from. Linux then drops every further SYN
// (with net.ipv4.tcp_abort_on_overflow at 0, its default, it neither answers nor resets), so
// a connect to it times out: an instance too busy to accept, or a host that has gone away.
func unreachable(t *testing.T) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)

	// Connect until a connect finds the queue full; the connections that made it stay open
	// (queued, never accepted) for the rest of the test.
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			var ne net.Error
			abort, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_abort_on_overflow")
			require.True(t, errors.As(err, &ne) && ne.Timeout(), "a connect to a full accept queue failed without timing out "+
				"(net.ipv4.tcp_abort_on_overflow = %s): %v", strings.TrimSpace(string(abort)), err)
			return addr
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	t.Fatalf("8 connections to a listener of backlog 0 were all accepted by the kernel: its accept queue never filled")
	return ""
}

// connectTimeouts counts the connect timeouts nginx logged for requests of method.
func connectTimeouts(t *testing.T, prefix, method string) int {
	b, err := os.ReadFile(filepath.Join(prefix, "logs", "error.log"))
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "upstream timed out") && strings.Contains(line, "while connecting to upstream") &&
			strings.Contains(line, `request: "`+method+" ") {
			n++
		}
	}
	return n
}

// send sends one request of method to the order route, tagged tag, and returns the status.
func send(t *testing.T, base, method, tag string) int {
	status, _, _ := orderAnswer(t, base, method, tag)
	return status
}

// TestConnectTimeoutMovesOn: a request whose connect times out (the instance's accept queue
// is full, its SYN dropped) is answered by the other instance, a POST as well as a GET:
// nothing was sent to the first.
func TestConnectTimeoutMovesOn(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	gate, err := os.ReadFile("order-gate.conf")
	require.NoError(t, err)
	base, prefix := startNginxPrefix(t, []string{unreachable(t), answering(t, "answering", s)}, string(gate), unchanged)

	// Round-robin sends some of each method's requests to the unreachable instance first.
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for i := range 3 {
			tag := method + strconv.Itoa(i)
			assert.Equal(t, http.StatusCreated, send(t, base, method, tag), "%s (nginx's error log below)", tag)
			byTag, _ := s.count("", tag)
			assert.Equal(t, 1, byTag, "%s reached the answering instance %d times", tag, byTag)
		}
		require.Positive(t, connectTimeouts(t, prefix, method), "no %s met the unreachable instance: the test proves nothing", method)
	}
}

// saw reports whether upstream saw the request tagged tag.
func (s *seen) saw(upstream, tag string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tags[upstream] {
		if t == tag {
			return true
		}
	}
	return false
}

// TestReadTimeoutPassesOnlyReads: a request that was sent and got no answer within
// proxy_read_timeout (1 s here) is passed on to the other instance only if it is a read. A
// POST is answered 504 and reaches no other instance: the first may yet place the order. A
// GET is tried once more, on the other instance, and answered from there: a read changes
// nothing, and the retry is also the control that shows a timed-out POST could have been
// passed on, had nginx been allowed to.
func TestReadTimeoutPassesOnlyReads(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	slow, _, _ := holding(t, "slow", s)
	base := startNginx(t, []string{slow, answering(t, "answering", s)}, func(conf string) string {
		edited := strings.Replace(conf, "proxy_read_timeout 30s;", "proxy_read_timeout 1s;", 1)
		require.NotEqual(t, conf, edited, "nginx.conf has no 'proxy_read_timeout 30s;'")
		return edited
	})

	// Round-robin sends some of each method's requests to the slow instance first.
	for _, tt := range []struct {
		method   string
		status   int // of a request that reached the slow instance
		attempts int // instances it reached
	}{
		{http.MethodPost, http.StatusGatewayTimeout, 1},
		{http.MethodGet, http.StatusCreated, 2},
	} {
		slowed := 0
		for i := range 3 {
			tag := tt.method + strconv.Itoa(i)
			status := send(t, base, tt.method, tag)
			byTag, _ := s.count("", tag)
			if !s.saw("slow", tag) {
				assert.Equal(t, http.StatusCreated, status, tag)
				assert.Equal(t, 1, byTag, "%s reached %d instances", tag, byTag)
				continue
			}
			slowed++
			assert.Equal(t, tt.status, status, "%s reached the slow instance", tag)
			assert.Equal(t, tt.attempts, byTag, "%s reached the slow instance, and %d instances in all: %v", tag, byTag, s.tags)
		}
		require.Positive(t, slowed, "no %s reached the slow instance: the test proves nothing", tt.method)
	}
}

// timeScale divides every proxy timeout of nginx.conf in the tests that wait them out
// (scaleTimeouts): nginx's waits scale with them, so that the reads' 7 s read timeout takes
// 0.7 s, and a bound of the real config, divided by timeScale, holds the scaled one.
const timeScale = 10

// The bounds nginx.conf states (its comments derive them), in the real config's time: a
// client has its answer, nginx's 504 gateway_timeout at worst, within
// proxy_next_upstream_timeout (10 s: no attempt begins later) + proxy_connect_timeout (2 s)
// + the location's proxy_read_timeout (7 s for reads, 30 s for orders).
const (
	readAnswerBound  = 19 * time.Second
	orderAnswerBound = 42 * time.Second
)

// instanceWriteTimeout is an instance's WriteTimeout with the default SECKILL_LOCK_TTL
// (10 s + writeTimeoutSlack, 5 s: cmd/seckill/serve.go): the latest an order can be answered.
const instanceWriteTimeout = 15 * time.Second

// scaleTimeouts is conf with every proxy_*_timeout divided by timeScale.
func scaleTimeouts(t *testing.T, conf string) string {
	re := regexp.MustCompile(`(?m)^([ \t]*proxy_(?:connect|send|read|next_upstream)_timeout[ \t]+)([0-9]+)s;`)
	require.True(t, re.MatchString(conf), "nginx.conf has no proxy timeout in seconds")
	return re.ReplaceAllStringFunc(conf, func(line string) string {
		m := re.FindStringSubmatch(line)
		secs, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		return fmt.Sprintf("%s%dms;", m[1], secs*1000/timeScale)
	})
}

// timedAnswer sends one request of method to path, tagged tag, and returns nginx's status and
// body and how long it took; a client that has no answer within within fails the test.
func timedAnswer(t *testing.T, base, method, path, tag string, within time.Duration) (status int, body string, took time.Duration) {
	req, err := http.NewRequest(method, base+path, nil)
	require.NoError(t, err)
	req.Header.Set(tagHeader, tag)
	req.Header.Set("X-User-ID", "42")
	start := time.Now()
	resp, err := (&http.Client{Timeout: within}).Do(req)
	require.NoError(t, err, "%s %s: no answer within %s", method, path, within)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), time.Since(start)
}

// TestHungInstancesAnswerInTime: with every instance hung (each takes the request and never
// answers), a client still has nginx's 504 gateway_timeout within the bound the config
// states, whatever the number of instances: a read is tried on one more instance after a
// timeout, not on every one (proxy_next_upstream_timeout), and waits the reads' read
// timeout, not an order's; an order reaches one instance only and waits an order's. Every
// timeout is divided by timeScale here.
func TestHungInstancesAnswerInTime(t *testing.T) {
	for _, tt := range []struct {
		name         string
		method, path string
		hung         int
		unreachable  bool // one more instance, whose connects time out
		bound        time.Duration
		attempts     int // hung instances the request reached; 0: not checked
	}{
		{"an order read, two instances", http.MethodGet, "/api/orders/1", 2, false, readAnswerBound, 2},
		{"an order read, three instances", http.MethodGet, "/api/orders/1", 3, false, readAnswerBound, 2},
		// The slowest order: a connect that times out, then both hung instances (9 s in,
		// the second still begins). Whether round-robin starts there varies, and so do the
		// attempts.
		{"an order read, two instances and one unreachable", http.MethodGet, "/api/orders/1", 2, true, readAnswerBound, 0},
		{"a voucher read, two instances", http.MethodGet, "/api/vouchers/1", 2, false, readAnswerBound, 2},
		{"an order, two instances", http.MethodPost, "/api/vouchers/1/orders", 2, false, orderAnswerBound, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &seen{tags: map[string][]string{}}
			var upstreams []string
			if tt.unreachable {
				upstreams = append(upstreams, unreachable(t))
			}
			for i := range tt.hung {
				addr, _, _ := holding(t, "hung-"+strconv.Itoa(i), s)
				upstreams = append(upstreams, addr)
			}
			base := startNginx(t, upstreams, func(conf string) string { return scaleTimeouts(t, conf) })

			bound := tt.bound / timeScale
			status, body, took := timedAnswer(t, base, tt.method, tt.path, tt.name, bound+2*time.Second)
			byTag, _ := s.count("", tt.name)
			t.Logf("%s %s: %d after %s (bound %s), %d attempts", tt.method, tt.path, status, took.Round(time.Millisecond), bound, byTag)
			assert.Equal(t, http.StatusGatewayTimeout, status)
			assertErrorCode(t, body, "gateway_timeout")
			assert.LessOrEqual(t, took, bound, "the 504 came after the bound")
			if tt.attempts > 0 {
				assert.Equal(t, tt.attempts, byTag, "instances the request reached: %v", s.tags)
			}
		})
	}
}

// slowAnswering is an upstream that answers every request 201 after d.
func slowAnswering(t *testing.T, name string, s *seen, d time.Duration) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.add(name, r.Header.Get(tagHeader))
		time.Sleep(d)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestLateAnswersWithinInstanceBoundsPass is the other side of TestHungInstancesAnswerInTime:
// nginx never gives up on an answer an instance may still give. A read is answered by its
// deadline (SECKILL_ORDER_TIMEOUT, order.DefaultTimeout: 503 unavailable at worst), an order
// by the instance's WriteTimeout; an answer that late still reaches the client, from the
// one instance it was sent to. Every timeout is divided by timeScale here, and the answers'
// delays too.
func TestLateAnswersWithinInstanceBoundsPass(t *testing.T) {
	for _, tt := range []struct {
		name         string
		method, path string
		delay        time.Duration
		bound        time.Duration
	}{
		{"an order read at the read deadline", http.MethodGet, "/api/orders/1", order.DefaultTimeout, readAnswerBound},
		{"a voucher read at the read deadline", http.MethodGet, "/api/vouchers/1", order.DefaultTimeout, readAnswerBound},
		{"an order at the write timeout", http.MethodPost, "/api/vouchers/1/orders", instanceWriteTimeout, orderAnswerBound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &seen{tags: map[string][]string{}}
			base := startNginx(t, []string{slowAnswering(t, "slow", s, tt.delay/timeScale)},
				func(conf string) string { return scaleTimeouts(t, conf) })
			status, body, took := timedAnswer(t, base, tt.method, tt.path, tt.name, tt.bound/timeScale+2*time.Second)
			t.Logf("%s %s: %d after %s", tt.method, tt.path, status, took.Round(time.Millisecond))
			assert.Equal(t, http.StatusCreated, status, "body %q", body)
			byTag, _ := s.count("", tt.name)
			assert.Equal(t, 1, byTag)
		})
	}
}
