package idgen_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/testenv"
)

func TestNextLayout(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	at := time.Date(2026, 11, 22, 8, 30, 0, 250_000_000, time.UTC)
	srv.Mini.SetTime(at)
	g := idgen.New(srv.Client, testenv.Unique("t"))
	first, err := g.Next(context.Background())
	require.NoError(t, err)
	second, err := g.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(at.Sub(idgen.Epoch)/time.Second), first>>32, "time part")
	assert.Equal(t, int64(250_000)<<12, first&(1<<32-1), "sequence part: the server clock's microsecond << 12")
	assert.Equal(t, first+1, second)
	assert.Greater(t, first, int64(1)<<53, "ids exceed JavaScript's exact integers, hence strings in the API")
}

// TestNextFollowsServerClock: the ids follow the Redis server's clock, not the caller's, and
// increase with it.
func TestNextFollowsServerClock(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	g := idgen.New(srv.Client, testenv.Unique("t"))
	start := time.Date(2026, 11, 22, 8, 30, 0, 0, time.UTC)
	var last int64
	for _, step := range []time.Duration{0, time.Microsecond, time.Millisecond, 999 * time.Millisecond, time.Hour} {
		at := start.Add(step)
		srv.Mini.SetTime(at)
		id, err := g.Next(context.Background())
		require.NoError(t, err)
		assert.Greater(t, id, last, "at %s", at)
		assert.Equal(t, at.Unix()-idgen.Epoch.Unix(), id>>32, "time part at %s", at)
		assert.Equal(t, int64(at.Nanosecond()/1000)<<12, id&(1<<32-1), "sequence part at %s", at)
		last = id
	}
}

// TestNextAfterEmptyRestart: the state lost between two microseconds of the same second, the
// next id is still above every id issued before. A counter that restarts at 1 (hmdp's
// RedisIdWorker) repeats the second's first id here.
func TestNextAfterEmptyRestart(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	g := idgen.New(srv.Client, testenv.Unique("t"))
	at := time.Date(2026, 11, 22, 8, 30, 0, 100_000, time.UTC)
	srv.Mini.SetTime(at)
	var before []int64
	for range 1000 { // all within one microsecond of the server's clock
		id, err := g.Next(context.Background())
		require.NoError(t, err)
		before = append(before, id)
	}
	srv.Mini.FlushAll()
	srv.Mini.SetTime(at.Add(time.Microsecond))
	after, err := g.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, before[0]>>32, after>>32, "same second")
	assert.Greater(t, after, before[len(before)-1])
}

// TestNextClockBehind: a server whose clock is behind the last id (a failover to a replica
// with a slower clock) keeps counting from the last id instead of going back.
func TestNextClockBehind(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	g := idgen.New(srv.Client, testenv.Unique("t"))
	at := time.Date(2026, 11, 22, 8, 30, 0, 500_000_000, time.UTC)
	srv.Mini.SetTime(at)
	first, err := g.Next(context.Background())
	require.NoError(t, err)
	for _, behind := range []time.Duration{time.Millisecond, 3 * time.Second} {
		srv.Mini.SetTime(at.Add(-behind))
		id, err := g.Next(context.Background())
		require.NoError(t, err)
		assert.Equal(t, first+1, id, "%s behind", behind)
		first = id
	}
}

func TestNextTimeRange(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	for _, at := range []time.Time{
		idgen.Epoch.Add(-time.Second),
		idgen.Epoch.Add(1 << 31 * time.Second),
	} {
		srv.Mini.SetTime(at)
		_, err := idgen.New(srv.Client, testenv.Unique("t")).Next(context.Background())
		assert.True(t, errors.Is(err, idgen.ErrTimeRange), "at %s: got %v, want ErrTimeRange", at, err)
	}
	srv.Mini.SetTime(idgen.Epoch.Add(time.Second))
	id, err := idgen.New(srv.Client, testenv.Unique("t")).Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1)<<32, id, "the first id of the epoch's second second")
}

func TestNextUniqueAcrossGenerators(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			prefix := testenv.Unique("u")
			t.Cleanup(func() { srv.Client.Del(context.Background(), "idgen:"+prefix) })
			gens := []*idgen.Generator{idgen.New(srv.Client, prefix), idgen.New(srv.Client, prefix)}
			var mu sync.Mutex
			seen := map[int64]bool{}
			var wg sync.WaitGroup
			for i := range 50 {
				wg.Go(func() {
					for range 20 {
						id, err := gens[i%2].Next(context.Background())
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						assert.False(t, seen[id], "duplicate id %d", id)
						seen[id] = true
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			assert.Len(t, seen, 1000)
		})
	}
}
