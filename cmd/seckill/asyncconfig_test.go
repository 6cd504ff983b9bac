package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAsyncStartIgnoresLockSettings: the asynchronous mode takes no per-user lock (one Redis
// script admits each order), so the rules that hold the lock's settings together (the order
// deadline inside the lease or RedLock's validity, whole-millisecond leases, SECKILL_FENCING=on
// only with a lock that issues tokens, the simulated work inside the deadline, RedLock's nodes
// listed once, lock servers that answer) refuse no async start: each row starts `seckill serve`
// in async mode and it becomes ready, while the same settings in the synchronous mode are
// still refused as before. Before, every async start here was refused but the last three.
func TestAsyncStartIgnoresLockSettings(t *testing.T) {
	dead := closedAddr(t)
	tests := []struct {
		name string
		env  map[string]string
		sync string // the synchronous mode's refusal; "" when it comes only at start (TestServeFailsWithoutItsLockBackend)
	}{
		{"order deadline past the lease", map[string]string{"SECKILL_LOCK_TTL": "200ms", "SECKILL_ORDER_TIMEOUT": "2s", "SECKILL_FENCING": "off"},
			"must be shorter than the lock TTL 200ms"},
		{"order deadline equal to the lease", map[string]string{"SECKILL_LOCK_TTL": "1s", "SECKILL_ORDER_TIMEOUT": "1s"},
			"must be shorter than the lock TTL 1s"},
		{"lease of 10.5ms", map[string]string{"SECKILL_LOCK_TTL": "10.5ms", "SECKILL_ORDER_TIMEOUT": "5ms"}, "whole milliseconds"},
		{"redlock lease within its drift allowance", map[string]string{"SECKILL_LOCK": "redlock", "SECKILL_LOCK_TTL": "2ms"},
			"nothing after its drift allowance"},
		{"redlock order deadline past the lease's validity", map[string]string{"SECKILL_LOCK": "redlock", "SECKILL_LOCK_TTL": "10s", "SECKILL_ORDER_TIMEOUT": "9950ms"},
			"must be shorter than 9.898s"},
		{"fencing on with redlock", map[string]string{"SECKILL_LOCK": "redlock", "SECKILL_FENCING": "on"}, "hands out no fencing token"},
		{"fencing on with no lock", map[string]string{"SECKILL_LOCK": "none", "SECKILL_FENCING": "on"}, "hands out no fencing token"},
		{"order delay past the deadline", map[string]string{"SECKILL_ORDER_DELAY": "2s"}, "order delay 2s must be shorter than the order timeout 2s"},
		{"redlock node listed twice", map[string]string{"SECKILL_LOCK": "redlock", "SECKILL_REDLOCK_ADDRS": "127.0.0.1:7001,127.0.0.1:7001"}, "is listed twice"},
		{"redlock nodes down", map[string]string{"SECKILL_LOCK": "redlock", "SECKILL_REDLOCK_ADDRS": dead}, ""},
		{"zookeeper down", map[string]string{"SECKILL_LOCK": "zookeeper", "SECKILL_ZOOKEEPER_ADDRS": dead}, ""},
		{"etcd down", map[string]string{"SECKILL_LOCK": "etcd", "SECKILL_ETCD_ENDPOINTS": dead}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.sync != "" {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				err := run(ctx, []string{"seckill", "serve", "-http-addr", "127.0.0.1:0"}, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
				require.NoError(t, ctx.Err(), "sync: not refused at start: %v", err)
				require.ErrorContains(t, err, tt.sync, "sync")
			}
			startServe(t, withEnv(tt.env, "SECKILL_ORDER_MODE", "async"))
		})
	}
}

// TestAsyncStartRefusesMalformedLockSettings: a setting the asynchronous mode does not use is
// still read, and one that is no value of its kind (no duration, no host:port, no lock or
// fencing mode) is refused as in the synchronous mode: a typo refused today does not wait for
// the day the instance is switched to sync.
func TestAsyncStartRefusesMalformedLockSettings(t *testing.T) {
	for _, tt := range []struct{ env, value string }{
		{"SECKILL_LOCK", "zk"},
		{"SECKILL_LOCK_TTL", "soon"},
		{"SECKILL_LOCK_TTL", "0s"},
		{"SECKILL_ORDER_DELAY", "-1s"},
		{"SECKILL_FENCING", "yes"},
		{"SECKILL_FENCE_RETENTION", "a day"},
		{"SECKILL_REDLOCK_ADDRS", "127.0.0.1:7001,127.0.0.1"},
		{"SECKILL_ZOOKEEPER_ADDRS", ":2181"},
		{"SECKILL_ETCD_ENDPOINTS", "etcd"},
	} {
		_, err := parseConfig("serve", []string{"-order-mode", "async"}, func(k string) string { return map[string]string{tt.env: tt.value}[k] }, io.Discard, nil)
		assert.ErrorContains(t, err, tt.env+"=", "%s=%q", tt.env, tt.value)
	}
}

// TestAsyncServeSaysStoppedOnceItsWriterHas: in async mode a stopping serve lets its order
// writer finish the batch in progress, and only then says "stopped" and returns. Before, the
// instance was closed by a deferred call after the "stopped" line: the writer could still be
// committing for seconds after the log said stopped, and a writer that outlived its bound
// went unsaid, the exit status 0.
func TestAsyncServeSaysStoppedOnceItsWriterHas(t *testing.T) {
	s := startServe(t, withEnv(nil, "SECKILL_ORDER_MODE", "async"))
	s.stop()
	err := <-s.done
	s.done <- err // for the cleanup
	require.NoError(t, err)
	log := s.log.String()
	writer := strings.Index(log, `msg="order writer stopped"`)
	stopped := strings.Index(log, "msg=stopped")
	require.NotEqual(t, -1, writer, "the writer's stop is logged:\n%s", log)
	require.NotEqual(t, -1, stopped, "serve says stopped:\n%s", log)
	assert.Less(t, writer, stopped, "the writer stopped before serve said stopped:\n%s", log)
}
