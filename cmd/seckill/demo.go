package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/verdict"
	"github.com/seckill/seckill/lessons/pitfall"
)

// serverAddrs returns the configured servers of a guard in serverOnly.
func serverAddrs(st *app.Stores, guard string) []string {
	if guard == "etcd" {
		return st.EtcdEndpoints()
	}
	return st.ZooKeeperAddrs()
}

// serverOnly are the guards whose backend has no embedded stand-in: the server's name and the
// setting that points at it.
var serverOnly = map[string][2]string{
	"zookeeper": {"ZooKeeper", "SECKILL_ZOOKEEPER_ADDRS"},
	"etcd":      {"etcd", "SECKILL_ETCD_ENDPOINTS"},
}

// notRunLine is the demo's line for guard g, whose server has no embedded stand-in, when no
// server of its answers at addrs.
func notRunLine(g string, addrs []string) string {
	how := serverOnly[g]
	return fmt.Sprintf("%-12s NOT RUN: no %s answers at %s; start one with `scripts/services.sh up %s`, or set %s",
		g, how[0], strings.Join(addrs, ","), g, how[1])
}

// absentServer returns the NOT RUN line of guard g, and true, when g needs a server of its own
// and nothing accepts connections at any of its addresses (each given a second): known at
// once, where a server that listens and does not answer takes the connect timeout to tell.
func absentServer(st *app.Stores, g string) (string, bool) {
	if _, ok := serverOnly[g]; !ok {
		return "", false
	}
	addrs := serverAddrs(st, g)
	if slices.ContainsFunc(addrs, pitfall.Reachable) {
		return "", false
	}
	return notRunLine(g, addrs), true
}

// maxStormOrders bounds the orders of one guard's storm (users x per-user).
const maxStormOrders = 1_000_000

// demoOptions shape the storm.
type demoOptions struct {
	users, perUser, stock, inFlight int
	delay                           time.Duration
	guards                          string
	fenceGuards                     string // guards of the fencing experiment; empty skips it
	fenceUsers                      int
}

// runDemo starts two instances behind a round-robin proxy and fires the same storm at them
// once per guard, then prints what reached the database.
func runDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var o demoOptions
	var set *flag.FlagSet // the parsed set: the demo takes no arguments after its flags
	cfg, err := parseConfig("demo", args, getenv, stderr, func(fs *flag.FlagSet) {
		set = fs
		fs.IntVar(&o.users, "users", 300, "distinct users in the storm")
		fs.IntVar(&o.perUser, "per-user", 10, "concurrent orders each user fires at once")
		fs.IntVar(&o.stock, "stock", 100, "stock of each guard's voucher")
		fs.IntVar(&o.inFlight, "in-flight", 40, "users storming at the same time")
		fs.DurationVar(&o.delay, "delay", 5*time.Millisecond, "business processing inside the critical section (overrides SECKILL_ORDER_DELAY)")
		fs.StringVar(&o.guards, "guards", "none,local,redis,reentrant,fair,localremote,redlock,mysql,zookeeper,etcd,"+asyncRow,
			"guards to run, comma-separated (zookeeper and etcd only when one answers at SECKILL_ZOOKEEPER_ADDRS, SECKILL_ETCD_ENDPOINTS; "+asyncRow+": SECKILL_ORDER_MODE=async)")
		fs.StringVar(&o.fenceGuards, "fence-guards", "redis,mysql,zookeeper,etcd",
			"guards of the fencing experiment (leases run out mid-order, zookeeper's session is expired, etcd's lease revoked; fencing off, then on), comma-separated (zookeeper and etcd only when one answers); empty skips it")
		fs.IntVar(&o.fenceUsers, "fence-users", 8, "users in each run of the fencing experiment")
	})
	if err != nil {
		return err
	}
	// `demo redis` ran every guard, and `demo -guards redis x -users 10` a storm of 300 users.
	if err := noArguments(set); err != nil {
		return err
	}
	if o.users < 1 || o.perUser < 1 || o.stock < 1 || o.inFlight < 1 {
		return errors.New("demo: users, per-user, stock and in-flight must be positive")
	}
	// Divided rather than multiplied: the product of two large counts wraps around (2^32 x
	// 2^32 is 0) and would pass.
	if o.users > maxStormOrders/o.perUser {
		return fmt.Errorf("demo: -users %d x -per-user %d orders: at most %d in a storm", o.users, o.perUser, maxStormOrders)
	}
	// A goroutine per user storming at once, and in-flight x per-user is the instances'
	// admission (stormGuard): bounded as well, that product stays within an int.
	if o.inFlight > maxStormOrders {
		return fmt.Errorf("demo: -in-flight %d: at most %d", o.inFlight, maxStormOrders)
	}
	cfg.orderDelay = o.delay
	if o.delay <= 0 {
		// The broken guards' failure shows only while a request waits inside the section.
		return fmt.Errorf("demo: -delay %s: want a positive delay, the processing inside the critical section", o.delay)
	}
	if _, err := cfg.appConfig().OrderConfig(); err != nil {
		return fmt.Errorf("demo: -delay %s must be shorter than the order's deadline, itself shorter than the lock TTL (%s): a guard's lease must outlast the wait inside it (%v)", o.delay, cfg.lockTTL, err)
	}
	guards := strings.Split(o.guards, ",")
	for _, g := range guards {
		if _, ok := app.LockKinds[g]; !ok && g != asyncRow {
			return fmt.Errorf("demo: unknown guard %q; want %s|%s", g, app.LockKindNames(), asyncRow)
		}
	}
	var fenceGuards []string
	if o.fenceGuards != "" {
		fenceGuards = strings.Split(o.fenceGuards, ",")
	}
	for _, g := range fenceGuards {
		if !slices.Contains(fenceKinds, g) {
			return fmt.Errorf("demo: -fence-guards %q: want guards with tokens whose lease runs out mid-order: %s", g, strings.Join(fenceKinds, ","))
		}
	}
	if o.fenceUsers < 1 || o.fenceUsers > 1000 {
		return errors.New("demo: -fence-users must be between 1 and 1000")
	}
	cfg.adminToken = lock.NewProcessID()

	// The instances log only errors: the expected duplicates of the unsafe guards would
	// otherwise bury the table.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	st, err := openStores(ctx, slog.New(slog.NewTextHandler(stderr, nil)), cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	where := "MySQL/MariaDB + Redis"
	if st.Embedded {
		where = "embedded SQLite + embedded Redis (miniredis)"
		if cfg.redlockAddrs == nil {
			where += ", RedLock on five more"
		}
	}
	fmt.Fprintf(stdout, "seckill demo: 2 instances behind a round-robin proxy, on %s\n", where)
	fmt.Fprintf(stdout, "storm per guard: %d users x %d concurrent orders, stock %d, %s processing inside the critical section\n\n",
		o.users, o.perUser, o.stock, o.delay)

	var rows []demoResult
	var notRun []string
	for _, g := range guards {
		c := cfg
		c.lock, c.orderMode = g, app.ModeSync
		if g == asyncRow {
			c.lock, c.orderMode = "redis", app.ModeAsync
		}
		// A guard without an embedded stand-in: say how to get its server, and go on.
		if line, absent := absentServer(st, g); absent {
			notRun = append(notRun, line)
			continue
		}
		r, err := stormGuard(ctx, log, c, st, o)
		var be *app.LockBackendError
		if _, ok := serverOnly[g]; ok && errors.As(err, &be) {
			notRun = append(notRun, notRunLine(g, be.Addrs))
			continue
		}
		if err != nil {
			return fmt.Errorf("demo %s: %w", g, err)
		}
		rows = append(rows, r)
	}
	printDemo(stdout, rows)
	for _, l := range notRun {
		fmt.Fprintln(stdout, l)
	}
	var fences []fenceResult
	quiet := slog.New(slog.DiscardHandler) // the stale holders' lost locks are the point, not news
	for _, g := range fenceGuards {
		if line, absent := absentServer(st, g); absent {
			fmt.Fprintf(stdout, "\nfencing %s\n", line)
			continue
		}
		for _, on := range []bool{false, true} {
			r, err := runFenceTrial(ctx, quiet, cfg.appConfig(), st, fenceTrial{guard: g, fencing: on, users: o.fenceUsers})
			if err != nil {
				return fmt.Errorf("demo fencing %s: %w", g, err)
			}
			fences = append(fences, r)
		}
	}
	if len(fences) > 0 {
		printFencing(stdout, fences)
	}
	for _, r := range rows {
		if !r.ok() {
			return errors.New("demo: verdict failed (see table)")
		}
	}
	for _, r := range fences {
		if !r.shown() {
			return errors.New("demo: fencing verdict failed (see table)")
		}
	}
	return nil
}

// fenceKinds are the guards the fencing experiment runs with: those that hand out tokens
// and hold a fixed lease, which runs out mid-order, ZooKeeper, whose holder's session the
// experiment expires mid-order, and etcd, whose holder's lease it revokes. The
// Redisson-style locks' watchdog renews theirs while the holder lives.
var fenceKinds = []string{"redis", "mysql", "zookeeper", "etcd"}

// cluster is two instances behind a round-robin reverse proxy, all on loopback.
type cluster struct {
	url       string
	bases     []string // each instance's own URL
	instances []*app.Instance
	servers   []*http.Server
}

// startCluster starts n instances of cfg over st behind a proxy that sends each user's
// requests to the instances in turn, so that concurrent requests of one user always reach
// more than one instance (a round-robin over all requests only makes that likely).
func startCluster(ctx context.Context, log *slog.Logger, cfg app.Config, st *app.Stores, n int) (*cluster, error) {
	c := &cluster{}
	var targets []*url.URL
	for range n {
		inst, err := newInstance(ctx, log, cfg, st)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.instances = append(c.instances, inst)
		addr, err := c.serve(inst.Handler, orderSpan(cfg.Order))
		if err != nil {
			c.stop()
			return nil, err
		}
		targets = append(targets, &url.URL{Scheme: "http", Host: addr})
		c.bases = append(c.bases, "http://"+addr)
	}
	var turns sync.Map // X-User-ID → *atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			next, _ := turns.LoadOrStore(r.In.Header.Get(api.HeaderUserID), new(atomic.Uint64))
			r.SetURL(targets[next.(*atomic.Uint64).Add(1)%uint64(len(targets))])
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute},
	}
	addr, err := c.serve(proxy, orderSpan(cfg.Order))
	if err != nil {
		c.stop()
		return nil, err
	}
	c.url = "http://" + addr
	return c, nil
}

func (c *cluster) serve(h http.Handler, lockTTL time.Duration) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := newHTTPServer(h, lockTTL)
	c.servers = append(c.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), nil
}

func (c *cluster) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := len(c.servers) - 1; i >= 0; i-- {
		_ = c.servers[i].Shutdown(ctx)
	}
	for _, inst := range c.instances {
		_ = inst.Close()
	}
}

// stormGuard runs the storm against a fresh voucher with guard cfg.lock and judges it.
func stormGuard(ctx context.Context, log *slog.Logger, cfg config, st *app.Stores, o demoOptions) (_ demoResult, err error) {
	ac := cfg.appConfig()
	ac.Order.Process = newRendezvous(cfg.orderDelay).wait
	// The demo shows the guards, not admission control: each instance admits the whole
	// storm, which may all reach one of them, so that no order is shed.
	ac.Order.MaxInflight = max(ac.Order.MaxInflight, o.inFlight*o.perUser)
	// Nor the deadlines: unless SECKILL_ORDER_TIMEOUT is set, an order may take half the
	// lease. A storm that queues for the embedded database's one writer, or for five embedded
	// RedLock nodes in this one process (their node timeout is a quarter of the deadline), is
	// slower than production stores, and a shed order would hide the guard under test.
	if ac.Order.Timeout == 0 {
		ac.Order.Timeout = ac.Order.LockTTL / 2
	}
	cl, err := startCluster(ctx, log, ac, st, 2)
	if err != nil {
		return demoResult{}, err
	}
	defer cl.stop()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	defer client.CloseIdleConnections()

	vid, endSale, err := createSale(ctx, client, cl, cfg.adminToken, "demo "+cfg.lock, o.stock)
	if err != nil {
		return demoResult{}, err
	}
	defer func() { err = errors.Join(err, endSale()) }() // before the cluster stops: deferred last
	codes, answered := storm(ctx, client, cl.url, vid, o)
	r := demoResult{guard: cfg.lock, safe: app.LockKinds[cfg.lock].Safe, attempts: o.users * o.perUser, codes: codes,
		facts: verdict.Facts{Client: "the demo", Counts: order.Counts{Orders: map[string]float64{}}}}
	var asyncChecks []verdict.Check
	if cfg.orderMode == app.ModeAsync {
		r.guard, r.safe = asyncRow, true
		r.facts.Accepted = "202" // the checks' names say what accepted the orders, as the load test's do
		if asyncChecks, err = drainAsync(ctx, cl.instances, vid, len(answered)); err != nil {
			return demoResult{}, err
		}
	}
	for _, inst := range cl.instances {
		c, err := order.ReadCounts(inst.Registry)
		if err != nil {
			return demoResult{}, err
		}
		r.facts.Counts = r.facts.Counts.Add(c)
		r.facts.Instances++
	}
	run := []verdict.Voucher{{Scenario: cfg.lock, ID: vid, Stock: int64(o.stock)}}
	if err := verdict.ReadDB(ctx, cl.instances[0].DB, run, answered, &r.facts); err != nil {
		return demoResult{}, err
	}
	r.checks = append(verdict.Evaluate(r.facts), asyncChecks...)
	return r, nil
}

// storm fires perUser simultaneous orders for each user, inFlight users at a time, counts
// the answers by error code ("created" for 201) and returns the orders answered 201.
func storm(ctx context.Context, client *http.Client, base string, voucherID int64, o demoOptions) (map[string]int, []verdict.Answered) {
	var mu sync.Mutex
	codes := map[string]int{}
	var answered []verdict.Answered
	users := make(chan int)
	var wg sync.WaitGroup
	for range o.inFlight {
		wg.Go(func() {
			for u := range users {
				start := make(chan struct{})
				var uw sync.WaitGroup
				for range o.perUser {
					uw.Go(func() {
						<-start
						code, id := placeOrder(ctx, client, base, voucherID, int64(u))
						mu.Lock()
						codes[code]++
						if code == "created" {
							answered = append(answered, verdict.Answered{ID: id, User: int64(u), Voucher: voucherID})
						}
						mu.Unlock()
					})
				}
				close(start) // the user's orders leave together
				uw.Wait()
			}
		})
	}
	for u := 1; u <= o.users; u++ {
		users <- u
	}
	close(users)
	wg.Wait()
	return codes, answered
}
