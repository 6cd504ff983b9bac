package pitfall

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 4 — the expiry-timestamp lock (加锁代码 错误示例2): the value is the lock's expiry
// time on the client's clock; a client that finds it in the past takes the lock over with
// GETSET. It has three faults: clients' clocks must agree; concurrent GETSETs overwrite each
// other's expiry; the lock has no owner, so anyone can unlock. This script shows all three.
var getsetTimestamp = &Pitfall{
	Num: "4", Name: "getset-timestamp", Title: "An expiry timestamp as the value, with GETSET takeover",
	Source: "004 加锁代码 错误示例2 (setnx(expires) + get + getSet)",
	Story: "A takes the lock (`SETNX key <its clock + 10s>`) and crashes. Later B and C both read the stale " +
		"timestamp; B's `GETSET` wins, C's `GETSET` loses but has already overwritten B's expiry with its own. " +
		"D, whose clock runs 15 s ahead, reads that expiry as past and takes the lock over while B is inside. " +
		"B, done, releases with `DEL` and deletes D's lock: the value names no owner.",
	Remedy: "Let Redis keep the time: `SET key owner NX PX ttl` (lock.SimpleRedisLock). The lease is measured " +
		"by the server's clock alone, nobody takes a live lock over, and the release checks the owner.",
	Variants: wrongFix("SETNX expiry-timestamp; GET; GETSET takeover; DEL", "lock.SimpleRedisLock (SET NX PX)"),
	play:     playGetset,
	judge:    exclusionVerdict("A", "B"),
}

// timestampLock is the expiry-timestamp lock with its GETSET takeover.
type timestampLock struct {
	c     *redis.Client
	key   string
	clock clock
	t     tracer
}

func (l timestampLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	now, err := l.clock.now()
	if err != nil {
		return false, err
	}
	expires := strconv.FormatInt(l.clock.s.stamp(now.Add(ttl)), 10)
	if n, err := l.c.Do(ctx, "SETNX", l.key, expires).Int(); err != nil || n == 1 {
		return n == 1, err
	}
	current, err := l.c.Get(ctx, l.key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	l.t.Point("after-get")
	if ms, err := strconv.ParseInt(current, 10, 64); err != nil || ms >= l.clock.s.stamp(now) {
		return false, nil
	}
	l.t.Note("reads the lock as expired: %s is before its clock's %s", current, strconv.FormatInt(l.clock.s.stamp(now), 10))
	//lint:ignore SA1019 the lesson is the GETSET lock; SET with GET would be a different lock
	old, err := l.c.GetSet(ctx, l.key, expires).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	if old != current {
		l.t.Note("GETSET returned %s, not the %s it read: not acquired, but its expiry has replaced the holder's", old, current)
		return false, nil
	}
	l.t.Note("GETSET returned the value it read: takes the lock over")
	return true, nil
}

func (l timestampLock) Unlock(ctx context.Context) error { return l.c.Del(ctx, l.key).Err() }

func playGetset(s *Scene, v Variant) error {
	if err := s.startClock(); err != nil {
		return err
	}
	short, lease := s.ShortLease(), s.Lease()
	name := s.LockName("job")
	actor := func(skew time.Duration, ttl time.Duration) func(context.Context, *Actor) error {
		return func(ctx context.Context, a *Actor) error {
			var lk lock.Lock = lock.NewSimpleRedisLock(a.Redis, a.Process, name)
			if v.Wrong {
				lk = timestampLock{c: a.Redis, key: lockKey(name), clock: clock{s: s, skew: skew}, t: a}
			} else {
				a.Point("after-get") // the fix reads nothing first; it waits at the same moment
			}
			return guarded(ctx, a, lk, ttl)
		}
	}
	// C's clock runs a fifth of a lease ahead, D's one and a half leases ahead.
	s.Go("A", actor(0, short))
	s.Go("B", actor(0, lease))
	s.Go("C", actor(lease/5, lease))
	s.Go("D", actor(lease*3/2, lease))
	s.Until("A", "working")
	s.Crash("A")
	if err := s.Advance(short*11/10, "A's lease is over on every clock"); err != nil {
		return err
	}
	s.Until("B", "after-get")
	s.Until("C", "after-get")
	s.Until("B", "working")
	s.Finish("C")
	s.Until("D", "working")
	s.Finish("B")
	s.Finish("D")
	return nil
}
