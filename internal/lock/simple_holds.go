package lock

import (
	"sync"
	"time"
)

// simpleHolds records which SimpleRedisLock keys this process's goroutines hold, so that the
// cleanup after a SET whose reply was lost can tell a key that SET may have taken from one
// its goroutine held before it: the value (process id and goroutine id) is the same, and
// Redis cannot tell them apart. It is the process's, not one lock's or one SimpleRedisLocks':
// a goroutine may hold the key through any SimpleRedisLock of the name, and the owner value
// names the process, not the lock.
var simpleHolds = heldKeys{m: map[heldKey]time.Time{}}

// minSweep is the size at which heldKeys first drops the holds whose lease has run out.
const minSweep = 1024

// heldKeys maps a key and owner value to the end of the lease its last grant set, as the
// granting lock's clock counts it from the grant's send.
type heldKeys struct {
	mu    sync.Mutex
	m     map[heldKey]time.Time
	sweep int // sweep the entries that ran out when the map reaches this size
}

type heldKey struct{ key, value string }

// add records a grant of key to value whose lease runs out at expires. A holder that never
// unlocks leaves an entry until a sweep finds its lease over: the sweeps run when the map
// has doubled since the last one, so they cost O(1) a grant.
func (h *heldKeys) add(key, value string, expires, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[heldKey{key, value}] = expires
	if len(h.m) < max(h.sweep, minSweep) {
		return
	}
	for k, e := range h.m {
		if !now.Before(e) {
			delete(h.m, k)
		}
	}
	h.sweep = 2 * len(h.m)
}

// drop forgets the hold of key by value: its Unlock was answered.
func (h *heldKeys) drop(key, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, heldKey{key, value})
}

// holds reports whether value holds key at now: granted, not unlocked, its lease not over.
func (h *heldKeys) holds(key, value string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[heldKey{key, value}]
	return ok && now.Before(e)
}
