package pitfall

import (
	"context"
	_ "embed"
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
	Remedy: "Count holds per owner (Redisson's design, as Lua): the value is a hash `{owner: count}`; " +
		"the owner's second TryLock increments the count, each Unlock decrements it, and only the last one " +
		"deletes the key. Others are still refused while any hold remains.",
	Variants: wrongFix("lock.SimpleRedisLock (SET NX)", "reentrant lock (hash owner → hold count, Lua)"),
	play:     playReentrancy,
	judge:    reentrancyVerdict,
}

var (
	//go:embed lesson_reentrant_lock.lua
	reentrantLockLua string
	//go:embed lesson_reentrant_unlock.lua
	reentrantUnlockLua string

	reentrantLockScript   = nameScript(reentrantLockName, reentrantLockLua, false)
	reentrantUnlockScript = nameScript(reentrantUnlockName, reentrantUnlockLua, true)
)

const (
	reentrantLockName   = "lesson_reentrant_lock.lua"
	reentrantUnlockName = "lesson_reentrant_unlock.lua"
)

// reentrantLock holds a lock per owner (process + goroutine id) with a hold count.
type reentrantLock struct {
	c       tokenClient
	key     string
	process string
	ttl     time.Duration
}

func (l *reentrantLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	l.ttl = ttl
	n, err := reentrantLockScript.Run(ctx, l.c, []string{l.key}, owner(l.process), ttl.Milliseconds()).Int()
	return n > 0, err
}

func (l *reentrantLock) Unlock(ctx context.Context) error {
	n, err := reentrantUnlockScript.Run(ctx, l.c, []string{l.key}, owner(l.process), l.ttl.Milliseconds()).Int()
	if err == nil && n < 0 {
		return lock.ErrNotHeld
	}
	return err
}

func playReentrancy(s *Scene, v Variant) error {
	name := s.LockName("order:1")
	mk := func(a *Actor) lock.Lock {
		if v.Wrong {
			return lock.NewSimpleRedisLock(a.Redis, a.Process, name)
		}
		return &reentrantLock{c: a.Redis, key: lockKey(name), process: a.Process}
	}
	s.Go("A", func(ctx context.Context, a *Actor) error {
		outer := mk(a)
		if ok, err := outer.TryLock(ctx, s.Lease()); err != nil || !ok {
			return fmt.Errorf("A could not lock: %v", err)
		}
		a.Enter()
		a.Note("calls createOrder, which takes the same lock")
		inner := mk(a)
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
	})
	s.Go("B", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a), s.Lease()) })
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
