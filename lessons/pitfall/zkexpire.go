package pitfall

import (
	"context"
	"errors"
)

// ZKSessionProxy relays ZooKeeper client connections to one server and can expire the session
// of the first client it relayed, at once and at a moment of the caller's choosing: the
// controlled expiry a fencing experiment needs (a holder whose session ends while it still
// works). The server deletes the session's ephemeral nodes as it does when a session times
// out, and the client hears that its session expired when it next talks to the server.
type ZKSessionProxy struct {
	p *zkProxy
}

// NewZKSessionProxy starts relaying to the ZooKeeper server at target on a loopback port.
func NewZKSessionProxy(target string) (*ZKSessionProxy, error) {
	p, err := newZKProxy(target)
	if err != nil {
		return nil, err
	}
	return &ZKSessionProxy{p: p}, nil
}

// Addr is the host:port a client connects to instead of the server.
func (z *ZKSessionProxy) Addr() string { return z.p.addr() }

// ExpireFirst ends the session of the first connection relayed (see closeZKSession). It
// returns an error when no connection has a session yet, or the server refused to end it.
func (z *ZKSessionProxy) ExpireFirst(ctx context.Context) error {
	z.p.mu.Lock()
	var first *zkProxyConn
	if len(z.p.conns) > 0 {
		first = z.p.conns[0]
	}
	z.p.mu.Unlock()
	if first == nil {
		return errors.New("zookeeper proxy: no connection relayed yet")
	}
	id, passwd := first.credentials()
	if id == 0 {
		return errors.New("zookeeper proxy: the first connection has no session yet")
	}
	return closeZKSession(ctx, z.p.target, id, passwd)
}

// Close stops relaying and cuts every relayed connection.
func (z *ZKSessionProxy) Close() { z.p.close() }
