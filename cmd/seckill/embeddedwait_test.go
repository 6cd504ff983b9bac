package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/database"
)

// TestEmbeddedWriteLockWaitEndsAtOrderDeadline: on the embedded store, an order whose write
// finds SQLite's one write lock taken by another connection (held here for the whole test)
// is answered 503 unavailable at its deadline, well inside its lock's lease; SQLite's
// busy_timeout alone kept it 10 s, as long as the lease itself.
func TestEmbeddedWriteLockWaitEndsAtOrderDeadline(t *testing.T) {
	dir := t.TempDir()
	const deadline = time.Second // the voucher read, the lock and the id come first, on a loaded machine too
	s := startServe(t, withEnv(nil, "SECKILL_DATA_DIR", dir, "SECKILL_ORDER_TIMEOUT", deadline.String()))
	vid := mustCreateVoucher(t, s.base, 1)

	other, err := database.OpenSQLite(context.Background(), dir, database.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	holder := other.Begin() // BEGIN IMMEDIATE: the write lock, until Rollback
	require.NoError(t, holder.Error)
	t.Cleanup(func() { holder.Rollback() })

	// Far below the 10 s lease and busy_timeout, far above what a starved machine adds.
	const bound = deadline + 3*time.Second
	client := &http.Client{Timeout: bound}
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/vouchers/%d/orders", s.base, vid), nil)
	require.NoError(t, err)
	req.Header.Set("X-User-ID", "7")
	resp, err := client.Do(req)
	require.NoError(t, err, "no answer within %s of an order with a %s deadline", bound, deadline)
	defer resp.Body.Close()
	var body struct{ Error struct{ Code string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "unavailable", body.Error.Code)
	assert.Contains(t, s.log.String(), database.ErrWriteLockBusy.Error(), "the log names the wait that gave up")
}
