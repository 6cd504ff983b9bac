package pitfall

import (
	"context"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 8 — the hmdp @Transactional mistake, around 替换优惠券秒杀下单加锁操作: the lock must
// wrap the whole transaction (hmdp calls the transactional proxy inside try/finally for
// exactly this reason). Released inside the transaction, the lock lets a
// second request read the table before the first one's order is committed.
var unlockBeforeCommit = &Pitfall{
	Num: "8", Name: "unlock-before-commit", Title: "The lock released before the transaction commits",
	Source: "003 — 替换优惠券秒杀下单加锁操作 (lock around the transactional proxy); hmdp's @Transactional mistake",
	Story: "A checks (no order), inserts, and releases the lock inside its transaction, before COMMIT. " +
		"B takes the free lock and checks: A's row is not committed, so B sees no order and inserts a second one. " +
		"The lock was held, but not over the work it had to cover.",
	Remedy: "Release the lock only after COMMIT (the service's order flow does: lock → transaction → commit → unlock). " +
		"B is refused while A is inside; when B retries after A's commit, the check finds A's order: already_ordered.",
	Variants: wrongFix("lock.SimpleRedisLock, unlocked before COMMIT", "lock.SimpleRedisLock, unlocked after COMMIT"),
	play:     playUnlockBeforeCommit,
	judge:    orderVerdict(1, "A", "B"),
}

func playUnlockBeforeCommit(s *Scene, v Variant) error {
	s.db = NewOrderDB()
	flow := orderFlow{db: s.db, user: 1, ttl: s.Lease(), unlockBeforeCommit: v.Wrong}
	name := s.LockName("order:1")
	s.Go("A", func(ctx context.Context, a *Actor) error {
		_, err := flow.place(ctx, a, lock.NewSimpleRedisLock(a.Redis, "app1", name))
		return err
	}, WithProcess("app1"))
	s.Go("B", func(ctx context.Context, a *Actor) error {
		lk := lock.NewSimpleRedisLock(a.Redis, "app2", name)
		res, err := flow.place(ctx, a, lk)
		if err != nil || res != orderInProgress {
			return err
		}
		a.Point("retry")
		a.Note("retries")
		_, err = flow.place(ctx, a, lk)
		return err
	}, WithProcess("app2"))
	s.Until("A", "before-commit")
	s.Until("B", "retry")
	s.Finish("A")
	s.Finish("B")
	return nil
}
