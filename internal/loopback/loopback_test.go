package loopback_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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

// TestStartGivesUp: when every port it tries is taken, Start says so with the last error.
// Its ports are ones no server reserves: at random in the whole range, the last try could
// meet a port a test binary running beside holds, and the last error was then ErrReserved
// (a CI run of 2026-12-06).
func TestStartGivesUp(t *testing.T) {
	loopback.SetPick(t, ports(loopback.FreePorts(loopback.PortLow+23, 3)...))
	taken := &net.OpError{Op: "listen", Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	calls := 0
	err := loopback.Start(func(string) error { calls++; return taken })
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.Greater(t, calls, 1, "tried more than one port")
}

// TestStartStopsOnOtherFailures: only a taken port is worth another try; a server that fails
// for any other reason is reported at once (a server process that cannot start waited out its
// start bound once per try).
func TestStartStopsOnOtherFailures(t *testing.T) {
	broken := errors.New("no such binary")
	calls := 0
	err := loopback.Start(func(string) error { calls++; return broken })
	require.ErrorIs(t, err, broken)
	assert.Equal(t, 1, calls)

	calls = 0
	err = loopback.Start(func(addr string) error {
		if calls++; calls < 3 {
			return fmt.Errorf("server exited, its log says: %w", loopback.ErrInUse)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, calls, "a port its log called taken is tried again elsewhere")
}

// ports returns a pick that yields ps in turn, then the last one again.
func ports(ps ...int) func() int {
	i := 0
	return func() int {
		p := ps[min(i, len(ps)-1)]
		i++
		return p
	}
}

// TestStartNeverHandsOutAHeldPort: a port handed out stays its server's while the server is
// down for a restart; Start gives another server another port, though nothing listens on the
// first. Two helpers that probed "is it free?" chose the same port in that window.
func TestStartNeverHandsOutAHeldPort(t *testing.T) {
	free := loopback.FreePorts(loopback.PortLow+17, 2)
	first, second := free[0], free[1]
	loopback.SetPick(t, ports(first, first, second))
	var down string // a server that is down: it listens on nothing
	require.NoError(t, loopback.Start(func(addr string) error { down = addr; return nil }))
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(first), down)

	var ln net.Listener
	require.NoError(t, loopback.Start(func(addr string) (err error) { ln, err = net.Listen("tcp", addr); return err }))
	t.Cleanup(func() { _ = ln.Close() })
	assert.Equal(t, "127.0.0.1:"+strconv.Itoa(second), ln.Addr().String(), "the second server got the port of the first, down")
	require.ErrorIs(t, loopback.StartOn(first, func(string) error { return nil }), loopback.ErrReserved)
}

// reserveEnv makes this test binary a child that reserves the port it names and waits.
const reserveEnv = "LOOPBACK_TEST_RESERVE"

// TestStartOnHonoursAnotherProcess: a port another process (another test binary of
// `go test ./...`) reserved is refused until that process ends.
func TestStartOnHonoursAnotherProcess(t *testing.T) {
	if p := os.Getenv(reserveEnv); p != "" {
		port, _ := strconv.Atoi(p)
		if err := loopback.StartOn(port, func(string) error { return nil }); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("reserved")
		_, _ = io.Copy(io.Discard, os.Stdin) // hold it until the parent closes stdin
		os.Exit(0)
	}
	// The child reserves a port of the range's start; one that a server of a test binary
	// running beside holds (Start picks ports at random in the whole range) is passed over.
	var port int
	var child *exec.Cmd
	var stdin io.WriteCloser
	for port = loopback.PortLow + 19; ; port++ {
		require.Less(t, port, loopback.PortLow+100, "no port of the range's start free for the child")
		child = exec.Command(os.Args[0], "-test.run=^TestStartOnHonoursAnotherProcess$")
		child.Env = append(os.Environ(), reserveEnv+"="+strconv.Itoa(port))
		var err error
		stdin, err = child.StdinPipe()
		require.NoError(t, err)
		out, err := child.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, child.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		if line == "reserved\n" {
			break
		}
		require.Equal(t, loopback.ErrReserved.Error()+": 127.0.0.1:"+strconv.Itoa(port)+"\n", line, "the child's answer")
		_ = stdin.Close()
		_ = child.Wait()
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = child.Wait() })

	called := false
	err := loopback.StartOn(port, func(string) error { called = true; return nil })
	require.ErrorIs(t, err, loopback.ErrReserved)
	assert.False(t, called, "start called on a port another process holds")

	require.NoError(t, stdin.Close())
	require.NoError(t, child.Wait())
	require.NoError(t, loopback.StartOn(port, func(string) error { return nil }), "the port is free once its holder has exited")
}

// TestClosedRefusesAndStaysReserved: Closed's address refuses connections, and its port stays
// reserved: another Closed, or a server Start places, never gets it.
func TestClosedRefusesAndStaysReserved(t *testing.T) {
	a, err := loopback.Closed()
	require.NoError(t, err)
	b, err := loopback.Closed()
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	for _, addr := range []string{a, b} {
		_, err := net.Dial("tcp", addr)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "dial %s", addr)
		_, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		p, err := strconv.Atoi(port)
		require.NoError(t, err)
		assert.ErrorIs(t, loopback.StartOn(p, func(string) error { return nil }), loopback.ErrReserved)
	}
}
