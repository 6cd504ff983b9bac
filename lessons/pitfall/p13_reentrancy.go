package pitfall

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 13 — a lock its holder cannot take again: reentrancy as a requirement (可重入性:
// "分布式锁一样要考虑可重入的问题"), and the database lock's missing reentrancy (不具备可重入的特性:
// the same thread cannot take the lock again before releasing it). Redisson's RLock counts
// holds per owner in a hash. SET NX cannot tell "held by someone else" from "held by me".
var reentrancy = &Pitfall{
	Num: "13", Name: "reentrancy", Title: "A non-reentrant lock taken again by its holder",
	Source: "000 分布式锁的要求 (可重入性); 004 基于数据库的实现方式 (不具备可重入的特性); 001 Redisson hold count",
	Story: "A's order flow takes `lock:order:1`, then calls a helper that guards itself with the same lock (as a " +
		"nested transactional method would). `SET NX` finds the key, whoever set it, and refuses: A is turned away " +
		"by its own lock, and the request fails although nobody else holds it.",
	Remedy: "Count holds per owner, as lock.ReentrantLock does (Redisson's RLock, scripts/lua/reentrant_lock.lua): " +
		"the lock is a hash `{owner: count}`, the owner being process and goroutine; the owner's second TryLock " +
		"increments the count, each Unlock decrements it (reentrant_unlock.lua), and only the last one deletes the " +
		"hash and publishes the release. Others are still refused while any hold remains. (Taken here with a fixed " +
		"lease, `TryLockWait(ctx, 0, lease)`, so that no watchdog renewal lands in the timeline.)",
	Variants: wrongFix("lock.SimpleRedisLock (SET NX)", "lock.ReentrantLock (hash owner → hold count)"),
	play:     playReentrancy,
	judge:    reentrancyVerdict,
}

// fixedLease is a lock.ReentrantLock taken with a fixed lease (TryLockWait, wait 0) instead of
// TryLock's watchdog, for the lessons' ReentrantLocks whose watchdog no script steps (pitfall
// 13's, and B's in pitfall 7): an unstepped watchdog renews on its own timer, which would put
// a renewal into the timeline whenever the machine is slow enough.
type fixedLease struct{ *lock.ReentrantLock }

func (l fixedLease) TryLock(ctx context.Context, lease time.Duration) (bool, error) {
	return l.TryLockWait(ctx, 0, lease)
}

func playReentrancy(s *Scene, v Variant) error {
	name := s.LockName("order:1")
	// actor makes a's locks: for the fix, the ReentrantLocks of a lock.Client of a's own (one
	// per process, as the service makes it), closed when a ends.
	actor := func(fn func(ctx context.Context, a *Actor, mk func() lock.Lock) error) func(context.Context, *Actor) error {
		return func(ctx context.Context, a *Actor) error {
			if v.Wrong {
				return fn(ctx, a, func() lock.Lock { return lock.NewSimpleRedisLock(a.Redis, a.Process, name) })
			}
			c := lock.NewClient(a.Redis, lock.Options{Process: a.Process})
			err := fn(ctx, a, func() lock.Lock { return fixedLease{c.ReentrantLock(name)} })
			return errors.Join(err, c.Close())
		}
	}
	s.Go("A", actor(func(ctx context.Context, a *Actor, mk func() lock.Lock) error {
		outer := mk()
		if ok, err := outer.TryLock(ctx, s.Lease()); err != nil || !ok {
			return fmt.Errorf("A could not lock: %v", err)
		}
		a.Enter()
		a.Note("calls createOrder, which takes the same lock")
		inner := mk()
		ok, err := inner.TryLock(ctx, s.Lease())
		if err != nil {
			return err
		}
		if ok {
			a.Note("createOrder runs")
			if err := inner.Unlock(ctx); err != nil {
				return err
			}
		} else {
			a.Note("createOrder fails: order_in_progress, from A's own lock")
		}
		a.Point("nested-done")
		a.Exit()
		return outer.Unlock(ctx)
	}))
	s.Go("B", actor(func(ctx context.Context, a *Actor, mk func() lock.Lock) error {
		return guarded(ctx, a, mk(), s.Lease())
	}))
	s.Until("A", "nested-done")
	s.Finish("B")
	s.Finish("A")
	return nil
}

// reentrancyVerdict judges pitfall 13: a holder refused by its own lock is the failure. A fix
// must also let the holder's nested call run: a lock that refuses the nested call without
// saying whose lock refused it, or that lets nobody in, leaves no such refusal either.
func reentrancyVerdict(_ *Scene, events []Event, v Variant) Verdict {
	if e, ok := firstEvent(events, func(e Event) bool { return e.Refused && strings.Contains(e.Note, "already holds") }); ok {
		return Verdict{Violated: true, Outcome: fmt.Sprintf("%s refused at t=%d by the lock it holds itself", e.Actor, e.T)}
	}
	if os := overlaps(events); len(os) > 0 {
		return Verdict{Violated: true, Outcome: joinOverlaps(os)}
	}
	out := "never two inside the critical section" + refusalSuffix(events)
	if !v.Wrong {
		if short := entryShortfall(events, []string{"A"}); short != "" {
			return Verdict{Violated: true, Outcome: out + ", but " + short}
		}
		if _, ok := firstEvent(events, func(e Event) bool { return e.Actor == "A" && e.What == "createOrder runs" }); !ok {
			return Verdict{Violated: true, Outcome: out + ", but A's nested createOrder did not run, where the script expects it to"}
		}
	}
	if e, ok := firstEvent(events, noteContains("hold count 2")); ok {
		out = fmt.Sprintf("%s re-entered at t=%d (hold count 2); %s", e.Actor, e.T, out)
	}
	return Verdict{Outcome: out}
}
