package lock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// TestSimpleTokensIgnoreTheProcessClock: two instances take a SimpleRedisLock in turn, and
// Redis loses the name's grant counter between them; the second instance's clock is two days
// behind the first's. Its token must still be above the first's: a counter that starts again
// counts from Redis's clock, as the other locks' scripts do, never from the clock of whichever
// instance comes next. It was seeded from the instance's clock, and the second token came out
// below the first: the order fence refuses such a holder until the counter passes its tokens.
func TestSimpleTokensIgnoreTheProcessClock(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			name := testenv.Unique("skew-")
			behind := func() time.Time { return time.Now().Add(-48 * time.Hour) }
			var last int64
			for i, clock := range []func() time.Time{time.Now, behind} {
				l := NewSimpleRedisLocks(srv.Client, NewProcessID(), SimpleRedisOptions{}).New(name).(*SimpleRedisLock)
				l.clock = clock
				ok, err := l.TryLock(ctx, 10*time.Second)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Greater(t, l.Token(), last, "grant %d, its instance's clock %s behind", i, time.Since(clock()).Round(time.Hour))
				last = l.Token()
				require.NoError(t, l.Unlock(ctx))
				require.NoError(t, srv.Client.Del(ctx, l.counter).Err()) // Redis lost the counter
			}
		})
	}
}
