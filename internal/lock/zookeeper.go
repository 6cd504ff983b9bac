package lock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Defaults for ZooKeeperOptions fields left zero.
const (
	// DefaultZooKeeperSessionTimeout is the session timeout a ZooKeeperClient asks for: how
	// long the server keeps the session, and with it the lock nodes, of a client it no longer
	// hears from.
	DefaultZooKeeperSessionTimeout = 10 * time.Second
	// DefaultZooKeeperRoot is the node under which each lock name has its parent node.
	DefaultZooKeeperRoot = "/seckill/locks"
)

// ZooKeeperOptions configures a ZooKeeperClient. The zero value is usable.
type ZooKeeperOptions struct {
	// Process identifies this process in the owner written into lock nodes; NewProcessID()
	// when empty. Two processes must never share one.
	Process string
	// SessionTimeout is the session timeout asked of the server, which bounds it (by default
	// between 2 and 20 ticks; 4 s to 60 s on the server scripts/services.sh runs) and
	// grants the result in its connect reply. The client reckons with the granted timeout:
	// it decides the holds are lost, and gives up a single ZooKeeper call, by the session
	// the server keeps, not the one asked for. DefaultZooKeeperSessionTimeout when zero.
	SessionTimeout time.Duration
	// Root is the node under which lock name n has its parent node Root/n (n path-escaped).
	// DefaultZooKeeperRoot when empty.
	Root string
	// Logger receives go-zookeeper's messages (connections made and lost); nil discards them.
	Logger *slog.Logger
	// NoTokens creates lock nodes with a plain create instead of a multi of the create and a
	// SetData of the parent, whose reply carries the new node's czxid, the fencing token
	// (go-zookeeper has no create2, which would return it): Token then returns 0. For callers
	// that never fence; it spares the parent a write per acquisition.
	NoTokens bool
}

// ZooKeeperClient owns one ZooKeeper session and the holds of the locks taken in it. Make
// one per process (or service instance) and Close it at shutdown: closing the session
// deletes its lock nodes, so the locks it held pass on at once.
type ZooKeeperClient struct {
	conn    *zk.Conn
	addrs   []string
	process string
	root    string
	tokens  bool // learn each node's czxid, its fencing token (not ZooKeeperOptions.NoTokens)
	acl     []zk.ACL
	sess    *zkSession

	lastRead atomic.Int64 // unix nanoseconds of the last bytes received from the server
	granted  atomic.Int64 // the session timeout in the connection's connect reply; 0 before it

	mu     sync.Mutex // guards closed and adding to wg
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	hooks zkHooks
}

// zkHooks lets the package's tests reach inside a ZooKeeperClient. All nil outside tests.
type zkHooks struct {
	// dial replaces net.DialTimeout for the connections to the servers.
	dial func(network, addr string, timeout time.Duration) (net.Conn, error)
	// created sees, and may replace, the result of every create of a lock node: a test
	// "loses" the reply of a create the server did.
	created func(path string, err error) (string, error)
	// watching reports a waiter (its node) setting its watch on its predecessor.
	watching func(node, predecessor string)
	// woke reports a waiter's watch firing.
	woke func(node string, ev zk.Event)
	// sessionEvent sees each session event before the client records it.
	sessionEvent func(state zk.State)
	// removing reports a background delete of a node being started (its path, "" while
	// only its GUID is known).
	removing func(path, guid string)
}

// NewZooKeeperClient connects to the ZooKeeper ensemble at addrs (host:port) and waits until
// it has a session, or until ctx ends: an unreachable or wrong address fails here, with the
// addresses in the error, rather than at the first lock.
func NewZooKeeperClient(ctx context.Context, addrs []string, opts ZooKeeperOptions) (*ZooKeeperClient, error) {
	return newZooKeeperClient(ctx, addrs, opts, zkHooks{})
}

func newZooKeeperClient(ctx context.Context, addrs []string, opts ZooKeeperOptions, hooks zkHooks) (*ZooKeeperClient, error) {
	if len(addrs) == 0 {
		return nil, errors.New("zookeeper: no server address")
	}
	if opts.Process == "" {
		opts.Process = NewProcessID()
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultZooKeeperSessionTimeout
	}
	if opts.Root == "" {
		opts.Root = DefaultZooKeeperRoot
	}
	opts.Root = "/" + strings.Trim(opts.Root, "/")
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &ZooKeeperClient{
		addrs:   append([]string(nil), addrs...),
		process: opts.Process,
		root:    opts.Root,
		tokens:  !opts.NoTokens,
		acl:     zk.WorldACL(zk.PermAll),
		done:    make(chan struct{}),
		hooks:   hooks,
	}
	c.lastRead.Store(time.Now().UnixNano())
	c.sess = newZKSession(opts.SessionTimeout,
		func() time.Time { return time.Unix(0, c.lastRead.Load()) },
		func(paths []string) {
			for _, p := range paths {
				c.removeLater(&zkNode{path: p})
			}
		})

	// The event callback, unlike the event channel go-zookeeper also offers, never drops an
	// event (the channel's buffer holds six, and a full one discards silently). It runs on
	// the connection's goroutine and must not block; the one wait below ends as soon as
	// Connect has returned.
	established := make(chan struct{})
	var once sync.Once
	ready := make(chan struct{})
	var conn *zk.Conn
	callback := func(ev zk.Event) {
		if ev.Type != zk.EventSession {
			return
		}
		var id int64
		timeout := opts.SessionTimeout
		if ev.State == zk.StateHasSession {
			<-ready
			id = conn.SessionID()
			// go-zookeeper reads the connect reply on this goroutine before it reports
			// the session, so the reply's timeout is recorded by now.
			if g := time.Duration(c.granted.Load()); g > 0 {
				timeout = g
			}
		}
		if hooks.sessionEvent != nil {
			hooks.sessionEvent(ev.State)
		}
		c.sess.event(ev.State, id, timeout)
		if ev.State == zk.StateHasSession {
			// After the session is recorded: the client is Connected once
			// NewZooKeeperClient returns, so a readiness check made at once passes.
			once.Do(func() { close(established) })
		}
	}
	dial := net.DialTimeout
	if hooks.dial != nil {
		dial = hooks.dial
	}
	conn, _, err := zk.Connect(c.addrs, opts.SessionTimeout,
		zk.WithDialer(func(network, addr string, timeout time.Duration) (net.Conn, error) {
			nc, err := dial(network, addr, timeout)
			if err != nil {
				return nil, err
			}
			c.granted.Store(0) // a connection's session is the one its own reply grants
			return &zkServerConn{Conn: nc, last: &c.lastRead, granted: &c.granted}, nil
		}),
		zk.WithEventCallback(callback),
		zk.WithLogger(zkLogger{logger}),
		zk.WithLogInfo(false))
	close(ready)
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(addrs, ","), err)
	}
	c.conn = conn

	timer := time.NewTimer(opts.SessionTimeout)
	defer timer.Stop()
	select {
	case <-established:
		return c, nil
	case <-timer.C:
		err = fmt.Errorf("no session within %s (is ZooKeeper running there?)", opts.SessionTimeout)
	case <-ctx.Done():
		err = fmt.Errorf("no session before the context ended (is ZooKeeper running there?): %w", ctx.Err())
	}
	c.sess.close()
	conn.Close()
	return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(addrs, ","), err)
}

// Connected reports whether the client's session is established on a live connection: false
// while the connection is down or a new session is being set up, and after Close.
func (c *ZooKeeperClient) Connected() bool { return c.sess.isConnected() }

// Process returns the process id written into this client's lock nodes.
func (c *ZooKeeperClient) Process() string { return c.process }

// Close ends every hold (their Lost channels close), closes the session, which deletes its
// lock nodes at once, and waits for the client's goroutines. The client's locks then return
// ErrClosed: an acquisition ErrClosed, an Unlock an error wrapping both ErrNotHeld (the hold
// is gone, its node with the session) and ErrClosed.
func (c *ZooKeeperClient) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	c.sess.close()
	c.conn.Close()
	c.wg.Wait()
	return nil
}

// spawn runs f on a goroutine that Close waits for; it reports false, and runs nothing, once
// the client is closed.
func (c *ZooKeeperClient) spawn(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// zkServerConn is a connection to a server, as the client reads it: it records when bytes
// last arrived (see zkSession) and the session timeout the server granted in its connect
// reply, the first frame it sends. go-zookeeper keeps the granted timeout to itself; the
// server may have clamped the one asked for to its minSessionTimeout or maxSessionTimeout.
// go-zookeeper reads a connection from one goroutine at a time, so reply needs no lock.
type zkServerConn struct {
	net.Conn
	last    *atomic.Int64
	granted *atomic.Int64
	reply   []byte // the connect reply's bytes so far; nil once it was read
	replied bool
}

func (r *zkServerConn) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if n > 0 {
		r.last.Store(time.Now().UnixNano())
		if !r.replied {
			r.reply = append(r.reply, b[:n]...)
			if d, done := zkGrantedTimeout(r.reply); done {
				r.replied, r.reply = true, nil
				if d > 0 {
					r.granted.Store(int64(d))
				}
			}
		}
	}
	return n, err
}

// zkGrantedTimeout reads the session timeout out of the start of a connection's stream, the
// connect reply: its length (int32), then protocolVersion (int32), timeOut (int32,
// milliseconds), sessionId (int64) and passwd. done is false until those bytes are there; d is
// 0 for a reply that grants no session (session id 0: the one asked for expired).
func zkGrantedTimeout(stream []byte) (d time.Duration, done bool) {
	if len(stream) < 4+16 {
		return 0, false
	}
	r := stream[4:]
	ms := int32(binary.BigEndian.Uint32(r[4:8]))
	if id := int64(binary.BigEndian.Uint64(r[8:16])); id == 0 || ms <= 0 {
		return 0, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// zkLogger hands go-zookeeper's log lines to slog.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Info(fmt.Sprintf(format, args...), "component", "zookeeper")
}
