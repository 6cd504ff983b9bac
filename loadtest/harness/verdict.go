package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// voucherFacts is what the database says about one voucher of the run.
type voucherFacts struct {
	k6Voucher       // initial stock as setup() created it
	StockLeft int64 // seckill_vouchers.stock now
	Orders    int64 // rows in voucher_orders
}

// facts is everything the verdict is computed from.
type facts struct {
	Lock            string
	Vouchers        []voucherFacts
	UniqueKey       bool               // uk_user_voucher exists and is unique
	DuplicateGroups int64              // (user_id, voucher_id) pairs with more than one row
	Orders201       int                // 201 answers k6 logged
	Missing201      int                // of those, ids absent from voucher_orders
	WrongOwner201   int                // of those, ids present with another user or voucher
	Repeated201     int                // (user, voucher) pairs answered 201 more than once
	Unanswered      int64              // rows of the run's vouchers whose id k6 never saw answered 201
	Instances       int                // instances whose /metrics were read
	Metrics         map[string]float64 // seckill_orders_total by result, summed over the instances
	PerInstance     []float64          // seckill_orders_total of each instance, all results
}

// kind separates the checks a broken lock is expected to fail from those that hold whatever
// the guard, because the database enforces them or the harness depends on them.
type kind int

const (
	lockSignal kind = iota // fails when a duplicate got past the guard (or stock oversold)
	integrity              // must hold in every mode; a failure is a harness or service bug
)

type checkResult struct {
	Name, Want, Got string
	OK              bool
	Kind            kind
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// evaluate turns facts into checks. It has no I/O so that tests can feed it any facts.
func evaluate(f facts) []checkResult {
	var cs []checkResult
	add := func(k kind, name, want, got string, ok bool) {
		cs = append(cs, checkResult{Name: name, Want: want, Got: got, OK: ok, Kind: k})
	}
	for _, v := range f.Vouchers {
		p := fmt.Sprintf("%s voucher %d: ", v.Scenario, v.ID)
		add(lockSignal, p+"orders <= initial stock", "<= "+itoa(v.Stock), itoa(v.Orders), v.Orders <= v.Stock)
		add(lockSignal, p+"stock left >= 0", ">= 0", itoa(v.StockLeft), v.StockLeft >= 0)
		add(integrity, p+"initial stock - stock left = orders", itoa(v.Orders), itoa(v.Stock-v.StockLeft), v.Stock-v.StockLeft == v.Orders)
	}
	add(lockSignal, "duplicate (user_id, voucher_id) rows", "0", itoa(f.DuplicateGroups), f.DuplicateGroups == 0)
	add(lockSignal, "users answered 201 twice for one voucher", "0", strconv.Itoa(f.Repeated201), f.Repeated201 == 0)
	dup := f.Metrics["duplicate_blocked_by_db"]
	add(lockSignal, fmt.Sprintf("duplicate_blocked_by_db (sum of %d instances)", f.Instances), "0", fmtFloat(dup), dup == 0)
	add(integrity, "uk_user_voucher unique key present", "yes", yesNo(f.UniqueKey), f.UniqueKey)
	add(integrity, "k6 saw orders answered 201", "> 0", strconv.Itoa(f.Orders201), f.Orders201 > 0)
	add(integrity, "201 orderIds missing from voucher_orders", "0", strconv.Itoa(f.Missing201), f.Missing201 == 0)
	add(integrity, "201 orderIds with another user or voucher", "0", strconv.Itoa(f.WrongOwner201), f.WrongOwner201 == 0)
	add(integrity, "orders in the database k6 never saw answered 201", "0", itoa(f.Unanswered), f.Unanswered == 0)
	add(integrity, "instances' /metrics read", ">= 1", strconv.Itoa(f.Instances), f.Instances >= 1)
	return cs
}

// verdict reports whether the run is a success. Normally that means every check passed. With
// expectFailure (a broken guard under test) it means the harness caught the broken guard — at
// least one lockSignal check failed — while every integrity check still held.
func verdict(cs []checkResult, expectFailure bool) (ok bool, msg string) {
	var lockFails, integrityFails []string
	for _, c := range cs {
		if c.OK {
			continue
		}
		if c.Kind == lockSignal {
			lockFails = append(lockFails, c.Name+" = "+c.Got)
		} else {
			integrityFails = append(integrityFails, c.Name+" = "+c.Got)
		}
	}
	switch {
	case len(integrityFails) > 0:
		return false, "FAIL: integrity broken: " + strings.Join(integrityFails, "; ")
	case !expectFailure && len(lockFails) == 0:
		return true, "PASS: no duplicate order, no oversell, every 201 is in the database"
	case !expectFailure:
		return false, "FAIL: the guard let duplicates through: " + strings.Join(lockFails, "; ")
	case len(lockFails) > 0:
		return true, "PASS (failure expected and detected): " + strings.Join(lockFails, "; ")
	default:
		return false, "FAIL: a broken guard was under test but no duplicate was detected — the harness would not have noticed"
	}
}

func printVerdict(w io.Writer, f facts, cs []checkResult, expectFailure bool) bool {
	mode := "expect a clean run"
	if expectFailure {
		mode = "expect the guard to fail"
	}
	fmt.Fprintf(w, "verdict for LOCK=%s (%s)\n", f.Lock, mode)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tWANT\tGOT\t")
	for _, c := range cs {
		mark := "ok"
		if !c.OK {
			mark = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Want, c.Got, mark)
	}
	tw.Flush()
	if len(f.Metrics) > 0 {
		keys := []string{"created", "already_ordered", "order_in_progress", "sold_out", "sale_not_active", "duplicate_blocked_by_db", "error"}
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+"="+fmtFloat(f.Metrics[k]))
		}
		fmt.Fprintf(w, "seckill_orders_total over %d instances: %s\n", f.Instances, strings.Join(parts, " "))
	}
	if len(f.PerInstance) > 0 {
		parts := make([]string, 0, len(f.PerInstance))
		for i, n := range f.PerInstance {
			parts = append(parts, fmt.Sprintf("#%d %s", i+1, fmtFloat(n)))
		}
		fmt.Fprintf(w, "order requests served per instance (round-robin): %s\n", strings.Join(parts, ", "))
	}
	ok, msg := verdict(cs, expectFailure)
	fmt.Fprintln(w, "VERDICT:", msg)
	return ok
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
