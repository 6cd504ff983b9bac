package pitfall

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"
)

// Pitfall 2b — the simplest Redis lock (先来看一个最简单的锁), failure case 1: the SETNX reached Redis and
// was executed, but the reply never reached the client (a crash or a broken link after the
// server ran it). The client believes it has no lock and never releases it; the lock is
// held by nobody who knows it.
var lostReply = &Pitfall{
	Num: "2b", Name: "lost-reply", Title: "The SET succeeded but the client saw an error",
	Source: "002 实现 — 先来看一个最简单的锁, failure case 1 (请求打到redis服务器之后…响应打到客户端之前)",
	Story: "A's `SETNX` is executed by Redis, but the reply is lost on the way back: A sees an error, " +
		"answers 503 and never unlocks, since as far as it knows it holds nothing. The key has no TTL: " +
		"B is refused forever, although nobody is inside.",
	Remedy: "A lease, and cleaning up after the error. With `SET NX PX` the orphaned key would expire when its " +
		"lease ran out; lock.SimpleRedisLock's TryLock does not wait for that: when the SET fails it runs " +
		"unlock.lua with the value it sent, deleting the key only if A's SET took it, and B gets the lock at once. " +
		"A network call has three steps (send, execute, reply) and any of them can fail independently: a lock " +
		"must survive all three.",
	Variants: wrongFix("SETNX lock \"locked\" / DEL", "lock.SimpleRedisLock (SET NX PX)"),
	play:     playLostReply,
	judge:    livenessVerdict(noTTLReason),
}

// errReplyLost is what a client sees when the reply to an executed command never arrives.
var errReplyLost = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset: reply lost")}

// loseFirstReply runs the first SET-family command for real, then drops its reply.
type loseFirstReply struct {
	scene *Scene
	done  bool
}

func (h *loseFirstReply) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook drops the replies of the first MULTI … EXEC holding a SET (how
// lock.SimpleRedisLock takes its lock and its fencing token).
func (h *loseFirstReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if h.done || err != nil {
			return err
		}
		for _, cmd := range cmds {
			if cmd.Name() == "set" {
				h.done = true
				h.scene.setHolder(fmt.Sprint(cmd.Args()[1]), h.scene.actorOf(ctx))
				for _, c := range cmds {
					c.SetErr(errReplyLost)
				}
				return errReplyLost
			}
		}
		return nil
	}
}

func (h *loseFirstReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.done || err != nil || (cmd.Name() != "set" && cmd.Name() != "setnx") {
			return err
		}
		h.done = true
		h.scene.setHolder(fmt.Sprint(cmd.Args()[1]), h.scene.actorOf(ctx))
		cmd.SetErr(errReplyLost)
		return errReplyLost
	}
}

func playLostReply(s *Scene, v Variant) error {
	name := s.LockName("job")
	mk := setnxOrFix(v, name)
	s.Go("A", func(ctx context.Context, a *Actor) error {
		_, err := mk(a).TryLock(ctx, s.ShortLease())
		if err == nil {
			return errors.New("the reply was not dropped")
		}
		if v.Wrong {
			a.Note("sees an error, answers 503 and never unlocks: as far as A knows, it holds no lock")
		} else {
			a.Note("sees an error and answers 503: TryLock has already deleted the key its lost SET took")
		}
		return nil
	}, withFault(&loseFirstReply{scene: s}))
	s.Go("B", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a), s.Lease()) })
	s.Finish("A")
	if v.Wrong {
		if err := s.Expire(lockKey(name)); err != nil {
			return err
		}
	}
	s.Finish("B")
	return nil
}
