package pitfall

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 10 — a deadline computed on the client's clock: SET … NX PXAT (now + ttl). The
// expiry-timestamp lock's rule ("由于是客户端自己生成过期时间,所以需要强制要求分布式下每个客户端的
// 时间必须同步") holds for timestamps in values; PXAT carries the same assumption into the
// server's expiry. The fallacies of distributed computing are the backdrop.
var clockSkew = &Pitfall{
	Num: "10", Name: "clock-skew", Title: "A deadline computed on the client's clock (SET … PXAT)",
	Source: "004 加锁代码 错误示例2 (clients' clocks must agree); 002 分布式系统中错误的假设",
	Story: "A's clock runs 15 s behind. It locks with `SET key owner NX PXAT <its now + 10s>`: a deadline " +
		"already in the server's past. Redis answers OK and expires the key at once. A believes it holds the " +
		"lock and goes in; B locks the same key a moment later and also goes in. (A clock that runs ahead " +
		"fails the other way: the lease lasts far longer than meant, and a crashed holder blocks everyone.)",
	Remedy: "Give Redis a duration, not a deadline: `SET key owner NX PX ttl` (lock.SimpleRedisLock). The " +
		"lease is then measured on one clock, the server's, whatever the clients' clocks say.",
	Variants: wrongFix("SET NX PXAT <client clock + ttl>", "lock.SimpleRedisLock (SET NX PX ttl)"),
	play:     playClockSkew,
	judge:    exclusionVerdict("A"),
}

// pxatLock sets an absolute deadline computed on its own clock.
type pxatLock struct {
	*lock.SimpleRedisLock // for its compare-and-delete Unlock
	c                     *redis.Client
	owner                 string
	clock                 clock
}

func (l pxatLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	now, err := l.clock.now()
	if err != nil {
		return false, err
	}
	deadline := l.clock.s.stamp(now.Add(ttl))
	err = l.c.Do(ctx, "SET", l.Key(), l.owner, "NX", "PXAT", deadline).Err()
	if err == redis.Nil {
		return false, nil
	}
	return err == nil, err
}

func playClockSkew(s *Scene, v Variant) error {
	if err := s.startClock(); err != nil {
		return err
	}
	lease := s.Lease()
	name := s.LockName("job")
	actor := func(skew time.Duration) func(context.Context, *Actor) error {
		return func(ctx context.Context, a *Actor) error {
			l := lock.NewSimpleRedisLock(a.Redis, a.Process, name)
			var lk lock.Lock = l
			if v.Wrong {
				lk = pxatLock{SimpleRedisLock: l, c: a.Redis, owner: owner(a.Process), clock: clock{s: s, skew: skew}}
			}
			return guarded(ctx, a, lk, lease)
		}
	}
	s.Go("A", actor(-lease*3/2))
	s.Go("B", actor(0))
	s.Until("A", "working")
	if err := s.Observe(lockKey(name), "what A's SET left behind"); err != nil {
		return err
	}
	s.Until("B", "working")
	s.Finish("A")
	s.Finish("B")
	return nil
}
