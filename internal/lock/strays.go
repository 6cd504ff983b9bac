package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// strayRetry is how often the stray locks are tried again.
const strayRetry = 50 * time.Millisecond

// strays are the locks a SET NX may have taken although its reply was lost, and whose
// immediate compare-and-delete failed too (Redis was slow or unreachable for longer than
// cleanupTimeout), and the locks whose Unlock got no answer. A new connection cannot help while Redis's replies are late, since go-redis
// waits for HELLO's reply before it sends anything on one. One goroutine per SimpleRedisLocks
// tries them again every strayRetry, until a compare-and-delete is answered (the key is then
// gone or someone else's) or the lock has expired by itself, and exits when none is left. So a
// Redis that stalls for seconds strands a user's lock for about as long as it stalls, not for
// a whole TTL.
type strays struct {
	client RedisClient

	mu      sync.Mutex
	pending map[stray]time.Time // when the lock expires by itself, at the latest
	running bool
}

type stray struct{ key, value string }

func newStrays(client RedisClient) *strays {
	return &strays{client: client, pending: map[stray]time.Time{}}
}

// add remembers a lock whose cleanup failed, and starts the retries if they are not running.
func (s *strays) add(key, value string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[stray{key, value}] = expires
	if !s.running {
		s.running = true
		go s.run()
	}
}

// holds reports whether the lock key may still hold value from a lost SET. The owner of
// value must not SET it again meanwhile: a compare-and-delete of the stray still on its way
// to Redis would delete the new lock, which has the same value.
func (s *strays) holds(key, value string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[stray{key, value}]
	return ok
}

func (s *strays) run() {
	for {
		time.Sleep(strayRetry)
		s.mu.Lock()
		now := time.Now()
		batch := make([]stray, 0, len(s.pending))
		for st, expires := range s.pending {
			if now.After(expires) {
				delete(s.pending, st)
				continue
			}
			batch = append(batch, st)
		}
		if len(batch) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		// One first: while Redis is away, a round costs one attempt, not one per stray.
		if s.retry(batch[:1]) {
			s.retry(batch[1:])
		}
	}
}

// strayConcurrency bounds the compare-and-deletes of one round in flight at once: enough that
// a round takes a fraction of a round trip per stray, few enough that the thousands a long
// outage leaves behind do not take the pool's connections from the orders when Redis is back.
const strayConcurrency = 4

// retry sends one compare-and-delete per stray, forgetting those that were answered, and
// reports whether all were.
func (s *strays) retry(batch []stray) bool {
	var failed atomic.Bool
	sem := make(chan struct{}, strayConcurrency)
	var wg sync.WaitGroup
	for _, st := range batch {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			// A closed client (the service is shutting down) can never clean up: forget it.
			if err := unlockScript.Run(ctx, s.client, []string{st.key}, st.value).Err(); err != nil && !errors.Is(err, redis.ErrClosed) {
				failed.Store(true)
				return // Redis is still away: the next round tries again
			}
			s.mu.Lock()
			delete(s.pending, st)
			s.mu.Unlock()
		}()
	}
	wg.Wait()
	return !failed.Load()
}
