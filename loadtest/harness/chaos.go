package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// chaosCheck is one experiment's figures and thresholds.
type chaosCheck struct {
	w      io.Writer
	failed []string
	// placed is the code of an answer that placed an order in the run's mode: codeCreated
	// (201) in the synchronous mode, codeAdmitted (202) in the asynchronous one. An answer of
	// the other mode's code counts as neither, so a run against instances in the wrong mode
	// fails its checks instead of passing them.
	placed string
}

// ordered reports whether a placed an order in the run's mode.
func (c *chaosCheck) ordered(a attempt) bool { return a.Code == c.placed }

// threshold prints one measured figure against what it must be, and remembers a failure.
func (c *chaosCheck) threshold(name, want, got string, ok bool) {
	mark := "PASS"
	if !ok {
		mark = "FAIL"
		c.failed = append(c.failed, name)
	}
	fmt.Fprintf(c.w, "  %-4s %-58s want %-12s got %s\n", mark, name, want, got)
}

func (c *chaosCheck) figure(format string, a ...any) { fmt.Fprintf(c.w, "  "+format+"\n", a...) }

type chaosFlags struct {
	experiment, dir, capacityDir, events, dsn, instancesFile, nginxLog, nginxErrorLog, instanceLogs string
	orderMode                                                                                       string
	bound, recovery, overloadP99, lightP99Floor, writtenAfter                                       time.Duration
	goroutines                                                                                      float64
	rateFactor, goodput                                                                             float64
	async                                                                                           asyncVerify
}

// asyncMode reports whether the instances ran SECKILL_ORDER_MODE=async.
func (f chaosFlags) asyncMode() bool { return f.orderMode == "async" }

func runChaosCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f chaosFlags
	fs.StringVar(&f.experiment, "experiment", "", "capacity, kill-instance, redis-kill, mariadb-kill, mariadb-freeze, redis-latency, overload or sentinel")
	fs.StringVar(&f.dir, "dir", "", "what `harness load` wrote for the experiment")
	fs.StringVar(&f.capacityDir, "capacity-dir", "", "overload: the closed-loop capacity runs of the same cluster, comma-separated (before and after the overload); capacity is their mean")
	fs.StringVar(&f.events, "events", "", "file of 'NAME UNIX-SECONDS' lines: when chaos.sh did what")
	fs.StringVar(&f.dsn, "dsn", "", "go-sql-driver DSN of the service's database (the SQL verdict)")
	fs.StringVar(&f.instancesFile, "instances-file", "", "the instances' base URLs, one a line (their /metrics)")
	fs.StringVar(&f.nginxLog, "nginx-log", "", "nginx access log in scripts/cluster.sh's chaos format")
	fs.StringVar(&f.nginxErrorLog, "nginx-error-log", "", "nginx error log (dropped connections)")
	fs.StringVar(&f.instanceLogs, "instance-logs", "", "glob of the instances' logs (primary-key clashes)")
	fs.StringVar(&f.orderMode, "order-mode", "sync", "the instances' SECKILL_ORDER_MODE: sync (an order is a 201) or async (a 202; the verdict waits for the writers and adds the asynchronous checks)")
	fs.StringVar(&f.async.redisAddr, "redis", "", "async: the instances' Redis (the books, the streams, the dead letters); needed with -dsn")
	fs.StringVar(&f.async.url, "url", "", "async: where to ask GET /api/orders/{id} for every accepted order (nginx); empty: not asked")
	fs.DurationVar(&f.async.drainTimeout, "drain-timeout", 60*time.Second, "async: how long the writers may take to write every accepted order")
	fs.DurationVar(&f.writtenAfter, "written-after", 10*time.Second, "async, a MariaDB fault: the backlog is back to its level before the fault within this after the store answers again")
	fs.DurationVar(&f.bound, "bound", 3*time.Second, "a store that is down or frozen is answered 503 within this")
	fs.DurationVar(&f.recovery, "recovery", time.Second, "the first order after a store is back succeeds within this")
	fs.DurationVar(&f.overloadP99, "overload-p99", 50*time.Millisecond, "p99 latency of the 503 overloaded answers")
	fs.DurationVar(&f.lightP99Floor, "light-p99-floor", 20*time.Millisecond, "overload: the light load from 1 s after may reach a p99 of 2 × its p99 before, or this when that is less")
	fs.Float64Var(&f.goroutines, "goroutines", 500, "bound of go_goroutines of each instance during a fault")
	fs.Float64Var(&f.rateFactor, "rate-factor", 3, "capacity: the open-loop rate written to rate.txt is this × capacity")
	fs.Float64Var(&f.goodput, "goodput", 0.9, "overload: orders/s must be at least this × capacity")
	timeout := stepTimeout(fs, "the SQL verdict's database reads and the instances' /metrics")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := &chaosCheck{w: stdout, placed: codeCreated}
	switch f.orderMode {
	case "sync":
	case "async":
		c.placed = codeAdmitted
		f.async.killedHolding = -1
		if f.dsn != "" && f.async.redisAddr == "" {
			return errors.New("chaos-check: -order-mode async with -dsn needs -redis: the verdict reads the books there")
		}
		if *timeout <= f.async.drainTimeout {
			return fmt.Errorf("chaos-check: -timeout %s must exceed -drain-timeout %s: the drain is one of its waits", *timeout, f.async.drainTimeout)
		}
	default:
		return fmt.Errorf("chaos-check: -order-mode %q: want sync or async", f.orderMode)
	}
	// Every wait below has this deadline, besides the bounds of its own (the DSN's timeouts, a
	// scrape's).
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var wait dbWait
	if f.dsn != "" {
		var err error
		if wait, err = newDBWait(f.dsn, *timeout); err != nil {
			return fmt.Errorf("chaos-check: -dsn: %w", err)
		}
	}
	as, err := readAttempts(filepath.Join(f.dir, "requests.csv"))
	if err != nil {
		return err
	}
	ev, err := readEvents(f.events)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "== %s: %s\n", f.experiment, describeAttempts(as))
	switch f.experiment {
	case "capacity":
		return checkCapacity(c, f, as)
	case "kill-instance":
		err = checkKillInstance(c, f, as)
	case "redis-kill", "mariadb-kill", "mariadb-freeze", "sentinel":
		err = checkStoreOutage(c, f, as, ev)
	case "redis-latency":
		err = checkRedisLatency(c, f, as, ev)
	case "overload":
		err = checkOverload(c, f, as)
	default:
		return fmt.Errorf("chaos-check: unknown -experiment %q", f.experiment)
	}
	if err != nil {
		return err
	}
	if f.dsn != "" {
		ok, err := chaosVerdict(ctx, stdout, c, f, wait, as)
		if err != nil {
			return err
		}
		c.threshold("SQL verdict (harness verify)", "PASS", passFail(ok), ok)
	}
	if len(c.failed) > 0 {
		fmt.Fprintf(stdout, "RESULT %s: FAIL (%s)\n", f.experiment, strings.Join(c.failed, "; "))
		return errors.New("chaos-check: " + f.experiment + " failed")
	}
	fmt.Fprintf(stdout, "RESULT %s: PASS\n", f.experiment)
	return nil
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func describeAttempts(as []attempt) string {
	users := map[int64]bool{}
	byCode := map[string]int{}
	for _, a := range as {
		users[a.User] = true
		byCode[a.Code]++
	}
	return fmt.Sprintf("%d users, %d requests: %s", len(users), len(as), formatCounts(byCode))
}

// ordersPerSec is the rate of the orders placed in phase (placed: the mode's code) over the time
// their requests arrived.
func ordersPerSec(as []attempt, phase, placed string) (rate float64, created int, window time.Duration) {
	var first, last time.Time
	for _, a := range as {
		if a.Phase != phase {
			continue
		}
		if first.IsZero() || a.Start.Before(first) {
			first = a.Start
		}
		if a.End.After(last) {
			last = a.End
		}
		if a.Code == placed {
			created++
		}
	}
	window = last.Sub(first)
	if window <= 0 {
		return 0, created, 0
	}
	return float64(created) / window.Seconds(), created, window
}

func checkCapacity(c *chaosCheck, f chaosFlags, as []attempt) error {
	rate, created, window := ordersPerSec(as, phaseMain, c.placed)
	lat := latencies(as, c.ordered)
	c.figure("capacity (closed loop): %d orders in %.1f s = %.1f orders/s; %s latency p50 %s p99 %s",
		created, window.Seconds(), rate, statusOf(c.placed), ms(pct(lat, 0.5)), ms(pct(lat, 0.99)))
	if rate <= 0 {
		return errors.New("chaos-check: capacity: no orders")
	}
	open := rate * f.rateFactor
	c.figure("open-loop rate for the overload experiment: %.0f users/s (%.1f × capacity)", open, f.rateFactor)
	return os.WriteFile(filepath.Join(f.dir, "rate.txt"), fmt.Appendf(nil, "%.0f\n%.3f\n", open, rate), 0o644)
}

// unserved counts the users that never got an order (an answer of code placed, or a 409
// already_ordered).
func unserved(as []attempt, placed string) (users, without int) {
	served := map[int64]bool{}
	for _, a := range as {
		served[a.User] = served[a.User] || a.Code == placed || a.Code == "already_ordered"
	}
	for _, ok := range served {
		if !ok {
			without++
		}
	}
	return len(served), without
}

func checkUnserved(c *chaosCheck, as []attempt) {
	users, without := unserved(as, c.placed)
	c.threshold("users who retried until served, without an order", "0", fmt.Sprintf("%d of %d", without, users), without == 0)
}

func checkKillInstance(c *chaosCheck, f chaosFlags, as []attempt) error {
	checkUnserved(c, as)
	if f.nginxLog == "" {
		return errors.New("chaos-check: kill-instance needs -nginx-log")
	}
	nf, err := readNginxLog(f.nginxLog)
	if err != nil {
		return err
	}
	c.figure("nginx: %d requests, %d × 502, %d passed on before anything was sent (connect failed)", nf.Requests, nf.Status502, nf.MovedUnsent)
	c.threshold("POSTs passed to another instance after being sent", "0", fmt.Sprint(nf.RetriedPOSTs), nf.RetriedPOSTs == 0)
	return nil
}

func readNginxLog(path string) (nginxFacts, error) {
	r, err := os.Open(path)
	if err != nil {
		return nginxFacts{}, fmt.Errorf("nginx log: %w", err)
	}
	defer r.Close()
	return parseNginxLog(r)
}

// checkStoreOutage judges a store killed or frozen between the events fault_start and
// fault_end, answering again at store_up. An order needs every store in the synchronous mode,
// and Redis alone in the asynchronous one: there a MariaDB fault is judged by
// checkAdmittedThrough instead.
func checkStoreOutage(c *chaosCheck, f chaosFlags, as []attempt, ev map[string]time.Time) error {
	start, end, up := ev["fault_start"], ev["fault_end"], ev["store_up"]
	if start.IsZero() || end.IsZero() || up.IsZero() {
		return errors.New("chaos-check: events need fault_start, fault_end and store_up")
	}
	c.figure("fault %s → %s (%.1f s); store answering %.2f s after fault_end", clock(start), clock(end), end.Sub(start).Seconds(), up.Sub(end).Seconds())
	printTimeline(c, as, start.Add(-2*time.Second), up.Add(3*time.Second), start, up)
	if f.asyncMode() && strings.HasPrefix(f.experiment, "mariadb-") {
		return checkAdmittedThrough(c, f, as, start, end, up)
	}
	// Answered while the store was away: every one a 503. With Sentinel the end of the fault is
	// when a poll of the sentinels sees the switch, which the service's failover client (told
	// by +switch-master) may beat: an order then is the service back early, not a fault.
	allowed := func(a attempt) bool { return a.Status == 503 || (f.experiment == "sentinel" && c.ordered(a)) }
	during, not503, other, worst := duringFault(as, start, end, allowed)
	c.threshold("requests answered during the fault", "> 0", fmt.Sprint(during), during > 0)
	name := "of those, answers other than 503"
	if f.experiment == "sentinel" {
		name += " (or " + statusOf(c.placed) + " on the new primary)"
	}
	c.threshold(name, "0", fmt.Sprintf("%d %s", not503, formatCounts(other)), not503 == 0)
	c.threshold("slowest answer to a request in flight during the fault", "<= "+f.bound.String(), ms(worst), worst <= f.bound)
	rec, ok := recoveryAfter(as, up, c.placed)
	c.threshold("first order after the store answers again", "<= "+f.recovery.String(), recString(rec, ok), ok && rec <= f.recovery)
	peak := peakGoroutines(c, f)
	c.threshold("go_goroutines of an instance, peak", fmt.Sprintf("<= %.0f", f.goroutines), fmt.Sprintf("%.0f", peak), peak <= f.goroutines)
	checkUnserved(c, as)
	if f.experiment == "redis-kill" || f.experiment == "sentinel" {
		n, err := countInLogs(f.instanceLogs, "for key 'PRIMARY'")
		if err != nil {
			return err
		}
		c.threshold("primary-key clashes in the instances' logs", "0", fmt.Sprint(n), n == 0)
	}
	return nil
}

// duringFault counts the requests sent and answered between start and end, and those of them
// whose answer allowed refuses, by code; worst is the slowest answer to a request in flight at
// any moment of the fault, which must come within the bound.
func duringFault(as []attempt, start, end time.Time, allowed func(attempt) bool) (during, refused int, codes map[string]int, worst time.Duration) {
	codes = map[string]int{}
	for _, a := range as {
		if !a.Start.Before(start) && a.End.Before(end) {
			during++
			if !allowed(a) {
				refused++
				codes[a.Code]++
			}
		}
		if a.End.After(start) && a.Start.Before(end) {
			worst = max(worst, a.latency())
		}
	}
	return during, refused, codes, worst
}

// statusOf is the HTTP status of an order placed with code placed, as the thresholds name it.
func statusOf(placed string) string {
	if placed == codeAdmitted {
		return "202"
	}
	return "201"
}

// checkAdmittedThrough judges a MariaDB fault in the asynchronous mode: admission is one Redis
// script, so the orders go on being admitted (202) while the database is away, they wait in
// the stream (the backlog rises: otherwise the fault tested nothing), and the writers write
// them once it is back (the backlog falls to where it was before the fault within
// -written-after; the verdict then requires every 202 to be one row).
func checkAdmittedThrough(c *chaosCheck, f chaosFlags, as []attempt, start, end, up time.Time) error {
	during, other, codes, worst := duringFault(as, start, end, c.ordered)
	c.threshold("requests answered during the fault", "> 0", fmt.Sprint(during), during > 0)
	c.threshold("of those, answers other than 202 (admission needs Redis alone)", "0", fmt.Sprintf("%d %s", other, formatCounts(codes)), other == 0)
	c.threshold("slowest answer to a request in flight during the fault", "<= "+f.bound.String(), ms(worst), worst <= f.bound)
	ws, err := readWatch(filepath.Join(f.dir, "watch.csv"))
	if err != nil {
		return err
	}
	b := backlogAround(ws, start, end, up)
	c.figure("backlog (%s, refreshed about once a second, every 2 s or so while the database hangs; read every 250 ms): %.0f before the fault, peak %.0f during it",
		"seckill_async_backlog", b.before, b.peak)
	c.threshold("backlog during the fault above its level before (the orders waited)", fmt.Sprintf("> %.0f", b.before), fmt.Sprintf("%.0f", b.peak), b.peak > b.before)
	got := "not within the run"
	if b.writtenOK {
		got = ms(b.written)
	}
	c.threshold("backlog back to its level before, after the store answers again", "<= "+f.writtenAfter.String(), got, b.writtenOK && b.written <= f.writtenAfter)
	peak := peakGoroutines(c, f)
	c.threshold("go_goroutines of an instance, peak", fmt.Sprintf("<= %.0f", f.goroutines), fmt.Sprintf("%.0f", peak), peak <= f.goroutines)
	checkUnserved(c, as)
	return nil
}

// backlog is what the instances' backlog gauge read around a fault.
type backlog struct {
	before, peak float64       // the most any instance read in the 2 s before the fault; during it
	written      time.Duration // after the store answered, until every instance read at most before
	writtenOK    bool
}

// backlogAround reads the backlog gauge from the samples: the level before start, the peak
// between start and end, and how long after up every instance had read the level before again
// (all instances read one Redis: their readings differ only by when each refreshed).
func backlogAround(ws []watchSample, start, end, up time.Time) backlog {
	var b backlog
	for _, s := range ws {
		switch {
		case s.Err:
		case s.T.Before(start) && !s.T.Before(start.Add(-2*time.Second)):
			b.before = max(b.before, s.Backlog)
		case !s.T.Before(start) && s.T.Before(end):
			b.peak = max(b.peak, s.Backlog)
		}
	}
	back := map[int]time.Time{} // each instance's first reading from up on at the level before
	instances := map[int]bool{}
	for _, s := range ws {
		if s.Err {
			continue
		}
		instances[s.Instance] = true
		if _, done := back[s.Instance]; !done && !s.T.Before(up) && s.Backlog <= b.before {
			back[s.Instance] = s.T
		}
	}
	if len(instances) == 0 || len(back) < len(instances) {
		return b
	}
	var last time.Time
	for _, t := range back {
		if t.After(last) {
			last = t
		}
	}
	b.written, b.writtenOK = last.Sub(up), true
	return b
}

func recString(d time.Duration, ok bool) string {
	if !ok {
		return "no order after it"
	}
	return ms(d)
}

// recoveryAfter is how long after t the first request that started after t placed an order
// (an answer of code placed).
func recoveryAfter(as []attempt, t time.Time, placed string) (time.Duration, bool) {
	var first time.Time
	for _, a := range as {
		if a.Code == placed && !a.Start.Before(t) && (first.IsZero() || a.End.Before(first)) {
			first = a.End
		}
	}
	return first.Sub(t), !first.IsZero()
}

func peakGoroutines(c *chaosCheck, f chaosFlags) float64 {
	ws, err := readWatch(filepath.Join(f.dir, "watch.csv"))
	if err != nil || len(ws) == 0 {
		c.figure("no /metrics samples (%v)", err)
		return 1e9
	}
	var peak, fds float64
	var reads, misses int
	for _, s := range ws {
		reads++
		if s.Err {
			misses++
			continue
		}
		peak = max(peak, s.Goroutines)
		fds = max(fds, s.OpenFDs)
	}
	c.figure("/metrics read every 250 ms: %d reads (%d unanswered); peak go_goroutines %.0f, peak open fds %.0f", reads, misses, peak, fds)
	return peak
}

func countInLogs(glob, needle string) (int, error) {
	if glob == "" {
		return 0, errors.New("chaos-check: -instance-logs is needed")
	}
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("chaos-check: no instance logs match %q", glob)
	}
	n := 0
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, err
		}
		n += strings.Count(string(b), needle)
	}
	return n, nil
}

// checkRedisLatency judges Redis replies slowed down by toxiproxy with spikes between the
// events spike1_start … spikeN_end. In the synchronous mode the danger after a spike is a
// stranded lock (order_in_progress); the asynchronous mode takes no lock, and there the
// requests after the spikes must simply be served (no 503).
func checkRedisLatency(c *chaosCheck, f chaosFlags, as []attempt, ev map[string]time.Time) error {
	var lastEnd time.Time
	for i := 1; ; i++ {
		s, e := ev[fmt.Sprintf("spike%d_start", i)], ev[fmt.Sprintf("spike%d_end", i)]
		if s.IsZero() || e.IsZero() {
			break
		}
		c.figure("spike %d: %s → %s (%.1f s)", i, clock(s), clock(e), e.Sub(s).Seconds())
		lastEnd = e
	}
	if lastEnd.IsZero() {
		return errors.New("chaos-check: redis-latency: no spike events")
	}
	first := as[0].Start
	for _, a := range as {
		if a.Start.Before(first) {
			first = a.Start
		}
	}
	printTimeline(c, as, first, lastEnd.Add(5*time.Second), ev["spike1_start"], lastEnd)
	var inProgress, inProgressAfter, unavailableAfter, after int
	settle := lastEnd.Add(time.Second)
	for _, a := range as {
		if a.Code == "order_in_progress" {
			inProgress++
		}
		if !a.Start.Before(settle) {
			after++
			if a.Code == "order_in_progress" {
				inProgressAfter++
			}
			if a.Status == 503 {
				unavailableAfter++
			}
		}
	}
	c.threshold("requests started > 1 s after the last spike", "> 0", fmt.Sprint(after), after > 0)
	if f.asyncMode() {
		c.threshold("of those, 503 answers (the admission not back)", "0", fmt.Sprint(unavailableAfter), unavailableAfter == 0)
	} else {
		c.figure("order_in_progress answers over the whole run: %d (each user has one request at a time: another attempt's lock still held)", inProgress)
		c.threshold("of those, order_in_progress (a stranded lock)", "0", fmt.Sprint(inProgressAfter), inProgressAfter == 0)
	}
	checkUnserved(c, as)
	return nil
}

func checkOverload(c *chaosCheck, f chaosFlags, as []attempt) error {
	if f.capacityDir == "" {
		return errors.New("chaos-check: overload needs -capacity-dir")
	}
	var capacity float64
	var runs []string
	dirs := strings.Split(f.capacityDir, ",")
	for _, dir := range dirs {
		capAs, err := readAttempts(filepath.Join(dir, "requests.csv"))
		if err != nil {
			return err
		}
		r, _, _ := ordersPerSec(capAs, phaseMain, c.placed)
		if r <= 0 {
			// Counted as 0 it would lower the mean, and with it the goodput the overload must
			// reach: a cluster the overload broke would pass its own threshold more easily.
			return fmt.Errorf("chaos-check: overload: the capacity run %s placed no order: no capacity to judge against", dir)
		}
		capacity += r / float64(len(dirs))
		runs = append(runs, fmt.Sprintf("%s %.1f", filepath.Base(dir), r))
	}
	c.figure("capacity: %.1f orders/s, the mean of the closed-loop runs (%s orders/s)", capacity, strings.Join(runs, ", "))
	rate, created, window := ordersPerSec(as, phaseMain, c.placed)
	var requests int
	byCode := map[string]int{}
	for _, a := range as {
		if a.Phase == phaseMain {
			requests++
			byCode[a.Code]++
		}
	}
	c.figure("offered %d requests in %.1f s (%.0f/s = %.1f × capacity %.1f orders/s): %s",
		requests, window.Seconds(), float64(requests)/window.Seconds(), float64(requests)/window.Seconds()/capacity, capacity, formatCounts(byCode))
	c.threshold("goodput (orders/s) / capacity", fmt.Sprintf(">= %.2f", f.goodput), fmt.Sprintf("%.2f (%d orders, %.1f/s)", rate/capacity, created, rate), rate >= f.goodput*capacity)
	rest := requests - byCode[c.placed] - byCode["overloaded"]
	c.threshold("answers neither "+statusOf(c.placed)+" nor 503 overloaded", "0", fmt.Sprint(rest), rest == 0)
	ol := latencies(as, func(a attempt) bool { return a.Phase == phaseMain && a.Code == "overloaded" })
	c.threshold("503 overloaded latency p99", "<= "+ms(f.overloadP99), fmt.Sprintf("%s (p50 %s, n=%d)", ms(pct(ol, 0.99)), ms(pct(ol, 0.5)), len(ol)), len(ol) > 0 && pct(ol, 0.99) <= f.overloadP99)
	all := func(code string) int {
		n := 0
		for _, a := range as {
			if a.Code == code {
				n++
			}
		}
		return n
	}
	c.threshold("dropped connections (no HTTP answer)", "0", fmt.Sprint(all(codeConnError)), all(codeConnError) == 0)
	if f.nginxLog != "" {
		nf, err := readNginxLog(f.nginxLog)
		if err != nil {
			return err
		}
		c.threshold("nginx: 504 answers", "0", fmt.Sprint(nf.All504), nf.All504 == 0)
		c.threshold("nginx: 500 answers of its own", "0", fmt.Sprint(nf.Own500), nf.Own500 == 0)
		c.threshold("nginx: 502 answers", "0", fmt.Sprint(nf.Status502), nf.Status502 == 0)
	}
	if f.nginxErrorLog != "" {
		n, err := countInLogs(f.nginxErrorLog, "worker_connections are not enough")
		if err != nil {
			return err
		}
		c.threshold("nginx: 'worker_connections are not enough'", "0", fmt.Sprint(n), n == 0)
	}
	// Normal latency: the light head phase; after the load, the tail phase from 1 s on.
	head := latencies(as, func(a attempt) bool { return a.Phase == phaseHead && c.ordered(a) })
	var mainEnd time.Time
	for _, a := range as {
		if a.Phase == phaseMain && a.Start.After(mainEnd) {
			mainEnd = a.Start
		}
	}
	settled := mainEnd.Add(time.Second)
	var tail []time.Duration
	tailOther := 0
	for _, a := range as {
		if a.Phase == phaseTail && !a.Start.Before(settled) {
			tail = append(tail, a.latency())
			if !c.ordered(a) {
				tailOther++
			}
		}
	}
	slices.Sort(tail)
	normal := max(2*pct(head, 0.99), f.lightP99Floor)
	c.figure("normal latency (light load before): %s p50 %s p99 %s", statusOf(c.placed), ms(pct(head, 0.5)), ms(pct(head, 0.99)))
	c.threshold("light load from 1 s after: answers other than "+statusOf(c.placed), "0", fmt.Sprintf("%d of %d", tailOther, len(tail)), len(tail) > 0 && tailOther == 0)
	c.threshold("light load from 1 s after: p99 (2 × normal p99, >= "+ms(f.lightP99Floor)+")", "<= "+ms(normal), ms(pct(tail, 0.99)), len(tail) > 0 && pct(tail, 0.99) <= normal)
	return nil
}

// latencies returns the sorted latencies of the attempts keep accepts.
func latencies(as []attempt, keep func(attempt) bool) []time.Duration {
	var out []time.Duration
	for _, a := range as {
		if keep(a) {
			out = append(out, a.latency())
		}
	}
	slices.Sort(out)
	return out
}

// pct is the p-quantile of sorted (nearest rank); 0 for none.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// printTimeline prints one line per second of [from, to): the answers by the second they came.
func printTimeline(c *chaosCheck, as []attempt, from, to, mark1, mark2 time.Time) {
	cols := []string{c.placed, "already_ordered", "unavailable", "overloaded", "order_in_progress"}
	c.figure("%-14s %8s %8s %8s %8s %8s %8s  %s", "second (UTC)", statusOf(c.placed), "409 ao", "503 unav", "503 over", "409 inpr", "other", "max latency")
	from = from.Truncate(time.Second)
	for t := from; t.Before(to); t = t.Add(time.Second) {
		counts := map[string]int{}
		var worst time.Duration
		for _, a := range as {
			if !a.End.Before(t) && a.End.Before(t.Add(time.Second)) {
				counts[a.Code]++
				worst = max(worst, a.latency())
			}
		}
		other := 0
		for k, n := range counts {
			if !slices.Contains(cols, k) {
				other += n
			}
		}
		note := ""
		if !mark1.IsZero() && !mark1.Before(t) && mark1.Before(t.Add(time.Second)) {
			note += " <- fault"
		}
		if !mark2.IsZero() && !mark2.Before(t) && mark2.Before(t.Add(time.Second)) {
			note += " <- back"
		}
		c.figure("%-14s %8d %8d %8d %8d %8d %8d  %s%s", t.UTC().Format("15:04:05"), counts[cols[0]], counts[cols[1]],
			counts[cols[2]], counts[cols[3]], counts[cols[4]], other, ms(worst), note)
	}
}
