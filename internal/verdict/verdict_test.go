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
			{Scenario: "storm", ID: 1, Stock: 1200, StockLeft: 0, Orders: 1200, Answered: 1200},
			{Scenario: "sellout", ID: 2, Stock: 900, StockLeft: 0, Orders: 900, Answered: 900, SoldOut: 3600, SellsOut: true},
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
			name: "no order at all",
			mutate: func(f *Facts) {
				f.Orders201, f.Unanswered = 0, 2100
				f.Vouchers[0].Answered, f.Vouchers[1].Answered = 0, 0
			},
			wantOK: false,
			wantFailed: []string{"storm voucher 1: k6 saw orders answered 201", "sellout voucher 2: k6 saw orders answered 201",
				"k6 saw orders answered 201", "orders in the database k6 never saw answered 201"},
		},
		{
			name: "a voucher that accepted nothing, beside one that did",
			mutate: func(f *Facts) {
				f.Vouchers[1] = Voucher{Scenario: "sellout", ID: 2, Stock: 900, StockLeft: 900}
				f.Orders201 = 1200
			},
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"sellout voucher 2: k6 saw orders answered 201"},
		},
		{
			// Too few buyers (dropped iterations, a short run): 600 of 900 sold, nobody refused.
			name: "a sell-out that stopped short",
			mutate: func(f *Facts) {
				v := &f.Vouchers[1]
				v.Orders, v.StockLeft, v.Answered, v.SoldOut = 600, 300, 600, 0
				f.Orders201 = 1800
			},
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"sellout voucher 2: sold out: buyers answered sold_out"},
		},
		{
			name: "a sell-out that sold its last unit to its last buyer: the end untested",
			mutate: func(f *Facts) {
				f.Vouchers[1].SoldOut = 0
			},
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"sellout voucher 2: sold out: buyers answered sold_out"},
		},
		{
			// A broken guard's run is judged on the guard only if the sell-out sold out.
			name: "broken guard detected, but the sell-out stopped short",
			mutate: func(f *Facts) {
				f.Counts.Orders[order.ResultDuplicateByDB] = 37
				v := &f.Vouchers[1]
				v.Orders, v.StockLeft, v.Answered, v.SoldOut = 600, 300, 600, 0
				f.Orders201 = 1800
			},
			expectFailure: true,
			wantOK:        false,
			wantMsg:       "FAIL: integrity broken",
			wantFailed:    []string{"sellout voucher 2: sold out: buyers answered sold_out", "duplicate_blocked_by_db (sum of 2 instances)"},
		},
		{
			name: "a voucher not meant to sell out, with stock left and no sold_out",
			mutate: func(f *Facts) {
				v := &f.Vouchers[0]
				v.Orders, v.StockLeft, v.Answered = 1000, 200, 1000
				f.Orders201 = 1900
			},
			wantOK:  true,
			wantMsg: "PASS: no duplicate",
		},
		{
			name: "buyers answered sold_out with stock left",
			mutate: func(f *Facts) {
				v := &f.Vouchers[1]
				v.Orders, v.StockLeft, v.Answered = 850, 50, 850
				f.Orders201 = 2050
			},
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"sellout voucher 2: stock left after 3600 sold_out answers"},
		},
		{
			name: "stock left and no sold_out answer",
			mutate: func(f *Facts) {
				f.Vouchers[0] = Voucher{Scenario: "storm", ID: 1, Stock: 1240, StockLeft: 40, Orders: 1200, Answered: 1200}
			},
			wantOK: true,
		},
		{
			name:       "a 201 orderId missing from the database",
			mutate:     func(f *Facts) { f.Missing201 = 1 },
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"201 orderIds missing from voucher_orders"},
		},
		{
			name:       "a 201 orderId whose row has another user or voucher",
			mutate:     func(f *Facts) { f.WrongOwner201 = 1 },
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"201 orderIds with another user or voucher"},
		},
		{
			name:       "a row nobody was answered 201 for",
			mutate:     func(f *Facts) { f.Unanswered = 1 },
			wantOK:     false,
			wantMsg:    "FAIL: integrity broken",
			wantFailed: []string{"orders in the database k6 never saw answered 201"},
		},
		{
			name:          "a broken guard seen as duplicate rows",
			mutate:        func(f *Facts) { f.DuplicateGroups = 3 },
			expectFailure: true,
			wantOK:        true,
			wantMsg:       "PASS (failure expected and detected)",
			wantFailed:    []string{"duplicate (user_id, voucher_id) rows"},
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
		{ID: "103", User: 3, Voucher: 8}, // its user's order, of another voucher
	}
	f := Facts{Vouchers: []Voucher{{ID: 7}, {ID: 8}, {ID: 9}}}
	Compare(answered, inDB, &f)
	assert.Equal(t, 5, f.Orders201)
	assert.Equal(t, []int64{4, 1, 0}, []int64{f.Vouchers[0].Answered, f.Vouchers[1].Answered, f.Vouchers[2].Answered},
		"answered orders per voucher")
	assert.Equal(t, 2, f.Missing201, "missing: 104 and 105")
	assert.Equal(t, 2, f.WrongOwner201, "102 (another user) and 103 (another voucher)")
	assert.Equal(t, 1, f.Repeated201)
	assert.Zero(t, f.Unanswered, "every row's id was answered, if to the wrong owner")
	f = Facts{}
	Compare(answered[:4], inDB, &f)
	assert.Equal(t, int64(1), f.Unanswered, "103 was never answered 201")
}

// TestAsyncRunVerdict feeds Compare and Evaluate an asynchronous run as the verifier does
// (202 answers against the rows), and breaks it each way the promise forbids: every 202 is
// exactly one row with its id, user and voucher, no duplicate, no oversell.
func TestAsyncRunVerdict(t *testing.T) {
	const storm, sellout = 7, 8
	rows := func() map[string]Owner {
		return map[string]Owner{"101": {1, storm}, "102": {2, storm}, "201": {3, sellout}, "202": {4, sellout}}
	}
	answered := func() []Answered {
		return []Answered{{"101", 1, storm}, {"102", 2, storm}, {"201", 3, sellout}, {"202", 4, sellout}}
	}
	tests := []struct {
		name       string
		mutate     func(inDB map[string]Owner, as *[]Answered, f *Facts)
		wantFailed []string
		wantMsg    string
	}{
		{name: "clean", wantMsg: "PASS"},
		{
			name: "a 202 without its row",
			mutate: func(inDB map[string]Owner, _ *[]Answered, f *Facts) {
				delete(inDB, "202")
				f.Vouchers[1].Orders--
				f.Vouchers[1].StockLeft++
			},
			wantFailed: []string{"202 orderIds missing from voucher_orders"},
			wantMsg:    "FAIL: integrity broken",
		},
		{
			name:       "a 202 whose row has another user",
			mutate:     func(inDB map[string]Owner, _ *[]Answered, _ *Facts) { inDB["201"] = Owner{User: 9, Voucher: sellout} },
			wantFailed: []string{"202 orderIds with another user or voucher"},
			wantMsg:    "FAIL: integrity broken",
		},
		{
			name:       "a 202 whose row has another voucher",
			mutate:     func(inDB map[string]Owner, _ *[]Answered, _ *Facts) { inDB["102"] = Owner{User: 2, Voucher: sellout} },
			wantFailed: []string{"202 orderIds with another user or voucher"},
			wantMsg:    "FAIL: integrity broken",
		},
		{
			name: "a user answered 202 twice, both rows written (no unique key)",
			mutate: func(inDB map[string]Owner, as *[]Answered, f *Facts) {
				inDB["103"] = Owner{User: 1, Voucher: storm}
				*as = append(*as, Answered{"103", 1, storm})
				f.Vouchers[0].Orders++
				f.Vouchers[0].StockLeft--
				f.DuplicateGroups, f.UniqueKey = 1, false
			},
			wantFailed: []string{"duplicate (user_id, voucher_id) rows", "users answered 202 twice for one voucher", "uk_user_voucher unique key present"},
			wantMsg:    "FAIL: integrity broken",
		},
		{
			name: "oversold: a third row for two units",
			mutate: func(inDB map[string]Owner, as *[]Answered, f *Facts) {
				inDB["203"] = Owner{User: 5, Voucher: sellout}
				*as = append(*as, Answered{"203", 5, sellout})
				f.Vouchers[1].Orders++
				f.Vouchers[1].StockLeft--
			},
			wantFailed: []string{"sellout voucher 8: orders <= initial stock", "sellout voucher 8: stock left >= 0"},
			wantMsg:    "FAIL: the guard let",
		},
		{
			name:       "a row nobody was answered 202 for",
			mutate:     func(_ map[string]Owner, as *[]Answered, _ *Facts) { *as = (*as)[1:] },
			wantFailed: []string{"orders in the database k6 never saw answered 202"},
			wantMsg:    "FAIL: integrity broken",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Facts{
				Client: "k6", Accepted: "202", UniqueKey: true, Instances: 1,
				Vouchers: []Voucher{
					{Scenario: "storm", ID: storm, Stock: 10, StockLeft: 8, Orders: 2},
					{Scenario: "sellout", ID: sellout, Stock: 2, StockLeft: 0, Orders: 2},
				},
				Counts: order.Counts{Orders: map[string]float64{}},
			}
			inDB, as := rows(), answered()
			if tt.mutate != nil {
				tt.mutate(inDB, &as, &f)
			}
			Compare(as, inDB, &f)
			cs := Evaluate(f)
			var failed []string
			for _, c := range cs {
				if !c.OK {
					failed = append(failed, c.Name)
				}
			}
			assert.Equal(t, tt.wantFailed, failed)
			_, msg := Judge(cs, false)
			assert.Contains(t, msg, tt.wantMsg)
		})
	}
}
