package pitfall

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 17 — the herd effect. A ZooKeeper lock whose waiters all watch the lock's parent
// node (getChildren with a watch) wakes every waiter at every change of the queue: each
// release, and each newcomer, sends a notification to all of them, they all list the
// children again, and all but one go back to sleep. The ZooKeeper recipe, and Curator's
// InterProcessMutex after it, has each waiter watch only the node just before its own: a
// release wakes exactly one waiter, the next in line. The counts come from the wire: every
// client's connection goes through a proxy that counts the notifications the server sends it.
var zkHerd = &Pitfall{
	Num: "17", Name: "zk-herd", Title: "The herd effect: every waiter watches the parent",
	Source: "004 基于ZooKeeper的实现方式 (step 4: 设置监听比自己次小的节点, watch only the next smaller node)",
	Story: "A holds the lock; B, C, D and E queue behind it with ephemeral sequential nodes, each watching the " +
		"lock's parent node for changes to its children (plain go-zookeeper: create, then getChildren with a " +
		"watch until its node is the lowest). Every change to the queue fires every waiter's watch: each " +
		"newcomer wakes all who queued before it, and each release wakes all who still wait. They all list the " +
		"children again and all but one go back to sleep: with n waiters a release costs n notifications and n " +
		"getChildren calls for one grant, and the queue drained one by one costs n(n+1)/2.",
	Remedy: "`lock.ZooKeeperLock` (Curator's InterProcessMutex): each waiter watches only its predecessor's node " +
		"(getData with a watch). A newcomer changes no watched node, and a release deletes the one node exactly " +
		"one waiter watches: one notification per release, to the next in line. The counts below are what a " +
		"proxy in front of ZooKeeper saw on each client's connection, with a barrier (a ping the proxy sends " +
		"itself) after every step so that no notification is still on its way when they are read.",
	Variants:       wrongFix("waiters watch the parent (getChildren + watch)", "lock.ZooKeeperLock (each waiter watches its predecessor)"),
	NeedsZooKeeper: true,
	ownBackend:     true,
	play:           playZKHerd,
	judge:          herdVerdict,
}

// herdWaiters are the clients that queue behind the first holder.
var herdWaiters = []string{"B", "C", "D", "E"}

// herdStats is what the herd lesson counted: waiters woken by each release and by each
// newcomer.
type herdStats struct {
	releases []int
	joins    []int
}

// parentWatchLock is the lock with the herd: an ephemeral sequential node, and getChildren
// with a watch on the parent until that node is the lowest.
type parentWatchLock struct {
	conn   *zk.Conn
	parent string
	node   string
}

func (l *parentWatchLock) lock(ctx context.Context) error {
	p, err := l.conn.Create(l.parent+"/lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		return err
	}
	l.node = p
	for {
		children, _, ch, err := l.conn.ChildrenW(l.parent)
		if err != nil {
			return err
		}
		slices.Sort(children) // same prefix, ten-digit sequence: text order is sequence order
		if len(children) > 0 && children[0] == path.Base(l.node) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *parentWatchLock) unlock() error { return l.conn.Delete(l.node, -1) }

func playZKHerd(s *Scene, v Variant) error {
	z, err := startZKLesson(s)
	if err != nil {
		return err
	}
	stats := &herdStats{}
	s.herd = stats
	const name = "order:1"
	parent := z.root + "/" + name
	if v.Wrong {
		for _, p := range []string{z.root, parent} {
			if _, err := z.spy.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
		}
	}
	actors := append([]string{"A"}, herdWaiters...)
	conns := map[string]*zkProxyConn{}

	// Each actor: wait for the lock, stop at "acquired" before telling anyone (the script
	// reads the wire first), then hold it until told and release it.
	for _, n := range actors {
		var take func(ctx context.Context) error
		var release func(ctx context.Context) error
		var nodeOf func() string
		if v.Wrong {
			c, err := z.dial(s.ctx, z.proxy.addr())
			if err != nil {
				return err
			}
			s.teardown = append(s.teardown, func() error { c.Close(); return nil })
			conns[n] = z.proxy.conn(c.SessionID())
			l := &parentWatchLock{conn: c, parent: parent}
			take, release, nodeOf = l.lock, func(context.Context) error { return l.unlock() }, func() string { return l.node }
		} else {
			c, conn, err := z.client("app-"+n, true)
			if err != nil {
				return err
			}
			conns[n] = conn
			l := lock.NewZooKeeperLocks(c).ZooKeeperLock(name)
			take, release, nodeOf = l.Lock, l.Unlock, func() string { return "" }
		}
		if conns[n] == nil {
			return fmt.Errorf("no proxied connection for %s", n)
		}
		s.Go(n, func(ctx context.Context, a *Actor) error {
			ctx, cancel := context.WithTimeout(ctx, zkWait)
			defer cancel()
			if err := take(ctx); err != nil {
				return err
			}
			a.Point("acquired")
			a.Did("ZooKeeper", "Lock "+name, "acquired", a.Name+" takes the lock")
			a.Enter()
			a.Point("working")
			a.Exit()
			what := "Unlock " + name + ": delete its node"
			if p := nodeOf(); p != "" {
				what = "Unlock " + name + ": delete " + shownPath(p)
			}
			a.Did("ZooKeeper", what, "ok", a.Name+" releases its lock")
			return release(ctx)
		})
	}

	watchSeen := map[string]int{}
	notesSeen := map[string]int{}
	// settle waits until every notification the server owes the waiters has arrived, and
	// each woken waiter has listed the queue again and set its next watch; it records what
	// reached each waiter, in waiter order, and returns how many were woken.
	settle := func(waiters []string) (int, error) {
		for _, w := range waiters {
			if err := conns[w].barrier(s.ctx, zkWait); err != nil {
				return 0, fmt.Errorf("%s: %w", w, err)
			}
		}
		woken := 0
		for _, w := range waiters {
			c := conns[w]
			notes, _ := c.stats()
			fresh := notes[notesSeen[w]:]
			if len(fresh) == 0 {
				continue
			}
			woken++
			want := watchSeen[w] + len(fresh)
			if err := c.await(s.ctx, zkWait, func() bool { return len(c.watched) >= want }); err != nil {
				return 0, fmt.Errorf("%s did not watch again: %w", w, err)
			}
			_, watched := c.stats()
			for _, n := range fresh {
				s.Observed(w, "ZooKeeper", "watch fires: "+shownPath(n.String()), "",
					"woken for nothing: lists the children again, not the lowest, watches "+shownPath(watched[len(watched)-1])+" again")
			}
			notesSeen[w], watchSeen[w] = len(notes), len(watched)
		}
		return woken, nil
	}
	// queued waits until w has set its first watch, and records what it watches.
	queued := func(w string) error {
		c := conns[w]
		if err := c.await(s.ctx, zkWait, func() bool { return len(c.watched) > watchSeen[w] }); err != nil {
			return fmt.Errorf("%s did not queue: %w", w, err)
		}
		_, watched := c.stats()
		watchSeen[w] = len(watched)
		s.Observed(w, "ZooKeeper", "Lock "+name+": creates its node, is not the lowest", "waits",
			"watches "+shownPath(watched[len(watched)-1]))
		return nil
	}

	if !s.Until("A", "acquired") || !s.Until("A", "working") {
		return errNoPoint("A", "working")
	}
	for i, w := range herdWaiters {
		s.Resume(w, "acquired")
		if err := queued(w); err != nil {
			return err
		}
		woken, err := settle(herdWaiters[:i])
		if err != nil {
			return err
		}
		stats.joins = append(stats.joins, woken)
		if i > 0 {
			s.Note("%s joining the queue woke %d of the %d waiters before it", w, woken, i)
		}
	}
	for i, holder := range actors[:len(actors)-1] {
		next := actors[i+1]
		s.Finish(holder)
		if !s.Await(next) {
			return errNoPoint(next, "acquired")
		}
		notes, _ := conns[next].stats()
		fresh := notes[notesSeen[next]:]
		for _, n := range fresh {
			s.Observed(next, "ZooKeeper", "watch fires: "+shownPath(n.String()), "", "woken: lists the children again, is the lowest")
		}
		notesSeen[next] = len(notes)
		woken, err := settle(actors[i+2:])
		if err != nil {
			return err
		}
		if len(fresh) > 0 {
			woken++
		}
		stats.releases = append(stats.releases, woken)
		s.Note("%s's release woke %d of the %d waiters; one of them can take the lock", holder, woken, len(actors)-i-1)
		if !s.Until(next, "working") {
			return errNoPoint(next, "working")
		}
	}
	s.Finish(actors[len(actors)-1])
	return nil
}

func herdVerdict(s *Scene, events []Event, _ Variant) Verdict {
	st := s.herd
	sum := func(xs []int) int {
		n := 0
		for _, x := range xs {
			n += x
		}
		return n
	}
	list := func(xs []int) string {
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ", ")
	}
	if os := overlaps(events); len(os) > 0 {
		return Verdict{Violated: true, Outcome: joinOverlaps(os)}
	}
	out := fmt.Sprintf("%d releases woke %s waiters (%d wake-ups for %d grants); newcomers woke %d",
		len(st.releases), list(st.releases), sum(st.releases), len(st.releases), sum(st.joins))
	if sum(st.releases) > len(st.releases) || sum(st.joins) > 0 {
		return Verdict{Violated: true, Outcome: "the herd: " + out}
	}
	return Verdict{Outcome: out + ": each release woke only the next in line; never two inside"}
}
