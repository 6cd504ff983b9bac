package testenv

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestartFindsItsPortFree: while a server of these tests is down for a restart, no other
// helper is placed on its port, even one that asks for exactly that port first (as
// StartMariaDB asked for 16306, and the sentinels for SECKILL_TEST_SENTINEL_PORT's): the port
// looked free to the probe, the other helper took it, and the restart met "another server
// answers".
func TestRestartFindsItsPortFree(t *testing.T) {
	rs := StartRedisServer(t)
	_, p, err := net.SplitHostPort(rs.Addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)

	rs.Kill()
	var other net.Listener // another helper's server, asking for rs's port first
	require.NoError(t, onFreePort(port, func(addr string) (err error) { other, err = net.Listen("tcp", addr); return err }))
	t.Cleanup(func() { _ = other.Close() })
	assert.NotEqual(t, rs.Addr, other.Addr().String(), "another server was placed on the port of one down for a restart")

	rs.Restart()
	require.NoError(t, rs.Client().Ping(t.Context()).Err())
}

// TestStartMovesOffAForeignListener: a port held by a process that reserves nothing (here a
// bare listener) makes the server's start fail with "address already in use", and another
// port is tried; the server ends up on that one.
func TestStartMovesOffAForeignListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	_, p, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)

	rs := startRedis(t, t.TempDir(), port, nil)
	assert.NotEqual(t, ln.Addr().String(), rs.Addr)
	require.NoError(t, rs.Client().Ping(t.Context()).Err())
}
