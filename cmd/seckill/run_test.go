package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// server is one `seckill serve` started through run.
type server struct {
	base string
	stop context.CancelFunc
	done chan error
	log  *syncBuffer
}

func startServe(t *testing.T, env map[string]string) *server {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{base: "http://" + addr, stop: cancel, done: make(chan error, 1), log: &syncBuffer{}}
	getenv := func(k string) string { return env[k] }
	go func() {
		s.done <- run(ctx, []string{"seckill", "serve", "-http-addr", addr}, getenv, io.Discard, s.log)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	require.Eventually(t, func() bool {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve exited early: %v\n%s", err, s.log)
		default:
		}
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 10*time.Millisecond, "serve never became ready")
	return s
}

// stores returns the environment of instances that share one pair of stores: embedded
// (a shared miniredis and SQLite directory) or, in integration builds, the real ones.
func storeEnvs(t *testing.T) map[string]map[string]string {
	t.Helper()
	envs := map[string]map[string]string{}
	mini := testenv.EmbeddedRedis(t)
	envs["embedded"] = map[string]string{"SECKILL_REDIS_ADDR": mini.Mini.Addr(), "SECKILL_DATA_DIR": t.TempDir()}
	if testenv.Integration {
		real := map[string]string{
			"SECKILL_MYSQL_DSN":  testenv.MySQLDSN(t),
			"SECKILL_REDIS_ADDR": testenv.Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379"),
		}
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), []string{"seckill", "migrate"}, func(k string) string { return real[k] }, &out, io.Discard))
		require.Regexp(t, `applied [1-9][0-9]* migration`, out.String(), "migrate on a fresh database")
		envs["real"] = real
	}
	return envs
}

func withEnv(env map[string]string, kv ...string) map[string]string {
	out := map[string]string{"SECKILL_ADMIN_TOKEN": "secret"}
	for k, v := range env {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func mustCreateVoucher(t *testing.T, base string, stock int) int64 {
	t.Helper()
	now := time.Now().UTC()
	id, err := createVoucher(context.Background(), http.DefaultClient, base, "secret", voucherRequest{
		Title: "e2e", Stock: stock, BeginTime: now.Add(-time.Minute), EndTime: now.Add(time.Hour),
	})
	require.NoError(t, err)
	return id
}

func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("series %s not in /metrics", series)
	return 0
}

// TestTwoInstancesOneOrderPerUser is the service's promise end to end: two instances over
// shared stores, each user storming both at once, and the books balance.
func TestTwoInstancesOneOrderPerUser(t *testing.T) {
	for name, env := range storeEnvs(t) {
		t.Run(name, func(t *testing.T) {
			env := withEnv(env, "SECKILL_LOCK", "redis", "SECKILL_ORDER_DELAY", "2ms")
			a := startServe(t, env)
			b := startServe(t, env)
			const stock, users, perUser = 25, 60, 6
			vid := mustCreateVoucher(t, a.base, stock)

			var mu sync.Mutex
			codes := map[string]int{}
			created := map[int64]string{}
			var wg sync.WaitGroup
			for u := int64(1); u <= users; u++ {
				start := make(chan struct{})
				for i := range perUser {
					base := []string{a.base, b.base}[i%2]
					wg.Go(func() {
						<-start
						code, orderID := postOrder(t, base, vid, u)
						mu.Lock()
						defer mu.Unlock()
						codes[code]++
						if code == "created" {
							assert.Empty(t, created[u], "user %d got two orders", u)
							created[u] = orderID
						}
					})
				}
				close(start)
			}
			wg.Wait()
			if t.Failed() || codes["unavailable"] > 0 {
				t.Logf("instance a log:\n%s\ninstance b log:\n%s", a.log, b.log)
			}

			assert.Equal(t, users*perUser, codes["created"]+codes["order_in_progress"]+codes["already_ordered"]+codes["sold_out"],
				"every answer is one of the expected ones: %v", codes)
			assert.Equal(t, stock, codes["created"], "stock sold exactly: %v", codes)
			var left struct{ Stock int }
			getJSON(t, a.base+"/api/vouchers/"+strconv.FormatInt(vid, 10), &left)
			assert.Zero(t, left.Stock)
			for _, s := range []*server{a, b} {
				assert.Zero(t, metric(t, s.base, `seckill_orders_total{result="duplicate_blocked_by_db"}`), "duplicates reached the DB")
				assert.Zero(t, metric(t, s.base, "seckill_lock_lost_total"))
			}
			total := metric(t, a.base, `seckill_orders_total{result="created"}`) + metric(t, b.base, `seckill_orders_total{result="created"}`)
			assert.Equal(t, float64(stock), total)
		})
	}
}

// TestGracefulShutdownFinishesInFlightOrder: SIGTERM (the context) while an order is inside
// its critical section; the order completes, its lock is released, run returns nil.
func TestGracefulShutdownFinishesInFlightOrder(t *testing.T) {
	mini := testenv.EmbeddedRedis(t)
	env := withEnv(map[string]string{"SECKILL_REDIS_ADDR": mini.Mini.Addr(), "SECKILL_DATA_DIR": t.TempDir()},
		"SECKILL_ORDER_DELAY", "300ms")
	s := startServe(t, env)
	vid := mustCreateVoucher(t, s.base, 1)
	res := make(chan string, 1)
	go func() {
		code, _ := postOrder(t, s.base, vid, 5)
		res <- code
	}()
	require.Eventually(t, func() bool { return mini.Mini.Exists("lock:order:5") }, 5*time.Second, time.Millisecond,
		"the order never took its lock")
	s.stop()
	assert.Equal(t, "created", <-res)
	assert.NoError(t, <-s.done)
	s.done <- nil // for the cleanup
	assert.False(t, mini.Mini.Exists("lock:order:5"), "lock released before exit")
}

func postOrder(t *testing.T, base string, vid, user int64) (code, orderID string) {
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/vouchers/%d/orders", base, vid), nil)
	req.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
	resp, err := http.DefaultClient.Do(req)
	if !assert.NoError(t, err) {
		return "transport", ""
	}
	defer resp.Body.Close()
	var body struct {
		OrderID string `json:"orderId"`
		Error   struct{ Code string }
	}
	assert.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	if resp.StatusCode == http.StatusCreated {
		_, err := strconv.ParseInt(body.OrderID, 10, 64)
		assert.NoError(t, err, "orderId %q is a decimal string", body.OrderID)
		return "created", body.OrderID
	}
	assert.Less(t, resp.StatusCode, 500, "no 5xx under a healthy storm: %s", body.Error.Code)
	return body.Error.Code, ""
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

func TestDemoShowsEachGuard(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"seckill", "demo", "-users", "60", "-per-user", "8", "-stock", "200", "-delay", "20ms"},
		func(string) string { return "" }, &out, io.Discard)
	require.NoError(t, err, out.String())
	for _, want := range []string{"none         FAILS AS EXPECTED", "local        FAILS AS EXPECTED", "redis        PASS",
		"reentrant    PASS", "fair         PASS", "localremote  PASS"} {
		assert.Contains(t, out.String(), want)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"seckill", "nope"}, nil, "unknown command"},
		{[]string{"seckill", "serve"}, map[string]string{"SECKILL_LOCK": "zk"}, "SECKILL_LOCK"},
		{[]string{"seckill", "serve", "-lock-ttl", "0s"}, nil, "SECKILL_LOCK_TTL"},
		{[]string{"seckill", "serve"}, map[string]string{"SECKILL_ORDER_DELAY": "soon"}, "SECKILL_ORDER_DELAY"},
		{[]string{"seckill", "migrate"}, nil, "SECKILL_MYSQL_DSN"},
		{[]string{"seckill", "demo", "-guards", "redis,zk"}, nil, "unknown guard"},
	}
	for _, tt := range tests {
		err := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
		require.Error(t, err, "%v %v", tt.args, tt.env)
		assert.Contains(t, err.Error(), tt.want)
	}
}
