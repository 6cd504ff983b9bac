//go:build integration

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
)

// hungRun is a run's files in dir (summary.json of one voucher, an empty orders.log) and the
// DSN of its database, a MariaDB of the test's own frozen (SIGSTOP) until the test ends.
type hungRun struct {
	dir, summary, orders, dsn, addr string
}

func frozenRun(t *testing.T) hungRun {
	t.Helper()
	ctx := context.Background()
	maria := testenv.StartMariaDB(t)
	r := hungRun{dir: t.TempDir(), dsn: maria.CreateDatabase("seckill_verify_hung"), addr: maria.Addr}
	db, err := database.OpenMySQL(ctx, r.dsn, database.Pool{})
	require.NoError(t, err)
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	vid, err := newBaselineStores(db).voucher(ctx)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	r.summary, r.orders = filepath.Join(r.dir, "summary.json"), filepath.Join(r.dir, "orders.log")
	require.NoError(t, os.WriteFile(r.summary, fmt.Appendf(nil, `{"lock":"redis","vouchers":[{"scenario":"storm","id":%d,"stock":10}]}`, vid), 0o644))
	require.NoError(t, os.WriteFile(r.orders, nil, 0o644))
	maria.Freeze()
	t.Cleanup(maria.Thaw)
	return r
}

// hungCase is one way a step must give up on the frozen database: dsn (the run's, perhaps
// with a longer readTimeout) and flags, by bound, with an error containing want.
type hungCase struct {
	name  string
	dsn   string
	flags []string
	bound time.Duration
	want  []string
}

// hungCases are the two bounds that can strike first: the DSN's readTimeout (OpenMySQL's
// default, 5 s), or, for a DSN whose readTimeout is far longer, the step's -timeout.
func hungCases(r hungRun, extra ...string) []hungCase {
	return []hungCase{
		{name: "the DSN's readTimeout", dsn: r.dsn, bound: database.DefaultReadTimeout,
			want: []string{"open the database at " + r.addr, "did not answer within the DSN's readTimeout (5s)"}},
		{name: "the step's deadline", dsn: r.dsn + "?readTimeout=10m", flags: append([]string{"-timeout", "2s"}, extra...), bound: 2 * time.Second,
			want: []string{"open the database at " + r.addr, "no answer before the deadline (-timeout 2s)"}},
	}
}

// endsWithin runs step and requires it to fail within tt's bound, naming what tt wants.
func endsWithin(t *testing.T, tt hungCase, step func() error) {
	t.Helper()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- step() }()
	// Past the bound by a margin for a loaded machine, not by another timeout.
	select {
	case err := <-errc:
		took := time.Since(start)
		require.Error(t, err)
		for _, w := range tt.want {
			assert.ErrorContains(t, err, w)
		}
		assert.Less(t, took, tt.bound+3*time.Second, "gave up %s after it started", took)
		t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	case <-time.After(tt.bound + 10*time.Second):
		t.Fatalf("still waiting on the frozen database %s after it started (bound %s)", time.Since(start).Round(time.Second), tt.bound)
	}
}

// TestVerifyHungDatabase: verify against a MariaDB of the test's own that hangs (SIGSTOP)
// ends within its bounds, with an error that names the database and the bound that struck.
func TestVerifyHungDatabase(t *testing.T) {
	r := frozenRun(t)
	metrics := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(metrics.Close)
	for _, tt := range hungCases(r, "-drain-timeout", "1s") {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-dsn", tt.dsn, "-summary", r.summary, "-orders", r.orders, "-instances", metrics.URL}, tt.flags...)
			endsWithin(t, tt, func() error { return runVerify(context.Background(), args, io.Discard, io.Discard) })
		})
	}
}

// TestChaosCheckHungDatabase: chaos-check's SQL verdict against a frozen MariaDB ends within
// the same bounds as verify, naming the database and the bound that struck.
func TestChaosCheckHungDatabase(t *testing.T) {
	r := frozenRun(t)
	// An experiment whose own checks need only requests.csv and the events: one request,
	// answered 201, after one Redis latency spike.
	at := time.Now().Add(-time.Minute)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "requests.csv"),
		fmt.Appendf(nil, "%d,%d,main,1,1,201,%s,1\n", at.Add(3*time.Second).UnixNano(), at.Add(3*time.Second+time.Millisecond).UnixNano(), codeCreated), 0o644))
	events := filepath.Join(r.dir, "events")
	require.NoError(t, os.WriteFile(events, fmt.Appendf(nil, "spike1_start %d\nspike1_end %d\n", at.Unix(), at.Unix()+1), 0o644))
	for _, tt := range hungCases(r) {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-experiment", "redis-latency", "-dir", r.dir, "-events", events, "-dsn", tt.dsn}, tt.flags...)
			endsWithin(t, tt, func() error { return runChaosCheck(context.Background(), args, io.Discard, io.Discard) })
		})
	}
}
