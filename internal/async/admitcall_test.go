package async_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/idgen"
)

// TestAdmissionCallTimed: each call of the admission script is timed once, from its sending to
// its answer, whatever it carries: a call held before it reaches Redis counts that long, and
// the admissions that queued behind it make one call more, not one each.
func TestAdmissionCallTimed(t *testing.T) {
	t.Parallel()
	const heldFor = 30 * time.Millisecond
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			f, vid, h, _ := hooked(t, s, async.Config{}, 10, 1)
			reg := prometheus.NewRegistry()
			svc := async.NewService(f.hookedClient(h), idgen.New(f.rdb, "order"), f.loader, async.NewMetrics(reg), quiet, f.cfg)
			firstDone, rest := heldWith(t, f, svc, h, vid, 1, 2, 3, 4)
			time.Sleep(heldFor) // the held call's least duration, not a wait for an event
			close(h.release[0])
			for _, a := range append(firstDone(), rest()...) {
				require.NoError(t, a.err, "user %d", a.user)
			}
			require.Equal(t, []int{1, 3}, h.calls())

			mfs, err := reg.Gather()
			require.NoError(t, err)
			var count uint64
			var sum float64
			for _, mf := range mfs {
				if mf.GetName() == async.MetricAdmitCall {
					count = mf.GetMetric()[0].GetHistogram().GetSampleCount()
					sum = mf.GetMetric()[0].GetHistogram().GetSampleSum()
				}
			}
			assert.Equal(t, uint64(2), count, "one observation per call")
			assert.GreaterOrEqual(t, sum, heldFor.Seconds(), "the held call counts the time it was held")
		})
	}
}
