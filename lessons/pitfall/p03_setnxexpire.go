package pitfall

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 3 — SETNX, then EXPIRE as a second command (SETNX lock thread1; EXPIRE lock 10:
// "两个操作,无法保证原子性"), the jedis.setnx-then-jedis.expire wrong example ("若在这里程序突然
// 崩溃,则无法设置过期时间,将发生死锁").
var setnxExpire = &Pitfall{
	Num: "3", Name: "setnx-expire", Title: "SETNX then EXPIRE as two commands",
	Source: "003 Redis分布式锁的实现 (SETNX + EXPIRE); 004 加锁代码 错误示例1",
	Story: "A sends `SETNX`, then crashes before its `EXPIRE` is sent. The lock exists without a TTL: " +
		"the expiry that was meant to prevent a dead lock never arrives, and B is refused forever.",
	Remedy: "One command: `SET key value NX PX ttl` (lock.SimpleRedisLock) sets the value and the lease " +
		"atomically; there is no moment at which the lock exists without its expiry.",
	Variants: wrongFix("SETNX, then EXPIRE", "lock.SimpleRedisLock (SET NX PX, one command)"),
	play:     playSetnxExpire,
	judge:    livenessVerdict(noTTLReason),
}

// setnxExpireLock takes the lock with SETNX and sets its lease with a second command,
// pausing at "after-setnx" in between.
type setnxExpireLock struct {
	c     *redis.Client
	key   string
	value string
	t     tracer
}

func (l setnxExpireLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := l.c.Do(ctx, "SETNX", l.key, l.value).Int()
	if err != nil || n == 0 {
		return false, err
	}
	l.t.Point("after-setnx")
	return true, l.c.PExpire(ctx, l.key, ttl).Err()
}

func (l setnxExpireLock) Unlock(ctx context.Context) error { return l.c.Del(ctx, l.key).Err() }

func playSetnxExpire(s *Scene, v Variant) error {
	name := s.LockName("job")
	mk := func(a *Actor) lock.Lock {
		if v.Wrong {
			return setnxExpireLock{c: a.Redis, key: lockKey(name), value: owner(a.Process), t: a}
		}
		return lock.NewSimpleRedisLock(a.Redis, a.Process, name)
	}
	s.Go("A", func(ctx context.Context, a *Actor) error {
		ok, err := mk(a).TryLock(ctx, s.ShortLease())
		if err != nil || !ok {
			return err
		}
		a.Point("after-setnx") // the fix has nothing left to send: A crashes at the same moment
		return nil
	})
	s.Go("B", func(ctx context.Context, a *Actor) error {
		return guarded(ctx, a, mk(a), s.Lease())
	})
	s.Until("A", "after-setnx")
	s.Crash("A")
	if err := s.Expire(lockKey(name)); err != nil {
		return err
	}
	s.Finish("B")
	return nil
}
