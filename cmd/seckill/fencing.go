package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/lessons/pitfall"
)

// The fencing experiment: every order's lease runs out while the order is inside its
// critical section, and a second request of the same user is granted the lock meanwhile.
// The rendezvous holds each user's first order inside until the second one is inside too;
// that one is granted the lock only once the first one's lease has run out. So every first
// order writes after its lease ended, which the SECKILL_LOCK_TTL=200ms with
// SECKILL_ORDER_DELAY=500ms makes likely and the rendezvous makes certain. The orders'
// deadline must then exceed the lease: order.Config.OutliveLease allows it for this
// experiment alone.
//
// A ZooKeeper lock has no lease of its own: it lives as long as its holder's session. There
// the trial expires the first instance's session once every user's first order is inside
// (zkSessionExpiry), and the second orders are granted the lock as ZooKeeper deletes the
// expired session's nodes. The order service does not abort an order whose lock reports
// Lost(), so the stale writer reaches its write, where only the fence (the node's czxid)
// stops it. An etcd lock lives as long as its holder's lease: there the trial revokes the
// first instance's lease, found by its keys (etcdLeaseExpiry), with the same effect.
const (
	fenceLease    = 200 * time.Millisecond
	fenceDeadline = 20 * time.Second // far beyond the lease: the second order waits for its expiry
	fenceRetry    = 10 * time.Millisecond
)

// fenceUserBlock numbers the trials of this process, each with the user ids from its number
// times fenceUserBlockSize on.
var fenceUserBlock atomic.Int64

const fenceUserBlockSize = 1_000_000

// fenceTrial is one run of the experiment: a guard, fencing on or off, and how many users.
type fenceTrial struct {
	guard   string
	fencing bool
	users   int
}

// fenceResult is what a trial left: the answers by code, both instances' counters, and the
// orders stored.
type fenceResult struct {
	trial  fenceTrial
	codes  map[string]int
	counts order.Counts
	rows   int64
}

func (r fenceResult) dupByDB() float64 { return r.counts.Orders[order.ResultDuplicateByDB] }
func (r fenceResult) fenced() float64  { return r.counts.Orders[order.ResultFenced] }

// shown reports whether the trial shows what it is for: one order stored per user either
// way; without fencing the stale writers' duplicates reach the unique key, with fencing none
// does and the stale writers are fenced.
func (r fenceResult) shown() bool {
	if r.rows != int64(r.trial.users) {
		return false
	}
	if r.trial.fencing {
		return r.dupByDB() == 0 && r.fenced() > 0
	}
	return r.dupByDB() > 0
}

func (r fenceResult) verdict() string {
	switch {
	case r.rows != int64(r.trial.users):
		return fmt.Sprintf("FAIL: %d orders stored for %d users", r.rows, r.trial.users)
	case r.trial.fencing && r.shown():
		return "PASS: every stale writer fenced (409 lock_expired), no duplicate reached the database"
	case r.trial.fencing:
		return "FAIL: stale writers reached the database despite fencing"
	case r.shown():
		return "SHOWN: unfenced, the stale writers' duplicates reached the unique key"
	}
	return "NOT SHOWN: no stale writer reached the database"
}

// runFenceTrial starts two instances of base with the trial's guard over st and, for each
// user at once, sends the first order to one instance and the second to the other (see
// fenceUser).
func runFenceTrial(ctx context.Context, log *slog.Logger, base app.Config, st *app.Stores, tr fenceTrial) (_ fenceResult, err error) {
	gate := newRendezvous(fenceDeadline)
	// expire ends the leases once every first order is inside; the leases of redis and
	// mysql run out on their own.
	expire := func(context.Context) error { return nil }
	var cl *cluster
	switch tr.guard {
	case "zookeeper":
		zp, view, err := zkSessionExpiry(st)
		if err != nil {
			return fenceResult{}, err
		}
		defer zp.Close() // after the cluster stopped: deferred first
		st, expire = view, zp.ExpireFirst
	case "etcd":
		expire = func(ctx context.Context) error { return etcdLeaseExpiry(ctx, st, cl.instances[0].Process) }
	}
	cfg := base
	cfg.Lock, cfg.Fencing = tr.guard, app.FencingOff
	if tr.fencing {
		cfg.Fencing = app.FencingOn
	}
	cfg.Order.LockTTL, cfg.Order.Timeout, cfg.Order.OutliveLease = fenceLease, fenceDeadline, true
	cfg.Order.Process, cfg.Order.ProcessingDelay = gate.wait, 0
	cfg.Order.MaxInflight = max(cfg.Order.MaxInflight, 4*tr.users)
	cl, err = startCluster(ctx, log, cfg, st, 2)
	if err != nil {
		return fenceResult{}, err
	}
	defer cl.stop()
	client := &http.Client{Timeout: 2 * fenceDeadline}
	defer client.CloseIdleConnections()
	vid, endSale, err := createSale(ctx, client, cl, cfg.AdminToken, "fencing "+tr.guard, 2*tr.users)
	if err != nil {
		return fenceResult{}, err
	}
	defer func() { err = errors.Join(err, endSale()) }() // before the cluster stops: deferred last
	// The embedded Redis (miniredis) keeps time only when told: each retry ages it by one
	// lease, as the real clock does a real Redis's keys.
	age := func() {}
	if st.Mini != nil {
		age = func() { st.Mini.FastForward(fenceLease) }
	}
	r := fenceResult{trial: tr, codes: map[string]int{}, counts: order.Counts{Orders: map[string]float64{}}}
	var mu sync.Mutex
	var errs []error
	var wg, inside sync.WaitGroup
	inside.Add(tr.users)
	expired := make(chan error, 1)
	go func() {
		inside.Wait()
		if err := expire(ctx); err != nil {
			expired <- fmt.Errorf("expire the first instance's session: %w", err)
			return
		}
		expired <- nil
	}()
	// Users of their own: a lock left by an earlier run on the same stores (a storm's order
	// whose unlock failed, within its lease) must not meet this trial's first orders.
	users := fenceUserBlock.Add(1) * fenceUserBlockSize
	for u := 1; u <= tr.users; u++ {
		wg.Go(func() {
			var once sync.Once
			in := func() { once.Do(inside.Done) }
			defer in() // a user that failed must not hold up the others' expiry
			codes, err := fenceUser(ctx, client, cl.bases, vid, users+int64(u), gate, in, age)
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			for _, c := range codes {
				r.codes[c]++
			}
		})
	}
	wg.Wait()
	errs = append(errs, <-expired)
	if err := errors.Join(errs...); err != nil {
		return fenceResult{}, err
	}
	for _, inst := range cl.instances {
		c, err := order.ReadCounts(inst.Registry)
		if err != nil {
			return fenceResult{}, err
		}
		r.counts = r.counts.Add(c)
	}
	err = cl.instances[0].DB.WithContext(ctx).Table("voucher_orders").Where("voucher_id = ?", vid).Count(&r.rows).Error
	return r, err
}

// fenceUser sends user's first order to bases[0] and, once it is inside its critical
// section (then it calls inside), the second to bases[1], again every fenceRetry while the
// first one's lock is still alive (order_in_progress): the second is granted the lock once
// that lease has run out (or its session expired), and meets the first inside; age runs
// before each retry. It returns the two answers' codes.
func fenceUser(ctx context.Context, client *http.Client, bases []string, vid, user int64, gate *rendezvous, inside, age func()) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, fenceDeadline)
	defer cancel()
	first := make(chan string, 1)
	go func() {
		code, _ := placeOrder(ctx, client, bases[0], vid, user)
		first <- code
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for gate.count(user) == 0 {
		select {
		case code := <-first:
			return []string{code}, fmt.Errorf("user %d: the first order answered %s before it was inside", user, code)
		case <-ctx.Done():
			return nil, fmt.Errorf("user %d: the first order never got inside: %w", user, ctx.Err())
		case <-tick.C:
		}
	}
	inside()
	for {
		code, _ := placeOrder(ctx, client, bases[1], vid, user)
		if code != "order_in_progress" {
			return []string{<-first, code}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("user %d: the second order was never granted the lock: %w", user, ctx.Err())
		case <-time.After(fenceRetry):
		}
		age()
	}
}

// zkSessionExpiry puts a proxy in front of st's ZooKeeper server and returns it with a view
// of st whose instances connect through it. The first instance started over the view opens
// the first session the proxy relays (an instance waits for its session before the next one
// starts), which the proxy's ExpireFirst ends.
func zkSessionExpiry(st *app.Stores) (*pitfall.ZKSessionProxy, *app.Stores, error) {
	addrs := st.ZooKeeperAddrs()
	if len(addrs) == 0 {
		return nil, nil, errors.New("fencing zookeeper: no ZooKeeper address")
	}
	zp, err := pitfall.NewZKSessionProxy(addrs[0])
	if err != nil {
		return nil, nil, err
	}
	return zp, st.WithZooKeeperAddrs([]string{zp.Addr()}), nil
}

// etcdLeaseExpiry revokes the leases of the etcd lock keys that process (the first
// instance) holds, found among the keys under the locks' prefix by their owner value: etcd
// deletes the keys with the lease, so the second orders are granted the lock, while the first
// instance's client reports its holds lost and goes on with a new lease.
func etcdLeaseExpiry(ctx context.Context, st *app.Stores, process string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: st.EtcdEndpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, lock.DefaultEtcdPrefix+"/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	leases := map[clientv3.LeaseID]bool{}
	for _, kv := range resp.Kvs {
		if strings.HasPrefix(string(kv.Value), process+"-") {
			leases[clientv3.LeaseID(kv.Lease)] = true
		}
	}
	if len(leases) == 0 {
		return fmt.Errorf("fencing etcd: no lock key of process %s", process)
	}
	for id := range leases {
		if _, err := cli.Revoke(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// printFencing writes the experiment's table and verdicts.
func printFencing(w io.Writer, rows []fenceResult) {
	fmt.Fprintf(w, "\nfencing tokens: every lease (%s; zookeeper: the holder's session, expired) runs out mid-order, a second request of each user is granted the lock and meets the first inside\n", fenceLease)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "guard\tfencing\tusers\tcreated\tlock_expired (fenced)\tdup blocked by DB\torders stored\t")
	for _, r := range rows {
		on := map[bool]string{true: "on", false: "off"}[r.trial.fencing]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f\t%d\t\n", r.trial.guard, on, r.trial.users, r.codes["created"],
			r.codes["lock_expired"], r.dupByDB(), r.rows)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, r := range rows {
		on := map[bool]string{true: "on", false: "off"}[r.trial.fencing]
		fmt.Fprintf(w, "%-12s fencing %-3s %s\n", r.trial.guard, on, r.verdict())
	}
}
