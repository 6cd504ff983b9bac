// Command lockbench measures the project's locks (Redis, RedLock, the MySQL table lock and
// GET_LOCK, ZooKeeper, etcd) against their Go peers (bsm/redislock, go-redsync/redsync, a bare
// GET_LOCK, go-zookeeper/zk's Lock, etcd's concurrency.Mutex) in one run on one machine, and
// prints markdown tables: throughput, waits and fairness, the time until a SIGKILLed holder's
// lock is free again, and what the five-node locks do when nodes are lost.
//
// It is its own module so that the peers stay out of the service's go.mod. It imports
// github.com/seckill/seckill/internal/lock: Go's internal rule is about import paths, and
// this module's path lies under github.com/seckill/seckill, so the import is allowed.
//
//	cd loadtest/lockbench && go run . -duration 1s -rounds 3   # after make services-up
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runBench(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

func runBench(ctx context.Context, args []string, out io.Writer) error {
	began := time.Now()
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	redisAddr := fs.String("redis", "127.0.0.1:6379", "Redis address (the single-node locks)")
	fs.StringVar(redisAddr, "addr", "127.0.0.1:6379", "the same as -redis")
	redlockAddrs := fs.String("redlock", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005", "the RedLock nodes (scripts/services.sh up)")
	mysqlDSN := fs.String("mysql", "root:@tcp(127.0.0.1:3306)/", "MySQL/MariaDB server DSN (the run creates and drops its own database)")
	mysqlDB := fs.String("mysql-db", "", "the database to create (default seckill_lockbench_<random>)")
	zkAddrs := fs.String("zk", "127.0.0.1:2181", "ZooKeeper addresses (scripts/services.sh up)")
	zkRoot := fs.String("zk-root", "", "ZooKeeper node the run works under (default /seckill-lockbench/<random>)")
	zkSession := fs.Duration("zk-session", 4*time.Second, "ZooKeeper session timeout (the kill test waits about this long; 4 s is the server's minimum)")
	etcdAddrs := fs.String("etcd", "", "etcd endpoints; empty: start a private etcd on -etcd-port when the etcd binary exists, else leave etcd out")
	etcdPort := fs.Int("etcd-port", 16379, "client port of the private etcd (the peer port is the next)")
	prefix := fs.String("prefix", "", "key prefix (default lockbench:<random>:)")
	duration := fs.Duration("duration", 3*time.Second, "length of each measured scenario")
	critical := fs.Duration("critical", 200*time.Microsecond, "critical section of the contended scenario")
	sleep := fs.Bool("sleep", false, "hold the lock with time.Sleep(critical) instead of spinning (a short sleep lasts much longer than asked)")
	contenders := fs.Int("contenders", 16, "goroutines contending for one key")
	nRounds := fs.Int("rounds", 3, "rounds; each figure is the median over them (fairness: the worst round)")
	backends := fs.String("backends", "redis,redlock,mysql,zookeeper,etcd", "the backends to run (comma-separated)")
	only := fs.String("only", "", "run only the contestants whose name contains one of these comma-separated words")
	kill := fs.Bool("kill", true, "measure how soon a SIGKILLed holder's lock is free again")
	killLease := fs.Duration("kill-lease", 2*time.Second, "lease of the locks in the kill test")
	nodeLossBase := fs.Int("nodeloss-port", 16301, "first of five ports for private redis-server processes in the node-loss test; 0 skips it")
	child := fs.String("child", "", "internal: run as the kill test's child for this contestant")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	e := &env{redisAddr: *redisAddr, redlockAddrs: splitList(*redlockAddrs), mysqlDSN: *mysqlDSN, mysqlDB: *mysqlDB,
		zkAddrs: splitList(*zkAddrs), etcdAddrs: splitList(*etcdAddrs), zkRoot: *zkRoot, zkSession: *zkSession, prefix: *prefix, lease: lease, killLease: *killLease}
	if e.prefix == "" {
		e.prefix = "lockbench:" + id + ":"
	}
	if e.mysqlDB == "" {
		e.mysqlDB = "seckill_lockbench_" + id
	}
	if e.zkRoot == "" {
		e.zkRoot = "/seckill-lockbench/" + id
	}
	e.etcdPrefix = "/seckill-lockbench/" + strings.ReplaceAll(e.prefix, ":", "/") // the kill test's child shares it
	if *child != "" {
		e.lease = *killLease
		for _, c := range contestants() {
			if c.name == *child {
				return runChild(ctx, e, c)
			}
		}
		return fmt.Errorf("no contestant %q", *child)
	}
	b := bench{env: e, duration: *duration, critical: *critical, sleep: *sleep, contenders: *contenders}

	picked := func(family string) bool {
		return slices.Contains(splitList(strings.ToLower(*backends)), strings.ToLower(strings.TrimSuffix(family, "×5")))
	}
	if len(e.etcdAddrs) == 0 && picked(famEtcd) && (*only == "" || strings.Contains(*only, "etcd")) {
		if _, err := exec.LookPath("etcd"); err == nil {
			addr, stop, err := startEtcd(ctx, *etcdPort)
			if err != nil {
				return err
			}
			defer stop()
			e.etcdAddrs = []string{addr}
		} else {
			fmt.Fprintln(os.Stderr, "lockbench: no etcd binary (Debian package etcd-server): etcd left out")
		}
	}
	var cs []contestant
	var families []string
	for _, c := range contestants() {
		if !picked(c.family) || c.family == famEtcd && len(e.etcdAddrs) == 0 {
			continue
		}
		if *only == "" || slices.ContainsFunc(strings.Split(*only, ","), func(w string) bool { return strings.Contains(c.name, w) }) {
			cs = append(cs, c)
			if !slices.Contains(families, c.family) {
				families = append(families, c.family)
			}
		}
	}
	if slices.Contains(families, famMySQL) {
		if err := e.prepareMySQL(ctx); err != nil {
			return fmt.Errorf("mysql: %w", err)
		}
		defer func() { _ = e.dropMySQL(context.WithoutCancel(ctx)) }()
	}
	if slices.Contains(families, famZK) {
		defer func() { _ = e.removeZK(context.WithoutCancel(ctx)) }()
	}
	rtts, err := e.roundTrips(ctx, families)
	if err != nil {
		return err
	}
	held := b.criticalSection()
	how := "spinning"
	if b.sleep {
		how = "time.Sleep"
	}
	fmt.Fprintf(out, "lockbench %s · %s · %d CPUs (%s), GOMAXPROCS %d · %s\n",
		time.Now().UTC().Format(time.RFC3339), versions(ctx, e), runtime.NumCPU(), cpuModel(), runtime.GOMAXPROCS(0), loadavg())
	fmt.Fprintf(out, "critical section %v by %s (alone it lasts %v) · %d contenders · %v per scenario · median of %d rounds, fairness from the worst round · lease %v\n",
		b.critical, how, held.Round(time.Microsecond), b.contenders, b.duration, *nRounds, lease)
	var rt []string
	for _, f := range families {
		rt = append(rt, fmt.Sprintf("%s %v", f, rtts[f].Round(time.Microsecond)))
	}
	fmt.Fprintf(out, "round trip (median): %s; limit = 1 / (held + round trip)\n\n", strings.Join(rt, ", "))

	// Rounds interleave the contestants, so that a change in the machine's load (it is
	// shared) falls on all of them; the table gives each figure's median over the rounds.
	// Each round starts at another contestant, so that none always follows the same one
	// (what a server does after the last scenario, such as etcd revoking sessions, falls on
	// whoever comes next).
	rounds := make([][]run, len(cs))
	for i := range *nRounds {
		for k := range cs {
			j := (k + i*len(cs) / *nRounds) % len(cs)
			c := cs[j]
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(os.Stderr, "round %d/%d: %s\n", i+1, *nRounds, c.name)
			rounds[j] = append(rounds[j], b.measure(ctx, c))
		}
	}
	runs := make([]run, len(cs))
	for j, rs := range rounds {
		runs[j] = median(rs)
	}
	printPerformance(out, cs, runs, rtts)
	printFairness(out, runs)

	kills := make([]string, len(cs))
	if *kill {
		for j, c := range cs {
			fmt.Fprintf(os.Stderr, "kill -9: %s\n", c.name)
			d, err := b.killRecovery(ctx, c)
			if err != nil {
				kills[j] = "error: " + err.Error()
			} else {
				kills[j] = round(d).String()
			}
		}
	}
	var losses []nodeLoss
	if *nodeLossBase > 0 {
		var five []contestant
		for _, c := range cs {
			if c.family == famRedLock {
				five = append(five, c)
			}
		}
		if len(five) > 0 {
			if losses, err = b.nodeLoss(ctx, five, *nodeLossBase); err != nil {
				fmt.Fprintf(out, "node-loss test failed: %v\n", err)
			}
		}
	}
	printReliability(out, cs, kills, losses, *killLease, e.zkSession)
	if len(losses) > 0 {
		printNodeLoss(out, losses)
	}
	fmt.Fprintf(out, "\nload after the run: %s · the run took %s\n", loadavg(), time.Since(began).Round(time.Second))
	return nil
}

// peerFigure is the best figure among the peers named (by name prefix) in names.
func peerFigure(runs []run, names []string, f func(run) float64) (float64, bool) {
	best, found := 0.0, false
	for _, r := range runs {
		if r.peer && slices.ContainsFunc(names, func(p string) bool { return strings.HasPrefix(r.name, p) }) {
			best, found = max(best, f(r)), true
		}
	}
	return best, found
}

func ratio(v float64, runs []run, names []string, f func(run) float64) string {
	p, ok := peerFigure(runs, names, f)
	if !ok || p == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v/p)
}

func printPerformance(out io.Writer, cs []contestant, runs []run, rtts map[string]time.Duration) {
	fmt.Fprintln(out, "Performance (median of the rounds). \"÷ peer\": ours ÷ the best of its peers in the same run.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| lock | backend | pairs/s, 1 goroutine | pairs/s, 32 goroutines | contended acq/s | held (mean) | ÷ limit | p50 wait | p99 wait | Redis commands/acq | 1 g ÷ peer | 32 g ÷ peer | contended ÷ peer |")
	fmt.Fprintln(out, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var notes []string
	for i, r := range runs {
		c := cs[i]
		name := r.name
		if c.peer {
			name = "*" + name + "* (peer)"
		}
		if r.setupError != nil || r.uncontendedErrors > 0 || r.contendedErrors > 0 {
			name += fmt.Sprintf(" (errors¹: %d uncontended, %d contended)", r.uncontendedErrors, r.contendedErrors)
			notes = append(notes, fmt.Sprintf("¹ %s: setup %v; uncontended, first: %v; contended, first: %v",
				r.name, r.setupError, r.uncontendedError, r.contendedError))
		}
		cmds := "–"
		if r.commandsPerAcq >= 0 {
			cmds = fmt.Sprintf("%.2f", r.commandsPerAcq)
		}
		limit := 1 / (r.critical + rtts[c.family]).Seconds()
		frac := "–"
		if r.critical > 0 {
			frac = fmt.Sprintf("%.0f%%", 100*r.acquisitions/limit)
		}
		v1, v32, vc := "–", "–", "–"
		if !c.peer {
			v1 = ratio(r.pairs1, runs, c.peers, func(r run) float64 { return r.pairs1 })
			v32 = ratio(r.pairs32, runs, c.peers, func(r run) float64 { return r.pairs32 })
			vc = ratio(r.acquisitions, runs, c.peers, func(r run) float64 { return r.acquisitions })
		}
		fmt.Fprintf(out, "| %s | %s | %.0f | %.0f | %.0f | %v | %s | %v | %v | %s | %s | %s | %s |\n",
			name, c.family, r.pairs1, r.pairs32, r.acquisitions, round(r.critical), frac, round(r.p50), round(r.p99), cmds, v1, v32, vc)
	}
	fmt.Fprintln(out)
	for _, n := range notes {
		fmt.Fprintln(out, strings.ReplaceAll(n, "\n", " "))
	}
	for _, r := range runs {
		if w := r.wakes; !r.peer && w.WakesByPublish+w.WakesByLocal+w.WakesByTimer+w.Subscribes > 0 {
			fmt.Fprintf(out, "%s, contended, all rounds: wake-ups %d by the releaser in-process, %d by publish, %d by timer; %d SUBSCRIBE, %d UNSUBSCRIBE\n",
				r.name, w.WakesByLocal, w.WakesByPublish, w.WakesByTimer, w.Subscribes, w.Unsubscribes)
		}
	}
	fmt.Fprintln(out)
}

func printFairness(out io.Writer, runs []run) {
	fmt.Fprintln(out, "Fairness of the contended run (the worst round): each contender's acquisitions as a multiple of a fair share (1 = its 1/n), Jain's index (1 = all equal, 1/n = one took all). Process stall: the longest gap between the wake-ups of a goroutine sleeping 1 ms at a time, in the round of the longest wait.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| lock | p50 wait | longest wait | longest ÷ p50 | it began at, its contender's wait nº | process stall in that round | longest but first waits | its ÷ p50 | fewest | most | Jain |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range runs {
		name := r.name
		if r.peer {
			name = "*" + name + "* (peer)"
		}
		rat, ratLater := "–", "–"
		if r.p50 > 0 {
			rat = fmt.Sprintf("%.0f×", float64(r.longest)/float64(r.p50))
			ratLater = fmt.Sprintf("%.0f×", float64(r.longestLater)/float64(r.p50))
		}
		fmt.Fprintf(out, "| %s | %v | %v | %s | %v, nº %d | %v | %v | %s | %.2f | %.2f | %.3f |\n", name, round(r.p50), round(r.longest), rat,
			r.longestAt.Round(time.Millisecond), r.longestNth, round(r.stall), round(r.longestLater), ratLater, r.minShare, r.maxShare, r.jain)
	}
	fmt.Fprintln(out)
}

func printReliability(out io.Writer, cs []contestant, kills []string, losses []nodeLoss, killLease, zkSession time.Duration) {
	fmt.Fprintf(out, "Reliability. kill -9: a child process takes the lock and is SIGKILLed; the time until this process holds it, waiting its own way (leases %v, ZooKeeper session timeout %v). Reentrancy and fencing: from the code.\n\n", killLease, zkSession)
	fmt.Fprintln(out, "| lock | kill -9'd holder: lock free after | one node lost | reentrant | fencing token |")
	fmt.Fprintln(out, "| --- | ---: | --- | --- | --- |")
	for i, c := range cs {
		loss := "unavailable (one server)"
		for _, l := range losses {
			if l.name == c.name && len(l.states) > 2 {
				loss = "1 hung: " + l.states[1] + "; 1 down: " + l.states[2]
			}
		}
		if c.family == famRedLock && len(losses) == 0 {
			loss = "not measured"
		}
		k := kills[i]
		if k == "" {
			k = "not measured"
		}
		name := c.name
		if c.peer {
			name = "*" + name + "* (peer)"
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s |\n", name, k, loss, c.reentrant, c.fencing)
	}
	fmt.Fprintln(out)
}

func printNodeLoss(out io.Writer, losses []nodeLoss) {
	fmt.Fprintln(out, "Node loss: five private redis-server processes; one goroutine's acquire+release pairs in each state, one after the other.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| lock | "+strings.Join(nodeLossStates, " | ")+" |")
	fmt.Fprintln(out, "| --- |"+strings.Repeat(" --- |", len(nodeLossStates)))
	for _, l := range losses {
		fmt.Fprintf(out, "| %s | %s |\n", l.name, strings.Join(l.states, " | "))
	}
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// versions names the servers: Redis's version, MySQL's and ZooKeeper's where asked.
func versions(ctx context.Context, e *env) string {
	v := []string{"Redis " + redisVersion(ctx, e.redisAddr)}
	if db, err := e.openMySQL(); err == nil {
		var s string
		if db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&s) == nil {
			v = append(v, "MySQL "+s)
		}
		_ = db.Close()
	}
	return strings.Join(v, ", ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "?"
}

func redisVersion(ctx context.Context, addr string) string {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(f[:3], " ")
}
