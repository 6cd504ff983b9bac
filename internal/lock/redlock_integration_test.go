//go:build integration

package lock

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/loopback"
)

// The RedLock tests against real redis-server processes, which the test starts itself on
// free ports (never 7001-7005, which scripts/services.sh owns) and kills when it ends, as
// redsync's tests do. A node is taken down with SIGKILL (and restarted empty on its port),
// or hung with SIGSTOP: the process keeps its socket open and answers nothing, the case the
// node timeout exists for.

// redisProc is one redis-server process started by a test.
type redisProc struct {
	port int
	dir  string
	cmd  *exec.Cmd
}

// realNodes starts n redis-server processes, without persistence, and stops them when t ends.
func realNodes(t *testing.T, n int) (redNodes, []*redisProc) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not on PATH: install Debian's redis-server package " +
			"(apt-get install redis-server; scripts/services.sh up installs it too)")
	}
	var nodes redNodes
	var procs []*redisProc
	for range n {
		p := &redisProc{port: freePort(t), dir: t.TempDir()}
		p.start(t)
		t.Cleanup(func() { p.kill(t) })
		procs = append(procs, p)
		nodes.addrs = append(nodes.addrs, "127.0.0.1:"+strconv.Itoa(p.port))
	}
	return nodes, procs
}

// freePort is a free port below the ephemeral port range (loopback): a node is restarted on
// its port, which, chosen by the kernel, could meanwhile have gone to another test's client
// socket ("address already in use").
func freePort(t *testing.T) int {
	t.Helper()
	var port int
	require.NoError(t, loopback.Start(func(addr string) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		return ln.Close()
	}))
	return port
}

// start runs redis-server on p's port and waits until it answers PING. It polls the port
// with plain dials first: go-redis backs off between refused dials, which would make every
// restart cost a tenth of a second.
func (p *redisProc) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(p.port),
		"--save", "", "--appendonly", "no", "--dir", p.dir, "--daemonize", "no")
	require.NoError(t, p.cmd.Start(), "start redis-server on port %d", p.port)
	addr := "127.0.0.1:" + strconv.Itoa(p.port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.Close()
			break
		}
		if time.Now().After(deadline) {
			p.kill(t)
			t.Fatalf("redis-server on port %d did not listen within 10s: %v", p.port, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Ping(ctx).Err(), "PING redis-server on port %d", p.port)
}

// kill stops the process for good (SIGKILL; a stopped process dies too) and reaps it.
func (p *redisProc) kill(t *testing.T) {
	t.Helper()
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

func (p *redisProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig), "signal %s to redis-server on port %d", sig, p.port)
}

// TestRedLockQuorumReal: for every subset of five real nodes taken down, and for subsets
// hung on both sides of the quorum, acquisition succeeds exactly when a quorum is reachable.
// The two run side by side, each on its own five processes, and each case with a process of
// its own (fresh clients, as go-redis's dial circuit breaker would otherwise remember one
// case's down node in the next). A killed node refuses at once (the clients do not redial);
// a stopped one is silent, and its client ignores context deadlines and gives up only after
// its read timeout, hungFor: only the node timeout stands between it and the caller.
func TestRedLockQuorumReal(t *testing.T) {
	t.Parallel()
	// Each case with hung nodes waits out the node timeout once or twice, so the hung mode
	// takes the cases at the quorum's edges, not all 32.
	hungCases := map[int]bool{0b00000: true, 0b00100: true, 0b10010: true, 0b10101: true, 0b11111: true}
	modes := []struct {
		name          string
		cases         func(c quorumCase) bool
		fail, recover func(t *testing.T, p *redisProc)
	}{
		{"down",
			func(quorumCase) bool { return true },
			func(t *testing.T, p *redisProc) { p.kill(t) },
			func(t *testing.T, p *redisProc) { p.start(t) }}, // empty, on the same port
		{"hung",
			func(c quorumCase) bool { return hungCases[c.mask] },
			func(t *testing.T, p *redisProc) { p.signal(t, syscall.SIGSTOP) },
			func(t *testing.T, p *redisProc) { p.signal(t, syscall.SIGCONT) }},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			nodes, procs := realNodes(t, redNodeCount)
			for _, c := range quorumCases(redNodeCount) {
				if !m.cases(c) {
					continue
				}
				unavailable := func(f func(*testing.T, *redisProc)) {
					for i, p := range procs {
						if c.mask&(1<<i) != 0 {
							f(t, p)
						}
					}
				}
				l := nodes.family(t, RedLockOptions{}, nil).RedLock("quorum-" + m.name + "-" + c.String())
				unavailable(m.fail)
				checkQuorum(t, nodes, l, c)
				unavailable(m.recover)
			}
		})
	}
}

// TestRedLockExcludesReal: goroutines of two processes never hold the lock at once.
func TestRedLockExcludesReal(t *testing.T) {
	nodes, _ := realNodes(t, redNodeCount)
	opts := RedLockOptions{RetryDelay: time.Millisecond}
	checkExclusion(t, [2]*RedLocks{nodes.family(t, opts, nil), nodes.family(t, opts, nil)}, 8, 25)
}

// TestRedLockValidityRunsOutReal: once its validity has run out a lock is not held, though
// its keys may outlive it by the drift allowance: Valid says so, another process takes it
// when the keys expire, and the late Unlock returns ErrNotHeld without touching the new
// holder's keys.
func TestRedLockValidityRunsOutReal(t *testing.T) {
	ctx := context.Background()
	nodes, _ := realNodes(t, redNodeCount)
	a := nodes.family(t, RedLockOptions{RetryDelay: time.Millisecond}, nil).RedLock("expiry")
	b := nodes.family(t, RedLockOptions{RetryDelay: time.Millisecond}, nil).RedLock("expiry")

	// Long enough for each of five real nodes to answer within its share (the node timeout is
	// capped below the lease) on a loaded machine, and for b's attempt while a's keys live.
	const lease = time.Second
	ok, err := a.TryLock(ctx, lease)
	require.NoError(t, err)
	require.True(t, ok)
	until := a.Until()
	require.True(t, a.Valid(), "just taken")
	ok, err = b.TryLock(ctx, time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "another process while a's keys live")

	time.Sleep(time.Until(until)) // to the known end of validity, not a guess
	assert.False(t, a.Valid(), "Valid after Until")

	ok, err = b.TryLockWait(ctx, 10*time.Second, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "b takes the lock once a's keys expire")
	bValue := heldValue(b)
	// b may have found one of a's keys not yet expired: it holds a quorum, maybe not all.
	bHolds := holding(nodes.values(t, b.Key()), bValue)
	require.GreaterOrEqual(t, bHolds, 3)

	err = a.Unlock(ctx)
	require.ErrorIs(t, err, ErrNotHeld)
	assert.Equal(t, bHolds, holding(nodes.values(t, b.Key()), bValue), "a's late Unlock must leave b's keys")
	require.NoError(t, b.Unlock(ctx))
}

// restart kills each process and starts it again, empty, on its port.
func restart(t *testing.T, procs []*redisProc) {
	t.Helper()
	for _, p := range procs {
		p.kill(t)
		p.start(t)
	}
}

// TestRedLockNodeRestartReal: a node that comes back empty (no persistence) is a node that
// forgot; as long as a quorum remembers, the lock stays held and excludes others.
func TestRedLockNodeRestartReal(t *testing.T) {
	ctx := context.Background()
	nodes, procs := realNodes(t, redNodeCount)
	a := nodes.family(t, RedLockOptions{}, nil).RedLock("restart")
	b := nodes.family(t, RedLockOptions{}, nil).RedLock("restart")
	mustTake(t, a, time.Minute)
	restart(t, procs[:2])
	ok, err := b.TryLock(ctx, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "two forgetful nodes are not a quorum for b")
	require.NoError(t, a.Unlock(ctx), "three nodes still held a's keys")

	// A third restart would hand the lock to b while a still holds it: that is the
	// lesson of delayed restarts, not something this test should pretend away.
	mustTake(t, a, time.Minute)
	restart(t, procs[:3])
	ok, err = b.TryLock(ctx, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "three nodes forgot: b gets a quorum while a believes it holds the lock")
	assert.True(t, a.Valid(), "a cannot tell")
	require.ErrorIs(t, a.Unlock(ctx), ErrNotHeld, "only two nodes still held a's keys")
	assert.Equal(t, 3, holding(nodes.values(t, b.Key()), heldValue(b)), "a's Unlock must leave b's keys")
	require.NoError(t, b.Unlock(ctx))
}
