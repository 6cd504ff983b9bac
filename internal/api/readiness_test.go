package api_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
)

// flipCheck is a Check whose answer the test sets, counting its calls.
type flipCheck struct {
	err   atomic.Pointer[error]
	calls atomic.Int64
}

func (f *flipCheck) set(err error) { f.err.Store(&err) }

func (f *flipCheck) check(context.Context) error {
	f.calls.Add(1)
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// readyz asks h for /readyz and returns the status and the decoded body.
func readyz(t *testing.T, h http.Handler) (int, map[string]any) {
	t.Helper()
	w := serve(t, h, request{"GET", "/readyz", nil, ""})
	return w.Code, decodeJSON(t, w)
}

// TestReadinessAnswersTheLastResult: /readyz answers what the last round of checks found,
// and runs no check itself, however often it is asked.
func TestReadinessAnswersTheLastResult(t *testing.T) {
	redis := &flipCheck{}
	r := api.NewReadiness(discardLog(), map[string]api.Check{"redis": redis.check})
	h := api.NewServer(discardLog(), api.Config{Ready: r}, &fakeVouchers{}, &fakeOrders{})

	code, body := readyz(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code, "before the first round: %v", body)
	assert.Equal(t, false, body["ready"])
	assert.Equal(t, "not checked yet", body["reason"])

	r.Refresh(context.Background())
	code, body = readyz(t, h)
	assert.Equal(t, http.StatusOK, code, "%v", body)
	assert.Equal(t, map[string]any{"redis": "ok"}, body["checks"])

	errDown := errors.New("connection refused")
	redis.set(errDown)
	for range 3 {
		code, body = readyz(t, h)
		assert.Equal(t, http.StatusOK, code, "the last round found redis up: %v", body)
	}
	assert.Equal(t, int64(1), redis.calls.Load(), "/readyz ran a check")

	r.Refresh(context.Background())
	code, body = readyz(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code, "%v", body)
	assert.Equal(t, false, body["ready"])
	assert.Equal(t, map[string]any{"redis": errDown.Error()}, body["checks"])

	redis.set(nil)
	r.Refresh(context.Background())
	code, body = readyz(t, h)
	assert.Equal(t, http.StatusOK, code, "recovered: %v", body)
	assert.Equal(t, true, body["ready"])
}

// TestReadinessAge: /readyz says when its result was taken and how old it is, and stops
// vouching for a result once the checks have stopped running.
func TestReadinessAge(t *testing.T) {
	t0 := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := t0
	r := api.NewReadiness(discardLog(), map[string]api.Check{"database": func(context.Context) error { return nil }})
	r.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	h := api.NewServer(discardLog(), api.Config{Ready: r}, &fakeVouchers{}, &fakeOrders{})
	r.Refresh(context.Background())

	advance(1500 * time.Millisecond)
	code, body := readyz(t, h)
	assert.Equal(t, http.StatusOK, code, "%v", body)
	assert.Equal(t, "2026-11-11T00:00:00Z", body["checkedAt"])
	assert.InDelta(t, 1.5, body["ageSeconds"], 1e-9)

	advance(api.ReadyStaleAfter - 1500*time.Millisecond)
	code, body = readyz(t, h)
	assert.Equal(t, http.StatusOK, code, "at the limit: %v", body)

	advance(time.Millisecond)
	code, body = readyz(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code, "stale: %v", body)
	assert.Equal(t, false, body["ready"])
	assert.Contains(t, body["reason"], "stale")
	assert.Equal(t, map[string]any{"database": "ok"}, body["checks"], "the stale result is still shown")

	r.Refresh(context.Background())
	code, body = readyz(t, h)
	assert.Equal(t, http.StatusOK, code, "fresh again: %v", body)
	assert.InDelta(t, 0, body["ageSeconds"], 1e-9)
}

// TestReadinessNotHeldByAHangingCheck: while a round waits on a store that does not answer,
// /readyz answers at once from the previous round, and the other checks are not held up.
func TestReadinessNotHeldByAHangingCheck(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var hang atomic.Bool
	redis := func(ctx context.Context) error {
		if !hang.Load() {
			return nil
		}
		close(entered)
		select {
		case <-release:
			return errors.New("too slow")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	dbCalls := make(chan struct{}, 2)
	db := func(context.Context) error { dbCalls <- struct{}{}; return nil }
	r := api.NewReadiness(discardLog(), map[string]api.Check{"redis": redis, "database": db})
	h := api.NewServer(discardLog(), api.Config{Ready: r}, &fakeVouchers{}, &fakeOrders{})
	r.Refresh(context.Background())
	<-dbCalls

	hang.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Refresh(context.Background())
	}()
	<-entered
	code, body := readyz(t, h)
	assert.Equal(t, http.StatusOK, code, "the previous round, at once: %v", body)
	<-dbCalls // the database is checked while the redis check hangs, not after it
	close(release)
	<-done

	code, body = readyz(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code, "%v", body)
	assert.Equal(t, map[string]any{"redis": "too slow", "database": "ok"}, body["checks"])
}

// TestReadinessRunsOnTicks: Run refreshes on every tick, until its context ends.
func TestReadinessRunsOnTicks(t *testing.T) {
	redis := &flipCheck{}
	r := api.NewReadiness(discardLog(), map[string]api.Check{"redis": redis.check})
	h := api.NewServer(discardLog(), api.Config{Ready: r}, &fakeVouchers{}, &fakeOrders{})
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.Run(ctx, tick)
	}()
	// tick is unbuffered: a send returns once Run has taken it, and the next send once that
	// round has ended.
	roundDone := func() { tick <- time.Time{}; tick <- time.Time{} }

	roundDone()
	code, _ := readyz(t, h)
	assert.Equal(t, http.StatusOK, code)

	redis.set(errors.New("down"))
	roundDone()
	code, _ = readyz(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code)

	cancel()
	<-stopped
}

// TestReadinessStartClose: Start has a result before it returns, and Close stops the rounds.
func TestReadinessStartClose(t *testing.T) {
	redis := &flipCheck{}
	r := api.NewReadiness(discardLog(), map[string]api.Check{"redis": redis.check})
	h := api.NewServer(discardLog(), api.Config{Ready: r}, &fakeVouchers{}, &fakeOrders{})
	r.Start(time.Hour)
	code, body := readyz(t, h)
	assert.Equal(t, http.StatusOK, code, "%v", body)
	require.NoError(t, r.Close())
	assert.Equal(t, int64(1), redis.calls.Load())
}
