package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cleanFacts is a run in which the lock held: every check passes.
func cleanFacts() facts {
	return facts{
		Lock: "redis",
		Vouchers: []voucherFacts{
			{k6Voucher: k6Voucher{Scenario: "storm", ID: 1, Stock: 1200}, StockLeft: 0, Orders: 1200},
			{k6Voucher: k6Voucher{Scenario: "sellout", ID: 2, Stock: 900}, StockLeft: 0, Orders: 900},
		},
		UniqueKey:   true,
		Orders201:   2100,
		Instances:   2,
		Metrics:     map[string]float64{"created": 2100, "duplicate_blocked_by_db": 0},
		PerInstance: []float64{1050, 1050},
	}
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		name          string
		mutate        func(*facts)
		expectFailure bool
		wantOK        bool
		wantMsg       string
		wantFailed    []string
	}{
		{name: "clean run", wantOK: true, wantMsg: "PASS: no duplicate"},
		{
			name:       "duplicates blocked by the db key",
			mutate:     func(f *facts) { f.Metrics["duplicate_blocked_by_db"] = 37 },
			wantOK:     false,
			wantMsg:    "FAIL: the guard let duplicates through",
			wantFailed: []string{"duplicate_blocked_by_db (sum of 2 instances)"},
		},
		{
			name:          "broken guard detected",
			mutate:        func(f *facts) { f.Metrics["duplicate_blocked_by_db"] = 37; f.Lock = "local" },
			expectFailure: true,
			wantOK:        true,
			wantMsg:       "PASS (failure expected and detected)",
			wantFailed:    []string{"duplicate_blocked_by_db (sum of 2 instances)"},
		},
		{
			name:          "broken guard unnoticed",
			mutate:        func(f *facts) { f.Lock = "none" },
			expectFailure: true,
			wantOK:        false,
			wantMsg:       "no duplicate was detected",
		},
		{
			name: "broken guard detected but a 201 is missing from the db",
			mutate: func(f *facts) {
				f.Metrics["duplicate_blocked_by_db"] = 2
				f.Missing201 = 1
			},
			expectFailure: true,
			wantOK:        false,
			wantMsg:       "FAIL: integrity broken",
			wantFailed:    []string{"duplicate_blocked_by_db (sum of 2 instances)", "201 orderIds missing from voucher_orders"},
		},
		{
			name:       "oversell",
			mutate:     func(f *facts) { f.Vouchers[1].Orders = 901; f.Vouchers[1].StockLeft = -1 },
			wantOK:     false,
			wantMsg:    "FAIL: the guard let", // 900 - (-1) = 901 still adds up: oversell is a lock signal
			wantFailed: []string{"sellout voucher 2: orders <= initial stock", "sellout voucher 2: stock left >= 0"},
		},
		{
			name:       "duplicate rows (no unique key)",
			mutate:     func(f *facts) { f.DuplicateGroups = 4; f.UniqueKey = false },
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"duplicate (user_id, voucher_id) rows", "uk_user_voucher unique key present"},
		},
		{
			name:       "stock and orders disagree",
			mutate:     func(f *facts) { f.Vouchers[0].StockLeft = 5 },
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"storm voucher 1: initial stock - stock left = orders"},
		},
		{
			name:       "no order at all",
			mutate:     func(f *facts) { f.Orders201 = 0; f.Unanswered = 2100 },
			wantOK:     false,
			wantFailed: []string{"k6 saw orders answered 201", "orders in the database k6 never saw answered 201"},
		},
		{
			name:       "a user answered 201 twice",
			mutate:     func(f *facts) { f.Repeated201 = 1 },
			wantOK:     false,
			wantFailed: []string{"users answered 201 twice for one voucher"},
		},
		{
			name:       "no metrics read",
			mutate:     func(f *facts) { f.Instances = 0 },
			wantOK:     false,
			wantFailed: []string{"instances' /metrics read"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := cleanFacts()
			if tt.mutate != nil {
				tt.mutate(&f)
			}
			cs := evaluate(f)
			var failed []string
			for _, c := range cs {
				if !c.OK {
					failed = append(failed, c.Name)
				}
			}
			if tt.wantFailed != nil {
				assert.Equal(t, tt.wantFailed, failed, "failed checks: got %v, want %v", failed, tt.wantFailed)
			}
			ok, msg := verdict(cs, tt.expectFailure)
			assert.Equal(t, tt.wantOK, ok, "verdict: got %v (%s), want %v", ok, msg, tt.wantOK)
			assert.Contains(t, msg, tt.wantMsg)

			var out bytes.Buffer
			require.Equal(t, ok, printVerdict(&out, f, cs, tt.expectFailure))
			assert.Contains(t, out.String(), "VERDICT: "+msg)
			assert.Contains(t, out.String(), "order requests served per instance (round-robin): #1 1050, #2 1050")
		})
	}
}

func TestCompareOrders(t *testing.T) {
	inDB := map[string]orderOwner{
		"101": {user: 1, voucher: 7},
		"102": {user: 2, voucher: 7},
		"103": {user: 3, voucher: 7}, // never answered 201 to k6
	}
	orders := []k6Order{
		{ID: "101", User: 1, Voucher: 7},
		{ID: "102", User: 9, Voucher: 7}, // another user's order
		{ID: "104", User: 4, Voucher: 7}, // not in the database
		{ID: "105", User: 1, Voucher: 7}, // user 1 answered 201 twice
	}
	var f facts
	compareOrders(orders, inDB, &f)
	assert.Equal(t, 4, f.Orders201)
	assert.Equal(t, 2, f.Missing201, "missing: 104 and 105")
	assert.Equal(t, 1, f.WrongOwner201)
	assert.Equal(t, 1, f.Repeated201)
	assert.Equal(t, int64(1), f.Unanswered, "103 was never answered 201")
}
