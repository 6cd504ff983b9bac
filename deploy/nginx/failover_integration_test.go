//go:build integration

package nginx_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
