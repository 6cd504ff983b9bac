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

// TestVerifyHungDatabase: verify against a MariaDB of the test's own that hangs (SIGSTOP)
// ends within its bounds, with an error that names the database and the bound that struck:
// the DSN's readTimeout (OpenMySQL's default, 5 s), or, for a DSN whose readTimeout is far
// longer, verify's -timeout.
func TestVerifyHungDatabase(t *testing.T) {
	ctx := context.Background()
	maria := testenv.StartMariaDB(t)
	dsn := maria.CreateDatabase("seckill_verify_hung")
	db, err := database.OpenMySQL(ctx, dsn, database.Pool{})
	require.NoError(t, err)
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	vid, err := newBaselineStores(db).voucher(ctx)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	dir := t.TempDir()
	summary, orders := filepath.Join(dir, "summary.json"), filepath.Join(dir, "orders.log")
	require.NoError(t, os.WriteFile(summary, fmt.Appendf(nil, `{"lock":"redis","vouchers":[{"scenario":"storm","id":%d,"stock":10}]}`, vid), 0o644))
	require.NoError(t, os.WriteFile(orders, nil, 0o644))
	metrics := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(metrics.Close)

	maria.Freeze()
	t.Cleanup(maria.Thaw)
	tests := []struct {
		name  string
		dsn   string
		flags []string
		bound time.Duration // when verify must have given up
		want  []string
	}{
		{name: "the DSN's readTimeout", dsn: dsn, bound: database.DefaultReadTimeout,
			want: []string{"open the database at " + maria.Addr, "did not answer within the DSN's readTimeout (5s)"}},
		{name: "verify's deadline", dsn: dsn + "?readTimeout=10m", flags: []string{"-timeout", "2s", "-drain-timeout", "1s"}, bound: 2 * time.Second,
			want: []string{"open the database at " + maria.Addr, "no answer before the deadline (-timeout 2s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-dsn", tt.dsn, "-summary", summary, "-orders", orders, "-instances", metrics.URL}, tt.flags...)
			start := time.Now()
			errc := make(chan error, 1)
			go func() { errc <- runVerify(ctx, args, io.Discard, io.Discard) }()
			// Past the bound by a margin for a loaded machine, not by another timeout.
			select {
			case err := <-errc:
				took := time.Since(start)
				require.Error(t, err)
				for _, w := range tt.want {
					assert.ErrorContains(t, err, w)
				}
				assert.Less(t, took, tt.bound+3*time.Second, "verify gave up %s after it started", took)
				t.Logf("after %s: %v", took.Round(time.Millisecond), err)
			case <-time.After(tt.bound + 10*time.Second):
				t.Fatalf("verify still waiting on the frozen database %s after it started (bound %s)", time.Since(start).Round(time.Second), tt.bound)
			}
		})
	}
}
