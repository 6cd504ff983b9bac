package pitfall

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 6 — check-then-delete that is not atomic (分布式锁的原子性: thread 1 checks the id,
// then a GC pause before the delete), the jedis get-then-del wrong example ("若在此时,这把锁突然
// 不是这个客户端的,则会误解锁"). A RedisLockRegistry-style unlock has the same two steps.
var getThenDel = &Pitfall{
	Num: "6", Name: "get-then-del", Title: "Owner check and delete as two commands",
	Source: "003 分布式锁的原子性; 004 解锁代码 错误示例2",
	Story: "A's release reads the lock (`GET`: its own value), then stalls before its `DEL` (a GC pause, " +
		"a stop-the-world). The lease runs out, B takes the lock, and A's `DEL`, decided on a stale read, " +
		"deletes B's lock. C takes it while B is inside.",
	Remedy: "Check and delete in one step that nothing can interleave with: a Lua script " +
		"(`if GET == mine then DEL`), which Redis runs atomically (lock.SimpleRedisLock's unlock.lua). " +
		"A stalls at the same moment, but the check happens when the script runs.",
	Variants: wrongFix("GET, compare, then DEL", "lock.SimpleRedisLock (unlock.lua)"),
	play: func(s *Scene, v Variant) error {
		return playWrongDelete(s, "unlock-gap", func(a *Actor, name string) lock.Lock {
			l := lock.NewSimpleRedisLock(a.Redis, a.Process, name)
			if v.Wrong {
				return getDelLock{SimpleRedisLock: l, c: a.Redis, process: a.Process, t: a}
			}
			return pausedUnlock{Lock: l, t: a, point: "unlock-gap"}
		})
	},
	judge: exclusionVerdict("A", "B"),
}

// getDelLock releases by GET, compare, DEL: two commands, with a pause point between.
type getDelLock struct {
	*lock.SimpleRedisLock
	c       *redis.Client
	process string
	t       tracer
}

func (l getDelLock) Unlock(ctx context.Context) error {
	v, err := l.c.Get(ctx, l.Key()).Result()
	if errors.Is(err, redis.Nil) || v != owner(l.process) {
		return lock.ErrNotHeld
	}
	if err != nil {
		return err
	}
	l.t.Point("unlock-gap")
	return l.c.Del(ctx, l.Key()).Err()
}
