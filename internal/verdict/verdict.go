// Package verdict decides what a storm of orders showed. It turns what the database holds,
// what the clients were answered and what the instances counted into checks of two kinds:
// guard signals, which fail when a duplicate order or an oversell got past the per-user guard,
// and integrity checks, which must hold whatever the guard because the database enforces them
// or the judging depends on them. `seckill demo` and the load test's harness both judge here.
package verdict

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/seckill/seckill/internal/order"
)

// Kind says what a failed check means.
type Kind int

const (
	// GuardSignal fails when a duplicate got past the guard, or stock was oversold.
	GuardSignal Kind = iota
	// Integrity must hold in every run; a failure is a bug of the service or of the judging.
	Integrity
)

// Check is one line of a verdict.
type Check struct {
	Name, Want, Got string
	OK              bool
	Kind            Kind
}

// Voucher is what the database says about one voucher of the run.
type Voucher struct {
	Scenario  string // what the voucher was for: a k6 scenario, a demo guard
	ID        int64
	Stock     int64 // initial stock, as the client created it (the database knows only what is left)
	StockLeft int64 // seckill_vouchers.stock now
	Orders    int64 // rows in voucher_orders
	Answered  int64 // orders the client logged as accepted for this voucher (Compare counts them)
	SoldOut   int64 // answers sold_out the client counted for this voucher (0 when it does not count them)
	// SellsOut says the voucher's scenario is meant to sell out: it sends more buyers than
	// stock, and tests the sale's end (the last units, and the refusals after them).
	SellsOut bool
}

// Oversold is how far the orders went past the stock, or the stock below zero.
func (v Voucher) Oversold() int64 { return max(v.Orders-v.Stock, -v.StockLeft, 0) }

// Facts is everything a verdict is computed from.
type Facts struct {
	Client string // who placed the orders and logged every 201: "k6", "the demo"
	// Accepted is the status that accepted an order: "201" (also when empty), or "202" in the
	// asynchronous mode, where the Orders201 fields count the 202s.
	Accepted        string
	Vouchers        []Voucher
	UniqueKey       bool         // uk_user_voucher exists and is unique
	DuplicateGroups int64        // (user_id, voucher_id) pairs with more than one row
	Orders201       int          // 201 answers the client logged
	Missing201      int          // of those, ids absent from voucher_orders
	WrongOwner201   int          // of those, ids present with another user or voucher
	Repeated201     int          // (user, voucher) pairs answered 201 more than once
	Unanswered      int64        // rows of the run's vouchers whose id the client never saw answered 201
	Instances       int          // instances whose counters were read
	Counts          order.Counts // the order counters, summed over the instances
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Evaluate turns facts into checks. It does no I/O, so that tests can feed it any facts.
func Evaluate(f Facts) []Check {
	var cs []Check
	add := func(k Kind, name, want, got string, ok bool) {
		cs = append(cs, Check{Name: name, Want: want, Got: got, OK: ok, Kind: k})
	}
	acc := f.Accepted
	if acc == "" {
		acc = "201"
	}
	for _, v := range f.Vouchers {
		p := fmt.Sprintf("%s voucher %d: ", v.Scenario, v.ID)
		add(GuardSignal, p+"orders <= initial stock", "<= "+itoa(v.Stock), itoa(v.Orders), v.Orders <= v.Stock)
		add(GuardSignal, p+"stock left >= 0", ">= 0", itoa(v.StockLeft), v.StockLeft >= 0)
		add(Integrity, p+"initial stock - stock left = orders", itoa(v.Orders), itoa(v.Stock-v.StockLeft), v.Stock-v.StockLeft == v.Orders)
		// Per voucher, not only over the run: a scenario whose every order was refused (a
		// sell-out answered sold_out throughout) would otherwise pass on the others' orders,
		// its own checks true of an untouched voucher.
		add(Integrity, p+f.Client+" saw orders answered "+acc, "> 0", itoa(v.Answered), v.Answered > 0)
		// A buyer told sold_out must have found it so. Stock only goes down in a sale (an
		// asynchronous dead letter gives its unit back, and fails its own check), so after a
		// sold_out answer none is left at the end. Without this, a sell-out that refused
		// buyers with stock still on the shelf passed as "no oversell".
		add(Integrity, p+"stock left after "+itoa(v.SoldOut)+" sold_out answers", "<= 0 if any", itoa(v.StockLeft),
			v.SoldOut == 0 || v.StockLeft <= 0)
		// A sell-out that never sold out tested nothing of the sale's end, yet every check
		// above held: too few buyers were sent (the load generator dropped them, or ran too
		// short), or none was turned away. With the check above, sold_out answers mean the
		// stock reached zero and buyers were refused after it.
		if v.SellsOut {
			add(Integrity, p+"sold out: buyers answered sold_out", "> 0", itoa(v.SoldOut), v.SoldOut > 0)
		}
	}
	add(GuardSignal, "duplicate (user_id, voucher_id) rows", "0", itoa(f.DuplicateGroups), f.DuplicateGroups == 0)
	add(GuardSignal, "users answered "+acc+" twice for one voucher", "0", strconv.Itoa(f.Repeated201), f.Repeated201 == 0)
	dup := f.Counts.Orders[order.ResultDuplicateByDB]
	add(GuardSignal, fmt.Sprintf("%s (sum of %d instances)", order.ResultDuplicateByDB, f.Instances), "0", FormatFloat(dup), dup == 0)
	add(GuardSignal, fmt.Sprintf("%s (sum of %d instances)", order.MetricLockLost, f.Instances), "0", FormatFloat(f.Counts.LockLost), f.Counts.LockLost == 0)
	add(Integrity, "uk_user_voucher unique key present", "yes", yesNo(f.UniqueKey), f.UniqueKey)
	add(Integrity, f.Client+" saw orders answered "+acc, "> 0", strconv.Itoa(f.Orders201), f.Orders201 > 0)
	add(Integrity, acc+" orderIds missing from voucher_orders", "0", strconv.Itoa(f.Missing201), f.Missing201 == 0)
	add(Integrity, acc+" orderIds with another user or voucher", "0", strconv.Itoa(f.WrongOwner201), f.WrongOwner201 == 0)
	add(Integrity, "orders in the database "+f.Client+" never saw answered "+acc, "0", itoa(f.Unanswered), f.Unanswered == 0)
	add(Integrity, "instances' /metrics read", ">= 1", strconv.Itoa(f.Instances), f.Instances >= 1)
	return cs
}

// Failed lists the failed checks of kind k as "name = got".
func Failed(cs []Check, k Kind) []string {
	var out []string
	for _, c := range cs {
		if !c.OK && c.Kind == k {
			out = append(out, c.Name+" = "+c.Got)
		}
	}
	return out
}

// Judge reports whether the run is a success. Normally that means every check passed. With
// expectFailure (a broken guard under test) it means the broken guard was caught — at least
// one guard signal failed — while every integrity check still held.
func Judge(cs []Check, expectFailure bool) (ok bool, msg string) {
	guard, integrity := Failed(cs, GuardSignal), Failed(cs, Integrity)
	switch {
	case len(integrity) > 0:
		return false, "FAIL: integrity broken: " + strings.Join(integrity, "; ")
	case !expectFailure && len(guard) == 0:
		return true, "PASS: no duplicate order, no oversell, every 201 is in the database"
	case !expectFailure:
		return false, "FAIL: the guard let duplicates through: " + strings.Join(guard, "; ")
	case len(guard) > 0:
		return true, "PASS (failure expected and detected): " + strings.Join(guard, "; ")
	default:
		return false, "FAIL: a broken guard was under test but no duplicate was detected — the harness would not have noticed"
	}
}

// FormatFloat prints a count without a needless fraction.
func FormatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
