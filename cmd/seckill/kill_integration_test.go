//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/verdict"
)

// childArgs, set in the environment, makes the test binary run `seckill` with these
// arguments instead of the tests: a real process of the service that a test can kill -9.
const childArgs = "SECKILL_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgs); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, append([]string{"seckill"}, strings.Fields(args)...), os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "seckill:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The kill test's sale: stock for half the users, so it sells out after the kill.
const (
	killStock       = 150
	killUsersBefore = 40  // ordered on the victim alone: its writer reads some and holds them
	killUsersMiddle = 60  // ordered on both instances, round-robin
	killUsersAfter  = 200 // ordered on the survivor after the kill
	killWorkers     = 8
)

// TestAsyncInstanceKilled: in the asynchronous mode, one instance (a real process) is killed
// with SIGKILL in the middle of a sale while its writer holds delivered, unacknowledged orders.
// The other instance claims them (XAUTOCLAIM after SECKILL_STREAM_CLAIM_IDLE) and writes them:
// every 202 becomes exactly one row with its user, GET /api/orders/{id} answers created, the
// books balance and nothing is dead-lettered.
//
// The victim runs with a batch larger than the sale and a linger of a minute: once its writer
// has read an order it holds it a minute before topping up the batch, so "it holds orders" is
// a state the test waits for (its seckill_async_pending gauge while it is the only consumer),
// not a moment it hopes to hit.
func TestAsyncInstanceKilled(t *testing.T) {
	ctx := context.Background()
	rs := testenv.StartRedisServer(t)
	env := map[string]string{
		"SECKILL_MYSQL_DSN":         testenv.MySQLDSN(t),
		"SECKILL_REDIS_ADDR":        rs.Addr,
		"SECKILL_ADMIN_TOKEN":       "secret",
		"SECKILL_ORDER_MODE":        "async",
		"SECKILL_STREAM_CLAIM_IDLE": "1s",
	}
	require.NoError(t, run(ctx, []string{"seckill", "migrate"}, func(k string) string { return env[k] }, io.Discard, io.Discard))

	// A claim idle of ten minutes gives the victim's batches a deadline of five, long enough
	// for its linger of a minute (the longest a batch's deadline admits is a quarter of it);
	// the survivor claims after its own claim idle, a second.
	victim := startChild(t, withEnv(env, "SECKILL_STREAM_BATCH", "5000", "SECKILL_STREAM_LINGER", "1m", "SECKILL_STREAM_CLAIM_IDLE", "10m"))
	vid := mustCreateVoucher(t, victim.base, killStock)
	accepted := newAcceptedOrders()
	accepted.place(t, []string{victim.base}, vid, 1, killUsersBefore)
	require.Eventually(t, func() bool { return gauge(t, victim.base, async.MetricPending) > 0 }, 20*time.Second, 50*time.Millisecond,
		"the victim's writer never read an order")
	// Alone in the group, lingering a minute after its first read: what it holds now it holds
	// until it dies.
	held := gauge(t, victim.base, async.MetricPending)

	survivor := startServe(t, env)
	next := int64(killUsersBefore + 1)
	accepted.place(t, []string{victim.base, survivor.base}, vid, next, next+killUsersMiddle-1)
	victim.kill(t)
	next += killUsersMiddle
	accepted.place(t, []string{survivor.base}, vid, next, next+killUsersAfter-1)
	require.Len(t, accepted.orders, killStock, "stock for half the users: the sale sold out")

	rdb := rs.Client()
	statuses := async.NewStatuses(rdb, nil)
	require.Eventually(t, func() bool {
		n, err := statuses.Backlog(ctx, vid)
		return err == nil && n == 0
	}, 30*time.Second, 50*time.Millisecond, "the survivor never wrote the victim's orders")

	db, err := database.OpenMySQL(ctx, env["SECKILL_MYSQL_DSN"], database.Pool{MaxOpen: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	rows, err := verdict.Orders(ctx, db, []int64{vid})
	require.NoError(t, err)
	assert.Equal(t, accepted.orders, rows, "every 202 exactly one row, with its user")

	book, err := async.ReconcileSettled(ctx, rdb, async.NewStore(db), vid, 3)
	require.NoError(t, err)
	dead, err := statuses.DeadLettered(ctx, vid)
	require.NoError(t, err)
	var notCreated int
	for id, o := range accepted.orders {
		var got struct{ Status string }
		getJSONAs(t, survivor.base+"/api/orders/"+id, o.User, &got)
		if got.Status != "created" {
			notCreated++
		}
	}
	cs := verdict.EvaluateAsync(verdict.AsyncFacts{
		Vouchers: []verdict.AsyncVoucher{{Scenario: "kill", ID: vid, Initial: killStock, RedisStock: book.RedisStock,
			Pending: book.Pending, Orders: book.Orders, DeadLettered: dead}},
		DeadLetteredMetric: gauge(t, survivor.base, async.MetricDeadLettered),
		Polled:             len(accepted.orders), NotCreated: notCreated,
		ExpectClaimed: true, Held: held, Claimed: gauge(t, survivor.base, async.MetricClaimed),
	})
	assert.Empty(t, verdict.Failed(cs, verdict.Integrity), "checks: %+v", cs)
	t.Logf("the victim held %v orders when killed; the survivor claimed %v; %d orders, books %+v",
		held, gauge(t, survivor.base, async.MetricClaimed), len(rows), book)
}

// child is `seckill serve` in a process of its own: the test binary run again (TestMain).
type child struct {
	base   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed once the process is gone and reaped
}

func startChild(t *testing.T, env map[string]string) *child {
	t.Helper()
	addr := freeAddr(t)
	c := &child{base: "http://" + addr, log: filepath.Join(t.TempDir(), "seckill.log"), exited: make(chan struct{})}
	logf, err := os.Create(c.log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = logf.Close() })
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), childArgs+"=serve -http-addr "+addr)
	for k, v := range env {
		c.cmd.Env = append(c.cmd.Env, k+"="+v)
	}
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	require.NoError(t, c.cmd.Start())
	go func() {
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			b, _ := os.ReadFile(c.log)
			t.Logf("child log:\n%s", b)
		}
	})
	waitReady(t, c.base, 30*time.Second, func() (string, bool) {
		select {
		case <-c.exited:
			b, _ := os.ReadFile(c.log)
			return string(b), true
		default:
			return "", false
		}
	})
	return c
}

// kill sends SIGKILL and waits until the process is gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed child did not exit within 10 s")
	}
}

// acceptedOrders are the orders answered 202: order id → owner.
type acceptedOrders struct {
	mu     sync.Mutex
	orders map[string]verdict.Owner
}

func newAcceptedOrders() *acceptedOrders { return &acceptedOrders{orders: map[string]verdict.Owner{}} }

// place orders voucherID once for each user in [from, to], killWorkers at a time, spreading
// the users over bases; every answer must be 202 or sold_out.
func (a *acceptedOrders) place(t *testing.T, bases []string, voucherID, from, to int64) {
	t.Helper()
	users := make(chan int64)
	var wg sync.WaitGroup
	for range killWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range users {
				code, id := postAsyncOrder(t, bases[int(u)%len(bases)], voucherID, u)
				switch code {
				case "pending":
					a.mu.Lock()
					a.orders[id] = verdict.Owner{User: u, Voucher: voucherID}
					a.mu.Unlock()
				case "sold_out":
				default:
					t.Errorf("user %d: answered %s", u, code)
				}
			}
		}()
	}
	for u := from; u <= to; u++ {
		users <- u
	}
	close(users)
	wg.Wait()
}

// postAsyncOrder places one order and returns "pending" and the order id for a 202, or the
// error code.
func postAsyncOrder(t *testing.T, base string, vid, user int64) (code, orderID string) {
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/vouchers/%d/orders", base, vid), nil)
	req.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
	resp, err := http.DefaultClient.Do(req)
	if !assert.NoError(t, err) {
		return "transport", ""
	}
	defer resp.Body.Close()
	var body struct {
		OrderID string `json:"orderId"`
		Status  string `json:"status"`
		Error   struct{ Code string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "undecodable " + resp.Status, ""
	}
	if resp.StatusCode == http.StatusAccepted {
		return body.Status, body.OrderID
	}
	return body.Error.Code, ""
}

// getJSONAs GETs url as user into v; the answer must be 200.
func getJSONAs(t *testing.T, url string, user int64, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// gauge reads the sum of metric name's samples (a gauge or a counter) from base's /metrics.
func gauge(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	var sum float64
	for _, m := range families[name].GetMetric() {
		sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return sum
}
