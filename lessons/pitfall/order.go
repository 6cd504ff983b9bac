package pitfall

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// The outcomes of one order request, as the service answers them.
const (
	created         = "created (201)"
	alreadyOrdered  = "already_ordered (409)"
	orderInProgress = "order_in_progress (409)"
)

// orderFlow is hmdp's one-order-per-user flow as a pitfall actor runs it:
// take the lock, then in one transaction check for an order and insert one. It pauses at
// "checked" (after the check) and "before-commit". unlockBeforeCommit is pitfall 8's
// mistake: releasing the lock inside the transaction.
type orderFlow struct {
	db                 *OrderDB
	user               int
	ttl                time.Duration
	unlockBeforeCommit bool
}

func (f orderFlow) place(ctx context.Context, a *Actor, lk lock.Lock) (string, error) {
	ok, err := lk.TryLock(ctx, f.ttl)
	if err != nil {
		return "", err
	}
	if !ok {
		a.Note("answers %s", orderInProgress)
		return orderInProgress, nil
	}
	a.Enter()
	tx := f.db.Begin(a)
	if tx.CountOrders(f.user) > 0 {
		tx.Commit()
		a.Exit()
		if err := lk.Unlock(ctx); err != nil {
			return "", err
		}
		a.Note("answers %s", alreadyOrdered)
		return alreadyOrdered, nil
	}
	a.Point("checked")
	tx.InsertOrder(f.user)
	if f.unlockBeforeCommit {
		if err := lk.Unlock(ctx); err != nil {
			return "", err
		}
	}
	a.Point("before-commit")
	tx.Commit()
	a.Exit()
	if !f.unlockBeforeCommit {
		if err := lk.Unlock(ctx); err != nil {
			return "", err
		}
	}
	a.Note("answers %s", created)
	return created, nil
}

// loggedLock records the calls to a lock that does not talk to Redis (an in-process one),
// so that its decisions appear in the timeline.
type loggedLock struct {
	lock.Lock
	a    *Actor
	to   string // the participant: "app1 mutex"
	name string
}

func (l loggedLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := l.Lock.TryLock(ctx, ttl)
	what := "lock " + l.name
	switch {
	case err != nil:
		l.a.Did(l.to, what, "error: "+err.Error(), "")
	case ok:
		l.a.Did(l.to, what, "true", l.a.Name+" takes the lock")
	default:
		l.a.Refused(l.to, what, "false")
	}
	return ok, err
}

func (l loggedLock) Unlock(ctx context.Context) error {
	err := l.Lock.Unlock(ctx)
	reply := "ok"
	if err != nil {
		reply = "error: " + err.Error()
	}
	l.a.Did(l.to, "unlock "+l.name, reply, "")
	return err
}

// orderVerdict judges pitfalls 1 and 8: more than one order for the user is the failure. A
// fix must also place the one order the user asked for, and let into the critical section
// exactly the actors its script promises (entrants, as exclusionVerdict): a lock that
// refuses every request never duplicates an order either.
func orderVerdict(user int, entrants ...string) func(*Scene, []Event, Variant) Verdict {
	return func(s *Scene, events []Event, v Variant) Verdict {
		n := s.db.Orders(user)
		os := overlaps(events)
		if n > 1 {
			out := fmt.Sprintf("user %d has %d orders", user, n)
			if len(os) > 0 {
				out += ": " + joinOverlaps(os)
			}
			return Verdict{Violated: true, Outcome: out}
		}
		out := fmt.Sprintf("user %d has %d order%s", user, n, plural(n))
		if !v.Wrong {
			if n == 0 {
				return Verdict{Violated: true, Outcome: out + ", where the script expects 1" + refusalSuffix(events)}
			}
			if short := entryShortfall(events, entrants); short != "" {
				return Verdict{Violated: true, Outcome: out + ", but " + short + refusalSuffix(events)}
			}
		}
		if len(os) > 0 {
			return Verdict{Outcome: out + ", though " + joinOverlaps(os)}
		}
		return Verdict{Outcome: out + "; " + admissions(events)}
	}
}
