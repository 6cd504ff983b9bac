package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/async"
)

// loadConfig is one run of the chaos experiments' load driver (`harness load`).
type loadConfig struct {
	url, adminToken, out, lock, scenario string
	mode                                 string // open: rate new users a second; closed: workers users at a time
	rate                                 float64
	workers                              int
	burst                                int // concurrent orders each user sends at once (a duplicate storm)
	duration                             time.Duration
	retry                                bool // each user retries as docs/chaos.md tells a client to
	budget                               time.Duration
	timeout                              time.Duration
	stock                                int64
	userBase                             int64
	// lightRate is the arrival rate of the light phases before (head) and after (tail) the main
	// load: they give "normal latency" and how soon it returns.
	lightRate  float64
	head, tail time.Duration
	watch      []string
}

// Phases of a load run, as recorded in requests.csv.
const (
	phaseHead = "head"
	phaseMain = "main"
	phaseTail = "tail"
)

// Outcome codes that are not the service's error codes.
const (
	codeCreated   = "created"    // 201: the synchronous mode placed the order
	codeAdmitted  = "admitted"   // 202: the asynchronous mode admitted it, pending
	codeConnError = "conn_error" // no HTTP answer: refused, reset, closed, or the client timeout
)

// attempt is one order request as the driver saw it.
type attempt struct {
	Start, End time.Time
	Phase      string
	User       int64
	N          int // 1 for a user's first request, 2 for its first retry, ...
	Status     int // 0: no HTTP answer
	Code       string
	OrderID    string // of a 201, or of a 409 already_ordered (the user's existing order)
}

func (a attempt) latency() time.Duration { return a.End.Sub(a.Start) }

// placed reports whether the answer gave the user a new order: a 201, or the asynchronous
// mode's 202.
func (a attempt) placed() bool { return a.Code == codeCreated || a.Code == codeAdmitted }

// lost reports whether the client lost the answer: none at all, or a 5xx (nginx's 502 for an
// instance that died with the order in hand, a 503 for an order that ran out of time), after
// which the order may exist or not. The k6 script's lost() (loadtest/k6/seckill.js).
func (a attempt) lost() bool { return a.Status == 0 || a.Status >= 500 }

// knownOrder is an order the client knows the id of.
type knownOrder struct {
	ID   string
	User int64
}

// knownOrders returns each order the client knows of, once per user told of it, as the k6
// script's settle decides it: the id of every 201 (or 202 in the asynchronous mode); and, for
// a user none of whose requests was answered so but one of which was lost, the id its first
// 409 already_ordered carries (its lost answer's order). Only then is a 409 taken for an order: an already_ordered
// given to a user who was never answered 201 or 202 and lost nothing names an order nobody
// was told of, and the verdict must count its row as such, not as answered. unnamed lists the
// users in that case whose already_ordered carried no id; their order is looked up by (user,
// voucher) (chaosVerdict).
func knownOrders(as []attempt) (orders []knownOrder, unnamed []int64) {
	type seen struct {
		created, lost, conflict bool
		conflictID              string
	}
	users := map[int64]*seen{}
	var byArrival []int64
	// Once per user: an id answered to two users is two answers, and the verdict must compare
	// each with the row (which belongs to one of them at most).
	logged := map[knownOrder]bool{}
	for _, a := range as {
		u := users[a.User]
		if u == nil {
			u = &seen{}
			users[a.User] = u
			byArrival = append(byArrival, a.User)
		}
		switch {
		case a.placed():
			u.created = true
			if o := (knownOrder{ID: a.OrderID, User: a.User}); !logged[o] {
				logged[o] = true
				orders = append(orders, o)
			}
		case a.lost():
			u.lost = true
		case a.Code == "already_ordered":
			u.conflict = true
			if u.conflictID == "" {
				u.conflictID = a.OrderID
			}
		}
	}
	for _, user := range byArrival {
		switch u := users[user]; {
		case u.created || !u.lost || !u.conflict:
		case u.conflictID == "":
			unnamed = append(unnamed, user)
		case !logged[knownOrder{ID: u.conflictID, User: user}]:
			o := knownOrder{ID: u.conflictID, User: user}
			logged[o] = true
			orders = append(orders, o)
		}
	}
	return orders, unnamed
}

// final reports whether a client stops on this answer: the order exists (201, or 409
// already_ordered), can never exist (sold out, not on sale), or the request is wrong. A 5xx, no
// answer at all, and 409 order_in_progress (another attempt still holds the lock) are retried.
func (a attempt) final() bool {
	switch {
	case a.Status == 0 || a.Status >= 500:
		return false
	case a.Status == http.StatusConflict && a.Code == "order_in_progress":
		return false
	}
	return true
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c loadConfig
	var watch string
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "base URL (nginx)")
	fs.StringVar(&c.adminToken, "admin-token", "loadtest-admin-token", "bearer token to create the run's voucher")
	fs.StringVar(&c.out, "out", "run/chaos/load", "directory for summary.json, orders.log, requests.csv, watch.csv")
	fs.StringVar(&c.lock, "lock", "redis", "SECKILL_LOCK of the instances, recorded in summary.json")
	fs.StringVar(&c.scenario, "scenario", "chaos", "name of the run's voucher in the verdict")
	fs.StringVar(&c.mode, "mode", "open", "open: -rate new users a second; closed: -workers users at a time")
	fs.Float64Var(&c.rate, "rate", 50, "open loop: new users a second")
	fs.IntVar(&c.workers, "workers", 64, "closed loop: concurrent users")
	fs.IntVar(&c.burst, "burst", 1, "orders each user sends at once, each retried on its own (a duplicate storm: one order must come of them)")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "time new users arrive in the main phase")
	fs.BoolVar(&c.retry, "retry", true, "retry 5xx, connection errors and order_in_progress with backoff (100 ms doubling to 1 s, jittered) until the order exists or -budget ends")
	fs.DurationVar(&c.budget, "budget", 60*time.Second, "how long a retrying user keeps trying")
	fs.DurationVar(&c.timeout, "timeout", 45*time.Second, "client timeout of one request (longer than nginx can take to answer an order: proxy_next_upstream_timeout 10 s + connect 2 s + read 30 s)")
	fs.Int64Var(&c.stock, "stock", 1<<24, "stock of the run's voucher")
	fs.Int64Var(&c.userBase, "user-base", 1, "first user id")
	fs.Float64Var(&c.lightRate, "light-rate", 20, "arrival rate of the head and tail phases")
	fs.DurationVar(&c.head, "head", 0, "light phase before the main one")
	fs.DurationVar(&c.tail, "tail", 0, "light phase after the main one")
	fs.StringVar(&watch, "watch", "", "comma-separated instance base URLs whose /metrics (go_goroutines, process_open_fds) are read every 250 ms")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.mode != "open" && c.mode != "closed" {
		return fmt.Errorf("load: -mode %q: want open or closed", c.mode)
	}
	if c.rate <= 0 || c.workers <= 0 || c.lightRate <= 0 || c.burst <= 0 {
		return errors.New("load: -rate, -workers, -burst and -light-rate must be positive")
	}
	for _, u := range strings.Split(watch, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			c.watch = append(c.watch, u)
		}
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	d, err := newDriver(c)
	if err != nil {
		return err
	}
	vid, err := d.createVoucher(ctx)
	if err != nil {
		return err
	}
	stopWatch := d.startWatch(ctx)
	d.run(ctx, vid)
	stopWatch()
	if err := d.write(vid); err != nil {
		return err
	}
	printLoadSummary(stdout, c, d.attempts)
	return ctx.Err()
}

type driver struct {
	c      loadConfig
	client *http.Client // the admin API (the watch has a client of its own)
	orders *leanClient  // the order POSTs

	mu       sync.Mutex
	attempts []attempt
	watched  []watchSample
	nextUser int64
}

func newDriver(c loadConfig) (*driver, error) {
	orders, err := newLeanClient(c.url, c.timeout, 8192, 0)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	return &driver{c: c, client: &http.Client{Timeout: c.timeout}, orders: orders, nextUser: c.userBase}, nil
}

func (d *driver) createVoucher(ctx context.Context) (int64, error) {
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{
		"title": "chaos " + d.c.scenario + " " + now.Format(time.RFC3339Nano), "stock": d.c.stock,
		"beginTime": now.Add(-time.Minute), "endTime": now.Add(2 * time.Hour),
	})
	// The admin API goes through the same proxy; a store may be down when a run starts, so
	// this retries for a while too.
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.c.url+"/api/vouchers", bytes.NewReader(body))
		if err != nil {
			return 0, fmt.Errorf("load: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+d.c.adminToken)
		resp, err := d.client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v struct {
				ID int64 `json:"id"`
			}
			if resp.StatusCode == http.StatusCreated && json.Unmarshal(b, &v) == nil && v.ID > 0 {
				return v.ID, nil
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("load: create voucher: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// run drives the phases one after the other; each user's retries may outlast its phase.
func (d *driver) run(ctx context.Context, vid int64) {
	var users sync.WaitGroup
	if d.c.head > 0 {
		d.openLoop(ctx, &users, vid, phaseHead, d.c.lightRate, d.c.head)
	}
	if d.c.mode == "open" {
		d.openLoop(ctx, &users, vid, phaseMain, d.c.rate, d.c.duration)
	} else {
		d.closedLoop(ctx, vid, d.c.workers, d.c.duration)
	}
	if d.c.tail > 0 {
		d.openLoop(ctx, &users, vid, phaseTail, d.c.lightRate, d.c.tail)
	}
	users.Wait()
}

func (d *driver) newUser() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.nextUser
	d.nextUser++
	return u
}

// openLoop starts rate users a second for dur, on schedule whatever the answers take.
func (d *driver) openLoop(ctx context.Context, users *sync.WaitGroup, vid int64, phase string, rate float64, dur time.Duration) {
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if at.Sub(start) >= dur || ctx.Err() != nil {
			return
		}
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		users.Add(1)
		go func(user int64) {
			defer users.Done()
			d.user(ctx, vid, phase, user)
		}(d.newUser())
	}
}

// closedLoop keeps workers users busy for dur: each starts the next user when its last one ends.
func (d *driver) closedLoop(ctx context.Context, vid int64, workers int, dur time.Duration) {
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				d.user(ctx, vid, phaseMain, d.newUser())
			}
		}()
	}
	wg.Wait()
}

// user places one user's order: -burst requests at once, each retried on its own.
func (d *driver) user(ctx context.Context, vid int64, phase string, user int64) {
	if d.c.burst == 1 {
		d.orderChain(ctx, vid, phase, user)
		return
	}
	var wg sync.WaitGroup
	for range d.c.burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.orderChain(ctx, vid, phase, user)
		}()
	}
	wg.Wait()
}

// orderChain sends one order request, and retries it while the answer is not final if -retry
// is set.
func (d *driver) orderChain(ctx context.Context, vid int64, phase string, user int64) {
	first := time.Now()
	backoff := 100 * time.Millisecond
	for n := 1; ; n++ {
		a := d.order(ctx, vid, phase, user, n)
		d.mu.Lock()
		d.attempts = append(d.attempts, a)
		d.mu.Unlock()
		if a.final() || !d.c.retry || time.Since(first) > d.c.budget || ctx.Err() != nil {
			return
		}
		sleep := backoff/2 + rand.N(backoff)
		backoff = min(2*backoff, time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(sleep):
		}
	}
}

func (d *driver) order(ctx context.Context, vid int64, phase string, user int64, n int) attempt {
	a := attempt{Start: time.Now(), Phase: phase, User: user, N: n}
	if ctx.Err() != nil {
		a.End, a.Code = time.Now(), codeConnError
		return a
	}
	status, body, err := d.orders.post("/api/vouchers/"+strconv.FormatInt(vid, 10)+"/orders", user)
	a.End = time.Now()
	if err != nil {
		a.Code = codeConnError // no whole answer: refused, reset, closed, cut off or too late
		return a
	}
	a.Status = status
	a.Code, a.OrderID = classifyAnswer(status, body)
	return a
}

// classifyAnswer names an answer: "created", "admitted", the service's error code, or
// http_<status> for an answer that is not the service's JSON (a proxy's HTML page, or no body).
func classifyAnswer(status int, body []byte) (code, orderID string) {
	var v struct {
		OrderID string `json:"orderId"`
		Error   struct {
			Code    string `json:"code"`
			OrderID string `json:"orderId"`
		} `json:"error"`
	}
	ok := json.Unmarshal(body, &v) == nil
	switch {
	case status == http.StatusCreated && ok && v.OrderID != "":
		return codeCreated, v.OrderID
	case status == http.StatusAccepted && ok && v.OrderID != "":
		return codeAdmitted, v.OrderID
	case ok && v.Error.Code != "":
		return v.Error.Code, v.Error.OrderID
	}
	return "http_" + strconv.Itoa(status), ""
}

// watchSample is one read of an instance's /metrics; Err when it did not answer.
type watchSample struct {
	T          time.Time
	Instance   int
	Goroutines float64
	OpenFDs    float64
	Backlog    float64 // the asynchronous mode's async.MetricBacklog (0 in the synchronous mode)
	Err        bool
}

func (d *driver) startWatch(ctx context.Context) (stop func()) {
	if len(d.c.watch) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	client := &http.Client{Timeout: time.Second}
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			for i, u := range d.c.watch {
				s := readProcessMetrics(ctx, client, u)
				s.Instance = i + 1
				d.mu.Lock()
				d.watched = append(d.watched, s)
				d.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

func readProcessMetrics(ctx context.Context, client *http.Client, base string) watchSample {
	s := watchSample{T: time.Now(), Err: true}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return s
	}
	resp, err := client.Do(req)
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_goroutines":
			s.Goroutines, _ = strconv.ParseFloat(val, 64)
			s.Err = false
		case "process_open_fds":
			s.OpenFDs, _ = strconv.ParseFloat(val, 64)
		case async.MetricBacklog:
			s.Backlog, _ = strconv.ParseFloat(val, 64)
		}
	}
	return s
}

// write leaves what `harness verify` and `harness chaos-check` read: summary.json (the voucher
// and its stock), orders.log (one line per order the client knows the id of: knownOrders),
// requests.csv and watch.csv.
func (d *driver) write(vid int64) error {
	summary := k6Summary{Lock: d.c.lock, Vouchers: []k6Voucher{{Scenario: d.c.scenario, ID: vid, Stock: d.c.stock}}}
	b, _ := json.MarshalIndent(summary, "", "  ")
	if err := os.WriteFile(filepath.Join(d.c.out, "summary.json"), b, 0o644); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	var orders, reqs, watch bytes.Buffer
	// The verdict counts every line as an order answered to its user (two lines of one user
	// are two orders), so each order is written once per user told of it.
	known, _ := knownOrders(d.attempts)
	for _, o := range known {
		line, _ := json.Marshal(map[string]k6Order{"order": {ID: o.ID, User: o.User, Voucher: vid, Scenario: d.c.scenario}})
		orders.Write(append(line, '\n'))
	}
	for _, a := range d.attempts {
		fmt.Fprintf(&reqs, "%d,%d,%s,%d,%d,%d,%s,%s\n", a.Start.UnixNano(), a.End.UnixNano(), a.Phase, a.User, a.N, a.Status, a.Code, a.OrderID)
	}
	for _, s := range d.watched {
		fmt.Fprintf(&watch, "%d,%d,%g,%g,%g,%t\n", s.T.UnixNano(), s.Instance, s.Goroutines, s.OpenFDs, s.Backlog, s.Err)
	}
	for name, buf := range map[string]*bytes.Buffer{"orders.log": &orders, "requests.csv": &reqs, "watch.csv": &watch} {
		if err := os.WriteFile(filepath.Join(d.c.out, name), buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	return nil
}

func printLoadSummary(w io.Writer, c loadConfig, as []attempt) {
	byCode := map[string]int{}
	users := map[int64]bool{}
	for _, a := range as {
		byCode[a.Code]++
		users[a.User] = true
	}
	load := fmt.Sprintf("%g users/s", c.rate)
	if c.mode == "closed" {
		load = fmt.Sprintf("%d users at a time", c.workers)
	}
	fmt.Fprintf(w, "load: %s loop, %s for %s, retry=%t: %d users, %d requests: %s\n",
		c.mode, load, c.duration, c.retry, len(users), len(as), formatCounts(byCode))
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
