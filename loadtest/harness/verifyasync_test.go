package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/testenv"
)

// TestDrain: drain returns once the run's streams are empty, and fails at its bound while an
// order is still in one.
func TestDrain(t *testing.T) {
	ctx := context.Background()
	embedded := testenv.EmbeddedRedis(t)
	rdb := embedded.Client
	a := asyncVerify{rdb: rdb, statuses: async.NewStatuses(rdb, nil), drainTimeout: 300 * time.Millisecond}
	vouchers := []k6Voucher{{Scenario: "sellout", ID: 7, Stock: 10}}

	var out bytes.Buffer
	require.NoError(t, a.drain(ctx, &out, vouchers), "no stream at all: nothing to drain")
	assert.Contains(t, out.String(), "every accepted order written and acknowledged")

	// The stream's key as docs/async.md names it; Backlog counting the entry proves it is the one.
	const stream = "seckill:{voucher:7}:stream"
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []string{"order", "1"}}).Err())
	n, err := a.statuses.Backlog(ctx, 7)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the test's stream is the one Backlog reads")
	err = a.drain(ctx, &out, vouchers)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1 orders still in the streams")

	// The bound strikes inside a read, after a complete one: the error still says how many
	// orders the writers left, not "context deadline exceeded" as if Redis had failed.
	stalled := redis.NewClient(&redis.Options{Addr: embedded.Mini.Addr()})
	defer stalled.Close()
	stalled.AddHook(stallAfter{n: new(atomic.Int64), after: 1})
	s := asyncVerify{rdb: stalled, statuses: async.NewStatuses(stalled, nil), drainTimeout: 300 * time.Millisecond}
	err = s.drain(ctx, &out, vouchers)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not drain within 300ms: 1 orders still in the streams")

	a.drainTimeout = 5 * time.Second
	go func() {
		time.Sleep(100 * time.Millisecond)
		rdb.Del(ctx, stream) // as the writer's acknowledgement deletes a written entry
	}()
	require.NoError(t, a.drain(ctx, &out, vouchers), "the writer deleted the entry: drained")
}

// stallAfter lets the first `after` XLENs through and holds every later one until its
// context ends, as a read in flight when the drain's bound strikes.
type stallAfter struct {
	n     *atomic.Int64
	after int64
}

func (stallAfter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h stallAfter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "xlen" && h.n.Add(1) > h.after {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

func (stallAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestPollOrders: an order counts as created only when GET /api/orders/{id}, asked as its
// user, answers 200 created with its id, user and voucher.
func TestPollOrders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/api/orders/")
		user := r.Header.Get("X-User-ID")
		switch id {
		case "1":
			fmt.Fprintf(w, `{"orderId":"1","voucherId":5,"userId":%q,"status":"created"}`, user)
		case "2":
			fmt.Fprintf(w, `{"orderId":"2","voucherId":5,"userId":%q,"status":"pending"}`, user)
		case "3":
			fmt.Fprint(w, `{"orderId":"3","voucherId":5,"userId":"999","status":"created"}`)
		case "4":
			fmt.Fprintf(w, `{"orderId":"4","voucherId":6,"userId":%q,"status":"created"}`, user)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	orders := []k6Order{
		{ID: "1", User: 10, Voucher: 5}, // created
		{ID: "2", User: 11, Voucher: 5}, // still pending
		{ID: "3", User: 12, Voucher: 5}, // someone else's
		{ID: "4", User: 13, Voucher: 5}, // another voucher
		{ID: "5", User: 14, Voucher: 5}, // unknown
	}
	assert.Equal(t, 4, pollOrders(context.Background(), srv.URL, orders))
	assert.Equal(t, 0, pollOrders(context.Background(), srv.URL, orders[:1]))
}
