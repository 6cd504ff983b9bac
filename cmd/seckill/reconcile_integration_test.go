//go:build integration

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/voucher"
)

// TestReconcileShowsKeptUnits: `seckill reconcile` against a real MariaDB and Redis. Voucher A
// had one unit sold behind Redis (a row and the stock taken in the database alone) and then
// sold out: the order the database could not cover was dead-lettered and its unit kept, so the
// books agree (drift 0) and reconcile says ok, but shows the kept unit that brought them
// together. Voucher B had a unit sold behind Redis too and sold only one order: Redis still
// counts the unit the database lacks, a real drift, and reconcile exits non-zero.
func TestReconcileShowsKeptUnits(t *testing.T) {
	ctx := context.Background()
	db, rs, getenv := realStores(t)
	rdb := rs.Client()
	t.Cleanup(func() { _ = rdb.Close() })

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := async.Config{MaxAttempts: 1, ClaimIdle: time.Second}
	store := async.NewStore(db)
	loader := async.NewLoader(rdb, store, log)
	svc := async.NewService(rdb, idgen.New(rdb, "order"), loader, async.NewMetrics(prometheus.NewRegistry()), log, cfg)
	statuses := async.NewStatuses(rdb, store)
	sale := func(buyers int64) int64 {
		v, err := voucher.NewService(voucher.NewStore(db.DB)).Create(ctx, voucher.Voucher{Title: "t", Stock: 3,
			BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.NoError(t, loader.Load(ctx, v.ID))
		now := time.Now().UTC()
		require.NoError(t, db.Exec("UPDATE seckill_vouchers SET stock = stock - 1 WHERE voucher_id = ?", v.ID).Error)
		require.NoError(t, db.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)",
			v.ID*1000, 99, v.ID, now, now).Error)
		for u := int64(1); u <= buyers; u++ {
			_, err := svc.Place(ctx, u, v.ID)
			require.NoError(t, err, "user %d", u)
		}
		return v.ID
	}
	a, b := sale(3), sale(1)

	wcfg := cfg
	wcfg.Consumer = "w"
	w := async.NewWriter(rdb, store, nil, async.NewMetrics(prometheus.NewRegistry()), log, wcfg)
	w.Start()
	require.Eventually(t, func() bool {
		da, err1 := statuses.DeadLettered(ctx, a)
		na, err2 := statuses.Backlog(ctx, a)
		nb, err3 := statuses.Backlog(ctx, b)
		return err1 == nil && err2 == nil && err3 == nil && da == 1 && na == 0 && nb == 0
	}, time.Minute, 20*time.Millisecond, "the writer wrote both sales and dead-lettered A's stock-short order")
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, w.Stop(stopCtx))

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"seckill", "reconcile", strconv.FormatInt(a, 10)}, getenv, &out, io.Discard),
		"A's books agree; its kept unit is no drift:\n%s", &out)
	header, row := reconcileRow(t, out.String(), a)
	require.Contains(t, header, "kept", "reconcile shows the kept units:\n%s", &out)
	// voucher, initial, redis stock, pending, db orders, db stock, kept, drift, verdict
	assert.Equal(t, []string{strconv.FormatInt(a, 10), "3", "0", "0", "3", "0", "1", "+0", "ok"}, row, "\n%s", &out)
	assert.Contains(t, out.String(), "seckill:{voucher:"+strconv.FormatInt(a, 10)+"}:dead", "names where the kept orders are")

	out.Reset()
	err := run(ctx, []string{"seckill", "reconcile"}, getenv, &out, io.Discard)
	require.ErrorIs(t, err, errDrift, "B's books drift:\n%s", &out)
	assert.Contains(t, err.Error(), "1 of 2 vouchers drifted")
	_, row = reconcileRow(t, out.String(), b)
	assert.Equal(t, []string{strconv.FormatInt(b, 10), "3", "2", "0", "2", "1", "0", "+1", "DRIFT"}, row, "\n%s", &out)
	_, row = reconcileRow(t, out.String(), a)
	assert.Equal(t, "ok", row[len(row)-1], "\n%s", &out)
	t.Logf("reconcile:\n%s", &out)

	// Both sales over for longer than the retention: a writer retires them from Redis. The
	// books read the same, the kept unit counted where the dead letters went.
	wcfg.Now = func() time.Time { return time.Now().Add(3 * time.Hour) }
	wcfg.Consumer = "later"
	w = async.NewWriter(rdb, store, nil, async.NewMetrics(prometheus.NewRegistry()), log, wcfg)
	w.Start()
	require.Eventually(t, func() bool {
		ba, err1 := async.Reconcile(ctx, rdb, store, a)
		bb, err2 := async.Reconcile(ctx, rdb, store, b)
		return err1 == nil && err2 == nil && ba.Retired && bb.Retired
	}, time.Minute, 20*time.Millisecond, "both sales retired")
	require.NoError(t, w.Stop(stopCtx))
	out.Reset()
	err = run(ctx, []string{"seckill", "reconcile"}, getenv, &out, io.Discard)
	require.ErrorIs(t, err, errDrift, "B's books still drift:\n%s", &out)
	_, row = reconcileRow(t, out.String(), a)
	assert.Equal(t, []string{strconv.FormatInt(a, 10), "3", "0", "0", "3", "0", "1", "+0", "ok", "(retired)"}, row, "\n%s", &out)
	assert.Contains(t, out.String(), "FROM async_failed_orders WHERE voucher_id = "+strconv.FormatInt(a, 10), "names where the kept orders are")
	_, row = reconcileRow(t, out.String(), b)
	assert.Equal(t, []string{strconv.FormatInt(b, 10), "3", "2", "0", "2", "1", "0", "+1", "DRIFT", "(retired)"}, row, "\n%s", &out)
	t.Logf("reconcile after the retirement:\n%s", &out)
}

// reconcileRow returns reconcile's header line and the fields of voucherID's row.
func reconcileRow(t *testing.T, out string, voucherID int64) (string, []string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] == strconv.FormatInt(voucherID, 10) {
			return lines[0], f
		}
	}
	t.Fatalf("no row of voucher %d in:\n%s", voucherID, out)
	return "", nil
}
