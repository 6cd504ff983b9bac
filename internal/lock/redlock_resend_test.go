package lock

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dropSetReply is a connection that loses the reply to the first SET sent through any
// connection sharing armed: it reads the server's answer (so the SET has run) and then fails
// as a connection reset by the peer would, with io.EOF.
type dropSetReply struct {
	net.Conn
	armed *atomic.Bool
	set   atomic.Bool // a SET was written on this connection
}

func (c *dropSetReply) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("\r\nset\r\n")) {
		c.set.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *dropSetReply) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err == nil && c.set.Load() && c.armed.CompareAndSwap(true, false) {
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	return n, err
}

// TestRedLockReleasesResentSets: a go-redis client with its default MaxRetries sends a SET
// again after its reply was lost, and the second SET NX finds the key the first one set: the
// node answers "exists" although the key is this attempt's. A failed attempt must release
// those nodes too (the Redis documentation: unlock every instance, even those it believed
// it could not lock), or its keys block the lock, for every client, until the lease ends.
func TestRedLockReleasesResentSets(t *testing.T) {
	ctx := context.Background()
	nodes := embeddedNodes(t, redNodeCount)
	const resent = 0b00111 // a majority: the attempt fails
	clients := make([]RedisClient, len(nodes.addrs))
	for i, addr := range nodes.addrs {
		opts := &redis.Options{Addr: addr} // MaxRetries: go-redis's default, 3
		if resent&(1<<i) != 0 {
			armed := new(atomic.Bool)
			armed.Store(true)
			opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &dropSetReply{Conn: c, armed: armed}, nil
			}
		}
		c := redis.NewClient(opts)
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	l := NewRedLocks(clients, "", RedLockOptions{NodeTimeout: testNodeTimeout}).RedLock("resent")

	ok, err := l.TryLock(ctx, time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "nodes 0-2 answered that the key existed: 2 of 5")
	for i, v := range nodes.values(t, l.Key()) {
		assert.Empty(t, v, "node %d kept the failed attempt's key", i)
	}
	ok, err = l.TryLock(ctx, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "nobody holds the lock: the next attempt takes it")
	if ok {
		require.NoError(t, l.Unlock(ctx))
	}
}
