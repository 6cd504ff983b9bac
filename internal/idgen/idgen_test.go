package idgen_test

import (
	"context"
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
	at := time.Date(2026, 11, 22, 8, 30, 0, 0, time.UTC)
	g := idgen.New(srv.Client, testenv.Unique("t"), func() time.Time { return at })
	first, err := g.Next(context.Background())
	require.NoError(t, err)
	second, err := g.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(at.Sub(idgen.Epoch)/time.Second), first>>32, "time part")
	assert.Equal(t, int64(1), first&(1<<32-1), "sequence part")
	assert.Equal(t, first+1, second)
	assert.Greater(t, first, int64(1)<<53, "ids exceed JavaScript's exact integers, hence strings in the API")
}

func TestNextUniqueAcrossGenerators(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			prefix := testenv.Unique("u")
			gens := []*idgen.Generator{idgen.New(srv.Client, prefix, nil), idgen.New(srv.Client, prefix, nil)}
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
