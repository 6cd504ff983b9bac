package lock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// proc is one simulated process: a Client (own process id, own subscription) and a Registry.
type proc struct {
	c *Client
	r *Registry
}

func newProc(t *testing.T, srv testenv.Redis, opts Options) proc {
	t.Helper()
	c := NewClient(srv.Client, opts)
	t.Cleanup(func() { _ = c.Close() })
	return proc{c: c, r: NewRegistry(c)}
}

// newHookedProc is newProc on a client of its own with h added: a process whose commands a
// test can delay, cut or watch while other processes reach the server as usual.
func newHookedProc(t *testing.T, srv testenv.Redis, h redis.Hook, opts Options) proc {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Client.Options().Addr})
	rdb.AddHook(h)
	t.Cleanup(func() { _ = rdb.Close() })
	return newProc(t, testenv.Redis{Name: srv.Name, Client: rdb, Mini: srv.Mini}, opts)
}

// waitLock is what the waiting locks have in common.
type waitLock interface {
	Lock
	TryLockWait(ctx context.Context, wait, lease time.Duration) (bool, error)
	Lost() <-chan struct{}
	Key() string
}

// kind is one of the waiting locks under test.
type kind struct {
	name string
	make func(p proc, name string) waitLock
}

var kinds = []kind{
	{"reentrant", func(p proc, name string) waitLock { return p.c.ReentrantLock(name) }},
	{"fair", func(p proc, name string) waitLock { return p.c.FairLock(name) }},
	{"localremote", func(p proc, name string) waitLock { return p.r.Obtain(name) }},
}

// forEach runs f, in parallel, for every lock kind on every Redis server under test. Each
// run gets its own embedded server, so that one run's FastForward cannot age another's locks.
func forEach(t *testing.T, f func(t *testing.T, srv testenv.Redis, k kind)) {
	for _, srv := range testenv.RedisServers(t) {
		for _, k := range kinds {
			t.Run(srv.Name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				s := srv
				if s.Mini != nil {
					s = testenv.EmbeddedRedis(t)
				}
				f(t, s, k)
			})
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// numSub returns how many connections the server has subscribed to channel.
func numSub(t *testing.T, srv testenv.Redis, channel string) int64 {
	t.Helper()
	m, err := srv.Client.PubSubNumSub(context.Background(), channel).Result()
	require.NoError(t, err)
	return m[channel]
}

// eventually waits (bounded) for a condition the test has set in motion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventuallyf(t, cond, 10*time.Second, time.Millisecond, "waiting for %s", what)
}

// channelOf returns the release channel of a waiting lock.
func channelOf(l waitLock) string {
	switch l := l.(type) {
	case *ReentrantLock:
		return l.channel
	case *FairLock:
		return l.channel
	case *LocalRemoteLock:
		return l.key + ":released"
	}
	panic("unknown lock")
}

// take makes l's first hold for the calling goroutine, failing t if it cannot.
func take(t *testing.T, l waitLock, lease time.Duration) {
	t.Helper()
	ok, err := l.TryLockWait(context.Background(), 0, lease)
	require.NoError(t, err)
	require.True(t, ok, "lock not free")
}
