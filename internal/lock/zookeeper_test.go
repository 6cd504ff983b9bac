package lock

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ZooKeeper lock's parts that need no server: the order of the queue, and how session
// events end holds. The lock itself runs against a real ZooKeeper in
// zookeeper_integration_test.go.

func TestZKQueueOrdersBySequence(t *testing.T) {
	children := []string{
		"_c_b2-lock-0000000012",
		"stranger",
		"_c_a1-lock-0000000003",
		"_c_c3-lock-0000000100",
		"_c_d4-lock-notanumber",
	}
	got := zkQueue(children)
	want := []string{"_c_a1-lock-0000000003", "_c_b2-lock-0000000012", "_c_c3-lock-0000000100"}
	assert.Equal(t, want, got)
}

func TestZKSequence(t *testing.T) {
	tests := []struct {
		name string
		want int64
		ok   bool
	}{
		{"_c_0f4c2f6e-3d0e-4a51-9b8e-1a2b3c4d5e6f-lock-0000000007", 7, true},
		{"lock-0000000001", 0, false}, // not ours: no "-lock-"
		{"_c_x-lock-", 0, false},
	}
	for _, tt := range tests {
		got, ok := zkSequence(tt.name)
		assert.Equal(t, tt.ok, ok, tt.name)
		assert.Equal(t, tt.want, got, tt.name)
	}
}

// sessionUnderTest is a zkSession with one hold in session 42, and the paths it dropped.
type sessionUnderTest struct {
	s       *zkSession
	lost    <-chan struct{} // the hold's
	waiters <-chan struct{} // what a waiter of the first epoch sleeps on
	dropped chan []string
	read    time.Time
}

func newSessionUnderTest(t *testing.T, timeout time.Duration, lastRead time.Time) *sessionUnderTest {
	t.Helper()
	u := &sessionUnderTest{dropped: make(chan []string, 1), read: lastRead}
	u.s = newZKSession(timeout, func() time.Time { return u.read }, func(p []string) { u.dropped <- p })
	u.s.event(zk.StateConnecting, 0)
	u.s.event(zk.StateHasSession, 42)
	epoch, waiters, ok := u.s.current()
	require.True(t, ok)
	require.True(t, u.s.register("k", "/l/n1", 7, epoch))
	u.lost, _ = u.s.hold("k")
	u.waiters = waiters
	t.Cleanup(u.s.close)
	return u
}

func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestZKSessionLosesHolds(t *testing.T) {
	tests := []struct {
		name      string
		events    func(u *sessionUnderTest)
		dropped   bool // the session may live on: the hold's node must be deleted
		connected bool // Connected afterwards: only a new session is
	}{
		{"expired", func(u *sessionUnderTest) {
			u.s.event(zk.StateDisconnected, 0)
			u.s.event(zk.StateExpired, 0)
		}, false, false},
		{"replaced by a new session", func(u *sessionUnderTest) {
			u.s.event(zk.StateDisconnected, 0)
			u.s.event(zk.StateHasSession, 43)
		}, false, true},
		{"disconnected past the deadline", func(u *sessionUnderTest) {
			u.read = time.Now().Add(-time.Hour)
			u.s.event(zk.StateDisconnected, 0)
		}, true, false},
		{"closed", func(u *sessionUnderTest) { u.s.close() }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newSessionUnderTest(t, time.Hour, time.Now())
			epoch, _, _ := u.s.current()
			require.True(t, u.s.isConnected())
			tt.events(u)
			assert.Equal(t, tt.connected, u.s.isConnected(), "connected")
			require.True(t, closedWithin(u.lost, 10*time.Second), "the hold's Lost channel was not closed")
			assert.True(t, isClosed(u.waiters), "waiters of the old epoch were not woken")
			_, held := u.s.release("k")
			assert.False(t, held, "a lost hold is still released as held")
			lost, token := u.s.hold("k")
			assert.True(t, isClosed(lost), "Lost of a goroutine holding nothing must be closed")
			assert.Zero(t, token)
			assert.False(t, u.s.register("k2", "/l/n2", 8, epoch), "an acquisition that straddled the loss was recorded")
			if tt.dropped {
				assert.Equal(t, []string{"/l/n1"}, <-u.dropped)
			} else {
				assert.Empty(t, u.dropped)
			}
		})
	}
}

// TestZKSessionDeadline: a disconnection ends the holds two thirds of a session timeout after
// the last bytes from the server, unless the same session is back by then.
func TestZKSessionDeadline(t *testing.T) {
	t.Run("back in time", func(t *testing.T) {
		u := newSessionUnderTest(t, time.Hour, time.Now())
		u.s.event(zk.StateDisconnected, 0)
		u.s.event(zk.StateConnecting, 0)
		u.s.event(zk.StateConnected, 0)
		u.s.event(zk.StateHasSession, 42)
		assert.False(t, isClosed(u.lost), "a session back before its deadline lost its holds")
		_, held := u.s.release("k")
		assert.True(t, held)
	})
	t.Run("not back", func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		start := time.Now()
		u := newSessionUnderTest(t, timeout, start)
		u.s.event(zk.StateDisconnected, 0)
		u.s.event(zk.StateConnecting, 0)
		require.True(t, closedWithin(u.lost, 10*time.Second))
		assert.GreaterOrEqual(t, time.Since(start), timeout*2/3, "holds lost before the deadline")
		assert.Equal(t, []string{"/l/n1"}, <-u.dropped)
		// The same session coming back later changes nothing for the holds already lost,
		// and new holds are recorded in it.
		u.s.event(zk.StateHasSession, 42)
		epoch, _, _ := u.s.current()
		assert.True(t, u.s.register("k", "/l/n3", 9, epoch))
	})
}

func TestZKSessionReentry(t *testing.T) {
	u := newSessionUnderTest(t, time.Hour, time.Now())
	require.True(t, u.s.reenter("k"))
	require.False(t, u.s.reenter("other"))
	h, held := u.s.release("k")
	assert.True(t, held)
	assert.Nil(t, h, "an inner release must not delete the node")
	_, token := u.s.hold("k")
	assert.Equal(t, int64(7), token)
	h, held = u.s.release("k")
	assert.True(t, held)
	require.NotNil(t, h)
	assert.Equal(t, "/l/n1", h.at)
	_, held = u.s.release("k")
	assert.False(t, held)
	assert.False(t, isClosed(u.lost), "a released hold is not a lost one")
}

// TestNewZooKeeperClientUnreachable: nothing listening fails the constructor, naming the
// address, instead of the first lock.
func TestNewZooKeeperClientUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := NewZooKeeperClient(ctx, []string{addr}, ZooKeeperOptions{})
	require.Error(t, err)
	assert.Nil(t, c)
	assert.Contains(t, err.Error(), addr)
	assert.Contains(t, err.Error(), "is ZooKeeper running")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
