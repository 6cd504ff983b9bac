//go:build integration

package lock

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The server decides the session timeout: it clamps what the client asks for to its
// minSessionTimeout and maxSessionTimeout. These tests run a ZooKeeper of their own whose
// maximum is below what the client asks, so the session the server keeps is shorter than the
// one asked for.

// zkGrantedMax is the maxSessionTimeout of the tests' own server: its minimum too, two ticks
// of 2 s.
const zkGrantedMax = 4 * time.Second

// zkAskedTimeout is what the clients under test ask for, well above zkGrantedMax.
const zkAskedTimeout = 30 * time.Second

// startZooKeeper runs a standalone ZooKeeper, as scripts/services.sh does, on a port of its
// own with maxSessionTimeout zkGrantedMax, and returns its address once it answers ruok. It
// stops when t ends.
func startZooKeeper(t *testing.T) string {
	t.Helper()
	const jar = "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("%s is missing: install Debian's zookeeper package (scripts/services.sh up zookeeper installs it)", jar)
	}
	java, err := exec.LookPath("java")
	require.NoError(t, err, "java is not on PATH: install Debian's zookeeper package, which pulls a JRE")
	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPortAddress=127.0.0.1\nclientPort=%d\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=ruok\nmaxSessionTimeout=%d\n",
		filepath.Join(dir, "data"), port, zkGrantedMax.Milliseconds())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644))
	cp := jar
	for _, j := range []string{"/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"} {
		if _, err := os.Stat(j); err == nil {
			cp += ":" + j
		}
	}
	out, err := os.Create(filepath.Join(dir, "stdout.log"))
	require.NoError(t, err)
	defer out.Close()
	cmd := exec.Command(java, "-Xms32m", "-Xmx256m", "-Dzookeeper.log.dir="+dir, "-cp", cp,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// The JVM is slow to start, the more so on a shared machine.
	deadline := time.Now().Add(60 * time.Second)
	for !zkRuok(addr) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
			t.Fatalf("ZooKeeper on %s did not answer ruok within 60 s; its output:\n%s", addr, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return addr
}

// zkRuok reports whether the server at addr answers the four-letter command ruok.
func zkRuok(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("ruok")); err != nil {
		return false
	}
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return strings.HasPrefix(line, "imok")
}

// newZKClientAt connects a client asking for the session timeout asked, at addr.
func newZKClientAt(t *testing.T, addr, root string, asked time.Duration, hooks zkHooks) *ZooKeeperClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := newZooKeeperClient(ctx, []string{addr}, ZooKeeperOptions{SessionTimeout: asked, Root: root}, hooks)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestZooKeeperGrantedTimeout: the server grants a session shorter than the client asked
// for. The client reckons with the session the server keeps: a holder cut off from the server
// is told on Lost before the server expires its session and another process takes the lock,
// and a call the server never answers is given up after the granted timeout, not the asked
// one. Both run on one server, which is slow to start.
func TestZooKeeperGrantedTimeout(t *testing.T) {
	t.Parallel()
	addr := startZooKeeper(t)

	t.Run("Lost before the server expires the session", func(t *testing.T) {
		root := serverTestRoot(t)
		tap := &zkTap{}
		t.Cleanup(func() { tap.partition(false) })
		watching := make(chan struct{}, 1)
		a := newZKClientAt(t, addr, root, zkAskedTimeout, zkHooks{dial: tap.dial})
		b := newZKClientAt(t, addr, root, zkGrantedMax, zkHooks{watching: func(string, string) {
			select {
			case watching <- struct{}{}:
			default:
			}
		}})
		la := NewZooKeeperLocks(a).ZooKeeperLock("granted")
		lb := NewZooKeeperLocks(b).ZooKeeperLock("granted")
		zkTake(t, la)
		lost := la.Lost()

		// b's goroutine takes the lock (it holds it, so it releases it too) and checks a's
		// Lost the moment it holds it.
		ctx, cancel := context.WithTimeout(context.Background(), zkAskedTimeout*2/3)
		defer cancel()
		type outcome struct {
			err      error
			aWasLost bool
		}
		got := make(chan outcome, 1)
		go func() {
			err := lb.Lock(ctx)
			aWasLost := isClosed(lost)
			if err == nil {
				err = lb.Unlock(context.Background())
			}
			got <- outcome{err, aWasLost}
		}()
		select {
		case <-watching: // b is queued behind a
		case o := <-got:
			t.Fatalf("b did not queue behind a: %v", o.err)
		}

		// a is cut off: the server expires its session zkGrantedMax after it last heard
		// from a, deleting a's node, which hands b the lock.
		tap.partition(true)
		tap.cut()
		o := <-got
		require.NoError(t, o.err, "b never got the lock: the server did not expire a's session")
		assert.True(t, o.aWasLost,
			"b holds the lock and a's Lost is still open: two holders (a reckons with the %s it asked for, "+
				"not the %s the server granted)", zkAskedTimeout, zkGrantedMax)
	})

	t.Run("a call is given up after the granted timeout", func(t *testing.T) {
		root := serverTestRoot(t)
		tap := &zkTap{}
		a := newZKClientAt(t, addr, root, zkAskedTimeout, zkHooks{dial: tap.dial})
		la := NewZooKeeperLocks(a).ZooKeeperLock("stalled")
		zkTake(t, la)
		// The server never sees the delete, and goes on answering the pings: the session
		// lives, the call is never answered.
		tap.swallow(zkOpDelete)
		ctx, cancel := context.WithTimeout(context.Background(), zkAskedTimeout/2)
		defer cancel()
		err := la.Unlock(ctx)
		assert.ErrorIs(t, err, errZKNoAnswer, "Unlock waited for an answer past the granted session timeout")
	})
}
