// Package idgen generates globally unique, roughly time-ordered order ids with Redis, as
// hmdp's RedisIdWorker does: the seconds since a fixed epoch in the high 32 bits and a
// per-day Redis counter in the low 32.
package idgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Epoch is the zero of the id's time part: 2022-01-01T00:00:00Z.
var Epoch = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrOverflow is returned when a day's counter no longer fits in 32 bits.
var ErrOverflow = errors.New("idgen: daily sequence exhausted")

// Incrementer is the part of a Redis client the generator needs.
type Incrementer interface {
	Incr(ctx context.Context, key string) *redis.IntCmd
}

// Generator hands out ids for one key prefix ("order" gives keys icr:order:2026:11:22).
type Generator struct {
	client Incrementer
	prefix string
	now    func() time.Time
}

// New returns a generator for prefix. now may be nil for time.Now.
func New(client Incrementer, prefix string, now func() time.Time) *Generator {
	if now == nil {
		now = time.Now
	}
	return &Generator{client: client, prefix: prefix, now: now}
}

// Next returns a new id: (seconds since Epoch) << 32 | INCR icr:{prefix}:{yyyy:mm:dd}.
// Ids from different instances never collide because the counter is shared in Redis.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	t := g.now().UTC()
	key := "icr:" + g.prefix + ":" + t.Format("2006:01:02")
	seq, err := g.client.Incr(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("next id: %w", err)
	}
	if seq >= 1<<32 {
		return 0, ErrOverflow
	}
	return int64(t.Sub(Epoch)/time.Second)<<32 | seq, nil
}
