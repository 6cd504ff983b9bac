package verdict

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// cleanAsyncFacts is a drained asynchronous run: every check passes.
func cleanAsyncFacts() AsyncFacts {
	return AsyncFacts{
		Vouchers: []AsyncVoucher{
			{Scenario: "storm", ID: 1, Initial: 400, RedisStock: 40, Orders: 360},
			{Scenario: "sellout", ID: 2, Initial: 300, RedisStock: 0, Orders: 300},
		},
		Polled: 660,
	}
}

func TestEvaluateAsync(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(*AsyncFacts)
		wantFailed []string
	}{
		{name: "drained clean run"},
		{
			name:       "an order still in the stream",
			mutate:     func(f *AsyncFacts) { f.Vouchers[1].Pending, f.Vouchers[1].Orders = 1, 299 },
			wantFailed: []string{"sellout voucher 2: orders left in the stream = 1"},
		},
		{
			name:       "a unit lost",
			mutate:     func(f *AsyncFacts) { f.Vouchers[0].Orders = 359 },
			wantFailed: []string{"storm voucher 1: redis stock + pending + orders = initial stock = 399"},
		},
		{
			name:       "a unit sold twice",
			mutate:     func(f *AsyncFacts) { f.Vouchers[0].RedisStock = 41 },
			wantFailed: []string{"storm voucher 1: redis stock + pending + orders = initial stock = 401"},
		},
		{
			name: "dead letters",
			mutate: func(f *AsyncFacts) {
				f.Vouchers[1].DeadLettered = 2
				f.DeadLetteredMetric = 2
			},
			wantFailed: []string{"sellout voucher 2: dead-lettered (stream length) = 2", "dead-lettered (metric, instances read) = 2"},
		},
		{
			name:       "an accepted order not created",
			mutate:     func(f *AsyncFacts) { f.NotCreated = 1 },
			wantFailed: []string{"accepted orders not 'created' on GET /api/orders/{id} (of 660) = 1"},
		},
		{
			name:       "a kill whose orders nobody claimed",
			mutate:     func(f *AsyncFacts) { f.ExpectClaimed, f.Held = true, 3 },
			wantFailed: []string{"orders claimed from the killed instance, which held 3 (metric, survivors) = 0"},
		},
		{
			name:       "a kill whose orders were claimed in part",
			mutate:     func(f *AsyncFacts) { f.ExpectClaimed, f.Held, f.Claimed = true, 3, 2 },
			wantFailed: []string{"orders claimed from the killed instance, which held 3 (metric, survivors) = 2"},
		},
		{
			name:       "a kill that held nothing, a survivor's own entries claimed",
			mutate:     func(f *AsyncFacts) { f.ExpectClaimed, f.Held, f.Claimed = true, 0, 2 },
			wantFailed: []string{"orders claimed from the killed instance, which held 0 (metric, survivors) = 2"},
		},
		{
			name:   "a kill whose orders were claimed",
			mutate: func(f *AsyncFacts) { f.ExpectClaimed, f.Held, f.Claimed = true, 3, 3 },
		},
		{
			name:   "orders not polled: no poll check",
			mutate: func(f *AsyncFacts) { f.Polled, f.NotCreated = -1, 5 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := cleanAsyncFacts()
			if tt.mutate != nil {
				tt.mutate(&f)
			}
			cs := EvaluateAsync(f)
			assert.Equal(t, tt.wantFailed, Failed(cs, Integrity))
			assert.Empty(t, Failed(cs, GuardSignal), "every asynchronous check is an integrity check")
		})
	}
}
