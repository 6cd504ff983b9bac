//go:build integration

package nginx_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/loopback"
)

// tagHeader numbers the test's requests, so that each upstream can say which ones it saw.
const tagHeader = "X-Test-Request"

// seen records, per upstream, the tags of the requests that reached it.
type seen struct {
	mu   sync.Mutex
	tags map[string][]string // upstream name → tags
}

func (s *seen) add(upstream, tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tags[upstream] = append(s.tags[upstream], tag)
}

// count reports how many upstreams saw tag, and how many requests upstream saw.
func (s *seen) count(upstream, tag string) (byTag, byUpstream int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tags := range s.tags {
		for _, t := range tags {
			if t == tag {
				byTag++
			}
		}
	}
	return byTag, len(s.tags[upstream])
}

// answering is an upstream that answers every request 201.
func answering(t *testing.T, name string, s *seen) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.add(name, r.Header.Get(tagHeader))
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// dropping is an upstream that reads each request whole and then hangs up without an answer:
// an instance that dies, or is killed, with the order in its hands.
func dropping(t *testing.T, name string, s *seen) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				s.add(name, req.Header.Get(tagHeader))
			}()
		}
	}()
	return ln.Addr().String()
}

// refusing is an address where nothing listens: an instance that is down.
func refusing(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func nginxBin(t *testing.T) string {
	if bin, err := exec.LookPath("nginx"); err == nil {
		return bin
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx" // Debian's, outside a non-root PATH
	}
	t.Fatal("this test runs nginx with deploy/nginx's config, and there is none: install it " +
		"(Debian/Ubuntu: apt-get install -y --no-install-recommends nginx)")
	return ""
}

// serverParams are the parameters of the first server line of upstream.conf (" max_fails=0"):
// the test's upstreams get the same, as scripts/cluster.sh's do.
func serverParams(t *testing.T) string {
	b, err := os.ReadFile("upstream.conf")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^[ \t]*server[ \t]+[^\s;]+([^;]*);`).FindSubmatch(b)
	require.NotNil(t, m, "upstream.conf has no server line")
	return string(m[1])
}

// startNginx runs nginx with this directory's nginx.conf, edited by edit, and its
// order-gate.conf, in front of upstreams, in a prefix of its own on a loopback port, and
// returns its base URL.
func startNginx(t *testing.T, upstreams []string, edit func(conf string) string) string {
	t.Helper()
	gate, err := os.ReadFile("order-gate.conf")
	require.NoError(t, err)
	return startNginxGate(t, upstreams, string(gate), edit)
}

// startNginxGate is startNginx with gate as order-gate.conf.
func startNginxGate(t *testing.T, upstreams []string, gate string, edit func(conf string) string) string {
	t.Helper()
	base, _ := startNginxPrefix(t, upstreams, gate, edit)
	return base
}

// startNginxPrefix is startNginxGate that also returns nginx's prefix directory, where it
// keeps its temporary files.
func startNginxPrefix(t *testing.T, upstreams []string, gate string, edit func(conf string) string) (base, prefix string) {
	t.Helper()
	bin := nginxBin(t)
	conf, err := os.ReadFile("nginx.conf")
	require.NoError(t, err)
	var servers strings.Builder
	for _, u := range upstreams {
		fmt.Fprintf(&servers, "server %s%s;\n", u, serverParams(t))
	}

	listen := regexp.MustCompile(`(?m)^([ \t]*)listen 8080([ ;])`)
	require.True(t, listen.Match(conf), "nginx.conf has no 'listen 8080' line")
	// On a port loopback reserves, tried again elsewhere only when nginx found it taken.
	err = loopback.Start(func(addr string) error {
		dir := t.TempDir()
		// Started by root, nginx runs its workers as nobody, and they write a body larger
		// than client_body_buffer_size to client_body_temp under the prefix: the prefix and
		// its parent (t.TempDir makes both 0700) must let them through, as run/cluster does.
		require.NoError(t, os.Chmod(dir, 0o755))
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
		require.NoError(t, os.Mkdir(filepath.Join(dir, "conf"), 0o755))
		require.NoError(t, os.Mkdir(filepath.Join(dir, "logs"), 0o755))
		c := listen.ReplaceAllString(string(conf), "${1}listen "+addr+"${2}")
		require.NoError(t, os.WriteFile(filepath.Join(dir, "conf", "nginx.conf"), []byte(edit(c)), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "conf", "upstream.conf"), []byte(servers.String()), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "conf", "order-gate.conf"), []byte(gate), 0o644))

		var out bytes.Buffer
		cmd := exec.Command(bin, "-p", dir+"/", "-c", "conf/nginx.conf", "-e", "logs/error.log",
			"-g", "daemon off; pid "+filepath.Join(dir, "nginx.pid")+";")
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if waitHealthy("http://"+addr, exited) {
			t.Cleanup(func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-exited
				if t.Failed() {
					log, _ := os.ReadFile(filepath.Join(dir, "logs", "error.log"))
					t.Logf("nginx error log:\n%s", log)
				}
			})
			base, prefix = "http://"+addr, dir
			return nil
		}
		_ = cmd.Process.Kill()
		<-exited
		log, _ := os.ReadFile(filepath.Join(dir, "logs", "error.log"))
		err := fmt.Errorf("nginx on %s did not start: %s%s", addr, out.String(), log)
		if bytes.Contains(append(out.Bytes(), log...), []byte("Address already in use")) {
			return fmt.Errorf("%w: %w", loopback.ErrInUse, err)
		}
		return err
	})
	require.NoError(t, err)
	return base, prefix
}

// waitHealthy polls nginx's own health route until it answers, nginx exits, or 10 s pass.
func waitHealthy(base string, exited chan error) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return false
		default:
		}
		if resp, err := http.Get(base + "/nginx-health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// post sends one order-like POST, without a body as an order has none, tagged tag.
func post(t *testing.T, base, tag string) int {
	status, _, _ := postAnswer(t, base, tag)
	return status
}

// postAnswer is post with the answer's body and Retry-After header.
func postAnswer(t *testing.T, base, tag string) (status int, body, retryAfter string) {
	return orderAnswer(t, base, http.MethodPost, tag)
}

// orderAnswer sends a request of method to the order route, as post does.
func orderAnswer(t *testing.T, base, method, tag string) (status int, body, retryAfter string) {
	req, err := http.NewRequest(method, base+"/api/vouchers/1/orders", nil)
	require.NoError(t, err)
	req.Header.Set(tagHeader, tag)
	req.Header.Set("X-User-ID", "42")
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
}

func unchanged(conf string) string { return conf }

// assertErrorCode checks that body is the instances' error body, {"error": {"code": code,
// "message": …}}, as nginx must answer when it answers for them.
func assertErrorCode(t *testing.T, body, code string) {
	t.Helper()
	var v struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &v), "body %q", body)
	assert.Equal(t, code, v.Error.Code)
	assert.NotEmpty(t, v.Error.Message)
}

// TestPOSTNeverRetried: an instance that takes a POST and hangs up has nginx answer 502; the
// POST never reaches the other instance, which might place the order a second time. And the
// failing instance stays in rotation (max_fails=0): failures under overload cannot empty
// the upstream.
func TestPOSTNeverRetried(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	base := startNginx(t, []string{dropping(t, "dropping", s), answering(t, "answering", s)}, unchanged)

	const n = 6
	for i := range n {
		tag := strconv.Itoa(i)
		code := post(t, base, tag)
		byTag, _ := s.count("", tag)
		assert.Equal(t, 1, byTag, "POST %s reached %d upstreams: %v", tag, byTag, s.tags)
		assert.Contains(t, []int{http.StatusCreated, http.StatusBadGateway}, code, "POST %s", tag)
	}
	_, dropped := s.count("dropping", "")
	_, answered := s.count("answering", "")
	assert.Equal(t, n, dropped+answered)
	assert.GreaterOrEqual(t, dropped, 2, "after its first failure the dropping instance got no more requests: taken out of rotation")
	assert.GreaterOrEqual(t, answered, 2)
}

// TestPOSTRetryWouldBeSeen is the control: with "non_idempotent" added to
// proxy_next_upstream, nginx does pass a sent POST on, and the harness above sees it. Without
// this, TestPOSTNeverRetried could pass because the dropping upstream never looked like a
// failure to nginx.
func TestPOSTRetryWouldBeSeen(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	base := startNginx(t, []string{dropping(t, "dropping", s), answering(t, "answering", s)}, func(conf string) string {
		edited := strings.Replace(conf, "proxy_next_upstream error timeout;", "proxy_next_upstream error timeout non_idempotent;", 1)
		require.NotEqual(t, conf, edited, "nginx.conf has no 'proxy_next_upstream error timeout;'")
		return edited
	})
	retried := 0
	for i := range 4 {
		tag := strconv.Itoa(i)
		code := post(t, base, tag)
		if byTag, _ := s.count("", tag); byTag == 2 {
			retried++
			assert.Equal(t, http.StatusCreated, code, "the retry was answered")
		}
	}
	assert.Positive(t, retried, "no POST was retried: the harness cannot see a retry (%v)", s.tags)
}

// TestInstanceDown: an instance that refuses connections costs the client nothing: nothing
// was sent, so nginx passes every request on to the other instance.
func TestInstanceDown(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	base := startNginx(t, []string{refusing(t), answering(t, "answering", s)}, unchanged)
	for i := range 4 {
		tag := strconv.Itoa(i)
		assert.Equal(t, http.StatusCreated, post(t, base, tag), "POST %s", tag)
		byTag, _ := s.count("", tag)
		assert.Equal(t, 1, byTag, "POST %s", tag)
	}
}

// holding is an upstream that holds every request until release is closed, then answers 201;
// arrived receives one value per request as it arrives.
func holding(t *testing.T, name string, s *seen) (addr string, arrived <-chan struct{}, release func()) {
	in := make(chan struct{}, 64)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.add(name, r.Header.Get(tagHeader))
		in <- struct{}{}
		<-done
		w.WriteHeader(http.StatusCreated)
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(done) }) }
	t.Cleanup(func() { release(); srv.Close() })
	return srv.Listener.Addr().String(), in, release
}

// TestOrderGateSheds: with the gate's orders in progress, nginx answers the next order POST
// itself, at once, with the instances' 503 overloaded body and Retry-After, and it reaches no
// instance; other requests pass; once the orders end, orders pass again.
func TestOrderGateSheds(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	addr, arrived, release := holding(t, "holding", s)
	base := startNginxGate(t, []string{addr}, "limit_conn orders 3;\n", unchanged)

	results := make(chan int, 3)
	for i := range 3 {
		go func() { results <- post(t, base, "held-"+strconv.Itoa(i)) }()
	}
	for range 3 {
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatalf("the gate's 3 orders did not all reach the upstream: %v", s.tags)
		}
	}

	start := time.Now()
	status, body, retryAfter := postAnswer(t, base, "shed")
	assert.Less(t, time.Since(start), 2*time.Second, "the shed answer waited")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "1", retryAfter)
	assertErrorCode(t, body, "overloaded")
	byTag, _ := s.count("", "shed")
	assert.Zero(t, byTag, "the shed order reached the upstream")

	// Only order POSTs count: a GET passes the full gate (and waits at the upstream).
	getDone := make(chan int, 1)
	go func() {
		resp, err := http.Get(base + "/api/vouchers/1/orders")
		if err != nil {
			getDone <- 0
			return
		}
		resp.Body.Close()
		getDone <- resp.StatusCode
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("a GET was stopped by the order gate")
	}

	release()
	for range 3 {
		assert.Equal(t, http.StatusCreated, <-results)
	}
	assert.Equal(t, http.StatusCreated, <-getDone)
	assert.Equal(t, http.StatusCreated, post(t, base, "after"), "the gate did not reopen")
}

// TestInstance503PassesTheGate: error_page turns only nginx's own 503 into overloaded; an
// instance's 503 (unavailable: a store failed) reaches the client as the instance wrote it.
func TestInstance503PassesTheGate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"store down"}}`)
	}))
	t.Cleanup(srv.Close)
	base := startNginx(t, []string{srv.Listener.Addr().String()}, unchanged)
	status, body, _ := postAnswer(t, base, "x")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, `"unavailable"`)
}

// TestBodyTooLargeAnswersLikeAnInstance: nginx refuses a body over client_max_body_size
// itself, before any instance sees it, and answers as an instance would (413
// payload_too_large, JSON): the API's contract is what nginx exposes. A body of exactly the
// instances' limit, 64 KiB, still reaches them.
func TestBodyTooLargeAnswersLikeAnInstance(t *testing.T) {
	s := &seen{tags: map[string][]string{}}
	base := startNginx(t, []string{answering(t, "answering", s)}, unchanged)
	send := func(tag string, size int) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodPost, base+"/api/vouchers", strings.NewReader(strings.Repeat(" ", size)))
		require.NoError(t, err)
		req.Header.Set(tagHeader, tag)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}

	resp, body := send("large", 64<<10+1)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	assertErrorCode(t, body, "payload_too_large")
	byTag, _ := s.count("", "large")
	assert.Zero(t, byTag, "the body over the limit reached an instance")

	resp, _ = send("limit", 64<<10)
	assert.Equal(t, http.StatusCreated, resp.StatusCode, "a body of the instances' own limit stopped at nginx")
}
