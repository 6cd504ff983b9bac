package pitfall

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ZooKeeper's wire protocol, as much of it as the proxy reads: every packet is a 4-byte
// big-endian length and a body. The client's first packet is the connect request and the
// server's first the connect response (protocol version, timeout, session id, password);
// after that a request starts with (xid, opcode) and a reply with (xid, zxid, error). A reply
// with xid -1 is a watch notification (event type, state, path); xid -2 answers a ping.
const (
	zkXidNotification = -1
	zkXidPing         = -2

	zkOpExists       = 3
	zkOpGetData      = 4
	zkOpGetChildren  = 8
	zkOpPing         = 11
	zkOpGetChildren2 = 12
	zkOpClose        = -11
)

// zkProxy relays ZooKeeper client connections to one server and watches them: it reads the
// session each connection gets, counts the watch notifications the server sends it and the
// requests that set a watch, can freeze a connection (a paused process: nothing in, nothing
// out) or cut it, and can put a barrier into a connection's stream. The barrier is a ping the
// proxy sends itself and whose reply it keeps: the server answers a connection's requests in
// order and queues a notification ahead of any reply that follows the change that fired it,
// so once the barrier's reply is back, every notification the server owed the connection
// before the barrier has passed the proxy. That is how the lessons count wake-ups without
// guessing how long to wait for them.
type zkProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []*zkProxyConn
	wg    sync.WaitGroup
}

// zkProxyConn is one relayed client connection.
type zkProxyConn struct {
	p          *zkProxy
	down, up   net.Conn
	mu         sync.Mutex
	changed    *sync.Cond
	frozen     bool
	closed     bool
	session    int64
	passwd     []byte
	notes      []zkNotification
	watchSets  int      // replies to requests that set a watch
	watched    []string // the paths of those requests, in order
	pings      []bool   // pending pings, oldest first: true for the proxy's own
	barrierHit int      // the proxy's pings answered
	pending    []zkSent // watch-setting requests awaiting their reply, by xid
	upMu       sync.Mutex
}

type zkSent struct {
	xid  int32
	path string
}

// zkNotification is one watch notification the server sent.
type zkNotification struct {
	Type int32
	Path string
}

func (n zkNotification) String() string {
	names := map[int32]string{1: "NodeCreated", 2: "NodeDeleted", 3: "NodeDataChanged", 4: "NodeChildrenChanged"}
	if s, ok := names[n.Type]; ok {
		return s + " " + n.Path
	}
	return fmt.Sprintf("event %d %s", n.Type, n.Path)
}

func newZKProxy(target string) (*zkProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &zkProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *zkProxy) addr() string { return p.ln.Addr().String() }

func (p *zkProxy) serve() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = down.Close()
			continue
		}
		c := &zkProxyConn{p: p, down: down, up: up}
		c.changed = sync.NewCond(&c.mu)
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); c.relayUp() }()
		go func() { defer p.wg.Done(); c.relayDown() }()
	}
}

// conn returns the live connection of session id (0: the latest connection), or nil.
func (p *zkProxy) conn(id int64) *zkProxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.conns) - 1; i >= 0; i-- {
		c := p.conns[i]
		c.mu.Lock()
		ok := !c.closed && (id == 0 || c.session == id)
		c.mu.Unlock()
		if ok {
			return c
		}
	}
	return nil
}

func (p *zkProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	conns := append([]*zkProxyConn(nil), p.conns...)
	p.mu.Unlock()
	for _, c := range conns {
		c.cut()
	}
	p.wg.Wait()
}

func readPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 16<<20 {
		return nil, fmt.Errorf("zookeeper packet of %d bytes", n)
	}
	buf := make([]byte, 4+n)
	copy(buf, hdr[:])
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}

// waitThawed blocks while the connection is frozen; it reports false once it is cut.
func (c *zkProxyConn) waitThawed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.frozen && !c.closed {
		c.changed.Wait()
	}
	return !c.closed
}

// relayUp copies the client's packets to the server, noting pings and watch-setting requests.
func (c *zkProxyConn) relayUp() {
	defer c.cut()
	first := true
	for {
		pkt, err := readPacket(c.down)
		if !c.waitThawed() || err != nil {
			return // a frozen connection shows its end only once thawed
		}
		if !first && len(pkt) >= 12 {
			xid := int32(binary.BigEndian.Uint32(pkt[4:]))
			op := int32(binary.BigEndian.Uint32(pkt[8:]))
			c.mu.Lock()
			switch {
			case op == zkOpPing:
				c.pings = append(c.pings, false)
			case op == zkOpGetData || op == zkOpExists || op == zkOpGetChildren || op == zkOpGetChildren2:
				if pkt[len(pkt)-1] == 1 { // the request is a path and a watch flag
					c.pending = append(c.pending, zkSent{xid: xid, path: zkString(pkt[12:])})
				}
			}
			c.mu.Unlock()
		}
		first = false
		c.upMu.Lock()
		_, err = c.up.Write(pkt)
		c.upMu.Unlock()
		if err != nil {
			return
		}
	}
}

// relayDown copies the server's packets to the client: it reads the session from the connect
// response, counts notifications and watch-setting replies, and keeps the replies to its own
// pings.
func (c *zkProxyConn) relayDown() {
	defer c.cut()
	first := true
	for {
		pkt, err := readPacket(c.up)
		if !c.waitThawed() || err != nil {
			return
		}
		forward := true
		c.mu.Lock()
		switch {
		case first && len(pkt) >= 24:
			// protocol version, timeout, session id, password
			c.session = int64(binary.BigEndian.Uint64(pkt[12:]))
			if n := int(binary.BigEndian.Uint32(pkt[20:])); n > 0 && 24+n <= len(pkt) {
				c.passwd = append([]byte(nil), pkt[24:24+n]...)
			}
		case len(pkt) >= 20:
			xid := int32(binary.BigEndian.Uint32(pkt[4:]))
			switch xid {
			case zkXidNotification:
				c.notes = append(c.notes, parseNotification(pkt[20:]))
			case zkXidPing:
				if len(c.pings) > 0 {
					own := c.pings[0]
					c.pings = c.pings[1:]
					if own {
						c.barrierHit++
						forward = false
					}
				}
			default:
				for i, s := range c.pending {
					if s.xid == xid {
						c.pending = append(c.pending[:i], c.pending[i+1:]...)
						c.watchSets++
						c.watched = append(c.watched, s.path)
						break
					}
				}
			}
		}
		first = false
		c.changed.Broadcast()
		c.mu.Unlock()
		if forward {
			if _, err := c.down.Write(pkt); err != nil {
				return
			}
		}
	}
}

func parseNotification(b []byte) zkNotification {
	if len(b) < 12 {
		return zkNotification{}
	}
	return zkNotification{Type: int32(binary.BigEndian.Uint32(b)), Path: zkString(b[8:])}
}

// zkString reads the protocol's string: a 4-byte length and the bytes.
func zkString(b []byte) string {
	if len(b) < 4 {
		return ""
	}
	l := int(int32(binary.BigEndian.Uint32(b)))
	if l <= 0 || 4+l > len(b) {
		return ""
	}
	return string(b[4 : 4+l])
}

// freeze stops the connection in both directions, as a paused process would: nothing it
// sends leaves, nothing sent to it is read.
func (c *zkProxyConn) freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = true
}

// cut closes the connection on both sides: the client sees it drop and reconnects.
func (c *zkProxyConn) cut() {
	c.mu.Lock()
	c.closed = true
	c.frozen = false
	c.changed.Broadcast()
	c.mu.Unlock()
	_ = c.down.Close()
	_ = c.up.Close()
}

// barrier sends a ping of the proxy's own on the connection and waits until the server has
// answered it (see zkProxy), up to limit.
func (c *zkProxyConn) barrier(ctx context.Context, limit time.Duration) error {
	c.mu.Lock()
	want := c.barrierHit + 1
	c.pings = append(c.pings, true)
	c.mu.Unlock()
	ping := make([]byte, 12)
	binary.BigEndian.PutUint32(ping, 8)
	binary.BigEndian.PutUint32(ping[4:], zkU32(zkXidPing))
	binary.BigEndian.PutUint32(ping[8:], zkU32(zkOpPing))
	c.upMu.Lock()
	_, err := c.up.Write(ping)
	c.upMu.Unlock()
	if err != nil {
		return fmt.Errorf("barrier ping: %w", err)
	}
	return c.await(ctx, limit, func() bool { return c.barrierHit >= want })
}

// await waits until cond (called with c.mu held) holds, the connection closes, or limit
// passes.
func (c *zkProxyConn) await(ctx context.Context, limit time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond() {
		if c.closed {
			return errors.New("zookeeper proxy: connection closed")
		}
		if ctx.Err() != nil {
			return fmt.Errorf("zookeeper proxy: condition not met within %s: %w", limit, ctx.Err())
		}
		c.changed.Wait()
	}
	return nil
}

// stats returns the notifications received so far and the paths of the watches set.
func (c *zkProxyConn) stats() (notes []zkNotification, watched []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]zkNotification(nil), c.notes...), append([]string(nil), c.watched...)
}

// credentials returns the connection's session id and password.
func (c *zkProxyConn) credentials() (int64, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session, append([]byte(nil), c.passwd...)
}

// closeZKSession ends session id at the server at addr from a connection of its own: it
// attaches to the session with its id and password, as a client reconnecting would, and asks
// the server to close it. The server deletes the session's ephemeral nodes at once, exactly
// what it does when the session times out; the lessons use it to expire a session
// deterministically instead of waiting out its timeout.
func closeZKSession(ctx context.Context, addr string, id int64, passwd []byte) error {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := make([]byte, 4+4+8+4+8+4+len(passwd)+1)
	b := req[4:]
	binary.BigEndian.PutUint32(b[0:], 0)       // protocol version
	binary.BigEndian.PutUint64(b[4:], 0)       // last zxid seen
	binary.BigEndian.PutUint32(b[12:], 10_000) // timeout (ms)
	binary.BigEndian.PutUint64(b[16:], uint64(id))
	binary.BigEndian.PutUint32(b[24:], uint32(len(passwd)))
	copy(b[28:], passwd)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	if _, err := conn.Write(req); err != nil {
		return err
	}
	resp, err := readPacket(conn)
	if err != nil {
		return fmt.Errorf("attach to session %#x: %w", id, err)
	}
	if len(resp) < 24 || int64(binary.BigEndian.Uint64(resp[12:])) != id || binary.BigEndian.Uint32(resp[8:]) == 0 {
		return fmt.Errorf("attach to session %#x: the server refused it (expired already?)", id)
	}
	closeReq := make([]byte, 12)
	binary.BigEndian.PutUint32(closeReq, 8)
	binary.BigEndian.PutUint32(closeReq[4:], 1)
	binary.BigEndian.PutUint32(closeReq[8:], zkU32(zkOpClose))
	if _, err := conn.Write(closeReq); err != nil {
		return err
	}
	if _, err := readPacket(conn); err != nil {
		return fmt.Errorf("close session %#x: %w", id, err)
	}
	return nil
}

// zkU32 is v's two's-complement bits, as the protocol writes a negative int32.
func zkU32(v int32) uint32 { return uint32(v) }
