// Command lockbench measures the project's Redis locks against bsm/redislock and
// go-redsync/redsync in one run against one Redis, and prints a markdown table.
//
// It is its own module so that the peers stay out of the service's go.mod. It imports
// github.com/seckill/seckill/internal/lock: Go's internal rule is about import paths, and
// this module's path lies under github.com/seckill/seckill, so the import is allowed.
//
//	cd loadtest/lockbench && go run . -addr 127.0.0.1:6379 -duration 3s
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
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
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:6379", "Redis address")
	duration := fs.Duration("duration", 3*time.Second, "length of each measured scenario")
	critical := fs.Duration("critical", 200*time.Microsecond, "critical section of the contended scenario")
	sleep := fs.Bool("sleep", false, "hold the lock with time.Sleep(critical) instead of spinning (a short sleep lasts much longer than asked)")
	contenders := fs.Int("contenders", 16, "goroutines contending for one key")
	nRounds := fs.Int("rounds", 3, "rounds; each figure is the median over them")
	only := fs.String("only", "", "run only the contestants whose name contains one of these comma-separated words")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	b := bench{addr: *addr, duration: *duration, critical: *critical, sleep: *sleep, contenders: *contenders,
		prefix: "lockbench:" + hex.EncodeToString(rnd[:]) + ":"}

	rtt, err := roundTrip(ctx, b.addr)
	if err != nil {
		return fmt.Errorf("redis at %s: %w", b.addr, err)
	}
	held := b.criticalSection()
	how := "spinning"
	if b.sleep {
		how = "time.Sleep"
	}
	fmt.Fprintf(out, "lockbench %s · Redis %s at %s · GOMAXPROCS %d · %s\n",
		time.Now().UTC().Format(time.RFC3339), redisVersion(ctx, b.addr), b.addr, runtime.GOMAXPROCS(0), loadavg())
	fmt.Fprintf(out, "PING round trip (median) %v · critical section %v by %s (alone it lasts %v) · %d contenders · %v per scenario · median of %d rounds\n",
		rtt.Round(time.Microsecond), b.critical, how, held.Round(time.Microsecond), b.contenders, b.duration, *nRounds)
	fmt.Fprintf(out, "limit = 1 / (critical section + round trip), with each run's measured mean critical section\n\n")

	var runs []run
	var cs []contestant
	for _, c := range contestants() {
		if *only == "" || slices.ContainsFunc(strings.Split(*only, ","), func(w string) bool { return strings.Contains(c.name, w) }) {
			cs = append(cs, c)
		}
	}
	// Rounds interleave the contestants, so that a change in the machine's load (it is
	// shared) falls on all of them; the table gives each figure's median over the rounds.
	rounds := make([][]run, len(cs))
	for i := range *nRounds {
		for j, c := range cs {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(os.Stderr, "round %d/%d: %s\n", i+1, *nRounds, c.name)
			rounds[j] = append(rounds[j], b.measure(ctx, c))
		}
	}
	for _, rs := range rounds {
		runs = append(runs, median(rs))
	}
	printTable(out, runs, rtt)
	fmt.Fprintf(out, "\nload after the run: %s\n", loadavg())
	return nil
}

func printTable(out io.Writer, runs []run, rtt time.Duration) {
	var bestPeer, bsmRun *run
	var bestPeerP99 time.Duration
	for i := range runs {
		r := &runs[i]
		if !r.peer {
			continue
		}
		if bestPeer == nil || r.acquisitions > bestPeer.acquisitions {
			bestPeer = r
		}
		if r.p99 > 0 && (bestPeerP99 == 0 || r.p99 < bestPeerP99) {
			bestPeerP99 = r.p99
		}
		if strings.HasPrefix(r.name, "bsm/") {
			bsmRun = r
		}
	}
	fmt.Fprintln(out, "| lock | pairs/s, 1 goroutine | pairs/s, 32 goroutines | contended acquisitions/s | p50 acquire | p99 acquire | commands/acquisition | held (mean) | limit | acq/s ÷ limit | acq/s ÷ best peer | p99 ÷ best peer p99 | pairs/s (1 g) ÷ bsm |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range runs {
		vsPeer, vsP99, vsBsm := "–", "–", "–"
		if bestPeer != nil && bestPeer.acquisitions > 0 {
			vsPeer = fmt.Sprintf("%.2f×", r.acquisitions/bestPeer.acquisitions)
		}
		if bestPeerP99 > 0 && r.p99 > 0 {
			vsP99 = fmt.Sprintf("%.3f", float64(r.p99)/float64(bestPeerP99))
		}
		if bsmRun != nil && bsmRun.pairs1 > 0 {
			vsBsm = fmt.Sprintf("%.2f×", r.pairs1/bsmRun.pairs1)
		}
		name := r.name
		if r.uncontendedError != nil || r.contendedErrors > 0 {
			name += fmt.Sprintf(" (errors: %d contended, first %v; uncontended %v)", r.contendedErrors, r.contendedError, r.uncontendedError)
		}
		limit := 1 / (r.critical + rtt).Seconds()
		fmt.Fprintf(out, "| %s | %.0f | %.0f | %.0f | %v | %v | %.2f | %v | %.0f/s | %.0f%% | %s | %s | %s |\n",
			name, r.pairs1, r.pairs32, r.acquisitions, round(r.p50), round(r.p99), r.commandsPerAcq,
			round(r.critical), limit, 100*r.acquisitions/limit, vsPeer, vsP99, vsBsm)
	}
	fmt.Fprintln(out)
	for _, r := range runs {
		if w := r.wakes; !r.peer && w.WakesByPublish+w.WakesByLocal+w.WakesByTimer+w.Subscribes > 0 {
			fmt.Fprintf(out, "%s, contended, all rounds: wake-ups %d by the releaser in-process, %d by publish, %d by timer; %d SUBSCRIBE, %d UNSUBSCRIBE\n",
				r.name, w.WakesByLocal, w.WakesByPublish, w.WakesByTimer, w.Subscribes, w.Unsubscribes)
		}
	}
	if bestPeer != nil {
		fmt.Fprintf(out, "\nbest peer by contended acquisitions/s: %s; lowest peer p99: %v\n", bestPeer.name, round(bestPeerP99))
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
