package lock

import "sync"

// sessionHolds keeps the holds taken in one session or lease: a ZooKeeperClient's session, an
// EtcdClient's lease. Per lock and owner it records where the hold lives (the node or key),
// its fencing token, how many times the owner has taken it, and a channel closed when it is
// lost. Each loss of the session bumps the epoch, ends every hold and closes the channel
// waiters sleep on; a hold is recorded only by an acquisition that started in the current
// epoch, so one that straddles a loss starts again instead of holding a node or key that may
// be gone.
type sessionHolds struct {
	mu     sync.Mutex
	epoch  uint64
	lost   chan struct{} // closed at the next loss
	closed bool
	m      map[string]*sessionHold
}

// sessionHold is one owner's hold of one lock name.
type sessionHold struct {
	at    string // the node or key that holds the lock
	token int64
	count int
	lost  chan struct{}
}

func newSessionHolds() *sessionHolds {
	return &sessionHolds{epoch: 1, lost: make(chan struct{}), m: make(map[string]*sessionHold)}
}

// current returns the epoch an acquisition starts in and the channel closed when it ends;
// ok is false once closed.
func (s *sessionHolds) current() (epoch uint64, lost <-chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch, s.lost, !s.closed
}

// reenter counts one more hold for key and reports true when the owner already holds it.
func (s *sessionHolds) reenter(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.m[key]; h != nil {
		h.count++
		return true
	}
	return false
}

// register records a first hold of key, living at at with the given token, by an
// acquisition that started in epoch. It reports false when the session was lost since.
func (s *sessionHolds) register(key, at string, token int64, epoch uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.epoch != epoch {
		return false
	}
	s.m[key] = &sessionHold{at: at, token: token, count: 1, lost: make(chan struct{})}
	return true
}

// release ends one hold of key. held is false when there was none (never taken, or lost);
// last is the hold that ended when that was the last one, nil otherwise.
func (s *sessionHolds) release(key string) (last *sessionHold, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.m[key]
	if h == nil {
		return nil, false
	}
	h.count--
	if h.count > 0 {
		return nil, true
	}
	delete(s.m, key)
	return h, true
}

// hold returns the lost channel and token of key's hold: a closed channel and 0 when none.
func (s *sessionHolds) hold(key string) (lost <-chan struct{}, token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.m[key]; h != nil {
		return h.lost, h.token
	}
	return closedChan, 0
}

// lose ends every hold and wakes the waiters, and returns where the holds lived.
func (s *sessionHolds) lose() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	close(s.lost)
	s.lost = make(chan struct{})
	var at []string
	for key, h := range s.m {
		close(h.lost)
		delete(s.m, key)
		at = append(at, h.at)
	}
	return at
}

// close ends every hold; no hold is recorded after it.
func (s *sessionHolds) close() {
	s.lose()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}
