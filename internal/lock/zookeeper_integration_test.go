//go:build integration

package lock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ZooKeeper lock against a real ZooKeeper: SECKILL_TEST_ZOOKEEPER_ADDR, by default the
// one scripts/services.sh runs on 127.0.0.1:2181. Each test works under its own root node.
// Two clients stand for two processes: each has its own session.

// zkTestSessionTimeout is the shortest session Debian's ZooKeeper grants (two ticks of 2 s).
const zkTestSessionTimeout = 4 * time.Second

func zkTestAddr() string {
	if a := os.Getenv("SECKILL_TEST_ZOOKEEPER_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:2181"
}

// serverTestRoot returns a path of the test's own, under which a test of the ZooKeeper or
// etcd lock keeps its nodes or keys.
func serverTestRoot(t *testing.T) string {
	return "/seckill-test/" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + uuid.NewString()[:8]
}

// newZKTestClient connects a client (one "process") under root, failing t with the way to
// start ZooKeeper when none answers.
func newZKTestClient(t *testing.T, root string, hooks zkHooks) *ZooKeeperClient {
	t.Helper()
	addr := zkTestAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := newZooKeeperClient(ctx, []string{addr}, ZooKeeperOptions{SessionTimeout: zkTestSessionTimeout, Root: root}, hooks)
	if err != nil {
		t.Fatalf("no ZooKeeper answers on %s (%v): run `scripts/services.sh up zookeeper`, "+
			"or set SECKILL_TEST_ZOOKEEPER_ADDR to one that runs", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// zkChildren returns the nodes under p (none when p does not exist).
func zkChildren(t *testing.T, c *ZooKeeperClient, p string) []string {
	t.Helper()
	children, _, err := c.conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	require.NoError(t, err)
	return children
}

func zkTake(t *testing.T, l *ZooKeeperLock) {
	t.Helper()
	ok, err := l.TryLock(context.Background(), 0)
	require.NoError(t, err)
	require.True(t, ok, "lock not free")
}

// TestZooKeeperConnectedOnReturn: a client is Connected as soon as NewZooKeeperClient returns.
// The hook holds the recording of the session's first event back until the client has
// returned (or 300 ms): a client that returns before it records the session reports itself
// not connected, as a readiness check made at once found in a CI run.
func TestZooKeeperConnectedOnReturn(t *testing.T) {
	returned := make(chan struct{})
	var once sync.Once
	c := newZKTestClient(t, serverTestRoot(t), zkHooks{sessionEvent: func(state zk.State) {
		if state != zk.StateHasSession {
			return
		}
		once.Do(func() {
			select {
			case <-returned:
			case <-time.After(300 * time.Millisecond):
			}
		})
	}})
	connected := c.Connected()
	close(returned)
	assert.True(t, connected, "not Connected when NewZooKeeperClient returned")
}

// TestZooKeeperMutualExclusion: goroutines of two processes take one lock in turn; never two
// hold it at once, and every grant's token is larger than the one before.
func TestZooKeeperMutualExclusion(t *testing.T) {
	root := serverTestRoot(t)
	clients := []*ZooKeeperClient{newZKTestClient(t, root, zkHooks{}), newZKTestClient(t, root, zkHooks{})}
	const perClient, rounds = 6, 10
	var inside, maxInside, grants atomic.Int64
	var lastToken atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*perClient*rounds)
	for _, c := range clients {
		l := NewZooKeeperLocks(c).ZooKeeperLock("mutex")
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := testCtx(t)
				for range rounds {
					if err := l.Lock(ctx); err != nil {
						errs <- err
						return
					}
					n := inside.Add(1)
					for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
					}
					if tok, last := l.Token(), lastToken.Swap(l.Token()); tok <= last {
						errs <- fmt.Errorf("token %d after %d: not increasing", tok, last)
					}
					grants.Add(1)
					inside.Add(-1)
					if err := l.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, int64(1), maxInside.Load(), "holders at once")
	assert.Equal(t, int64(2*perClient*rounds), grants.Load())
	assert.Empty(t, zkChildren(t, clients[0], root+"/mutex"), "nodes left behind")
}

// TestZooKeeperNoHerd: with N waiters queued, each release wakes exactly one of them, the
// one whose predecessor it deleted, and no waiter ever sets a second watch.
func TestZooKeeperNoHerd(t *testing.T) {
	root := serverTestRoot(t)
	var mu sync.Mutex
	watches, wakes := 0, 0
	hooks := zkHooks{
		watching: func(string, string) { mu.Lock(); watches++; mu.Unlock() },
		woke:     func(string, zk.Event) { mu.Lock(); wakes++; mu.Unlock() },
	}
	counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return watches, wakes }
	clients := []*ZooKeeperClient{newZKTestClient(t, root, hooks), newZKTestClient(t, root, hooks)}
	first := NewZooKeeperLocks(clients[0]).ZooKeeperLock("herd")
	zkTake(t, first)

	const waiters = 6
	acquired := make(chan int, waiters)
	release := make([]chan struct{}, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		release[i] = make(chan struct{})
		l := NewZooKeeperLocks(clients[i%2]).ZooKeeperLock("herd")
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := testCtx(t)
			if err := l.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			acquired <- i
			<-release[i]
			assert.NoError(t, l.Unlock(ctx))
		}()
	}
	eventually(t, "every waiter watching", func() bool { w, _ := counts(); return w == waiters })

	require.NoError(t, first.Unlock(context.Background()))
	for n := 1; n <= waiters; n++ {
		var who int
		select {
		case who = <-acquired:
		case <-time.After(10 * time.Second):
			t.Fatalf("release %d woke nobody", n)
		}
		w, k := counts()
		assert.Equal(t, n, k, "watches fired after %d releases", n)
		assert.Equal(t, waiters, w, "watches set after %d releases", n)
		close(release[who])
	}
	wg.Wait()
}

// loseReplies returns a created hook that loses the reply of the next n creates the server
// did, as a connection dropping before the reply arrives would.
func loseReplies(n int32) func(string, error) (string, error) {
	var left atomic.Int32
	left.Store(n)
	return func(p string, err error) (string, error) {
		if err == nil && left.Add(-1) >= 0 {
			return "", zk.ErrConnectionClosed
		}
		return p, err
	}
}

// TestZooKeeperLostCreateReply: a create whose reply is lost is found again by its GUID, so
// no node is orphaned, whether the lock is free, held elsewhere, or the caller gives up.
func TestZooKeeperLostCreateReply(t *testing.T) {
	t.Run("free", func(t *testing.T) {
		root := serverTestRoot(t)
		c := newZKTestClient(t, root, zkHooks{created: loseReplies(1)})
		l := NewZooKeeperLocks(c).ZooKeeperLock("lost-reply")
		zkTake(t, l)
		children := zkChildren(t, c, l.Path())
		require.Len(t, children, 1, "one node: the lost one, found again, and no second")
		st, err := zkCall(context.Background(), c, func() (*zk.Stat, error) {
			_, st, err := c.conn.Get(l.Path() + "/" + children[0])
			return st, err
		})
		require.NoError(t, err)
		assert.Equal(t, st.Czxid, l.Token())
		require.NoError(t, l.Unlock(context.Background()))
		assert.Empty(t, zkChildren(t, c, l.Path()), "node orphaned")
	})
	t.Run("held elsewhere", func(t *testing.T) {
		root := serverTestRoot(t)
		holder := NewZooKeeperLocks(newZKTestClient(t, root, zkHooks{})).ZooKeeperLock("lost-reply")
		zkTake(t, holder)
		c := newZKTestClient(t, root, zkHooks{created: loseReplies(1)})
		l := NewZooKeeperLocks(c).ZooKeeperLock("lost-reply")
		ok, err := l.TryLock(context.Background(), 0)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Len(t, zkChildren(t, c, l.Path()), 1, "only the holder's node may be left")
	})
	t.Run("caller gave up", func(t *testing.T) {
		// The create is done by the server, but its reply comes only after the caller's
		// context ended: the node made for nobody must be deleted.
		root := serverTestRoot(t)
		made := make(chan string, 1)
		answer := make(chan struct{})
		c := newZKTestClient(t, root, zkHooks{created: func(p string, err error) (string, error) {
			if err == nil { // not the first try, which finds no parent yet
				made <- p
				<-answer
			}
			return p, err
		}})
		var answered sync.Once
		reply := func() { answered.Do(func() { close(answer) }) }
		t.Cleanup(reply) // before Close, which waits for the create
		l := NewZooKeeperLocks(c).ZooKeeperLock("lost-reply")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Lock(ctx) }()
		p := <-made
		require.Len(t, zkChildren(t, c, l.Path()), 1, "the create was done")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		reply()
		eventually(t, "node "+p+" deleted", func() bool { return len(zkChildren(t, c, l.Path())) == 0 })
	})
}

// TestZooKeeperReentrant: the holder takes the lock again without a new node; only its last
// Unlock lets another process in; another goroutine cannot release it.
func TestZooKeeperReentrant(t *testing.T) {
	root := serverTestRoot(t)
	ca := newZKTestClient(t, root, zkHooks{})
	a := NewZooKeeperLocks(ca).ZooKeeperLock("reentrant")
	b := NewZooKeeperLocks(newZKTestClient(t, root, zkHooks{})).ZooKeeperLock("reentrant")
	ctx := testCtx(t)
	zkTake(t, a)
	token := a.Token()
	require.NoError(t, a.Lock(ctx))
	assert.Equal(t, token, a.Token(), "re-entry keeps the token")
	assert.Len(t, zkChildren(t, ca, a.Path()), 1, "re-entry made a node")

	other := make(chan error, 1)
	go func() { other <- a.Unlock(ctx) }()
	assert.ErrorIs(t, <-other, ErrNotHeld, "another goroutine released the lock")

	require.NoError(t, a.Unlock(ctx))
	ok, err := b.TryLock(ctx, 0)
	require.NoError(t, err)
	assert.False(t, ok, "free after the inner Unlock")
	require.NoError(t, a.Unlock(ctx))
	assert.ErrorIs(t, a.Unlock(ctx), ErrNotHeld, "one Unlock too many")
	ok, err = b.TryLock(ctx, 0)
	require.NoError(t, err)
	assert.True(t, ok, "not free after the last Unlock")
	assert.Greater(t, b.Token(), token)
	require.NoError(t, b.Unlock(ctx))
}

// TestZooKeeperGivingUp: a wait that runs out reports false, nil and a context that ends
// returns its error; neither leaves a node.
func TestZooKeeperGivingUp(t *testing.T) {
	root := serverTestRoot(t)
	holder := NewZooKeeperLocks(newZKTestClient(t, root, zkHooks{})).ZooKeeperLock("give-up")
	zkTake(t, holder)
	c := newZKTestClient(t, root, zkHooks{})
	l := NewZooKeeperLocks(c).ZooKeeperLock("give-up")

	start := time.Now()
	ok, err := l.TryLockWait(context.Background(), 100*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	assert.Len(t, zkChildren(t, c, l.Path()), 1, "the wait left its node")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, l.Lock(ctx), context.DeadlineExceeded)
	eventually(t, "the cancelled waiter's node deleted", func() bool { return len(zkChildren(t, c, l.Path())) == 1 })
}

// TestZooKeeperTokenAcrossParents: the parent node goes when its last child does (it is a
// container) and the sequence numbers start again under the new one; the token still grows.
func TestZooKeeperTokenAcrossParents(t *testing.T) {
	root := serverTestRoot(t)
	c := newZKTestClient(t, root, zkHooks{})
	l := NewZooKeeperLocks(c).ZooKeeperLock("parents")
	var tokens []int64
	for range 2 {
		zkTake(t, l)
		children := zkChildren(t, c, l.Path())
		require.Len(t, children, 1)
		seq, _ := zkSequence(children[0])
		assert.Zero(t, seq, "the first node under a new parent")
		tokens = append(tokens, l.Token())
		require.NoError(t, l.Unlock(context.Background()))
		require.NoError(t, c.conn.Delete(l.Path(), -1)) // what the server does to an empty container
	}
	assert.Greater(t, tokens[1], tokens[0])
}

// TestZooKeeperClose: closing the client ends its holds and deletes its nodes at once.
func TestZooKeeperClose(t *testing.T) {
	root := serverTestRoot(t)
	a := newZKTestClient(t, root, zkHooks{})
	la := NewZooKeeperLocks(a).ZooKeeperLock("close")
	zkTake(t, la)
	lost := la.Lost()
	assert.True(t, a.Connected(), "a client with a session")
	require.NoError(t, a.Close())
	assert.False(t, a.Connected(), "a closed client")
	assert.True(t, isClosed(lost), "Lost not closed by Close")
	err := la.Unlock(context.Background())
	assert.ErrorIs(t, err, ErrNotHeld, "Unlock of a hold that Close ended")
	assert.ErrorIs(t, err, ErrClosed, "Unlock of a hold that Close ended")
	_, err = la.TryLock(context.Background(), 0)
	assert.ErrorIs(t, err, ErrClosed)
	lb := NewZooKeeperLocks(newZKTestClient(t, root, zkHooks{})).ZooKeeperLock("close")
	zkTake(t, lb)
}

// TestZooKeeperSessionExpiry: the server expires the holder's session (forced, the usual
// way: a second connection takes over the session with its id and password and closes it).
// The holder is told on Lost, its Unlock returns ErrNotHeld, another process takes the lock
// with a larger token, and a waiter of the expired session queues again in the new one.
func TestZooKeeperSessionExpiry(t *testing.T) {
	t.Parallel()
	root := serverTestRoot(t)
	tap := &zkTap{}
	watching := make(chan struct{}, 1)
	a := newZKTestClient(t, root, zkHooks{dial: tap.dial, watching: func(string, string) {
		select {
		case watching <- struct{}{}:
		default:
		}
	}})
	b := newZKTestClient(t, root, zkHooks{})
	la := NewZooKeeperLocks(a).ZooKeeperLock("expiry")
	lb := NewZooKeeperLocks(b).ZooKeeperLock("expiry")
	zkTake(t, la)
	first := la.Token()
	lost := la.Lost()

	waited := make(chan int64, 1)
	finished := make(chan struct{})
	defer func() { <-finished }()
	ctx := testCtx(t)
	go func() {
		defer close(finished)
		if err := la.Lock(ctx); err != nil {
			t.Error(err)
			waited <- 0
			return
		}
		waited <- la.Token()
		assert.NoError(t, la.Unlock(ctx))
	}()
	<-watching // the waiter is queued behind the holder, in the same session

	id, passwd := tap.session(t)
	tap.partition(true) // a may not win its session back before it is closed
	zkExpire(t, zkTestAddr(), id, passwd)

	// The session is gone on the server: so are both of a's nodes.
	ok, err := lb.TryLock(testCtx(t), 0)
	require.NoError(t, err)
	require.True(t, ok, "the expired session's node still blocks the lock")
	second := lb.Token()
	assert.Greater(t, second, first)

	tap.partition(false)
	require.True(t, closedWithin(lost, 10*time.Second), "the holder was not told its session expired")
	assert.ErrorIs(t, la.Unlock(context.Background()), ErrNotHeld)
	assert.Zero(t, la.Token())

	require.NoError(t, lb.Unlock(context.Background()))
	select {
	case third := <-waited:
		assert.Greater(t, third, second, "the waiter's grant after the expiry")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter of the expired session never got the lock")
	}
	assert.NotEqual(t, id, a.conn.SessionID(), "a has a new session")
}

// TestZooKeeperWaitBoundedWhenTheServerDoesNotAnswer: a caller waits a second (TryLockWait,
// its ctx without a deadline) for a lock another process holds, and the server never answers
// the create of its node while it goes on answering the pings, so the session lives. The
// call must end with the wait and WaitOverrun, as the Redis, MySQL and etcd locks' do, and
// TryLockWait return an error then. It waited for the session timeout the server granted
// (4 s here; 10 s by default).
func TestZooKeeperWaitBoundedWhenTheServerDoesNotAnswer(t *testing.T) {
	root := serverTestRoot(t)
	tap := &zkTap{}
	a := newZKTestClient(t, root, zkHooks{dial: tap.dial})
	zkTake(t, NewZooKeeperLocks(newZKTestClient(t, root, zkHooks{})).ZooKeeperLock("stalled"))
	tap.swallow(zkOpMulti)
	const wait = time.Second
	start := time.Now()
	ok, err := NewZooKeeperLocks(a).ZooKeeperLock("stalled").TryLockWait(context.Background(), wait, 0)
	took := time.Since(start)
	assert.False(t, ok)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a create the server did not answer")
	assert.LessOrEqual(t, took, wait+waitOverrun+time.Second, "TryLockWait(%s) returned after %s (%v)", wait, took, err)
	t.Logf("returned %v, %v after %s", ok, err, took.Round(time.Millisecond))
}

// zkTap dials the server for a client, reads the session id and password out of each
// connect reply, and can refuse new connections and cut the one open (a partition as the
// client sees it), or swallow the client's requests of one kind.
type zkTap struct {
	mu      sync.Mutex
	id      int64
	passwd  []byte
	refused bool
	conns   []net.Conn
	opcode  atomic.Int32 // the requests swallowed; 0 none
}

// zkOpDelete and zkOpMulti are the opcodes of a delete request and of a multi, in which the
// client creates its lock nodes (go-zookeeper's opDelete, opMulti).
const (
	zkOpDelete = 2
	zkOpMulti  = 14
)

// swallow makes the client's connections drop every request with opcode op unsent, while
// reporting it written: the server never answers it, and goes on answering the rest.
func (p *zkTap) swallow(op int32) { p.opcode.Store(op) }

func (p *zkTap) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	p.mu.Lock()
	refused := p.refused
	p.mu.Unlock()
	if refused {
		return nil, errors.New("test: partitioned")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
	return &zkTapConn{Conn: c, tap: p}, nil
}

func (p *zkTap) partition(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused = on
}

// cut closes the connections made so far: with partition(true), the client is cut off.
func (p *zkTap) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *zkTap) session(t *testing.T) (int64, []byte) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NotZero(t, p.id, "no connect reply seen")
	return p.id, p.passwd
}

// zkTapConn copies the first frame the server sends, the connect reply.
type zkTapConn struct {
	net.Conn
	tap  *zkTap
	buf  []byte
	done bool
}

func (c *zkTapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.done && n > 0 {
		c.buf = append(c.buf, b[:n]...)
		if len(c.buf) >= 4 && len(c.buf) >= 4+int(binary.BigEndian.Uint32(c.buf)) {
			c.done = true
			// protocolVersion int32, timeOut int32, sessionId int64, passwd (int32 length + bytes)
			r := c.buf[4:]
			id := int64(binary.BigEndian.Uint64(r[8:16]))
			pl := int(binary.BigEndian.Uint32(r[16:20]))
			if id != 0 {
				c.tap.mu.Lock()
				c.tap.id, c.tap.passwd = id, append([]byte(nil), r[20:20+pl]...)
				c.tap.mu.Unlock()
			}
		}
	}
	return n, err
}

// Write drops a request the tap swallows. go-zookeeper writes each request, its length, xid
// and opcode first, in one Write.
func (c *zkTapConn) Write(b []byte) (int, error) {
	if op := c.tap.opcode.Load(); op != 0 && len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == op {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// zkExpire ends session id on the server: it connects with the session's id and password,
// which takes the session over, and sends closeSession.
func zkExpire(t *testing.T, addr string, id int64, passwd []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	frame := func(body []byte) {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		_, err := conn.Write(append(b, body...))
		require.NoError(t, err)
	}
	reply := func() []byte {
		var n [4]byte
		_, err := io.ReadFull(conn, n[:])
		require.NoError(t, err)
		b := make([]byte, binary.BigEndian.Uint32(n[:]))
		_, err = io.ReadFull(conn, b)
		require.NoError(t, err)
		return b
	}
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd.
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, uint32(zkTestSessionTimeout.Milliseconds()))
	req = binary.BigEndian.AppendUint64(req, uint64(id))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	frame(append(req, passwd...))
	r := reply()
	require.Equal(t, id, int64(binary.BigEndian.Uint64(r[8:16])), "the server did not hand the session over")
	// closeSession: xid 1, type -11; the reply header is xid, zxid, err.
	frame(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), uint32(0xFFFFFFF5)))
	r = reply()
	require.Equal(t, strconv.Itoa(0), strconv.Itoa(int(int32(binary.BigEndian.Uint32(r[12:16])))), "closeSession failed")
}

// TestZooKeeperNoTokens: with ZooKeeperOptions.NoTokens the lock still excludes, and hands
// out no token (Token stays 0, which it is only when the czxid was not learnt).
func TestZooKeeperNoTokens(t *testing.T) {
	root := serverTestRoot(t)
	connect := func() *ZooKeeperClient {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := NewZooKeeperClient(ctx, []string{zkTestAddr()},
			ZooKeeperOptions{SessionTimeout: zkTestSessionTimeout, Root: root, NoTokens: true})
		require.NoError(t, err, "run `scripts/services.sh up zookeeper`")
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a := NewZooKeeperLocks(connect()).ZooKeeperLock("no-tokens")
	b := NewZooKeeperLocks(connect()).ZooKeeperLock("no-tokens")
	zkTake(t, a)
	assert.Zero(t, a.Token(), "no token read")
	ok, err := b.TryLock(context.Background(), time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "held by a: b must not get it")
	require.NoError(t, a.Unlock(context.Background()))
	zkTake(t, b)
	assert.Zero(t, b.Token())
	require.NoError(t, b.Unlock(context.Background()))
}

// TestZooKeeperTokenIsCzxid: the token a grant learns from its create's multi (the parent's
// mzxid after the SetData beside the create) is its node's czxid, for a first grant, for one
// after the parent was gone, and for a grant that queued behind another holder.
func TestZooKeeperTokenIsCzxid(t *testing.T) {
	root := serverTestRoot(t)
	queued := make(chan struct{})
	var once sync.Once
	c := newZKTestClient(t, root, zkHooks{watching: func(string, string) { once.Do(func() { close(queued) }) }})
	l := NewZooKeeperLocks(c).ZooKeeperLock("czxid")
	// czxid reads the czxid of the one node under the lock's parent.
	czxid := func() (int64, error) {
		children, _, err := c.conn.Children(l.Path())
		if err != nil {
			return 0, err
		}
		if len(children) != 1 {
			return 0, fmt.Errorf("want one node, got %v", children)
		}
		_, st, err := c.conn.Get(l.Path() + "/" + children[0])
		if err != nil {
			return 0, err
		}
		return st.Czxid, nil
	}
	for range 2 { // the second time the parent is new: deleted after the first release
		zkTake(t, l)
		want, err := czxid()
		require.NoError(t, err)
		assert.Equal(t, want, l.Token())
		require.NoError(t, l.Unlock(context.Background()))
		// The server may have removed the empty container already: gone either way.
		if err := c.conn.Delete(l.Path(), -1); !errors.Is(err, zk.ErrNoNode) {
			require.NoError(t, err)
		}
	}

	holder := NewZooKeeperLocks(newZKTestClient(t, root, zkHooks{})).ZooKeeperLock("czxid")
	zkTake(t, holder)
	type grant struct{ token, czxid int64 }
	got := make(chan grant, 1)
	errs := make(chan error, 1)
	go func() {
		if err := l.Lock(context.Background()); err != nil {
			errs <- err
			return
		}
		want, err := czxid() // the holder's node is gone: only the waiter's is left
		if err != nil {
			errs <- err
		} else {
			got <- grant{l.Token(), want}
		}
		_ = l.Unlock(context.Background())
	}()
	select {
	case <-queued:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never watched its predecessor")
	}
	require.NoError(t, holder.Unlock(context.Background()))
	select {
	case g := <-got:
		assert.Equal(t, g.czxid, g.token)
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the lock")
	}
}

// TestZooKeeperParentGoneAtEveryCreate: the lock's parent node is gone at every create (the
// server removes an empty container, or an operator the tree, between the client making the
// parent and its create). Once its creates are spent the acquisition fails with the server's
// answer, leaving no node; it must not report success without a node.
func TestZooKeeperParentGoneAtEveryCreate(t *testing.T) {
	root := serverTestRoot(t)
	var c *ZooKeeperClient
	var creates atomic.Int32
	c = newZKTestClient(t, root, zkHooks{created: func(p string, err error) (string, error) {
		creates.Add(1)
		if err != nil {
			return p, err
		}
		// The server made the node: take it and its parent away, as if the parent had
		// gone just before the create arrived.
		if derr := c.conn.Delete(p, -1); derr != nil {
			return "", derr
		}
		if derr := c.conn.Delete(path.Dir(p), -1); derr != nil && !errors.Is(derr, zk.ErrNoNode) {
			return "", derr
		}
		return "", zk.ErrNoNode
	}})
	l := NewZooKeeperLocks(c).ZooKeeperLock("parent-gone")
	ok, err := l.TryLock(testCtx(t), 0)
	assert.False(t, ok)
	assert.ErrorIs(t, err, zk.ErrNoNode)
	assert.Equal(t, int32(zkCreateAttempts), creates.Load(), "creates tried")
	assert.Empty(t, zkChildren(t, c, l.Path()), "nodes left behind")
}

// TestZooKeeperOutageLeavesNoSearch: with the client cut off from the server, go-zookeeper
// fails the create it could not send with ErrNoServer. The server never saw it, so there is
// no node to look for: the acquisition fails at once with that error, and leaves no
// background search for its GUID polling the server until it is back (one per acquisition
// tried during the outage, then a Sync and a listing each when it ends).
func TestZooKeeperOutageLeavesNoSearch(t *testing.T) {
	root := serverTestRoot(t)
	tap := &zkTap{}
	var searches atomic.Int32
	disconnected := make(chan struct{}, 1)
	c := newZKTestClient(t, root, zkHooks{dial: tap.dial, removing: func(string, string) { searches.Add(1) },
		sessionEvent: func(state zk.State) {
			if state == zk.StateDisconnected {
				select {
				case disconnected <- struct{}{}:
				default:
				}
			}
		}})
	t.Cleanup(func() { tap.partition(false) })
	l := NewZooKeeperLocks(c).ZooKeeperLock("outage")
	zkTake(t, l) // the parent exists: the create is what fails
	require.NoError(t, l.Unlock(context.Background()))

	tap.partition(true)
	tap.cut()
	<-disconnected // from now on requests wait for a connection, which never comes
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := l.TryLock(ctx, 0)
	assert.False(t, ok)
	assert.ErrorIs(t, err, zk.ErrNoServer)
	assert.Zero(t, searches.Load(), "background searches for a node never sent")
}

// TestZooKeeperInvalidNameLeavesNoSearch: a lock name that makes no valid path ("", ".",
// "..") is refused by go-zookeeper before anything is sent. Without tokens the plain create
// is what it refuses: the acquisition fails with that error and leaves no background search
// for its node, which would fail the same way until the client closed.
func TestZooKeeperInvalidNameLeavesNoSearch(t *testing.T) {
	var searches atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := newZooKeeperClient(ctx, []string{zkTestAddr()},
		ZooKeeperOptions{SessionTimeout: zkTestSessionTimeout, Root: serverTestRoot(t), NoTokens: true},
		zkHooks{removing: func(string, string) { searches.Add(1) }})
	require.NoError(t, err, "run `scripts/services.sh up zookeeper`")
	t.Cleanup(func() { _ = c.Close() })
	for _, name := range []string{"", ".", ".."} {
		ok, err := NewZooKeeperLocks(c).ZooKeeperLock(name).TryLock(ctx, 0)
		assert.False(t, ok, "name %q", name)
		assert.ErrorIs(t, err, zk.ErrInvalidPath, "name %q", name)
	}
	assert.Zero(t, searches.Load(), "background searches for nodes never sent")
}
