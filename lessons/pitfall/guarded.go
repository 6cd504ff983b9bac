package pitfall

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// tracer is what a wrong lock may tell the timeline: where it pauses and what it concluded.
// *Actor is one; the locks know nothing else of the scene.
type tracer interface {
	Point(name string)
	Note(format string, args ...any)
}

// guarded is the usual critical section: take lk once (never waiting), work, release. It
// pauses at "working" (inside) and "unlock" (outside, just before the release).
func guarded(ctx context.Context, a *Actor, lk lock.Lock, ttl time.Duration) error {
	ok, err := lk.TryLock(ctx, ttl)
	if err != nil {
		return err
	}
	if !ok {
		a.Note("has no lock: gives up")
		return nil
	}
	a.Enter()
	a.Point("working")
	a.Exit()
	a.Point("unlock")
	if err := lk.Unlock(ctx); errors.Is(err, lock.ErrNotHeld) {
		a.Note("Unlock reports the lock was not held any more")
	} else if err != nil {
		return err
	}
	return nil
}

// livenessVerdict judges the pitfalls whose failure is a lock that turns clients away while
// nobody is inside (a dead lock); why explains the refusal from the timeline.
func livenessVerdict(why func(events []Event) string) func(*Scene, []Event, Variant) Verdict {
	return func(_ *Scene, events []Event, _ Variant) Verdict {
		if rs := refusedWhileFree(events); len(rs) > 0 {
			out := fmt.Sprintf("%s refused at t=%d while nobody was inside the critical section", rs[0].Actor, rs[0].T)
			if w := why(events); w != "" {
				out += ": " + w
			}
			return Verdict{Violated: true, Outcome: out}
		}
		if os := overlaps(events); len(os) > 0 {
			return Verdict{Violated: true, Outcome: joinOverlaps(os)}
		}
		var got []string
		for _, e := range events {
			if strings.HasSuffix(e.Note, "takes the lock") {
				got = append(got, fmt.Sprintf("%s at t=%d", e.Actor, e.T))
			}
		}
		return Verdict{Outcome: "no dead lock: the lock was taken by " + joinAnd(got) + "; never two inside"}
	}
}

// noTTLReason explains a refusal by a lock whose key has no TTL.
func noTTLReason(events []Event) string {
	if e, ok := firstEvent(events, func(e Event) bool { return strings.Contains(e.What, "no TTL") }); ok {
		return fmt.Sprintf("the key has no TTL (t=%d), so nobody will ever get the lock again", e.T)
	}
	return ""
}
