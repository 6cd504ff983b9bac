package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lessons/pitfall"
)

const pitfallsUsage = `usage: seckill pitfalls [name…] [--redis ADDR] [--redis-server-bin PATH] [--zookeeper ADDR] [--mermaid] [--list]

Runs the wrong Redis locks from the articles as scripted interleavings, each beside its fix,
and prints every timeline and its outcome. Exit status 1 if a wrong lock fails to show its
failure or a fix fails to hold.

  --redis ADDR             run against a real Redis (default: an embedded one per run)
  --redis-server-bin PATH  redis-server for the failover pitfall (default: redis-server on
                           PATH; without one, failover is left out unless named)
  --zookeeper ADDR         ZooKeeper for the ZooKeeper lessons (default: the first of
                           SECKILL_ZOOKEEPER_ADDRS, else 127.0.0.1:2181; when nothing answers
                           there, they are left out unless named: scripts/services.sh up zookeeper)
  --mermaid                print the timelines as Mermaid sequence diagrams
  --list                   list the pitfalls
`

// runPitfalls is "seckill pitfalls".
func runPitfalls(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pitfalls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, pitfallsUsage) }
	addr := fs.String("redis", "", "")
	bin := fs.String("redis-server-bin", "", "")
	zkAddr := fs.String("zookeeper", "", "")
	mermaid := fs.Bool("mermaid", false, "")
	list := fs.Bool("list", false, "")
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *list {
		return listPitfalls(stdout)
	}
	chosen, err := choosePitfalls(names)
	if err != nil {
		return err
	}
	env := pitfall.Env{RedisAddr: *addr, RedisServerBin: *bin}
	if env.RedisServerBin == "" {
		env.RedisServerBin = lookPath("redis-server", getenv("PATH"))
	}
	if *zkAddr == "" {
		*zkAddr = defaultZooKeeper(getenv)
	}
	zkUp := pitfall.Reachable(*zkAddr)
	if zkUp {
		env.ZooKeeperAddr = *zkAddr
	}
	// go-redis logs failed dials itself; the failover pitfall's dead primary is expected.
	redis.SetLogger(quietLogger{})

	var summary []pitfall.Result
	var notRun []string
	for _, p := range chosen {
		if p.NeedsServerBin && env.RedisServerBin == "" {
			if len(names) > 0 {
				return fmt.Errorf("%s needs redis-server: install it or pass --redis-server-bin", p.Name)
			}
			fmt.Fprintf(stdout, "== %s. %s (%s): not run, needs redis-server (on PATH or --redis-server-bin)\n\n", p.Num, p.Title, p.Name)
			notRun = append(notRun, p.Name)
			continue
		}
		if p.NeedsZooKeeper && !zkUp {
			if len(names) > 0 {
				return fmt.Errorf("%s needs ZooKeeper, and nothing answers at %s: start it with scripts/services.sh up zookeeper, or pass --zookeeper ADDR", p.Name, *zkAddr)
			}
			fmt.Fprintf(stdout, "== %s. %s (%s): not run, needs ZooKeeper and nothing answers at %s (start it with scripts/services.sh up zookeeper, or pass --zookeeper ADDR)\n\n",
				p.Num, p.Title, p.Name, *zkAddr)
			notRun = append(notRun, p.Name)
			continue
		}
		results, err := p.Run(ctx, env)
		if err != nil {
			return err
		}
		if err := printPitfall(stdout, p, results, *mermaid); err != nil {
			return err
		}
		summary = append(summary, results...)
	}
	return printSummary(stdout, summary, notRun)
}

// defaultZooKeeper is the ZooKeeper the lessons use unless --zookeeper says otherwise.
func defaultZooKeeper(getenv func(string) string) string {
	if first, _, _ := strings.Cut(getenv("SECKILL_ZOOKEEPER_ADDRS"), ","); strings.TrimSpace(first) != "" {
		return strings.TrimSpace(first)
	}
	return "127.0.0.1:2181"
}

// parseInterspersed parses flags that may come before, between or after the names.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return names, nil
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func choosePitfalls(names []string) ([]*pitfall.Pitfall, error) {
	if len(names) == 0 {
		return pitfall.All(), nil
	}
	var out []*pitfall.Pitfall
	for _, n := range names {
		p, ok := pitfall.Lookup(n)
		if !ok {
			return nil, fmt.Errorf("no pitfall %q (seckill pitfalls --list)", n)
		}
		out = append(out, p)
	}
	return out, nil
}

func listPitfalls(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range pitfall.All() {
		needs := ""
		switch {
		case p.NeedsServerBin:
			needs = " (needs redis-server)"
		case p.NeedsZooKeeper:
			needs = " (needs ZooKeeper)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\n", p.Num, p.Name, p.Title, needs, p.Source)
	}
	return tw.Flush()
}

func printPitfall(w io.Writer, p *pitfall.Pitfall, results []pitfall.Result, mermaid bool) error {
	fmt.Fprintf(w, "== %s. %s (%s)\n   source: %s\n\n", p.Num, p.Title, p.Name, p.Source)
	for _, r := range results {
		fmt.Fprintf(w, "-- %s: %s\n", r.Variant.Name, r.Variant.Label)
		if mermaid {
			fmt.Fprint(w, pitfall.Mermaid(r.Events))
		} else if err := pitfall.WriteTable(w, r.Events); err != nil {
			return err
		}
		fmt.Fprintf(w, "   outcome: %s\n\n", pitfall.Outcome(r))
	}
	return nil
}

// printSummary prints one line per run, and the lessons not run, and fails if any run did not
// show what it must.
func printSummary(w io.Writer, results []pitfall.Result, notRun []string) error {
	fmt.Fprintln(w, "== summary")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	bad := 0
	for _, r := range results {
		if !r.OK() {
			bad++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Pitfall.Num, r.Pitfall.Name, r.Variant.Name, pitfall.Outcome(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("pitfalls: %d of %d runs did not show what they must", bad, len(results))
	}
	fmt.Fprintf(w, "all %d runs as expected: every wrong lock failed, every fix held\n", len(results))
	if len(notRun) > 0 {
		fmt.Fprintf(w, "not run (nothing to show, not passed): %s\n", strings.Join(notRun, ", "))
	}
	return nil
}

// lookPath finds an executable file called name in path (a PATH value), or returns "".
func lookPath(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		f := filepath.Join(dir, name)
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return f
		}
	}
	return ""
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
