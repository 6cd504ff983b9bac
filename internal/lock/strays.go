package lock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/scripts/lua"
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

// strayChunk is how many compare-and-deletes one round trip carries. A round sends its strays
// in one pipeline of chunks: with Redis back but each reply 50 ms away (make chaos's
// redis-latency), forty strays then clear in one round trip after the probe, where one
// compare-and-delete at a time, four in flight, took ten round trips and a new connection's
// handshake each (about 3 s).
const strayChunk = 256

// retry sends one compare-and-delete per stray, pipelined, forgetting those that were
// answered, and reports whether all were.
func (s *strays) retry(batch []stray) bool {
	ok := true
	for i := 0; i < len(batch); i += strayChunk {
		chunk := batch[i:min(len(batch), i+strayChunk)]
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		cmds := make([]*redis.Cmd, len(chunk))
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j, st := range chunk {
				// The script's source, not its hash: a Redis that restarted empty has no
				// script cache, and a NOSCRIPT inside a pipeline is not retried.
				cmds[j] = p.Eval(ctx, lua.Unlock, []string{st.key}, st.value)
			}
			return nil
		})
		cancel()
		// A closed client (the service is shutting down) can never clean up: forget them.
		closed := errors.Is(err, redis.ErrClosed)
		s.mu.Lock()
		for j, st := range chunk {
			if e := cmds[j].Err(); closed || e == nil || errors.Is(e, redis.ErrClosed) {
				delete(s.pending, st)
				continue
			}
			ok = false // Redis is still away: the next round tries again
		}
		s.mu.Unlock()
	}
	return ok
}
