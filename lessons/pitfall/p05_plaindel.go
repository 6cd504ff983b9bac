package pitfall

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 5 — the wrong delete (误删): hmdp's first SimpleRedisLock unlocks with
// stringRedisTemplate.delete, the jedis.del wrong example ("任何客户端都可以随时进行解锁"), and a
// lock with expiry (带有过期时间的锁), case 3.
var plainDel = &Pitfall{
	Num: "5", Name: "plain-del", Title: "Unlock by plain DEL",
	Source: "003 Redis分布式锁误删问题; 004 解锁代码 错误示例1; 002 带有过期时间的锁 (case 3)",
	Story: "A's lease runs out while A is on its way to the release; B takes the lock. A's `DEL` " +
		"arrives and deletes B's lock, not its own. C takes the lock at once: B and C are inside together.",
	Remedy: "Put the owner in the value and release with compare-and-delete in one Lua script " +
		"(lock.SimpleRedisLock's unlock.lua): A's release finds B's value and deletes nothing; C is refused.",
	Variants: wrongFix("SET NX PX, unlock with DEL", "lock.SimpleRedisLock (unlock.lua compare-and-delete)"),
	play: func(s *Scene, v Variant) error {
		return playWrongDelete(s, "unlock", func(a *Actor, name string) lock.Lock {
			l := lock.NewSimpleRedisLock(a.Redis, a.Process, name)
			if v.Wrong {
				return plainDelLock{SimpleRedisLock: l, c: a.Redis}
			}
			return l
		})
	},
	judge: exclusionVerdict("A", "B"),
}

// plainDelLock is hmdp's first SimpleRedisLock: the owner is in the value, but the
// release never looks at it.
type plainDelLock struct {
	*lock.SimpleRedisLock
	c *redis.Client
}

func (l plainDelLock) Unlock(ctx context.Context) error { return l.c.Del(ctx, l.Key()).Err() }
