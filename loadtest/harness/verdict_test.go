package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/verdict"
)

// cleanReport is a run in which the lock held: every check passes.
func cleanReport() report {
	return report{
		Lock: "redis",
		Facts: verdict.Facts{
			Client:    "k6",
			Vouchers:  []verdict.Voucher{{Scenario: "sellout", ID: 2, Stock: 2100, Orders: 2100, Answered: 2100}},
			UniqueKey: true, Orders201: 2100, Instances: 2,
			Counts: order.Counts{Orders: map[string]float64{order.ResultCreated: 2100}},
		},
		PerInstance: []float64{1050, 1050},
	}
}

// TestPrintVerdict: the report shows every check, the counters and the verdict the verdict
// package gives, and returns it. (The checks themselves are tested in internal/verdict.)
func TestPrintVerdict(t *testing.T) {
	tests := []struct {
		name          string
		mutate        func(*report)
		expectFailure bool
		wantOK        bool
		wantLines     []string
	}{
		{name: "clean run", wantOK: true, wantLines: []string{"verdict for LOCK=redis (expect a clean run)"}},
		{
			name:      "duplicates blocked by the db key",
			mutate:    func(r *report) { r.Counts.Orders[order.ResultDuplicateByDB] = 37 },
			wantLines: []string{"FAILED", "duplicate_blocked_by_db=37"},
		},
		{
			name:          "broken guard detected",
			mutate:        func(r *report) { r.Counts.Orders[order.ResultDuplicateByDB] = 37; r.Lock = "local" },
			expectFailure: true,
			wantOK:        true,
			wantLines:     []string{"verdict for LOCK=local (expect the guard to fail)"},
		},
		{name: "broken guard unnoticed", mutate: func(r *report) { r.Lock = "none" }, expectFailure: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cleanReport()
			if tt.mutate != nil {
				tt.mutate(&r)
			}
			cs := verdict.Evaluate(r.Facts)
			ok, msg := verdict.Judge(cs, tt.expectFailure)
			require.Equal(t, tt.wantOK, ok, msg)

			var out bytes.Buffer
			require.Equal(t, ok, printVerdict(&out, r, cs, tt.expectFailure))
			assert.Contains(t, out.String(), "VERDICT: "+msg)
			assert.Contains(t, out.String(), "order requests served per instance (round-robin): #1 1050, #2 1050")
			assert.Contains(t, out.String(), order.MetricOrders+" over 2 instances: created=2100 already_ordered=0")
			for _, l := range tt.wantLines {
				assert.Contains(t, out.String(), l)
			}
		})
	}
}
