package pitfall

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 2 — the simplest Redis lock (先来看一个最简单的锁): SETNX lock "locked", doSomething,
// DEL lock. If the holder dies between p1 and p4, nobody ever gets the lock again (failure
// case 2; the property 不会死锁, no dead lock, is violated).
var noExpiry = &Pitfall{
	Num: "2", Name: "no-expiry", Title: "A lock with no expiry whose holder crashes",
	Source: "002 实现 — 先来看一个最简单的锁 (SETNX without expiry), failure case 2",
	Story: "A takes `SETNX lock locked` and crashes inside the critical section. The key has no TTL, " +
		"so no amount of waiting frees it: B is refused now and forever.",
	Remedy: "`SET key value NX PX ttl` (lock.SimpleRedisLock): Redis deletes the key when the lease runs out, " +
		"whatever happened to its holder, and B gets the lock.",
	Variants: wrongFix("SETNX lock \"locked\" / DEL", "lock.SimpleRedisLock (SET NX PX)"),
	play:     playNoExpiry,
	judge:    livenessVerdict(noTTLReason),
}

// setnxLock is the simplest lock: SETNX with a constant value, no TTL, DEL to
// release.
type setnxLock struct {
	c   *redis.Client
	key string
}

func newSetnxLock(c *redis.Client, name string) setnxLock {
	return setnxLock{c: c, key: lockKey(name)}
}

func (l setnxLock) TryLock(ctx context.Context, _ time.Duration) (bool, error) {
	n, err := l.c.Do(ctx, "SETNX", l.key, "locked").Int()
	return n == 1, err
}

func (l setnxLock) Unlock(ctx context.Context) error { return l.c.Del(ctx, l.key).Err() }

// setnxOrFix makes pitfall 2's locks: the SETNX lock for the wrong run, the
// SET NX PX lock.SimpleRedisLock for the fix.
func setnxOrFix(v Variant, name string) func(a *Actor) lock.Lock {
	return func(a *Actor) lock.Lock {
		if v.Wrong {
			return newSetnxLock(a.Redis, name)
		}
		return lock.NewSimpleRedisLock(a.Redis, a.Process, name)
	}
}

func playNoExpiry(s *Scene, v Variant) error {
	name := s.LockName("job")
	mk := setnxOrFix(v, name)
	s.Go("A", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a), s.ShortLease()) })
	s.Go("B", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a), s.Lease()) })
	s.Until("A", "working")
	s.Crash("A")
	if err := s.Expire(lockKey(name)); err != nil {
		return err
	}
	s.Finish("B")
	return nil
}
