package pitfall

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 9 (Go-specific) — hmdp's SimpleRedisLock value is UUID + thread id, and its unlock
// compares it with the current thread's. lock.SimpleRedisLock carries that over as process
// UUID + goroutine id. But a Go request often hands its work to another goroutine,
// and that goroutine is a different owner: it cannot release (or renew) the lock it works
// under.
var goroutineID = &Pitfall{
	Num: "9", Name: "goroutine-id", Title: "Identity by goroutine id",
	Source: "003 Redis分布式锁误删问题, 改进代码 (value = UUID + thread id); Go's goroutine ids",
	Story: "A's handler goroutine takes lock.SimpleRedisLock, hands the work to a worker goroutine and returns. " +
		"The worker does the work and calls Unlock: its goroutine id is not the one in the value, so the " +
		"compare-and-delete deletes nothing and reports ErrNotHeld. The lock stays until its TTL runs out; B, " +
		"arriving after the work is done, is refused although nobody is inside. Seen the other way: the worker " +
		"is not the lock's owner, so it cannot release it, renew it, or re-enter it; and if the handler unlocked " +
		"on return instead, the worker would go on working outside the lock.",
	Remedy: "Tie ownership to the acquisition, not to a goroutine: lock.RedLock (here over one Redis, a quorum of " +
		"one) draws a fresh random value at each TryLock and keeps it in the lock handle, as bsm/redislock does; " +
		"whoever holds the handle releases with that value (unlock.lua's compare-and-delete). The worker's Unlock " +
		"releases the lock and B gets it.",
	Variants: wrongFix("lock.SimpleRedisLock (owner = process + goroutine id)", "lock.RedLock over one node (owner = a value drawn at TryLock, kept in the handle)"),
	play:     playGoroutineID,
	judge: livenessVerdict(func(events []Event) string {
		if e, ok := firstEvent(events, func(e Event) bool {
			return e.Actor == "A.worker" && strings.Contains(e.Note, "nothing deleted")
		}); ok {
			return fmt.Sprintf("A.worker's Unlock at t=%d could not release a lock taken by goroutine A; it stays until its TTL runs out", e.T)
		}
		return ""
	}),
}

func playGoroutineID(s *Scene, v Variant) error {
	name := s.LockName("order:1")
	mk := func(a *Actor) lock.Lock {
		if v.Wrong {
			return lock.NewSimpleRedisLock(a.Redis, a.Process, name)
		}
		// NodeTimeout bounds each command by the lease rather than RedLock's 50 ms, which a
		// loaded machine running the race detector may exceed.
		return lock.NewRedLocks([]lock.RedisClient{a.Redis}, a.Process, lock.RedLockOptions{NodeTimeout: s.Lease() / 2}).RedLock(name)
	}
	s.Go("A", func(ctx context.Context, a *Actor) error {
		lk := mk(a)
		if ok, err := lk.TryLock(ctx, s.Lease()); err != nil || !ok {
			return fmt.Errorf("A could not lock: %v", err)
		}
		s.Go("A.worker", func(ctx context.Context, w *Actor) error {
			w.Enter()
			w.Point("working")
			w.Exit()
			if err := lk.Unlock(ctx); errors.Is(err, lock.ErrNotHeld) {
				w.Note("Unlock: ErrNotHeld, the value names goroutine A, not this one")
			} else if err != nil {
				return err
			}
			return nil
		}, WithProcess(a.Process))
		a.Note("hands the work to A.worker and returns")
		return nil
	})
	s.Go("B", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a), s.Lease()) })
	s.Finish("A")
	s.Until("A.worker", "working")
	s.Finish("A.worker")
	s.Finish("B")
	return nil
}
