package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// LockConnectTimeout bounds how long an instance waits at start for a lock backend of its
// own: a quorum of RedLock's nodes to answer, a ZooKeeper session or an etcd lease to be
// granted.
const LockConnectTimeout = 5 * time.Second

// redLockNodeShare is the share of an order's deadline that one RedLock attempt may wait for
// each node (the RedLocks' NodeTimeout; 500 ms with the default 2 s deadline). A hung node
// costs an acquisition that long, and the lock's validity is the lease less the attempt. The
// Redis documentation suggests 5-50 ms for a 10 s lease. On a loaded two-core machine
// running the instances and their clients, a storm's first wave (each request dialling each
// node) took longer than 250 ms, and every attempt cut short is an order refused with 503:
// the order's own budget is the better measure of how long a lock may take. The node
// clients' dial and I/O timeouts are the same, and ContextTimeoutEnabled hands them the
// attempt's deadline, so an abandoned call does not linger on a hung node.
const redLockNodeShare = 4

// LockBackendError reports a lock backend of a guard's own that did not answer when an
// instance started: Kind is the guard ("redlock", "zookeeper", "etcd"), Addrs the servers it
// tried.
type LockBackendError struct {
	Kind  string
	Addrs []string
	// NodeTimeout, when set, is how long each server was given to answer, a share of the order
	// deadline (RedLock's nodes, redLockNodeShare), and every server that failed ran out of
	// it: servers that are up but slower than that fail the start as servers that are down do,
	// and a longer order deadline is what gives them longer.
	NodeTimeout time.Duration
	Err         error
}

func (e *LockBackendError) Error() string {
	return fmt.Sprintf("%s at %s: %v", e.Kind, strings.Join(e.Addrs, ","), e.Err)
}

func (e *LockBackendError) Unwrap() error { return e.Err }

// redLockOptions are the guard's RedLock options: the default drift allowance, each node
// waited for at most nodeTimeout. LockKinds' Validity of redlock reads the drift from them.
func redLockOptions(nodeTimeout time.Duration) lock.RedLockOptions {
	return lock.RedLockOptions{NodeTimeout: nodeTimeout}
}

// redLockIdleConns is how many connections each RedLock node's client keeps open.
const redLockIdleConns = 16

// newRedLockGuard makes the RedLocks over the stores' RedLock nodes, one client per node
// with bounded timeouts, and fails when fewer than a quorum of them answer a PING.
func newRedLockGuard(env LockEnv) (Guard, error) {
	addrs, err := env.Stores.RedLockAddrs()
	if err != nil {
		return Guard{}, err
	}
	timeout := env.OrderTimeout / redLockNodeShare
	nodes := make([]*redis.Client, len(addrs))
	clients := make([]lock.RedisClient, len(addrs))
	for i, a := range addrs {
		nodes[i] = redis.NewClient(&redis.Options{
			Addr:     a,
			PoolSize: env.RedisPool,
			// Connections dialled at start, not in the first burst: every order talks to
			// every node, and a storm that dials them all at once waits on the dials.
			MinIdleConns:          min(env.RedisPool, redLockIdleConns),
			DialTimeout:           timeout,
			PoolTimeout:           timeout,
			ReadTimeout:           timeout,
			WriteTimeout:          timeout,
			ContextTimeoutEnabled: true,
			// Never resend: a SET NX resent after its reply was lost finds its own key and
			// counts as a node that refused; RedLock tolerates a node's failure instead.
			MaxRetries: -1,
			// One dial a call: a dead node counts as a refusal at once, not after go-redis's
			// five dials 100 ms apart, which held every order for the node's whole timeout
			// while the node was down (TestRedLockQuorum).
			DialerRetries: 1,
		})
		clients[i] = nodes[i]
	}
	closeNodes := func() error {
		var errs []error
		for _, n := range nodes {
			errs = append(errs, n.Close())
		}
		return errors.Join(errs...)
	}
	quorum := func(ctx context.Context) error {
		_, err := pingQuorum(ctx, nodes, addrs)
		return err
	}
	if timedOut, err := pingQuorum(env.Ctx, nodes, addrs); err != nil {
		_ = closeNodes()
		be := &LockBackendError{Kind: "redlock", Addrs: addrs, Err: err}
		// Past LockConnectTimeout it is the start's own bound that ran out, not the nodes'.
		if timedOut && timeout < LockConnectTimeout {
			be.NodeTimeout = timeout
			be.Err = fmt.Errorf("%w; each node was given %s to answer, 1/%d of the order deadline of %s",
				err, timeout, redLockNodeShare, env.OrderTimeout)
		}
		return Guard{}, be
	}
	return Guard{
		Locks: lock.NewRedLocks(clients, env.Process, redLockOptions(timeout)),
		Close: closeNodes,
		Ready: quorum,
	}, nil
}

// pingQuorum PINGs every node at once and reports an error wrapping lock.ErrNoQuorum, with
// the failing nodes' errors, when fewer than a quorum (len/2+1) answer; timedOut then says
// whether every node that failed ran out of time (rather than refused the connection, say).
func pingQuorum(ctx context.Context, nodes []*redis.Client, addrs []string) (timedOut bool, err error) {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Ping(ctx).Err() })
	}
	wg.Wait()
	answered, failed := 0, []string(nil)
	timedOut = true
	for i, err := range errs {
		if err != nil {
			failed = append(failed, addrs[i]+": "+err.Error())
			var ne net.Error // an I/O deadline, and context.DeadlineExceeded too
			timedOut = timedOut && errors.As(err, &ne) && ne.Timeout()
			continue
		}
		answered++
	}
	if q := len(nodes)/2 + 1; answered < q {
		return timedOut, fmt.Errorf("%w: %d of %d nodes answer PING, a quorum is %d (%s)",
			lock.ErrNoQuorum, answered, len(nodes), q, strings.Join(failed, "; "))
	}
	return false, nil
}

// newZooKeeperGuard opens the instance's ZooKeeper session, waiting for it within env.Ctx.
func newZooKeeperGuard(env LockEnv) (Guard, error) {
	addrs := env.Stores.ZooKeeperAddrs()
	zc, err := lock.NewZooKeeperClient(env.Ctx, addrs, lock.ZooKeeperOptions{Process: env.Process, Logger: env.Log,
		NoTokens: !env.Fencing})
	if err != nil {
		return Guard{}, &LockBackendError{Kind: "zookeeper", Addrs: addrs, Err: err}
	}
	return Guard{
		Locks: lock.NewZooKeeperLocks(zc),
		Close: zc.Close,
		Ready: func(context.Context) error {
			if !zc.Connected() {
				return errors.New("zookeeper session not connected")
			}
			return nil
		},
	}, nil
}

// etcdReadyTimeout bounds /readyz's read of etcd.
const etcdReadyTimeout = time.Second

// newEtcdGuard connects to the stores' etcd and grants the instance's lease, within env.Ctx.
// Its lease is the etcd client's default: an instance that dies loses its locks within it,
// as a Redis lock's within SECKILL_LOCK_TTL.
func newEtcdGuard(env LockEnv) (Guard, error) {
	addrs := env.Stores.EtcdEndpoints()
	ec, err := lock.NewEtcdClient(env.Ctx, addrs, lock.EtcdOptions{Process: env.Process})
	if err != nil {
		return Guard{}, &LockBackendError{Kind: "etcd", Addrs: addrs, Err: err}
	}
	return Guard{
		Locks: lock.NewEtcdLocks(ec),
		Close: ec.Close,
		Ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, etcdReadyTimeout)
			defer cancel()
			return ec.Ping(ctx)
		},
	}, nil
}
