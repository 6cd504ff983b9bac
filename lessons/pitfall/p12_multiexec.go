package pitfall

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 12 — MULTI/EXEC taken for compare-and-delete (带有识别客户端和超时时间的锁): "也许有人会想到
// 事务…multi, exists, del, exec,遗憾的是在执行del前我们无法获取到exists的值". A MULTI block
// queues its commands: the GET's answer arrives with the DEL's, too late to decide anything.
var multiExec = &Pitfall{
	Num: "12", Name: "multi-exec", Title: "A MULTI/EXEC transaction as compare-and-delete",
	Source: "002 带有识别客户端和超时时间的锁 (multi, exists, del, exec)",
	Story: "A releases with `MULTI; GET; DEL; EXEC`, hoping the transaction makes check and delete one step. " +
		"It does make them one step, but the GET's value comes back only with EXEC, after the DEL has run: " +
		"the delete is unconditional. With A's lease run out and B holding the lock, A deletes B's lock; C gets in.",
	Remedy: "Decide before deleting, atomically: either a Lua script (unlock.lua), or an optimistic transaction — " +
		"`WATCH key; GET key`, and only if it is ours `MULTI; DEL; EXEC`, which fails if the key changed since the WATCH. " +
		"This fix uses WATCH, to show the transaction done right: A watches the key and reads its own value, then " +
		"stalls before `MULTI` while its lease runs out and B takes the lock; B's SET touches the watched key, so A's " +
		"`EXEC` runs nothing (a nil reply) and A learns the lock is not its own any more. C is refused.",
	Variants: wrongFix("MULTI; GET; DEL; EXEC", "WATCH; GET; compare; MULTI; DEL; EXEC"),
	play: func(s *Scene, v Variant) error {
		// The wrong release has no gap to stall in: A stalls before it. The fix stalls
		// between its read and its EXEC, where only the WATCH stands between A and B's lock.
		point := "unlock"
		if !v.Wrong {
			point = "unlock-gap"
		}
		return playWrongDelete(s, point, func(a *Actor, name string) lock.Lock {
			l := lock.NewSimpleRedisLock(a.Redis, a.Process, name)
			if v.Wrong {
				return multiDelLock{SimpleRedisLock: l, c: a.Redis, process: a.Process, t: a}
			}
			return watchDelLock{SimpleRedisLock: l, c: a.Redis, process: a.Process, t: a}
		})
	},
	judge: exclusionVerdict("A", "B"),
}

// multiDelLock releases with GET and DEL queued in one MULTI block.
type multiDelLock struct {
	*lock.SimpleRedisLock
	c       *redis.Client
	process string
	t       tracer
}

func (l multiDelLock) Unlock(ctx context.Context) error {
	var get *redis.StringCmd
	_, err := l.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, l.Key())
		p.Del(ctx, l.Key())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if v, _ := get.Result(); v != owner(l.process) {
		l.t.Note("learns the lock was not its own only now, after the DEL has run")
		return lock.ErrNotHeld
	}
	return nil
}

// watchDelLock releases with an optimistic transaction: WATCH, GET, and MULTI/DEL/EXEC only
// when the value is ours; EXEC fails if the key changed after the WATCH. It pauses at
// "unlock-gap" between the GET and the MULTI, where a plain GET-then-DEL goes wrong.
type watchDelLock struct {
	*lock.SimpleRedisLock
	c       *redis.Client
	process string
	t       tracer
}

func (l watchDelLock) Unlock(ctx context.Context) error {
	err := l.c.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, l.Key()).Result()
		if errors.Is(err, redis.Nil) || (err == nil && v != owner(l.process)) {
			return lock.ErrNotHeld
		}
		if err != nil {
			return err
		}
		l.t.Point("unlock-gap")
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error { return p.Del(ctx, l.Key()).Err() })
		return err
	}, l.Key())
	if errors.Is(err, redis.TxFailedErr) {
		return lock.ErrNotHeld
	}
	return err
}
