package lock

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkSession follows one ZooKeeper connection's session, as the connection's event callback
// reports it, and keeps the holds taken in it. go-zookeeper/zk says nothing to a lock holder
// when the session ends: on expiry it quietly opens a new session, and the ephemeral lock
// nodes of the old one are gone. zkSession turns every end of a session into a lost lock.
//
// A session is lost, as far as the holds are concerned, when
//   - the server reports it expired (StateExpired, seen when the client reconnects),
//   - the client has a session with another id (the old one ended unseen), or
//   - the connection has been down too long to be sure the server still keeps it: the server
//     expires a session one session timeout (the one it granted, which may be shorter than
//     the one asked for) after it last heard from the client, and the
//     client last heard from the server at lastRead. Allowing a third of the timeout for the
//     round trip of that last exchange (the assumption go-zookeeper's pings already make:
//     one every third of the timeout, and a connection silent for two thirds is dead), the
//     earliest the server can expire the session is lastRead + 2/3 of the timeout. That is
//     when the holds are declared lost, unless the session is back by then.
//
// Each loss ends the holds (sessionHolds).
type zkSession struct {
	lastRead func() time.Time // when the client last received anything from the server
	dropped  func(paths []string)

	*sessionHolds // the holds, with their node paths

	mu        sync.Mutex
	id        int64         // the session the holds live in; 0 before the first
	connected bool          // the session is established on a live connection
	timeout   time.Duration // the session timeout the server granted, the one asked for before
	gen       uint64
	closed    bool
	timer     *time.Timer
}

// newZKSession returns the tracker of a session asking for the given timeout, which it assumes
// until the server grants one (see event). dropped receives the nodes of holds lost while
// their session may still live (the connection was down too long): they are lost to their
// holders, and must not block everyone else for as long as the session lasts.
func newZKSession(timeout time.Duration, lastRead func() time.Time, dropped func(paths []string)) *zkSession {
	return &zkSession{
		sessionHolds: newSessionHolds(),
		timeout:      timeout,
		lastRead:     lastRead,
		dropped:      dropped,
	}
}

// event takes one of the connection's session events; id is the connection's session id
// and timeout the session timeout the server granted, when they were reported (with
// StateHasSession).
func (s *zkSession) event(state zk.State, id int64, timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	switch state {
	case zk.StateHasSession:
		s.connected = true
		s.stopDeadlineLocked()
		if s.id != 0 && id != s.id {
			s.loseLocked(false) // a new session: the old one ended unseen
		}
		s.id = id
		s.timeout = timeout
	case zk.StateExpired:
		s.connected = false
		s.stopDeadlineLocked() // this is the loss it waited for; it must not come twice
		s.loseLocked(false)    // its nodes are gone with it
		s.id = 0
	case zk.StateDisconnected:
		if !s.connected || s.id == 0 {
			return
		}
		s.connected = false
		gen := s.gen
		wait := time.Until(s.lastRead().Add(s.timeout * 2 / 3))
		s.timer = time.AfterFunc(max(wait, 0), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.closed && !s.connected && s.gen == gen {
				s.loseLocked(true)
			}
		})
	}
}

// stopDeadlineLocked disarms the deadline of a disconnection, including one whose timer has
// fired already and waits for s.mu (the generation tells it). s.mu is held.
func (s *zkSession) stopDeadlineLocked() {
	s.gen++
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// loseLocked ends every hold and wakes the waiters. alive says the session may still live,
// so the holds' nodes must be deleted. s.mu is held.
func (s *zkSession) loseLocked(alive bool) {
	paths := s.lose()
	if alive && len(paths) > 0 && s.dropped != nil {
		s.dropped(paths)
	}
}

// sessionTimeout returns the session timeout the server granted the current session (the one
// asked for before the first).
func (s *zkSession) sessionTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timeout
}

// isConnected reports whether the session is established on a live connection.
func (s *zkSession) isConnected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected && !s.closed
}

// close ends every hold (closing the connection closes the session and deletes the nodes)
// and ignores later events.
func (s *zkSession) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.sessionHolds.close()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
}
