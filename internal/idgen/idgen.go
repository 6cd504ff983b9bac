// Package idgen hands out order ids that never repeat, across instances and across a Redis that
// restarts empty: int64, positive, ordered by the Redis server's clock, one round trip each.
//
// An id is (seconds since Epoch) << 32 | seq, the layout of hmdp's RedisIdWorker. Where that
// worker takes seq from a per-day INCR counter and the time from each process's own clock, here
// one script (scripts/lua/next_id.lua) takes both from the Redis server: the time from TIME, so
// every instance reads the same clock, and seq = (microsecond within the second) << 12, or one
// more than the last seq of that second if that is higher. The day counter starts again at 1
// when Redis restarts empty, and so repeated the ids of the current second; a sequence that
// starts at the clock's microsecond starts above every id the lost state issued.
package idgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/scripts/lua"
)

// Epoch is the zero of the id's time part: 2022-01-01T00:00:00Z.
var Epoch = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrTimeRange is returned when the Redis server's clock is outside the 2^31 seconds after
// Epoch that a positive int64 id can hold (2022 to 2090).
var ErrTimeRange = errors.New("idgen: redis clock outside the id's time range")

var nextScript = redis.NewScript(lua.NextID)

// Generator hands out the ids of one name; generators of the same name on the same Redis,
// in any number of processes, share one sequence.
type Generator struct {
	client redis.Scripter
	key    string
}

// New returns the generator for name ("order"); its state is the Redis hash idgen:{name}.
func New(client redis.Scripter, name string) *Generator {
	return &Generator{client: client, key: "idgen:" + name}
}

// Next returns a new id, greater than every id the generator's Redis state has issued, or an
// error wrapping the Redis error, or ErrTimeRange.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	return g.reserve(ctx, 1)
}

// MaxBlock is the most ids one round trip reserves (next_id.lua's bound).
const MaxBlock = 4096

// reserve reserves n consecutive ids, 1 <= n <= MaxBlock, and returns the first.
func (g *Generator) reserve(ctx context.Context, n int) (int64, error) {
	parts, err := nextScript.Run(ctx, g.client, []string{g.key}, n).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("next id: %w", err)
	}
	if len(parts) != 2 {
		return 0, fmt.Errorf("next id: script returned %d values, want 2", len(parts))
	}
	sec, seq := parts[0]-Epoch.Unix(), parts[1]
	if sec < 0 || sec >= 1<<31 {
		return 0, fmt.Errorf("next id: %w: %s", ErrTimeRange, time.Unix(parts[0], 0).UTC())
	}
	return sec<<32 | seq, nil
}

// ReserveTimeout bounds one reservation of a block: its round trip runs on a context of its
// own, not on the caller's that needed it (Blocks.Next).
const ReserveTimeout = time.Second

// Blocks hands out the ids of one name like Generator, from blocks it reserves in one round
// trip each: at most one call in Size reaches Redis. The ids stay unique across every Blocks
// and Generator of the name, and above everything an empty restart of Redis lost; what a block
// gives up is the order: an id is at most MaxAge older than the moment it is issued, and ids
// of two instances interleave within that. A block not used up within MaxAge is dropped (its
// ids are never issued), so an id's time part never lags by more than MaxAge.
type Blocks struct {
	gen     *Generator
	size    int
	maxAge  time.Duration
	timeout time.Duration // a reservation's own bound (ReserveTimeout)
	now     func() time.Time

	mu       sync.Mutex
	next     int64        // the next id to issue
	left     int          // ids left in the block
	fetched  time.Time    // when the block was reserved
	inflight *reservation // the reservation under way, nil when none
}

// reservation is one round trip for a block; done is closed when it has ended, err set before.
type reservation struct {
	done chan struct{}
	err  error
}

// NewBlocks returns the block-reserving generator for name; size is clamped to 1..MaxBlock
// and maxAge defaults to one second when not positive.
func NewBlocks(client redis.Scripter, name string, size int, maxAge time.Duration) *Blocks {
	if maxAge <= 0 {
		maxAge = time.Second
	}
	return &Blocks{gen: New(client, name), size: min(max(size, 1), MaxBlock), maxAge: maxAge, timeout: ReserveTimeout,
		now: time.Now}
}

// Next returns a new id. It reaches Redis only when the block is used up or too old: then one
// reservation runs, on its own context bounded by ReserveTimeout, and every caller that needs
// it waits for it within its own context. The reservation does not end with the caller that
// started it: on a slow Redis the callers that queue for a block are those nearest their
// deadlines, and a reservation bound to one of their contexts would run out with it, every
// time, while Redis answers within the bound (a latency spike's queue that never drains).
// It returns the reservation's error to the callers that waited for it, or an error wrapping
// the caller's context's when that ends first.
func (b *Blocks) Next(ctx context.Context) (int64, error) {
	for {
		b.mu.Lock()
		if b.left > 0 && b.now().Sub(b.fetched) <= b.maxAge {
			id := b.next
			b.next++
			b.left--
			b.mu.Unlock()
			return id, nil
		}
		r := b.inflight
		if r == nil {
			r = &reservation{done: make(chan struct{})}
			b.inflight = r
			go b.reserve(r)
		}
		b.mu.Unlock()
		select {
		case <-r.done:
			if r.err != nil {
				return 0, r.err
			}
			// The block is there, unless the callers before this one used it up: then the
			// next round starts another reservation.
		case <-ctx.Done():
			return 0, fmt.Errorf("next id: %w", ctx.Err())
		}
	}
}

// reserve runs r: one round trip for a block, bounded by b.timeout.
func (b *Blocks) reserve(r *reservation) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	first, err := b.gen.reserve(ctx, b.size)
	b.mu.Lock()
	if err == nil {
		b.next, b.left, b.fetched = first, b.size, b.now()
	}
	b.inflight = nil
	b.mu.Unlock()
	r.err = err
	close(r.done)
}
