package pitfall

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/internal/lock"
)

// zkSessionTimeout is the session timeout the lessons' clients ask for. Nothing waits it
// out: a session the script wants gone is closed at once (closeZKSession).
const zkSessionTimeout = 10 * time.Second

// zkWait bounds every wait of a ZooKeeper lesson on the server.
const zkWait = 30 * time.Second

// zkLesson is one run's view of ZooKeeper: a root node of its own (so runs on a shared
// server never meet), a proxy the actors' connections go through, and the script's own
// unrecorded connection.
type zkLesson struct {
	s     *Scene
	addr  string
	root  string
	proxy *zkProxy
	spy   *zk.Conn
}

func startZKLesson(s *Scene) (*zkLesson, error) {
	z := &zkLesson{s: s, addr: s.env.ZooKeeperAddr, root: "/seckill-pitfall-" + randomHex(6)}
	var err error
	if z.proxy, err = newZKProxy(z.addr); err != nil {
		return nil, err
	}
	s.teardown = append(s.teardown, func() error { z.proxy.close(); return nil })
	if z.spy, err = z.dial(s.ctx, z.addr); err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", z.addr, err)
	}
	s.teardown = append(s.teardown, func() error {
		defer z.spy.Close()
		return z.deleteTree(z.root)
	})
	s.Alias(z.root, "/locks")
	return z, nil
}

// dial opens a plain go-zookeeper connection to addr and waits for its session.
func (z *zkLesson) dial(ctx context.Context, addr string) (*zk.Conn, error) {
	conn, _, err := zk.Connect([]string{addr}, zkSessionTimeout, zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	err = poll(ctx, zkWait, func() (bool, error) { return conn.State() == zk.StateHasSession, nil })
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("no session (is ZooKeeper running? scripts/services.sh up zookeeper): %w", err)
	}
	return conn, nil
}

// client opens a lock.ZooKeeperClient for process, through the proxy when proxied, and
// returns it with its proxied connection.
func (z *zkLesson) client(process string, proxied bool) (*lock.ZooKeeperClient, *zkProxyConn, error) {
	addr := z.addr
	if proxied {
		addr = z.proxy.addr()
	}
	c, err := lock.NewZooKeeperClient(z.s.ctx, []string{addr}, lock.ZooKeeperOptions{
		Process: process, SessionTimeout: zkSessionTimeout, Root: z.root,
	})
	if err != nil {
		return nil, nil, err
	}
	z.s.teardown = append(z.s.teardown, c.Close)
	if !proxied {
		return c, nil, nil
	}
	return c, z.proxy.conn(0), nil
}

// deleteTree deletes p and everything under it; a missing node is not an error.
func (z *zkLesson) deleteTree(p string) error {
	children, _, err := z.spy.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := z.deleteTree(p + "/" + c); err != nil {
			return err
		}
	}
	if err := z.spy.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// protectedGUID matches the GUID in a protected lock node's name (Curator's "_c_" prefix).
var protectedGUID = regexp.MustCompile(`_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-`)

// shownPath is a node's path as the timeline shows it: the GUID of a protected name elided
// (the run's root is aliased by the scene).
func shownPath(p string) string { return protectedGUID.ReplaceAllString(p, "_c_…-") }

// zxids names fencing tokens (czxids, different in every run) in order of appearance: Z1, Z2…
type zxids struct {
	s    *Scene
	seen map[int64]string
}

func (z *zxids) name(token int64) string {
	if z.seen == nil {
		z.seen = map[int64]string{}
	}
	if n, ok := z.seen[token]; ok {
		return n
	}
	n := "Z" + strconv.Itoa(len(z.seen)+1)
	z.seen[token] = n
	z.s.Alias(strconv.FormatInt(token, 10), n)
	return n
}

// Reachable reports whether something accepts TCP connections at addr within a second: the
// runner's check before the ZooKeeper lessons, and the demo's before a server-only backend
// (ZooKeeper, etcd).
func Reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}
