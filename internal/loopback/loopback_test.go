package loopback_test

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/loopback"
)

// TestStartBelowEphemeralRange: a server placed by Start listens on a port below this
// machine's ephemeral range, and comes back on it after a stop.
func TestStartBelowEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	require.NoError(t, err, "this test reads Linux's ephemeral port range")
	fields := strings.Fields(string(b))
	require.Len(t, fields, 2, "ip_local_port_range: %q", b)
	low, err := strconv.Atoi(fields[0])
	require.NoError(t, err)
	require.LessOrEqual(t, loopback.PortHigh, low, "the ephemeral range starts below loopback.PortHigh here")

	m := miniredis.NewMiniRedis()
	require.NoError(t, loopback.Start(m.StartAddr))
	t.Cleanup(m.Close)
	_, p, err := net.SplitHostPort(m.Addr())
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	assert.Less(t, port, low, "port %d: in the ephemeral range [%d, …)", port, low)

	m.Close()
	require.NoError(t, m.Restart(), "restart on %s", m.Addr())
}

// TestStartGivesUp: when no port will do, Start says so with the last error.
func TestStartGivesUp(t *testing.T) {
	taken := &net.OpError{Op: "listen", Err: os.ErrExist}
	calls := 0
	err := loopback.Start(func(string) error { calls++; return taken })
	require.ErrorIs(t, err, os.ErrExist)
	assert.Greater(t, calls, 1, "tried more than one port")
}
