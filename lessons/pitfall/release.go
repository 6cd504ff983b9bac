package pitfall

import (
	"context"

	"github.com/seckill/seckill/internal/lock"
)

// playWrongDelete is the script of the wrong-release pitfalls (5, 6, 12), hmdp's wrong-delete
// (误删) story: A finishes its work and stalls on the way to its release (at point, a GC pause
// or a slow network) until its lease runs out; B takes the lock; A's release arrives and,
// with a wrong lock, deletes B's lock; C takes it while B is still inside.
func playWrongDelete(s *Scene, point string, mk func(a *Actor, name string) lock.Lock) error {
	name := s.LockName("order:1")
	s.Go("A", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a, name), s.ShortLease()) })
	s.Go("B", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a, name), s.Lease()) })
	s.Go("C", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a, name), s.Lease()) })
	if !s.Until("A", point) {
		return errNoPoint("A", point)
	}
	if err := s.Expire(lockKey(name)); err != nil {
		return err
	}
	s.Until("B", "working")
	s.Finish("A")
	s.Until("C", "working")
	s.Finish("B")
	s.Finish("C")
	return nil
}

// pausedUnlock stalls at point just before its lock's release reaches Redis: the fixes'
// equivalent of a wrong lock's pause between two commands.
type pausedUnlock struct {
	lock.Lock
	t     tracer
	point string
}

func (p pausedUnlock) Unlock(ctx context.Context) error {
	p.t.Point(p.point)
	return p.Lock.Unlock(ctx)
}
