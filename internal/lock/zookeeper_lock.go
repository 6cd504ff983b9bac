package lock

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/go-zookeeper/zk"
)

// errZKRequeue tells an acquisition that its node's session was lost while it waited: it
// starts again with a new node.
var errZKRequeue = errors.New("lock: zookeeper session lost during the attempt")

// ZooKeeperLocks makes the locks of one ZooKeeperClient.
type ZooKeeperLocks struct{ c *ZooKeeperClient }

// NewZooKeeperLocks returns the ZooKeeperLocks of c.
func NewZooKeeperLocks(c *ZooKeeperClient) *ZooKeeperLocks { return &ZooKeeperLocks{c: c} }

// New returns the ZooKeeperLock named name as a Lock.
func (f *ZooKeeperLocks) New(name string) Lock { return f.ZooKeeperLock(name) }

// ZooKeeperLock returns the lock named name, whose nodes live under Root/name (name
// path-escaped).
func (f *ZooKeeperLocks) ZooKeeperLock(name string) *ZooKeeperLock {
	return &ZooKeeperLock{queueLock{c: f.c, holds: f.c.sess.sessionHolds, process: f.c.process,
		at: f.c.root + "/" + url.PathEscape(name), entry: "node", heldBy: "session"}}
}

// ZooKeeperLock is Curator's InterProcessMutex over go-zookeeper/zk. To take it, a client
// creates an ephemeral sequential node under the lock's parent node; the lowest sequence
// holds the lock, and every other waiter watches only the node just before its own, so a
// release wakes one waiter, not the herd. Node names are protected (a GUID prefix), so a
// create whose reply was lost is found again instead of orphaned.
//
// The lock is held by the client's session, not by a lease: the node lives until it is
// deleted or the session ends, which the server decides when it stops hearing from the
// client for a session timeout. So TryLock and TryLockWait ignore their lease, and no
// watchdog renews anything. When the session is lost (see ZooKeeperClient), every hold in
// it is reported on Lost, and Unlock returns ErrNotHeld.
//
// The holder of a ZooKeeperLock is the goroutine that took it (process id and goroutine id,
// as for the package's other locks); it may take it again, and each TryLock needs its
// Unlock. Token returns a fencing token: the czxid of the holder's node, the zxid of the
// transaction that created it. Zxids grow with every transaction of the ensemble, and the
// lock goes to its nodes in the order they were created, so every grant of the name gets a
// larger token than the one before. The node's sequence number would not do: it restarts
// when the parent node is deleted (it is a container, removed once empty) and created
// again. With ZooKeeperOptions.NoTokens, Token always returns 0. A ZooKeeperLock is safe for
// concurrent use.
type ZooKeeperLock struct{ queueLock }

// Path returns the lock's parent node.
func (l *ZooKeeperLock) Path() string { return l.at }

// drop deletes the node of a hold just released (queueClient).
func (c *ZooKeeperClient) drop(ctx context.Context, h *sessionHold) (bool, error) {
	return c.remove(ctx, &zkNode{path: h.at})
}

// acquire takes parent's lock for owner me (see TryLockWait).
func (c *ZooKeeperClient) acquire(ctx context.Context, parent, me string, wait time.Duration) (bool, error) {
	key := holdKey(parent, me)
	if c.sess.reenter(key) {
		return true, nil
	}
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for {
		epoch, lost, ok := c.sess.current()
		if !ok {
			return false, ErrClosed
		}
		n, err := c.create(ctx, parent, []byte(me))
		if err == nil {
			var got bool
			got, err = c.queue(ctx, n, wait == 0, deadline, lost)
			if got {
				if c.sess.register(key, n.path, n.czxid, epoch) {
					return true, nil
				}
				err = errZKRequeue
			}
		}
		if n != nil {
			_, _ = c.remove(ctx, n) // failing, it goes on in the background
		}
		if !zkRetry(err) || wait == 0 || (!deadline.IsZero() && time.Now().After(deadline)) {
			return false, err
		}
		if err := zkPause(ctx, c, zkRetryPause); err != nil {
			return false, err
		}
	}
}

// zkRetryPause is the pause before a waiting acquisition tries again after a lost session or
// connection.
const zkRetryPause = 50 * time.Millisecond

// zkRetry reports whether a waiting acquisition should try again after err: its session was
// lost, or the connection was, and the client is reconnecting.
func zkRetry(err error) bool {
	return errors.Is(err, errZKRequeue) || errors.Is(err, zk.ErrSessionExpired) ||
		errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved)
}

// zkPause sleeps for d, or returns early with ctx's error or ErrClosed.
func zkPause(ctx context.Context, c *ZooKeeperClient, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
}

// queue waits until n is the lowest node under its parent, watching only its predecessor.
// once makes it look once and report false when n is not the lowest. It reports false, nil
// at deadline (when not zero), ctx's error when ctx ends, and errZKRequeue when the session
// is lost (lost closes) or n is found gone.
func (c *ZooKeeperClient) queue(ctx context.Context, n *zkNode, once bool, deadline time.Time, lost <-chan struct{}) (bool, error) {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	for {
		q, err := c.look(ctx, n)
		if err != nil {
			return false, err
		}
		me := -1
		for i, name := range q {
			if name == n.name() {
				me = i
				break
			}
		}
		switch {
		case me < 0:
			return false, errZKRequeue // our node is gone: its session ended
		case me == 0:
			return true, nil
		case once:
			return false, nil
		}
		pred := n.parent + "/" + q[me-1]
		ch, err := zkCall(ctx, c, func() (<-chan zk.Event, error) {
			_, _, ch, err := c.conn.GetW(pred)
			return ch, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone already: look again
		}
		if err != nil {
			return false, err
		}
		if c.hooks.watching != nil {
			c.hooks.watching(n.path, pred)
		}
		select {
		case ev := <-ch:
			if c.hooks.woke != nil {
				c.hooks.woke(n.path, ev)
			}
		case <-lost:
			return false, errZKRequeue
		case <-timeout:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-c.done:
			return false, ErrClosed
		}
	}
}

// look returns the lock nodes under n's parent, lowest first. When the client hands out
// tokens and n's czxid is not known yet (its create's reply was lost and n was found again by
// its GUID), it also reads it, in parallel: both requests go out on the connection together.
func (c *ZooKeeperClient) look(ctx context.Context, n *zkNode) ([]string, error) {
	var stat <-chan zkResult[*zk.Stat]
	if c.tokens && n.czxid == 0 {
		stat = zkStart(c, func() (*zk.Stat, error) {
			ok, st, err := c.conn.Exists(n.path)
			if err == nil && !ok {
				return nil, zk.ErrNoNode
			}
			return st, err
		})
	}
	children, err := zkCall(ctx, c, func() ([]string, error) {
		ch, _, err := c.conn.Children(n.parent)
		return ch, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, errZKRequeue // the parent went with our node
	}
	if err != nil {
		return nil, err
	}
	if stat != nil {
		st, _, err := zkAwait(ctx, c, stat)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, errZKRequeue
		}
		if err != nil {
			return nil, err
		}
		n.czxid = st.Czxid
	}
	return zkQueue(children), nil
}
