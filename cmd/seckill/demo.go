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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// demoOptions shape the storm.
type demoOptions struct {
	users, perUser, stock, inFlight int
	delay                           time.Duration
	guards                          string
}

// runDemo starts two instances behind a round-robin proxy and fires the same storm at them
// once per guard, then prints what reached the database.
func runDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var o demoOptions
	cfg, err := parseConfig("demo", args, getenv, stderr, func(fs *flag.FlagSet) {
		fs.IntVar(&o.users, "users", 300, "distinct users in the storm")
		fs.IntVar(&o.perUser, "per-user", 10, "concurrent orders each user fires at once")
		fs.IntVar(&o.stock, "stock", 100, "stock of each guard's voucher")
		fs.IntVar(&o.inFlight, "in-flight", 40, "users storming at the same time")
		fs.DurationVar(&o.delay, "delay", 5*time.Millisecond, "business processing inside the critical section (overrides SECKILL_ORDER_DELAY)")
		fs.StringVar(&o.guards, "guards", "none,local,redis,reentrant,fair,localremote", "guards to run, comma-separated")
	})
	if err != nil {
		return err
	}
	if o.users < 1 || o.perUser < 1 || o.stock < 0 || o.inFlight < 1 || o.users*o.perUser > 1_000_000 {
		return errors.New("demo: users, per-user and in-flight must be positive, stock not negative, users*per-user at most 1e6")
	}
	guards := strings.Split(o.guards, ",")
	for _, g := range guards {
		if _, ok := lockKinds[g]; !ok {
			return fmt.Errorf("demo: unknown guard %q; want %s", g, lockKindsUsage())
		}
	}
	cfg.orderDelay = o.delay
	cfg.adminToken = lock.NewProcessID()

	// The instances log only errors: the expected duplicates of the unsafe guards would
	// otherwise bury the table.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	st, err := openStores(slog.New(slog.NewTextHandler(stderr, nil)), cfg)
	if err != nil {
		return err
	}
	defer st.close()
	if err := migrateEmbedded(ctx, st); err != nil {
		return err
	}
	where := "MySQL/MariaDB + Redis"
	if st.embedded {
		where = "embedded SQLite + embedded Redis (miniredis)"
	}
	fmt.Fprintf(stdout, "seckill demo: 2 instances behind a round-robin proxy, on %s\n", where)
	fmt.Fprintf(stdout, "storm per guard: %d users x %d concurrent orders, stock %d, %s processing inside the critical section\n\n",
		o.users, o.perUser, o.stock, o.delay)

	var rows []demoResult
	for _, g := range guards {
		c := cfg
		c.lock = g
		r, err := stormGuard(ctx, log, c, st, o)
		if err != nil {
			return fmt.Errorf("demo %s: %w", g, err)
		}
		rows = append(rows, r)
	}
	printDemo(stdout, rows)
	for _, r := range rows {
		if !r.ok() {
			return errors.New("demo: verdict failed (see table)")
		}
	}
	return nil
}

// cluster is two instances behind a round-robin reverse proxy, all on loopback.
type cluster struct {
	url       string
	instances []*instance
	servers   []*http.Server
}

func startCluster(ctx context.Context, log *slog.Logger, cfg config, st *stores, n int) (*cluster, error) {
	c := &cluster{}
	var targets []*url.URL
	for range n {
		inst, err := newInstance(ctx, log, cfg, st)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.instances = append(c.instances, inst)
		addr, err := c.serve(inst.handler)
		if err != nil {
			c.stop()
			return nil, err
		}
		targets = append(targets, &url.URL{Scheme: "http", Host: addr})
	}
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(targets[next.Add(1)%uint64(len(targets))])
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute},
	}
	addr, err := c.serve(proxy)
	if err != nil {
		c.stop()
		return nil, err
	}
	c.url = "http://" + addr
	return c, nil
}

func (c *cluster) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
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
		_ = inst.close()
	}
}

// stormGuard runs the storm against a fresh voucher with guard cfg.lock.
func stormGuard(ctx context.Context, log *slog.Logger, cfg config, st *stores, o demoOptions) (demoResult, error) {
	cl, err := startCluster(ctx, log, cfg, st, 2)
	if err != nil {
		return demoResult{}, err
	}
	defer cl.stop()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	defer client.CloseIdleConnections()

	now := time.Now().UTC()
	vid, err := createVoucher(ctx, client, cl.url, cfg.adminToken, voucherRequest{
		Title: "demo " + cfg.lock, Stock: o.stock, BeginTime: now.Add(-time.Minute), EndTime: now.Add(time.Hour),
	})
	if err != nil {
		return demoResult{}, err
	}
	codes := storm(ctx, client, cl.url, vid, o)
	r := demoResult{guard: cfg.lock, safe: lockKinds[cfg.lock].safe, attempts: o.users * o.perUser, initialStock: o.stock, codes: codes}
	for _, inst := range cl.instances {
		dup, err := counterValue(inst.registry, "seckill_orders_total", "result", "duplicate_blocked_by_db")
		if err != nil {
			return demoResult{}, err
		}
		lost, err := counterValue(inst.registry, "seckill_lock_lost_total", "", "")
		if err != nil {
			return demoResult{}, err
		}
		r.dupBlocked += dup
		r.lockLost += lost
	}
	if err := r.readDB(ctx, cl.instances[0].db, vid); err != nil {
		return demoResult{}, err
	}
	return r, nil
}

// storm fires perUser simultaneous orders for each user, inFlight users at a time, and
// counts the answers by error code ("created" for 201).
func storm(ctx context.Context, client *http.Client, base string, voucherID int64, o demoOptions) map[string]int {
	var mu sync.Mutex
	codes := map[string]int{}
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
						code := placeOrder(ctx, client, base, voucherID, int64(u))
						mu.Lock()
						codes[code]++
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
	return codes
}
