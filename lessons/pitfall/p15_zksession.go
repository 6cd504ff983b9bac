package pitfall

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 15 — a ZooKeeper lock whose session expires while its holder is paused. A
// ZooKeeper lock is held by an ephemeral node, which lives as long as the client's session;
// the server ends the session when it stops hearing from the client. A holder stopped by a
// long pause (a stop-the-world GC, a frozen VM) sends no heartbeats, the session expires, the
// node goes, the next client takes the lock, and the holder wakes up believing it still
// holds it: the same shape as Kleppmann's lease that runs out under a paused client. The
// remedies: react to the lost-lock signal (ZooKeeperLock.Lost, the notice Curator gives
// through its ConnectionStateListener), and, because the pause can fall between the check
// and the write, fence the write with the lock's token (the node's czxid), which the storage
// checks.
var zkSessionExpiry = &Pitfall{
	Num: "15", Name: "zk-session-expiry", Title: "A ZooKeeper session expires while its holder is paused",
	Source: "004 基于ZooKeeper的实现方式 (ephemeral sequential nodes: the lock lives as long as the session); 002 标注1 (a holder paused past its lock)",
	Story: "A takes the ZooKeeper lock (`lock.ZooKeeperLock`: an ephemeral sequential node), reads the counter (0) and " +
		"stops in a long pause (a stop-the-world GC): its client sends nothing, not even heartbeats. ZooKeeper expires " +
		"A's session and deletes its node (the script closes the session at once with A's session id and password, " +
		"which is what the server does when the session timeout passes). B, refused while A's node was there, now " +
		"takes the lock, reads 0 and writes 1. A wakes and, not looking, writes 1 too: an increment is lost.",
	Remedy: "Two fixes on the same script. **React**: after the pause A selects on `Lost()`, which its client closed " +
		"when it learned the session had expired, and stops without writing. A check can only look before the " +
		"write, and the pause can come between the two: **fence** covers that. A checks `Lost()` (still open), " +
		"pauses, then writes with its fencing token, the czxid of its node (`Token()`); the storage has already " +
		"accepted B's larger token and rejects A's write. Both together: react to stop early, fence so that a " +
		"late writer can do no harm.",
	Variants: []Variant{
		{Name: "wrong", Label: "lock.ZooKeeperLock, the holder ignores Lost()", Wrong: true},
		{Name: "react", Label: "lock.ZooKeeperLock, the holder checks Lost() after the pause"},
		{Name: "fence", Label: "lock.ZooKeeperLock, czxid fencing token checked by the storage"},
	},
	NeedsZooKeeper: true,
	ownBackend:     true,
	play:           playZKSessionExpiry,
	judge:          zkSessionVerdict,
}

func playZKSessionExpiry(s *Scene, v Variant) error {
	z, err := startZKLesson(s)
	if err != nil {
		return err
	}
	s.storage = &Storage{}
	tokens := &zxids{s: s}
	ca, conn, err := z.client("app1", true)
	if err != nil {
		return err
	}
	cb, _, err := z.client("app2", false)
	if err != nil {
		return err
	}
	const name = "order:1"
	fenced := v.Name == "fence"
	what := "TryLock " + name + ": create an ephemeral sequential node; the lowest holds the lock"
	var aLost <-chan struct{}

	s.Go("A", func(ctx context.Context, a *Actor) error {
		lk := lock.NewZooKeeperLocks(ca).ZooKeeperLock(name)
		ok, err := lk.TryLock(ctx, 0)
		if err != nil || !ok {
			return fmt.Errorf("A could not lock: %v", err)
		}
		token := lk.Token()
		a.Did("ZooKeeper", what, "true, czxid "+tokens.name(token), "A takes the lock")
		aLost = lk.Lost()
		a.Enter()
		n := s.storage.Read(a)
		if fenced {
			select {
			case <-aLost:
				return errors.New("A lost its lock before the pause")
			default:
				a.Note("checks Lost(): still open, goes on")
			}
		}
		a.Point("paused")
		if v.Name == "react" {
			select {
			case <-aLost:
				a.Note("checks Lost(): closed, the session expired during the pause; stops without writing")
				a.Exit()
				return unlockLost(ctx, a, lk)
			default:
				a.Note("checks Lost(): still open")
			}
		}
		var fence int64
		if fenced {
			fence = token
		}
		s.storage.Write(a, fence, n+1)
		a.Exit()
		return unlockLost(ctx, a, lk)
	}, WithProcess("app1"))
	s.Go("B", func(ctx context.Context, a *Actor) error {
		lk := lock.NewZooKeeperLocks(cb).ZooKeeperLock(name)
		// B retries once, after A's session has expired: a lock that refuses it again would
		// refuse it forever, so B gives up rather than spin.
		for tries := 0; ; tries++ {
			ok, err := lk.TryLock(ctx, 0)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			a.Refused("ZooKeeper", what, "false: A's node is lower")
			if tries > 0 {
				a.Note("refused again after A's session expired: gives up")
				return nil
			}
			a.Point("refused")
		}
		token := lk.Token()
		a.Did("ZooKeeper", what, "true, czxid "+tokens.name(token), "B takes the lock")
		a.Enter()
		n := s.storage.Read(a)
		var fence int64
		if fenced {
			fence = token
		}
		s.storage.Write(a, fence, n+1)
		a.Point("working")
		a.Exit()
		return lk.Unlock(ctx)
	}, WithProcess("app2"))

	if !s.Until("A", "paused") {
		return errNoPoint("A", "paused")
	}
	if !s.Until("B", "refused") {
		return errNoPoint("B", "refused")
	}
	conn.freeze()
	s.Note("A's process stops in a long pause (stop-the-world GC): its client sends nothing, not even heartbeats")
	id, passwd := conn.credentials()
	if err := closeZKSession(s.ctx, z.addr, id, passwd); err != nil {
		return err
	}
	s.Note("ZooKeeper expires A's session and deletes its ephemeral node (the script closes the session now, " +
		"with A's session id and password, as the server does once the session timeout has passed)")
	if !s.Until("B", "working") {
		return errNoPoint("B", "working")
	}
	conn.cut()
	select {
	case <-aLost:
	case <-time.After(zkWait):
		return fmt.Errorf("A's client did not report the lost session within %s", zkWait)
	}
	s.Note("A's process resumes: its client reconnects, hears that the session expired, and closes Lost()")
	s.Finish("A")
	s.Finish("B")
	return nil
}

// unlockLost releases a lock whose session may be gone and notes what Unlock said.
func unlockLost(ctx context.Context, a *Actor, lk lock.Lock) error {
	err := lk.Unlock(ctx)
	if errors.Is(err, lock.ErrNotHeld) {
		a.Note("Unlock: not held (its node went with the session)")
		return nil
	}
	return err
}

// zkSessionVerdict judges pitfall 15: an increment lost is the failure. A fix must also let B
// in after A's session expired and have its write accepted: with nobody writing, counter 0
// after 0 accepted increments loses nothing either.
func zkSessionVerdict(s *Scene, events []Event, v Variant) Verdict {
	value, accepted := s.storage.Counts()
	counts := fmt.Sprintf("counter=%d after %d accepted increment%s", value, accepted, plural(accepted))
	os := overlaps(events)
	if value != accepted {
		return Verdict{Violated: true, Outcome: joinOverlaps(os) + "; lost update: " + counts}
	}
	if short := counterShortfall(events, "B", "A", "B"); short != "" && !v.Wrong {
		return Verdict{Violated: true, Outcome: "no lost update, but " + short + refusalSuffix(events) + "; " + counts}
	}
	out := joinOverlaps(os)
	if out == "" {
		out = "never two inside the critical section"
	}
	if e, ok := firstEvent(events, func(e Event) bool { return e.Reply == "rejected" }); ok {
		return Verdict{Outcome: fmt.Sprintf("%s, but the storage rejected %s's stale write at t=%d (%s): %s",
			out, e.Actor, e.T, strings.TrimSpace(e.Note), counts)}
	}
	if e, ok := firstEvent(events, func(e Event) bool { return strings.Contains(e.What, "stops without writing") }); ok {
		return Verdict{Outcome: fmt.Sprintf("%s, but %s saw Lost() closed at t=%d and wrote nothing: %s", out, e.Actor, e.T, counts)}
	}
	return Verdict{Outcome: out + ": " + counts}
}
