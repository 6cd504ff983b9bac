package verdict

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seckill/seckill/internal/order"
)

// cleanFacts is a run in which the lock held: every check passes.
func cleanFacts() Facts {
	return Facts{
		Client: "k6",
		Vouchers: []Voucher{
			{Scenario: "storm", ID: 1, Stock: 1200, StockLeft: 0, Orders: 1200},
			{Scenario: "sellout", ID: 2, Stock: 900, StockLeft: 0, Orders: 900},
		},
		UniqueKey: true,
		Orders201: 2100,
		Instances: 2,
		Counts:    order.Counts{Orders: map[string]float64{order.ResultCreated: 2100, order.ResultDuplicateByDB: 0}},
	}
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		name          string
		mutate        func(*Facts)
		expectFailure bool
		wantOK        bool
		wantMsg       string
		wantFailed    []string
	}{
		{name: "clean run", wantOK: true, wantMsg: "PASS: no duplicate"},
		{
			name:       "duplicates blocked by the db key",
			mutate:     func(f *Facts) { f.Counts.Orders[order.ResultDuplicateByDB] = 37 },
			wantOK:     false,
			wantMsg:    "FAIL: the guard let duplicates through",
			wantFailed: []string{"duplicate_blocked_by_db (sum of 2 instances)"},
		},
		{
			name:          "broken guard detected",
			mutate:        func(f *Facts) { f.Counts.Orders[order.ResultDuplicateByDB] = 37 },
			expectFailure: true,
			wantOK:        true,
			wantMsg:       "PASS (failure expected and detected)",
			wantFailed:    []string{"duplicate_blocked_by_db (sum of 2 instances)"},
		},
		{
			name:          "broken guard unnoticed",
			expectFailure: true,
			wantOK:        false,
			wantMsg:       "no duplicate was detected",
		},
		{
			name: "broken guard detected but a 201 is missing from the db",
			mutate: func(f *Facts) {
				f.Counts.Orders[order.ResultDuplicateByDB] = 2
				f.Missing201 = 1
			},
			expectFailure: true,
			wantOK:        false,
			wantMsg:       "FAIL: integrity broken",
			wantFailed:    []string{"duplicate_blocked_by_db (sum of 2 instances)", "201 orderIds missing from voucher_orders"},
		},
		{
			name:       "oversell",
			mutate:     func(f *Facts) { f.Vouchers[1].Orders = 901; f.Vouchers[1].StockLeft = -1 },
			wantOK:     false,
			wantMsg:    "FAIL: the guard let", // 900 - (-1) = 901 still adds up: oversell is a guard signal
			wantFailed: []string{"sellout voucher 2: orders <= initial stock", "sellout voucher 2: stock left >= 0"},
		},
		{
			name:       "duplicate rows (no unique key)",
			mutate:     func(f *Facts) { f.DuplicateGroups = 4; f.UniqueKey = false },
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"duplicate (user_id, voucher_id) rows", "uk_user_voucher unique key present"},
		},
		{
			name:       "stock and orders disagree",
			mutate:     func(f *Facts) { f.Vouchers[0].StockLeft = 5 },
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"storm voucher 1: initial stock - stock left = orders"},
		},
		{
			name:       "no order at all",
			mutate:     func(f *Facts) { f.Orders201 = 0; f.Unanswered = 2100 },
			wantOK:     false,
			wantFailed: []string{"k6 saw orders answered 201", "orders in the database k6 never saw answered 201"},
		},
		{
			name:       "a user answered 201 twice",
			mutate:     func(f *Facts) { f.Repeated201 = 1 },
			wantOK:     false,
			wantFailed: []string{"users answered 201 twice for one voucher"},
		},
		{
			name:       "a lock lost at unlock",
			mutate:     func(f *Facts) { f.Counts.LockLost = 1 },
			wantOK:     false,
			wantMsg:    "FAIL: the guard let duplicates through",
			wantFailed: []string{order.MetricLockLost + " (sum of 2 instances)"},
		},
		{
			name:       "no metrics read",
			mutate:     func(f *Facts) { f.Instances = 0 },
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
			cs := Evaluate(f)
			var failed []string
			for _, c := range cs {
				if !c.OK {
					failed = append(failed, c.Name)
				}
			}
			if tt.wantFailed != nil {
				assert.Equal(t, tt.wantFailed, failed, "failed checks: got %v, want %v", failed, tt.wantFailed)
			}
			ok, msg := Judge(cs, tt.expectFailure)
			assert.Equal(t, tt.wantOK, ok, "verdict: got %v (%s), want %v", ok, msg, tt.wantOK)
			assert.Contains(t, msg, tt.wantMsg)
		})
	}
}

func TestOversold(t *testing.T) {
	for _, tt := range []struct {
		v    Voucher
		want int64
	}{
		{Voucher{Stock: 10, StockLeft: 0, Orders: 10}, 0},
		{Voucher{Stock: 10, StockLeft: 3, Orders: 7}, 0},
		{Voucher{Stock: 10, StockLeft: 0, Orders: 12}, 2},
		{Voucher{Stock: 10, StockLeft: -3, Orders: 10}, 3},
	} {
		assert.Equal(t, tt.want, tt.v.Oversold(), "%+v", tt.v)
	}
}

func TestCompare(t *testing.T) {
	inDB := map[string]Owner{
		"101": {User: 1, Voucher: 7},
		"102": {User: 2, Voucher: 7},
		"103": {User: 3, Voucher: 7}, // never answered 201 to the client
	}
	answered := []Answered{
		{ID: "101", User: 1, Voucher: 7},
		{ID: "102", User: 9, Voucher: 7}, // another user's order
		{ID: "104", User: 4, Voucher: 7}, // not in the database
		{ID: "105", User: 1, Voucher: 7}, // user 1 answered 201 twice
	}
	var f Facts
	Compare(answered, inDB, &f)
	assert.Equal(t, 4, f.Orders201)
	assert.Equal(t, 2, f.Missing201, "missing: 104 and 105")
	assert.Equal(t, 1, f.WrongOwner201)
	assert.Equal(t, 1, f.Repeated201)
	assert.Equal(t, int64(1), f.Unanswered, "103 was never answered 201")
}
