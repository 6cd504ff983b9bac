package pitfall

import (
	"context"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 1 — hmdp's coupon seckill before its Redis lock: synchronized on the user id works
// on one JVM; with two instances behind nginx, "线程3和线程4在进程B中…锁对象肯定不是同一个",
// and one user places two orders. Here: lock.LocalLocks (the Go analogue of synchronized)
// on two service instances sharing one database.
var inProcess = &Pitfall{
	Num: "1", Name: "in-process", Title: "An in-process lock on a multi-instance deployment",
	Source: "003 优惠券秒杀（四）— opening section (JVM lock per process, two instances behind nginx)",
	Story: "Each instance has its own in-process mutex per user (`lock.LocalLocks`, Go's `synchronized`). " +
		"Two requests of the same user land on different instances: each takes its own instance's lock, " +
		"both find no order, both insert one. The lock excludes goroutines of one process, never two processes.",
	Remedy: "One lock shared by every instance: `lock.SimpleRedisLock` (SET NX PX in Redis). " +
		"The second request is refused (order_in_progress) while the first is inside.",
	Variants: wrongFix("lock.LocalLocks, one per instance", "lock.SimpleRedisLock shared through Redis"),
	play:     playInProcess,
	judge:    orderVerdict(1, "A"),
}

func playInProcess(s *Scene, v Variant) error {
	s.db = NewOrderDB()
	flow := orderFlow{db: s.db, user: 1, ttl: s.Lease()}
	name := s.LockName("order:1")
	instance := func(process string) func(context.Context, *Actor) error {
		local := lock.NewLocalLocks()
		return func(ctx context.Context, a *Actor) error {
			var lk lock.Lock
			if v.Wrong {
				lk = loggedLock{Lock: local.New(name), a: a, to: process + " mutex", name: "order:1"}
			} else {
				lk = lock.NewSimpleRedisLock(a.Redis, process, name)
			}
			_, err := flow.place(ctx, a, lk)
			return err
		}
	}
	s.Go("A", instance("app1"), WithProcess("app1"))
	s.Go("B", instance("app2"), WithProcess("app2"))
	s.Until("A", "checked")
	s.Until("B", "checked")
	s.Finish("A")
	s.Finish("B")
	return nil
}
