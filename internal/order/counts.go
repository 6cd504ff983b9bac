package order

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Counts is what an instance's order counters say.
type Counts struct {
	// Orders is MetricOrders by result.
	Orders map[string]float64
	// LockLost is MetricLockLost: unlocks that found the lock no longer theirs.
	LockLost float64
	// UnlockErrors is MetricUnlockErrors.
	UnlockErrors float64
}

// ReadCounts reads the order counters from g: an instance's registry, or a scraped /metrics
// parsed into families. It fails when g fails or holds no MetricOrders, never answering a
// made-up zero: a count that could not be read must not pass for no duplicates.
func ReadCounts(g prometheus.Gatherer) (Counts, error) {
	mfs, err := g.Gather()
	if err != nil {
		return Counts{}, fmt.Errorf("read order counters: %w", err)
	}
	c := Counts{Orders: map[string]float64{}}
	found := false
	for _, mf := range mfs {
		var sum float64
		for _, m := range mf.GetMetric() {
			v := value(m)
			sum += v
			if mf.GetName() == MetricOrders {
				for _, l := range m.GetLabel() {
					if l.GetName() == ResultLabel {
						c.Orders[l.GetValue()] += v
					}
				}
			}
		}
		switch mf.GetName() {
		case MetricOrders:
			found = true
		case MetricLockLost:
			c.LockLost = sum
		case MetricUnlockErrors:
			c.UnlockErrors = sum
		}
	}
	if !found {
		return Counts{}, fmt.Errorf("read order counters: no %s", MetricOrders)
	}
	return c, nil
}

// ReadCountsText reads the order counters from a Prometheus text exposition, as an
// instance's /metrics serves it: parsed into metric families, then read by ReadCounts.
func ReadCountsText(r io.Reader) (Counts, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Counts{}, fmt.Errorf("read order counters: %w", err)
	}
	return ReadCounts(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return slices.Collect(maps.Values(families)), nil
	}))
}

// Add returns the sum of c and d, as over several instances.
func (c Counts) Add(d Counts) Counts {
	out := Counts{Orders: make(map[string]float64, len(c.Orders)), LockLost: c.LockLost + d.LockLost,
		UnlockErrors: c.UnlockErrors + d.UnlockErrors}
	for k, v := range c.Orders {
		out.Orders[k] += v
	}
	for k, v := range d.Orders {
		out.Orders[k] += v
	}
	return out
}

// Total is the number of order attempts counted, all results.
func (c Counts) Total() float64 {
	var t float64
	for _, v := range c.Orders {
		t += v
	}
	return t
}

// value is a counter's value, or an untyped sample's: a text exposition without a TYPE line
// parses as untyped.
func value(m *dto.Metric) float64 {
	if m.GetUntyped() != nil {
		return m.GetUntyped().GetValue()
	}
	return m.GetCounter().GetValue()
}
