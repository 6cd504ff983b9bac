package pitfall

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Pitfall is one wrong way to build a Redis lock, from the articles, with its fix.
type Pitfall struct {
	Num    string // its number in the list ("1" … "13", and "2b")
	Name   string // the command-line name: "plain-del"
	Title  string
	Source string // the article and section it comes from
	// Story says what goes wrong, and Remedy what the fix does; both are Markdown prose for
	// docs/pitfalls.md.
	Story, Remedy string
	// Variants lists the runs: the wrong lock first, then one or more fixes.
	Variants []Variant
	// NeedsServerBin marks a pitfall that starts its own redis-server processes.
	NeedsServerBin bool
	// NeedsZooKeeper marks a lesson that runs against a real ZooKeeper (Env.ZooKeeperAddr).
	NeedsZooKeeper bool
	// ownBackend marks a lesson whose lock is not on the scene's one Redis (RedLock's nodes,
	// ZooKeeper, a database): the scene gets an embedded Redis it does not use.
	ownBackend bool

	play  func(s *Scene, v Variant) error
	judge func(s *Scene, events []Event, v Variant) Verdict
}

// Variant is one run of a pitfall's script: with the wrong lock, or with a fix.
type Variant struct {
	Name  string // "wrong", "fix", "renewal", "fencing"
	Label string // what lock the run uses
	Wrong bool   // the run must show the failure
}

// Verdict is what a run showed.
type Verdict struct {
	Violated bool   // the lock failed: two inside, a duplicate order, a lost update, a dead lock
	Outcome  string // one line, from the timeline
}

// Result is one finished run.
type Result struct {
	Pitfall *Pitfall
	Variant Variant
	Events  []Event
	Verdict Verdict
}

// OK reports whether the run showed what it must: the failure for the wrong lock, no
// failure for a fix.
func (r Result) OK() bool { return r.Verdict.Violated == r.Variant.Wrong }

// Env says which Redis to run against.
type Env struct {
	// RedisAddr is a real Redis (host:port). Empty: a fresh embedded miniredis per run.
	RedisAddr string
	// RedisServerBin is the redis-server binary, for pitfalls that start their own servers
	// (failover). Empty: those pitfalls cannot run.
	RedisServerBin string
	// RedLockProcesses runs the RedLock lesson on five redis-server processes started from
	// RedisServerBin, killed with SIGKILL and started again, instead of embedded servers.
	RedLockProcesses bool
	// ZooKeeperAddr is a ZooKeeper server (host:port) for the ZooKeeper lessons. Empty: those
	// lessons cannot run.
	ZooKeeperAddr string
	// MySQLDSN is a MySQL or MariaDB database (a go-sql-driver DSN naming a database that
	// exists) for the database lesson. Empty: an embedded SQLite database per run.
	MySQLDSN string
}

// Errors for a lesson that needs what Env does not give it.
var (
	// ErrNeedsServerBin is returned for a pitfall that needs a redis-server binary when Env has none.
	ErrNeedsServerBin = errors.New("pitfall: needs a redis-server binary")
	// ErrNeedsZooKeeper is returned for a lesson that needs ZooKeeper when Env has none.
	ErrNeedsZooKeeper = errors.New("pitfall: needs ZooKeeper (scripts/services.sh up zookeeper)")
)

// Run plays every variant of p and returns their results in order.
func (p *Pitfall) Run(ctx context.Context, env Env) ([]Result, error) {
	out := make([]Result, 0, len(p.Variants))
	for _, v := range p.Variants {
		r, err := p.RunVariant(ctx, env, v)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// RunVariant plays p's script once with variant v.
func (p *Pitfall) RunVariant(ctx context.Context, env Env, v Variant) (Result, error) {
	if (p.NeedsServerBin || (p == redlockRestart && env.RedLockProcesses)) && env.RedisServerBin == "" {
		return Result{}, fmt.Errorf("%s: %w", p.Name, ErrNeedsServerBin)
	}
	if p.NeedsZooKeeper && env.ZooKeeperAddr == "" {
		return Result{}, fmt.Errorf("%s: %w", p.Name, ErrNeedsZooKeeper)
	}
	var srv *server
	var cl *cluster
	ns := ""
	switch {
	case p.NeedsServerBin:
		var err error
		if cl, srv, err = clusterFor(ctx, env); err != nil {
			return Result{}, err
		}
		defer cl.close()
	case env.RedisAddr == "" || p.ownBackend:
		var err error
		if srv, err = embeddedServer(); err != nil {
			return Result{}, err
		}
	default:
		srv = realServer("tcp", env.RedisAddr)
		ns = "pitfall" + randomHex(4) + ":"
	}
	defer srv.close()
	s := newScene(ctx, srv, ns)
	s.env, s.cluster = env, cl
	if cl != nil {
		s.Alias(cl.dir, "$TMPDIR")
	}
	playErr := p.play(s, v)
	closeErr := s.close()
	cleanErr := s.cleanup()
	for i := len(s.teardown) - 1; i >= 0; i-- {
		cleanErr = errors.Join(cleanErr, s.teardown[i]())
	}
	if err := errors.Join(playErr, closeErr, cleanErr); err != nil {
		return Result{}, fmt.Errorf("%s (%s): %w", p.Name, v.Name, err)
	}
	events := s.timeline()
	return Result{Pitfall: p, Variant: v, Events: events, Verdict: p.judge(s, events, v)}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// All returns every pitfall in the order of their numbers.
func All() []*Pitfall {
	return []*Pitfall{
		inProcess, noExpiry, lostReply, setnxExpire, getsetTimestamp, plainDel, getThenDel,
		shortTTL, unlockBeforeCommit, goroutineID, clockSkew, failover, multiExec, reentrancy,
		redlockRestart, zkSessionExpiry, dbNoExpiry, zkHerd,
	}
}

// Lookup returns the pitfall called name.
func Lookup(name string) (*Pitfall, bool) {
	for _, p := range All() {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// wrongFix is the usual pair of variants.
func wrongFix(wrong, fix string) []Variant {
	return []Variant{{Name: "wrong", Label: wrong, Wrong: true}, {Name: "fix", Label: fix}}
}

// exclusionVerdict judges the pitfalls whose failure is two actors inside at once. Exclusion
// alone is not enough for a fix: a lock that refuses everyone never lets two in. So a fix must
// also let into the critical section exactly the actors its script promises, in that order
// (entrants); the others are meant to be refused. The wrong lock is judged on exclusion only,
// so that it fails for the reason its lesson tells.
func exclusionVerdict(entrants ...string) func(*Scene, []Event, Variant) Verdict {
	return func(_ *Scene, events []Event, v Variant) Verdict {
		if os := overlaps(events); len(os) > 0 {
			return Verdict{Violated: true, Outcome: joinOverlaps(os)}
		}
		if short := entryShortfall(events, entrants); short != "" && !v.Wrong {
			return Verdict{Violated: true, Outcome: "never two inside the critical section, but " + short + refusalSuffix(events)}
		}
		return Verdict{Outcome: admissions(events)}
	}
}

// entered returns the actors that entered the critical section, in order of entry.
func entered(events []Event) []string {
	var who []string
	for _, e := range events {
		if e.Kind == KindEnter {
			who = append(who, e.Actor)
		}
	}
	return who
}

// entryShortfall says how the actors that entered the critical section differ from want, the
// progress a fix's script promises; "" when they are the same.
func entryShortfall(events []Event, want []string) string {
	got := entered(events)
	if slices.Equal(got, want) {
		return ""
	}
	in := "nobody"
	if len(got) > 0 {
		in = joinThen(got)
	}
	return fmt.Sprintf("the lock let in %s where the script expects %s", in, joinThen(want))
}

// counterShortfall says how a run of a counter lesson falls short of the progress a fix's
// script promises: entrants inside, in that order, and the storage accepting writer's
// increment; "" when it does not.
func counterShortfall(events []Event, writer string, entrants ...string) string {
	if short := entryShortfall(events, entrants); short != "" {
		return short
	}
	if _, ok := firstEvent(events, func(e Event) bool {
		return e.Actor == writer && e.To == "Storage" && e.Reply == "accepted"
	}); !ok {
		return "the storage accepted no write from " + writer + ", where the script expects one"
	}
	return ""
}

// admissions describes a run where exclusion held: whom the lock let in, one at a time,
// and whom it turned away.
func admissions(events []Event) string {
	var out string
	switch got := entered(events); len(got) {
	case 0:
		out = "the lock let in nobody"
	case 1:
		out = "the lock let in only " + got[0]
	default:
		out = "the lock let in " + joinThen(got) + ", one at a time"
	}
	if r := refusals(events); len(r) > 0 {
		out += ", and refused " + joinAnd(r)
	}
	return out
}

// joinThen lists xs in order: "A", "A, then B".
func joinThen(xs []string) string { return strings.Join(xs, ", then ") }

// refusalSuffix names who the lock turned away, to say how exclusion held.
func refusalSuffix(events []Event) string {
	if r := refusals(events); len(r) > 0 {
		return "; the lock refused " + joinAnd(r)
	}
	return ""
}

// refusals lists the refused lock requests: "C at t=9".
func refusals(events []Event) []string {
	var who []string
	for _, e := range events {
		if e.Refused {
			who = append(who, fmt.Sprintf("%s at t=%d", e.Actor, e.T))
		}
	}
	return who
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	s := ""
	for i, x := range xs {
		switch {
		case i == 0:
		case i == len(xs)-1:
			s += " and "
		default:
			s += ", "
		}
		s += x
	}
	return s
}

func errNoPoint(actor, point string) error {
	return fmt.Errorf("script: %s ended before reaching %q", actor, point)
}
