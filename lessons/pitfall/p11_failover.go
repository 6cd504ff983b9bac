package pitfall

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Pitfall 11 — a Redis primary with replicas (Redis 多实例): replication from primary to replica is
// asynchronous; "App-A 从 Redis 某主节点 R-Master 获取到锁后,R-Master 宕机,此时 R-Master 的数据
// 还没来得及同步到 R-Slave…App-B 尝试获取锁,不出意外的也获取成功了". Run for real: two
// redis-server processes, replication held back by a proxy, the primary killed, the replica
// promoted.
var failover = &Pitfall{
	Num: "11", Name: "failover", Title: "Failover before replication",
	Source: "000 Redis 多实例 (asynchronous replication, a lock lost on failover; RedLock, ZooKeeper)",
	Story: "A takes the lock on the primary. Replication is asynchronous: the primary answers OK before the " +
		"replica has the key, and here the link stalls. The primary crashes (SIGKILL) and the replica is promoted " +
		"(`REPLICAOF NO ONE`) without A's key; a fresh replica attaches to it. B takes the same lock on the new " +
		"primary while A is still inside.",
	Remedy: "Do not count a lock the replica has not acknowledged: after `SET NX PX`, `WAIT 1 <timeout>`; if no " +
		"replica confirms, release and report not acquired. A gives up; after the failover B's SET is " +
		"acknowledged by the new replica and only B is inside. " +
		"WAIT narrows the window but does not make Redis strongly consistent (a failover can still pick a replica " +
		"that missed the write among several). The answers for stronger needs: RedLock (a majority of " +
		"independent primaries) or ZooKeeper.",
	Variants:       wrongFix("lock.SimpleRedisLock on the primary", "SET NX PX, then WAIT 1 replica, else release"),
	NeedsServerBin: true,
	play:           playFailover,
	judge: func(s *Scene, events []Event, v Variant) Verdict {
		out := exclusionVerdict("B")(s, events, v)
		if e, ok := firstEvent(events, func(e Event) bool { return strings.Contains(e.What, "no replica acknowledged") }); ok && !out.Violated {
			out.Outcome += fmt.Sprintf("; %s did not count its unreplicated lock (t=%d)", e.Actor, e.T)
		}
		return out
	},
}

// waitTimeout is how long the fixed lock's WAIT gives the replica to acknowledge.
const waitTimeout = 100 * time.Millisecond

// replicatedLock is the fix: a SimpleRedisLock that counts only once a replica has
// acknowledged the SET.
type replicatedLock struct {
	*lock.SimpleRedisLock
	c *redis.Client
	t tracer
}

func (l replicatedLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := l.SimpleRedisLock.TryLock(ctx, ttl)
	if err != nil || !ok {
		return ok, err
	}
	n, err := l.c.Wait(ctx, 1, waitTimeout).Result()
	if err == nil && n >= 1 {
		return true, nil
	}
	l.t.Note("no replica acknowledged the SET: does not count the lock, releases it")
	if uerr := l.Unlock(ctx); uerr != nil && !errors.Is(uerr, lock.ErrNotHeld) {
		return false, uerr
	}
	return false, err
}

func playFailover(s *Scene, v Variant) error {
	c := s.cluster
	name := s.LockName("order:1")
	key := lockKey(name)
	mk := func(a *Actor) lock.Lock {
		l := lock.NewSimpleRedisLock(a.Redis, a.Process, name)
		if v.Wrong {
			return l
		}
		return replicatedLock{SimpleRedisLock: l, c: a.Redis, t: a}
	}
	s.Note("the replica is in sync with the primary")
	c.proxy.hold()
	s.Note("the replication link stalls: nothing more reaches the replica")
	s.Go("A", func(ctx context.Context, a *Actor) error {
		err := guarded(ctx, a, mk(a), s.Lease())
		if err != nil && strings.Contains(err.Error(), "unlock") {
			a.Note("Unlock fails: the old primary is gone")
			return nil
		}
		return err
	}, withServer("unix", c.primary.sock, "primary"))
	s.Go("B", func(ctx context.Context, a *Actor) error { return guarded(ctx, a, mk(a), s.Lease()) },
		withServer("unix", c.replica.sock, "replica (new primary)"))
	s.Until("A", "working")
	n, err := c.replica.spy.Exists(s.ctx, key).Result()
	if err != nil {
		return err
	}
	s.Note("on the replica, %s %s", key, map[int64]string{0: "does not exist", 1: "exists"}[n])
	c.primary.kill()
	s.Note("the primary crashes (SIGKILL) before the replica has A's SET")
	if err := c.promote(s.ctx); err != nil {
		return err
	}
	s.Note("failover: the replica is promoted (REPLICAOF NO ONE)")
	if err := c.attachReplica(s.ctx); err != nil {
		return err
	}
	s.Note("a new replica attaches to the new primary and syncs")
	s.Until("B", "working")
	s.Finish("A")
	s.Finish("B")
	return nil
}

// clusterFor starts the cluster for a pitfall that needs one.
func clusterFor(ctx context.Context, env Env) (*cluster, *server, error) {
	c, err := startCluster(ctx, env.RedisServerBin)
	if err != nil {
		return nil, nil, fmt.Errorf("start primary and replica: %w", err)
	}
	return c, realServer("unix", c.primary.sock), nil
}
