package lock

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/loopback"
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

// sessionUnderTest is a zkSession with one hold in session 42, and the paths it dropped. The
// session asked for a day; the server granted the test's timeout.
type sessionUnderTest struct {
	s       *zkSession
	granted time.Duration
	lost    <-chan struct{} // the hold's
	waiters <-chan struct{} // what a waiter of the first epoch sleeps on
	dropped chan []string
	read    time.Time
}

func newSessionUnderTest(t *testing.T, granted time.Duration, lastRead time.Time) *sessionUnderTest {
	t.Helper()
	u := &sessionUnderTest{granted: granted, dropped: make(chan []string, 1), read: lastRead}
	u.s = newZKSession(24*time.Hour, func() time.Time { return u.read }, func(p []string) { u.dropped <- p })
	u.s.event(zk.StateConnecting, 0, u.granted)
	u.s.event(zk.StateHasSession, 42, u.granted)
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
			u.s.event(zk.StateDisconnected, 0, u.granted)
			u.s.event(zk.StateExpired, 0, u.granted)
		}, false, false},
		{"replaced by a new session", func(u *sessionUnderTest) {
			u.s.event(zk.StateDisconnected, 0, u.granted)
			u.s.event(zk.StateHasSession, 43, u.granted)
		}, false, true},
		{"disconnected past the deadline", func(u *sessionUnderTest) {
			u.read = time.Now().Add(-time.Hour)
			u.s.event(zk.StateDisconnected, 0, u.granted)
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

// TestZKSessionDeadline: a disconnection ends the holds two thirds of the session timeout the
// server granted (not the day asked for) after the last bytes from the server, unless the
// same session is back by then.
func TestZKSessionDeadline(t *testing.T) {
	t.Run("back in time", func(t *testing.T) {
		u := newSessionUnderTest(t, time.Hour, time.Now())
		u.s.event(zk.StateDisconnected, 0, u.granted)
		u.s.event(zk.StateConnecting, 0, u.granted)
		u.s.event(zk.StateConnected, 0, u.granted)
		u.s.event(zk.StateHasSession, 42, u.granted)
		assert.False(t, isClosed(u.lost), "a session back before its deadline lost its holds")
		_, held := u.s.release("k")
		assert.True(t, held)
	})
	t.Run("not back", func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		start := time.Now()
		u := newSessionUnderTest(t, timeout, start)
		u.s.event(zk.StateDisconnected, 0, u.granted)
		u.s.event(zk.StateConnecting, 0, u.granted)
		require.True(t, closedWithin(u.lost, 10*time.Second), "holds not lost by the granted timeout")
		assert.GreaterOrEqual(t, time.Since(start), timeout*2/3, "holds lost before the deadline")
		assert.Equal(t, []string{"/l/n1"}, <-u.dropped)
		// The same session coming back later changes nothing for the holds already lost,
		// and new holds are recorded in it.
		u.s.event(zk.StateHasSession, 42, u.granted)
		epoch, _, _ := u.s.current()
		assert.True(t, u.s.register("k", "/l/n3", 9, epoch))
	})
}

// TestZKSessionExpiredStopsTheDeadline: a disconnection arms the deadline of the holds, then
// the server reports the session expired, which loses them at once. The deadline must not
// fire later (the reconnect failing, no new session to stop it) and lose the next epoch's
// holds, or wake its waiters, a second time for the same end of the session.
func TestZKSessionExpiredStopsTheDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond // the deadline: 200 ms after the last read
	u := newSessionUnderTest(t, timeout, time.Now())
	u.s.event(zk.StateDisconnected, 0, u.granted)
	u.s.event(zk.StateExpired, 0, u.granted)
	require.True(t, isClosed(u.lost), "the expiry lost the hold")
	epoch, waiters, _ := u.s.current()
	assert.False(t, closedWithin(waiters, 3*timeout), "a second loss after the expiry, by the disconnection's deadline")
	after, _, _ := u.s.current()
	assert.Equal(t, epoch, after, "epoch")
	assert.Empty(t, u.dropped, "nodes dropped")
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
	addr, err := loopback.Closed()
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := NewZooKeeperClient(ctx, []string{addr}, ZooKeeperOptions{})
	require.Error(t, err)
	assert.Nil(t, c)
	assert.Contains(t, err.Error(), addr)
	assert.Contains(t, err.Error(), "is ZooKeeper running")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// zkConnectReply is a server's connect reply: length, protocolVersion, timeOut (ms),
// sessionId, passwd.
func zkConnectReply(timeoutMs int32, id int64) []byte {
	body := binary.BigEndian.AppendUint32(nil, 0)
	body = binary.BigEndian.AppendUint32(body, uint32(timeoutMs))
	body = binary.BigEndian.AppendUint64(body, uint64(id))
	body = binary.BigEndian.AppendUint32(body, 16)
	body = append(body, make([]byte, 16)...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestZKGrantedTimeout(t *testing.T) {
	full := zkConnectReply(4000, 42)
	tests := []struct {
		name   string
		stream []byte
		want   time.Duration
		done   bool
	}{
		{"granted", full, 4 * time.Second, true},
		{"followed by a reply", append(append([]byte(nil), full...), 0, 0, 0, 16), 4 * time.Second, true},
		{"up to the session id", full[:20], 4 * time.Second, true},
		{"short of the session id", full[:19], 0, false},
		{"expired: no session", zkConnectReply(4000, 0), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, done := zkGrantedTimeout(tt.stream)
			assert.Equal(t, tt.done, done, "done")
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestZKServerConnRecordsGranted: the client learns the granted timeout from the connect
// reply however the reads split it, and from the reply only: a later frame that looks like
// one changes nothing.
func TestZKServerConnRecordsGranted(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	var last, granted atomic.Int64
	conn := &zkServerConn{Conn: client, last: &last, granted: &granted}
	go func() {
		defer server.Close()
		for _, b := range append(zkConnectReply(2500, 42), zkConnectReply(9000, 43)...) {
			if _, err := server.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	_, err := io.ReadAll(conn)
	require.NoError(t, err)
	assert.Equal(t, 2500*time.Millisecond, time.Duration(granted.Load()))
	assert.NotZero(t, last.Load(), "the time of the last read")
}
