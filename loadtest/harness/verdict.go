package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/verdict"
)

// report is a load-test run as the verifier reports it: the facts the verdict is computed from,
// and what the report shows beside them.
type report struct {
	verdict.Facts
	Lock        string    // SECKILL_LOCK of the run, as k6's summary recorded it
	Mode        string    // SECKILL_ORDER_MODE of the run, as k6's summary recorded it
	PerInstance []float64 // order attempts each instance counted, all results
}

// printVerdict prints the checks, the counters and the verdict, and reports the verdict.
func printVerdict(w io.Writer, r report, cs []verdict.Check, expectFailure bool) bool {
	mode := "expect a clean run"
	if expectFailure {
		mode = "expect the guard to fail"
	}
	if r.Mode == "async" {
		fmt.Fprintf(w, "verdict for MODE=async LOCK=%s (%s)\n", r.Lock, mode)
	} else {
		fmt.Fprintf(w, "verdict for LOCK=%s (%s)\n", r.Lock, mode)
	}
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
	if len(r.Counts.Orders) > 0 && r.Mode != "async" { // the asynchronous mode counts admissions instead
		parts := make([]string, 0, len(order.Results))
		for _, k := range order.Results {
			parts = append(parts, k+"="+verdict.FormatFloat(r.Counts.Orders[k]))
		}
		fmt.Fprintf(w, "%s over %d instances: %s\n", order.MetricOrders, r.Instances, strings.Join(parts, " "))
	}
	if len(r.PerInstance) > 0 {
		parts := make([]string, 0, len(r.PerInstance))
		for i, n := range r.PerInstance {
			parts = append(parts, fmt.Sprintf("#%d %s", i+1, verdict.FormatFloat(n)))
		}
		what := "order requests served per instance (round-robin)"
		if r.Mode == "async" {
			what = "admission requests answered per instance (" + async.MetricAdmissions + ")"
		}
		fmt.Fprintf(w, "%s: %s\n", what, strings.Join(parts, ", "))
	}
	ok, msg := verdict.Judge(cs, expectFailure)
	if r.Mode == "async" {
		msg = strings.Replace(msg, "every 201 is in the database", "every 202 is a row, created, the books balance, nothing dead-lettered", 1)
	}
	fmt.Fprintln(w, "VERDICT:", msg)
	return ok
}
