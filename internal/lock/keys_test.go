package lock

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// hashSlotTag returns the part of key Redis Cluster hashes: the text between the first "{"
// and the next "}", when both exist and it is not empty, else the whole key.
func hashSlotTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func TestEveryKeyOfALockIsInOneSlot(t *testing.T) {
	c := NewClient(testenv.EmbeddedRedis(t).Client, Options{})
	t.Cleanup(func() { _ = c.Close() })
	r := NewRegistry(c)
	// An empty name has an empty tag, which Cluster ignores: names must not be empty.
	for _, name := range []string{"order:user:42", "a}b", "{x}", "x{y}"} {
		l := r.Obtain(name)
		simple := NewSimpleRedisLock(nil, "p", name)
		sets := map[string][]string{
			"simple":      {simple.Key(), simple.counter},
			"reentrant":   append(c.ReentrantLock(name).keys, fenceKey(c.ReentrantLock(name).key)),
			"fair":        c.FairLock(name).keys,
			"localremote": {l.Key(), l.Key() + ":released", fenceKey(l.Key())},
		}
		if name == "a}b" {
			// A SimpleRedisLock key with a "}" and no tag: its counter cannot share its slot
			// (see fenceKey); Cluster refuses the script rather than split it.
			delete(sets, "simple")
		}
		for kind, keys := range sets {
			for _, k := range keys {
				assert.Equal(t, hashSlotTag(keys[0]), hashSlotTag(k), "%s %q: key %s hashes apart from %s", kind, name, k, keys[0])
			}
		}
	}
}

func TestAcceptsAUniversalClient(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	var rdb redis.UniversalClient = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Mini.Addr()}})
	t.Cleanup(func() { _ = rdb.Close() })
	c := NewClient(rdb, Options{})
	t.Cleanup(func() { _ = c.Close() })
	l := c.ReentrantLock(testenv.Unique("universal-"))
	take(t, l, time.Second)
	require.NoError(t, l.Unlock(testCtx(t)))
}
