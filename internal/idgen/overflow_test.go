package idgen

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// TestNextOverflowMovesToNextSecond: when a second's sequence is used up, the next id takes the
// next second instead of failing, and stays above the last.
func TestNextOverflowMovesToNextSecond(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	g := New(srv.Client, testenv.Unique("t"))
	at := time.Date(2026, 11, 22, 8, 30, 0, 999_999_000, time.UTC)
	srv.Mini.SetTime(at)
	require.NoError(t, srv.Client.HSet(context.Background(), g.key, "sec", at.Unix(), "seq", int64(1<<32-1)).Err())
	last := (at.Unix()-Epoch.Unix())<<32 | (1<<32 - 1)
	id, err := g.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, last+1, id, "second+1, sequence 0")
	assert.Equal(t, at.Unix()+1-Epoch.Unix(), id>>32, "time part")
	next, err := g.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, id+1, next, "the clock, one second behind, does not take the id back")
}
