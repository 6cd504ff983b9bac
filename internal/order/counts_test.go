package order_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/order"
)

func TestReadCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	order.NewMetrics(reg)
	c, err := order.ReadCounts(reg)
	require.NoError(t, err)
	assert.Len(t, c.Orders, len(order.Results), "every result reads, at zero: %v", c.Orders)
	assert.Zero(t, c.Total())

	sum := c.Add(order.Counts{Orders: map[string]float64{order.ResultCreated: 3}, LockLost: 1, UnlockErrors: 2})
	sum = sum.Add(order.Counts{Orders: map[string]float64{order.ResultCreated: 2, order.ResultDuplicateByDB: 1}, LockLost: 1})
	assert.Equal(t, 5.0, sum.Orders[order.ResultCreated])
	assert.Equal(t, 1.0, sum.Orders[order.ResultDuplicateByDB])
	assert.Equal(t, 6.0, sum.Total())
	assert.Equal(t, 2.0, sum.LockLost)
	assert.Equal(t, 2.0, sum.UnlockErrors)
	assert.Zero(t, c.Total(), "Add leaves its operands alone")

	_, err = order.ReadCounts(prometheus.NewRegistry())
	require.Error(t, err, "no order counters must not read as zero duplicates")
	_, err = order.ReadCounts(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return nil, errors.New("scrape failed") }))
	require.ErrorContains(t, err, "scrape failed")
}

func TestReadCountsText(t *testing.T) {
	const exposition = `# HELP seckill_orders_total Order attempts by result.
# TYPE seckill_orders_total counter
seckill_orders_total{result="already_ordered"} 120
seckill_orders_total{result="created"} 1200
seckill_orders_total{instance="a",result="duplicate_blocked_by_db"} 3
seckill_orders_total{result="error"} 0
seckill_lock_lost_total 2
seckill_lock_acquire_seconds_bucket{result="acquired",le="0.001"} 5
`
	got, err := order.ReadCountsText(strings.NewReader(exposition))
	require.NoError(t, err)
	want := map[string]float64{"already_ordered": 120, "created": 1200, "duplicate_blocked_by_db": 3, "error": 0}
	assert.Equal(t, want, got.Orders)
	assert.Equal(t, 2.0, got.LockLost, "a sample without a TYPE line reads too")

	_, err = order.ReadCountsText(strings.NewReader("seckill_lock_lost_total 0\n"))
	require.Error(t, err, "an exposition without seckill_orders_total must not read as zero duplicates")
}
