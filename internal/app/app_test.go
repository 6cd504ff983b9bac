package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/order"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestOpenStoresAllOrNothing: one real store without the other is refused, never half
// embedded.
func TestOpenStoresAllOrNothing(t *testing.T) {
	for _, cfg := range []app.StoresConfig{
		{MySQLDSN: "root:@tcp(127.0.0.1:1)/x"},
		{RedisAddr: "127.0.0.1:1"},
		{MySQLDSN: "root:@tcp(127.0.0.1:1)/x", DataDir: t.TempDir()},
	} {
		_, err := app.OpenStores(context.Background(), cfg)
		assert.ErrorIs(t, err, app.ErrHalfEmbedded, "%+v", cfg)
	}
}

// TestNewEveryLockKind wires an instance with each guard over the embedded stores and asks
// it whether it is ready.
func TestNewEveryLockKind(t *testing.T) {
	ctx := context.Background()
	st, err := app.OpenStores(ctx, app.StoresConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.True(t, st.Embedded)
	require.NotNil(t, st.Mini)
	for kind := range app.LockKinds {
		t.Run(kind, func(t *testing.T) {
			inst, err := app.New(ctx, discard, app.Config{Lock: kind, Order: order.Config{LockTTL: time.Second}}, st)
			require.NoError(t, err)
			w := httptest.NewRecorder()
			inst.Handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			assert.Equal(t, http.StatusOK, w.Code, "readyz: %s", w.Body)
			_, err = order.ReadCounts(inst.Registry)
			assert.NoError(t, err, "the order counters are registered")
			assert.NotEmpty(t, inst.Process)
			assert.NoError(t, inst.Close())
		})
	}
	_, err = app.New(ctx, discard, app.Config{Lock: "zk"}, st)
	assert.ErrorContains(t, err, "unknown lock")
}
