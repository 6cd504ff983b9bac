package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRetry drives the waiting loop of MySQLLock.TryLockWait and RedLock.TryLockWait with
// scripted attempts: it retries while they fail, stops at the first success or final error,
// goes on after a retryable error (and returns it when wait runs out), and honours wait and
// ctx.
func TestRetry(t *testing.T) {
	errFinal, errAgain := errors.New("final"), errors.New("again")
	type answer struct {
		ok  bool
		err error
	}
	no, yes := answer{}, answer{ok: true}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		wait      time.Duration
		script    []answer // the attempts' answers in order; the last repeats
		wantOK    bool
		wantErr   error
		wantCalls int  // exactly, or at least when atLeast
		atLeast   bool // and wait must have run out
	}{
		{name: "first try", wait: time.Minute, script: []answer{yes}, wantOK: true, wantCalls: 1},
		{name: "after three failures", wait: time.Minute, script: []answer{no, no, no, yes}, wantOK: true, wantCalls: 4},
		{name: "wait 0 tries once", wait: 0, script: []answer{no, yes}, wantCalls: 1},
		{name: "a final error stops it", wait: time.Minute, script: []answer{no, {err: errFinal}, yes}, wantErr: errFinal, wantCalls: 2},
		{name: "a retryable error goes on", wait: time.Minute, script: []answer{{err: errAgain}, no, yes}, wantOK: true, wantCalls: 3},
		{name: "wait runs out", wait: 200 * time.Millisecond, script: []answer{no}, wantCalls: 2, atLeast: true},
		{name: "wait runs out on a retryable error", wait: 200 * time.Millisecond, script: []answer{no, {err: errAgain}}, wantErr: errAgain, wantCalls: 2, atLeast: true},
		{name: "ctx ends", ctx: canceled, wait: -1, script: []answer{no}, wantErr: context.Canceled, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			calls := 0
			start := time.Now()
			ok, err := retry(ctx, tt.wait, backoff(time.Millisecond, 4*time.Millisecond),
				func(err error) bool { return err == errAgain },
				func() (bool, error) {
					a := tt.script[min(calls, len(tt.script)-1)]
					calls++
					return a.ok, a.err
				})
			assert.Equal(t, tt.wantOK, ok, "ok")
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			if tt.atLeast {
				assert.GreaterOrEqual(t, calls, tt.wantCalls, "attempts")
				assert.GreaterOrEqual(t, time.Since(start), tt.wait, "returned before wait ran out")
			} else {
				assert.Equal(t, tt.wantCalls, calls, "attempts")
			}
		})
	}
}

// TestBackoff checks that the mean pause doubles from base up to the cap, each pause within
// [d/2, 3d/2) of its mean.
func TestBackoff(t *testing.T) {
	next := backoff(10*time.Millisecond, 40*time.Millisecond)
	for i, mean := range []time.Duration{10, 20, 40, 40, 40} {
		mean *= time.Millisecond
		got := next()
		assert.GreaterOrEqual(t, got, mean/2, "pause %d", i)
		assert.Less(t, got, mean*3/2, "pause %d", i)
	}
}
