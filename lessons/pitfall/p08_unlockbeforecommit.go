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
	Remedy: "Release the lock only after COMMIT. The fix runs the service's own order path: `order.Service.Place` " +
		"on two instances over `order.SQLStore` (the embedded SQLite with the service's schema; MariaDB in " +
		"`make test-integration`), which takes the lock, " +
		"runs the order's transaction to its COMMIT and only then unlocks. A is paused inside its critical section, " +
		"before its writes; B is refused (order_in_progress) while A is inside; when B retries after A's commit, " +
		"the check finds A's order: already_ordered. Were the service to release its lock before the commit, B " +
		"would get in beside A and the lesson would fail: the schema's unique key would still refuse B's second " +
		"order, but a duplicate that only the database stopped (duplicate_blocked_by_db) is the lock's failure.",
	Variants: wrongFix("lock.SimpleRedisLock, unlocked before COMMIT", "order.Service.Place: lock.SimpleRedisLock, unlocked after COMMIT"),
	play:     playUnlockBeforeCommit,
	judge:    orderVerdict(1, "A", "B"),
}

func playUnlockBeforeCommit(s *Scene, v Variant) error {
	if !v.Wrong {
		return playServiceOrders(s)
	}
	s.db = NewOrderDB()
	flow := orderFlow{db: s.db, user: 1, ttl: s.Lease(), unlockBeforeCommit: true}
	name := s.LockName("order:1")
	playOrderPair(s, "before-commit", func(a *Actor) func(context.Context) (string, error) {
		lk := lock.NewSimpleRedisLock(a.Redis, a.Process, name)
		return func(ctx context.Context) (string, error) { return flow.place(ctx, a, lk) }
	})
	return nil
}

// playServiceOrders is the fix: the same two requests of user 1 on two instances of the
// service's own order path (order.Service.Place). A is paused inside its order's critical
// section, in the business step before the writes. The order's transaction runs inside the
// store's Create, with no seam between its INSERT and its COMMIT; but the service can only
// release its lock before Create is called or after it returns, so a service that released
// before the commit would free the lock while A is paused there, and B would get in.
func playServiceOrders(s *Scene) error {
	so, err := newServiceOrders(s, 1)
	if err != nil {
		return err
	}
	s.orders = so
	playOrderPair(s, "processing", func(a *Actor) func(context.Context) (string, error) {
		svc := so.instance(s, a)
		return func(ctx context.Context) (string, error) { return so.place(ctx, a, svc) }
	})
	return so.observe(s)
}

// playOrderPair is pitfall 8's script: A, on instance app1, places user 1's order and stops
// at pause, inside its critical section; B, on app2, places the same order then and, refused
// as order_in_progress, retries once A's request has returned. placer returns an actor's way
// of placing the order, with the answer its client gets.
func playOrderPair(s *Scene, pause string, placer func(a *Actor) func(context.Context) (string, error)) {
	s.Go("A", func(ctx context.Context, a *Actor) error {
		_, err := placer(a)(ctx)
		return err
	}, WithProcess("app1"))
	s.Go("B", func(ctx context.Context, a *Actor) error {
		place := placer(a)
		res, err := place(ctx)
		if err != nil || res != orderInProgress {
			return err
		}
		a.Point("retry")
		a.Note("retries")
		_, err = place(ctx)
		return err
	}, WithProcess("app2"))
	s.Until("A", pause)
	s.Until("B", "retry")
	s.Finish("A")
	s.Finish("B")
}
