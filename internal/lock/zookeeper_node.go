package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"
)

// The name of a lock node is protected, as Curator names it: "_c_" + a GUID + "-lock-", and
// the server's ten-digit sequence number. A client whose create lost its reply lists the
// parent and finds its node by the GUID, instead of leaving it behind (an ephemeral node
// lives as long as the session, and a forgotten one at the head of the queue blocks the
// lock for as long).
const (
	zkProtectedPrefix = "_c_"
	zkLockName        = "-lock-"
)

// errZKNoAnswer marks a ZooKeeper call not answered within the session timeout.
var errZKNoAnswer = errors.New("zookeeper: no answer within the session timeout")

// zkNode is one lock node of ours: the parent it is created under, the GUID in its name, and
// once known its path and creation zxid.
type zkNode struct {
	parent, guid string
	path         string
	czxid        int64
}

func (n *zkNode) name() string { return path.Base(n.path) }

// zkResult is what a go-zookeeper call returned.
type zkResult[T any] struct {
	v   T
	err error
}

// zkStart runs op, a go-zookeeper call, on a goroutine of c and returns where its result
// will be. go-zookeeper's calls take no context; every one is answered in the end, by the
// server or by the connection failing or closing, so the goroutine ends.
func zkStart[T any](c *ZooKeeperClient, op func() (T, error)) <-chan zkResult[T] {
	ch := make(chan zkResult[T], 1)
	if !c.spawn(func() {
		v, err := op()
		ch <- zkResult[T]{v, err}
	}) {
		ch <- zkResult[T]{err: ErrClosed}
	}
	return ch
}

// zkAwait waits for a call started by zkStart until it is answered, ctx ends, the session
// timeout passes or the client closes. The timeout is the one the server granted: the one
// asked for may be many times the session the server keeps. answered is false when it stopped waiting: the call
// may still take effect.
func zkAwait[T any](ctx context.Context, c *ZooKeeperClient, ch <-chan zkResult[T]) (v T, answered bool, err error) {
	timer := time.NewTimer(c.sess.sessionTimeout())
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.v, true, r.err
	case <-ctx.Done():
		return v, false, ctx.Err()
	case <-timer.C:
		return v, false, errZKNoAnswer
	case <-c.done:
		return v, false, ErrClosed
	}
}

// zkCall runs op bounded by ctx and the session timeout.
func zkCall[T any](ctx context.Context, c *ZooKeeperClient, op func() (T, error)) (T, error) {
	v, _, err := zkAwait(ctx, c, zkStart(c, op))
	return v, err
}

// zkMaybeDone reports whether a failed create may have been done by the server all the
// same: every error but the server's own refusals (the reply of one that was done is lost
// when the connection drops before it arrives) and those go-zookeeper gives only to requests
// it never sent: ErrNoServer (it drops them while it finds no server to connect to: a search
// for their node would poll a server that is not there, until it is back) and ErrInvalidPath
// (a lock name that makes no valid path, "" or "..": a search would fail the same way until
// the client closed).
func zkMaybeDone(err error) bool {
	for _, refused := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrInvalidACL,
		zk.ErrBadArguments, zk.ErrInvalidFlags, zk.ErrNoChildrenForEphemerals, zk.ErrSessionExpired,
		zk.ErrNoServer, zk.ErrInvalidPath, ErrClosed} {
		if errors.Is(err, refused) {
			return false
		}
	}
	return true
}

// zkCreateAttempts bounds the creates of one node: after a missing parent, and after replies
// lost and not found again.
const zkCreateAttempts = 3

// create makes our ephemeral sequential node under parent, with data, protected by a fresh
// GUID. A missing parent is created (with its ancestors). A create whose reply was lost is
// looked for by its GUID before it is tried again. When the caller gives up while a create
// is on its way, the node it may yet make is deleted in the background.
func (c *ZooKeeperClient) create(ctx context.Context, parent string, data []byte) (*zkNode, error) {
	n := &zkNode{parent: parent, guid: uuid.NewString()}
	prefix := parent + "/" + zkProtectedPrefix + n.guid + zkLockName
	var err error
	for range zkCreateAttempts {
		ch := zkStart(c, func() (zkCreated, error) {
			r, err := c.createNode(parent, prefix, data)
			if c.hooks.created != nil {
				r.path, err = c.hooks.created(r.path, err)
			}
			return r, err
		})
		var r zkCreated
		var answered bool
		r, answered, err = zkAwait(ctx, c, ch)
		switch {
		case err == nil:
			n.path, n.czxid = r.path, r.czxid
			return n, nil
		case !answered:
			c.removeCreated(ch, n)
			return nil, err
		case errors.Is(err, zk.ErrNoNode):
			// err stays the create's: should this have been the last attempt, create
			// must fail with it, never return no node and no error.
			if perr := c.ensurePath(ctx, parent); perr != nil {
				return nil, perr
			}
		case errors.Is(err, zk.ErrSessionExpired):
			// Refused: a new session is on its way, try in it.
		case zkMaybeDone(err):
			found, ferr := c.findOwn(ctx, n)
			if ferr != nil {
				c.removeLater(n)
				return nil, fmt.Errorf("%w (and looking for the node: %w)", err, ferr)
			}
			if found {
				return n, nil
			}
		default:
			return nil, err
		}
	}
	return nil, err
}

// zkCreated is what the create of a lock node returned: its path and, when the client hands
// out tokens, its czxid.
type zkCreated struct {
	path  string
	czxid int64
}

// createNode creates one ephemeral sequential node at prefix. With tokens, the create goes in
// one multi with a SetData of the parent: a multi is one transaction, so the parent's new mzxid
// is the zxid that created the node, its czxid, the fencing token, learnt without a request of
// its own (go-zookeeper has no create2, which would return the node's stat). Nothing watches a
// parent's data, so the SetData wakes no one.
func (c *ZooKeeperClient) createNode(parent, prefix string, data []byte) (zkCreated, error) {
	if !c.tokens {
		p, err := c.conn.Create(prefix, data, zk.FlagEphemeralSequential, c.acl)
		return zkCreated{path: p}, err
	}
	res, err := c.conn.Multi(&zk.CreateRequest{Path: prefix, Data: data, Acl: c.acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: parent, Version: -1})
	if err != nil {
		return zkCreated{}, err
	}
	if len(res) != 2 || res[0].String == "" || res[1].Stat == nil {
		return zkCreated{}, fmt.Errorf("zookeeper: create %s: unexpected multi reply %+v", prefix, res)
	}
	return zkCreated{path: res[0].String, czxid: res[1].Stat.Mzxid}, nil
}

// findOwn looks among parent's children for the node whose name carries n's GUID, and sets
// n.path when it is there. A sync first makes the server we read from as current as the
// leader: a follower that has not yet applied our create could otherwise hide it.
func (c *ZooKeeperClient) findOwn(ctx context.Context, n *zkNode) (bool, error) {
	if _, err := zkCall(ctx, c, func() (string, error) { return c.conn.Sync(n.parent) }); err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return false, nil
		}
		return false, err
	}
	children, err := zkCall(ctx, c, func() ([]string, error) {
		ch, _, err := c.conn.Children(n.parent)
		return ch, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	mine := zkProtectedPrefix + n.guid + zkLockName
	for _, child := range children {
		if strings.HasPrefix(child, mine) {
			n.path = n.parent + "/" + child
			return true, nil
		}
	}
	return false, nil
}

// ensurePath creates p and its missing ancestors as container nodes, which the server
// deletes once their last child is gone: a lock name leaves nothing behind when unused.
func (c *ZooKeeperClient) ensurePath(ctx context.Context, p string) error {
	at := ""
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		at += "/" + part
		_, err := zkCall(ctx, c, func() (string, error) {
			return c.conn.CreateContainer(at, nil, zk.FlagContainer, c.acl)
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", at, err)
		}
	}
	return nil
}

// remove deletes n, waiting as long as ctx allows; what it cannot finish goes on in the
// background. It reports gone when the node was already gone: its session had ended.
func (c *ZooKeeperClient) remove(ctx context.Context, n *zkNode) (gone bool, err error) {
	_, err = zkCall(ctx, c, func() (struct{}, error) { return struct{}{}, c.conn.Delete(n.path, -1) })
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, zk.ErrNoNode):
		return true, nil
	}
	c.removeLater(n) // nothing once the client is closed: the session's nodes went with it
	return false, err
}

// removeCreated waits, in the background, for a create the caller stopped waiting for, and
// deletes the node it made.
func (c *ZooKeeperClient) removeCreated(ch <-chan zkResult[zkCreated], n *zkNode) {
	if c.hooks.removing != nil {
		c.hooks.removing(n.path, n.guid)
	}
	c.spawn(func() {
		var r zkResult[zkCreated]
		select {
		case r = <-ch:
		case <-c.done:
			return
		}
		if r.err == nil {
			n.path = r.v.path
		} else if !zkMaybeDone(r.err) {
			return
		}
		c.removeNow(n)
	})
}

// removeLater deletes n in the background.
func (c *ZooKeeperClient) removeLater(n *zkNode) {
	if c.hooks.removing != nil {
		c.hooks.removing(n.path, n.guid)
	}
	c.spawn(func() { c.removeNow(n) })
}

// removeNow deletes n (found by its GUID when its path is unknown), retrying until it is
// gone or the client closes, which closes the session and so deletes it.
func (c *ZooKeeperClient) removeNow(n *zkNode) {
	pause := 50 * time.Millisecond
	for {
		if err := c.removeOnce(context.Background(), n); err == nil {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return
		}
		pause = min(2*pause, time.Second)
	}
}

func (c *ZooKeeperClient) removeOnce(ctx context.Context, n *zkNode) error {
	if n.path == "" {
		found, err := c.findOwn(ctx, n)
		if err != nil || !found {
			return err
		}
	}
	_, err := zkCall(ctx, c, func() (struct{}, error) { return struct{}{}, c.conn.Delete(n.path, -1) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// zkSequence returns the sequence number at the end of a lock node's name, and false for a
// name that is not a lock node's.
func zkSequence(name string) (int64, bool) {
	i := strings.LastIndex(name, zkLockName)
	if i < 0 {
		return 0, false
	}
	seq, err := strconv.ParseInt(name[i+len(zkLockName):], 10, 64)
	return seq, err == nil
}

// zkQueue returns the lock nodes among children, lowest sequence first.
func zkQueue(children []string) []string {
	type entry struct {
		name string
		seq  int64
	}
	var q []entry
	for _, name := range children {
		if seq, ok := zkSequence(name); ok {
			q = append(q, entry{name, seq})
		}
	}
	slices.SortFunc(q, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	names := make([]string, len(q))
	for i, e := range q {
		names[i] = e.name
	}
	return names
}
