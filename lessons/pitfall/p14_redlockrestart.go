package pitfall

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 14 — a RedLock node that restarts without persistence. Redlock (the Redis
// documentation's algorithm over N independent masters) counts a lock held when a majority
// of nodes hold its key; Martin Kleppmann's critique ("How to do distributed locking") and the
// Redis documentation's own section on persistence point out that a node that crashes and
// comes back empty has forgotten a key it granted, and the same majority arithmetic then
// grants the lock a second time. The documented remedies: keep a crashed node down for one
// maximum lease before it rejoins (delayed restart), or fsync every write (AOF
// appendfsync always) so that it comes back with every key it acknowledged.
var redlockRestart = &Pitfall{
	Num: "14", Name: "redlock-restart", Title: "A RedLock node restarts without persistence",
	Source: "000 Redis 多实例 (RedLock over independent masters); the Redis documentation's Redlock, on crash recovery and persistence",
	Story: "Five independent Redis nodes, no replication. Nodes 4 and 5 are down when A asks, so A holds " +
		"the RedLock (`lock.NewRedLocks`) on nodes 1-3: three of five, a quorum. Nodes 4 and 5 come back. Node 3 " +
		"crashes (SIGKILL) and restarts at once without persistence: A's key is gone from it. B asks: nodes 1 and 2 " +
		"refuse, nodes 3, 4 and 5 grant. Three of five is a quorum for B too, and A's RedLock is still valid: " +
		"both hold the lock.",
	Remedy: "Two remedies, each on the same script. **Delayed restart**: a crashed node stays down for one " +
		"maximum lease before it may grant again, so every key it forgot has expired everywhere by then: B finds " +
		"only nodes 4 and 5, no quorum, and takes the lock once A has released it and node 3 is back. **fsync**: " +
		"with `appendonly yes` and `appendfsync always` a node acknowledges a SET only once it is on disk, and a " +
		"restart replays it: node 3 comes back with A's key and refuses B. (On the embedded servers the fsync run " +
		"restarts node 3 with its data, as the append-only file would; `make test-integration` runs the lesson " +
		"on real redis-server processes killed with SIGKILL.) RedLock still hands out no fencing token, so a " +
		"holder that pauses past its validity is pitfall 7 again.",
	Variants: []Variant{
		{Name: "wrong", Label: "lock.RedLock, node 3 restarts at once, empty", Wrong: true},
		{Name: "delayed-restart", Label: "lock.RedLock, node 3 stays down for one max lease"},
		{Name: "fsync", Label: "lock.RedLock, nodes with appendfsync always"},
	},
	ownBackend: true,
	play:       playRedLockRestart,
	judge:      redlockVerdict,
}

// The RedLock lesson's leases and node timeouts. On real processes time is real: the lease
// must outlast the script from A's acquisition to its release (a few process starts), and
// the delayed restart waits one lease.
const (
	redlockEmbeddedLease   = embeddedLease
	redlockEmbeddedTimeout = 2 * time.Second
	redlockRealLease       = 3 * time.Second
	redlockRealTimeout     = time.Second
)

func playRedLockRestart(s *Scene, v Variant) error {
	nodes, err := startRedLockNodes(s.ctx, s.env, 5, v.Name == "fsync")
	if err != nil {
		return err
	}
	s.teardown = append(s.teardown, nodes.close)
	lease, timeout := redlockEmbeddedLease, redlockEmbeddedTimeout
	if s.env.RedLockProcesses {
		lease, timeout = redlockRealLease, redlockRealTimeout
		s.Alias(nodes.dir, "$TMPDIR")
	}
	name := "order:1"
	key := "lock:" + name

	// Each attempt dials the nodes afresh, as a client whose connections to a crashed node
	// were reset would: go-redis holds back new dials to a node that refused some for a
	// second of real time, which the embedded clock does not move.
	act := func(ctx context.Context, a *Actor, retry bool) error {
		var ra *redlockActor
		var lk *lock.RedLock
		// A retry comes once the script has let A release (and node3 rejoin): a lock that
		// refuses again would refuse forever, so the client gives up and the verdict says so.
		for tries := 0; ; tries++ {
			ra = newRedLockActor(s, a, nodes)
			lk = ra.locks(timeout).RedLock(name)
			ok, err := lk.TryLock(ctx, lease)
			set := ra.flush()
			if err != nil {
				ra.close()
				return err
			}
			if ok {
				a.Note("holds the RedLock: %d of 5 nodes, a quorum", set)
				break
			}
			ra.close()
			a.Note("no quorum (%d of 5 nodes): refused, runs the compare-and-delete on every node", set)
			if !retry {
				return nil
			}
			if tries > 0 {
				a.Note("refused again after A released: gives up")
				return nil
			}
			a.Point("refused")
		}
		defer ra.close()
		a.Enter()
		a.Point("working")
		a.Note("its RedLock is still valid: Valid() = %t", lk.Valid())
		a.Exit()
		err := lk.Unlock(ctx)
		ra.flush()
		switch {
		case errors.Is(err, lock.ErrNotHeld):
			a.Note("Unlock: fewer than a quorum still held its key (ErrNotHeld): another client holds the lock")
		case err != nil:
			a.Note("Unlock: not every node answered (node3 is down); those that did released its key")
		}
		return nil
	}

	nodes.crash(3)
	nodes.crash(4)
	s.Note("five independent Redis nodes; node4 and node5 are down")
	s.Go("A", func(ctx context.Context, a *Actor) error { return act(ctx, a, false) }, WithProcess("app1"))
	s.Go("B", func(ctx context.Context, a *Actor) error { return act(ctx, a, true) }, WithProcess("app2"))
	if !s.Until("A", "working") {
		return errNoPoint("A", "working")
	}
	for _, i := range []int{3, 4} {
		if err := nodes.start(s.ctx, i, false); err != nil {
			return err
		}
	}
	s.Note("node4 and node5 come back (they never had A's key)")
	nodes.crash(2)
	switch v.Name {
	case "wrong":
		if err := nodes.start(s.ctx, 2, false); err != nil {
			return err
		}
		s.Note("node3 crashes (SIGKILL) and restarts at once, without persistence")
	case "delayed-restart":
		s.Note("node3 crashes (SIGKILL); it stays down for one max lease (%s) before it may grant again", lease)
	case "fsync":
		if err := nodes.start(s.ctx, 2, true); err != nil {
			return err
		}
		s.Note("node3 crashes (SIGKILL) and restarts; with appendfsync always every SET it acknowledged is on disk, and it replays them")
	}
	if v.Name != "delayed-restart" {
		has, err := nodes.exists(s.ctx, 2, key)
		if err != nil {
			return err
		}
		s.Note("on node3, %s %s", key, map[bool]string{true: "exists", false: "does not exist"}[has])
	}
	if v.Wrong {
		if !s.Until("B", "working") {
			return errNoPoint("B", "working")
		}
		s.Finish("A")
		s.Finish("B")
		return nil
	}
	// A fix that fails lets B in instead: it then runs to its end, and the verdict sees two
	// inside.
	s.Until("B", "refused")
	s.Finish("A")
	if v.Name == "delayed-restart" {
		if err := nodes.advance(s.ctx, lease); err != nil {
			return err
		}
		s.Note("time passes (+%s, one max lease): every key node3 had granted has expired everywhere", lease)
		if err := nodes.start(s.ctx, 2, false); err != nil {
			return err
		}
		s.Note("node3 rejoins, empty")
	}
	s.Finish("B")
	return nil
}

// redlockVerdict judges pitfall 14: two holding the RedLock at once is the failure. A fix must
// also let B in once A has released: a lock that refuses B forever never lets two in either.
func redlockVerdict(_ *Scene, events []Event, v Variant) Verdict {
	if os := overlaps(events); len(os) > 0 {
		return Verdict{Violated: true, Outcome: joinOverlaps(os) + ": each counted a quorum of 3 of 5 nodes, node3 in both"}
	}
	out := "never two inside the critical section"
	if short := entryShortfall(events, []string{"A", "B"}); short != "" && !v.Wrong {
		return Verdict{Violated: true, Outcome: out + ", but " + short + refusalSuffix(events)}
	}
	if e, ok := firstEvent(events, func(e Event) bool { return e.Actor == "B" && strings.HasPrefix(e.What, "no quorum") }); ok {
		out += fmt.Sprintf("; B found no quorum at t=%d", e.T)
	}
	if e, ok := firstEvent(events, func(e Event) bool { return e.Actor == "B" && strings.HasPrefix(e.What, "holds the RedLock") }); ok {
		out += fmt.Sprintf(" and took the lock at t=%d, after A released it", e.T)
	}
	return Verdict{Outcome: out}
}
