package idgen

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// TestBlocksReserveOncePerBlock: 250 ids from blocks of 100 are consecutive within a block,
// take three reservations (the state's last seq is the third block's end), and a plain
// Generator of the same name continues above all of them.
func TestBlocksReserveOncePerBlock(t *testing.T) {
	ctx := context.Background()
	srv := testenv.EmbeddedRedis(t)
	at := time.Date(2026, 11, 22, 8, 30, 0, 250_000_000, time.UTC)
	srv.Mini.SetTime(at)
	name := testenv.Unique("t")
	b := NewBlocks(srv.Client, name, 100, time.Hour)
	var ids []int64
	for range 250 {
		id, err := b.Next(ctx)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	first := (at.Unix()-Epoch.Unix())<<32 | int64(250_000)<<12
	for i, id := range ids {
		assert.Equal(t, first+int64(i), id, "id %d", i)
	}
	seq, err := srv.Client.HGet(ctx, "idgen:"+name, "seq").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(250_000)<<12+299, seq, "three blocks of 100 reserved, the last one's end stored")

	next, err := New(srv.Client, name).Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, first+300, next, "a Generator of the name never issues a reserved id")
}

// TestBlocksUniqueUnderConcurrency: three block generators and a plain one of the same name,
// 16 goroutines each, never issue the same id.
func TestBlocksUniqueUnderConcurrency(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	name := testenv.Unique("t")
	gens := []interface {
		Next(context.Context) (int64, error)
	}{NewBlocks(srv.Client, name, 7, time.Hour), NewBlocks(srv.Client, name, 64, time.Hour),
		NewBlocks(srv.Client, name, MaxBlock, time.Hour), New(srv.Client, name)}
	var (
		mu   sync.Mutex
		seen = map[int64]bool{}
		wg   sync.WaitGroup
	)
	for _, g := range gens {
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					id, err := g.Next(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					assert.False(t, seen[id], "id %d issued twice", id)
					seen[id] = true
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	assert.Len(t, seen, 4*16*50)
}

// TestBlocksDropAStaleBlock: a block older than maxAge is dropped, so the next id's time part
// follows the server's clock again instead of the block's.
func TestBlocksDropAStaleBlock(t *testing.T) {
	ctx := context.Background()
	srv := testenv.EmbeddedRedis(t)
	at := time.Date(2026, 11, 22, 8, 30, 0, 0, time.UTC)
	srv.Mini.SetTime(at)
	b := NewBlocks(srv.Client, testenv.Unique("t"), 100, time.Second)
	local := at
	b.now = func() time.Time { return local }
	first, err := b.Next(ctx)
	require.NoError(t, err)

	local = local.Add(time.Second) // not older than maxAge: the block goes on
	id, err := b.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, first+1, id)

	local = local.Add(time.Millisecond)
	srv.Mini.SetTime(at.Add(time.Minute))
	id, err = b.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, at.Add(time.Minute).Unix()-Epoch.Unix(), id>>32, "a new block, at the server's time")
}

// TestBlocksWaitIsBounded: while a reservation hangs on Redis, Next gives up when its own
// context ends.
func TestBlocksWaitIsBounded(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	b := NewBlocks(srv.Client, testenv.Unique("t"), 100, time.Hour)
	b.inflight = &reservation{done: make(chan struct{})} // another caller's, never ending
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Next(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

// gatedScripter is a Redis whose script calls wait for the test: each call is announced on
// calls, then waits until gate is closed (answered), fail is closed (refused with errRefused)
// or its context ends, as a read from a slow server does.
type gatedScripter struct {
	redis.Scripter
	calls      chan struct{}
	gate, fail chan struct{}
}

var errRefused = errors.New("refused")

func newGatedScripter(s redis.Scripter) gatedScripter {
	return gatedScripter{Scripter: s, calls: make(chan struct{}, 64), gate: make(chan struct{}), fail: make(chan struct{})}
}

func (g gatedScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	g.calls <- struct{}{}
	cmd := redis.NewCmd(ctx)
	select {
	case <-g.gate:
		return g.Scripter.EvalSha(ctx, sha, keys, args...)
	case <-g.fail:
		cmd.SetErr(errRefused)
	case <-ctx.Done():
		cmd.SetErr(ctx.Err())
	}
	return cmd
}

// TestBlocksReservationOutlivesItsCaller: the reservation a caller started goes on when that
// caller gives up (its deadline came while Redis was slow), and the block it brings serves the
// callers after it without another round trip. Bound to the caller's context it would end with
// it, and on a slow Redis, where the callers that reach the front are the ones nearest their
// deadlines, no reservation would ever finish.
func TestBlocksReservationOutlivesItsCaller(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	slow := newGatedScripter(srv.Client)
	b := NewBlocks(slow, testenv.Unique("t"), 100, time.Hour)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Next(ctx)
		errc <- err
	}()
	<-slow.calls // the reservation is at Redis
	cancel()     // its caller's deadline
	require.ErrorIs(t, <-errc, context.Canceled)

	close(slow.gate) // Redis answers
	first, err := b.Next(context.Background())
	require.NoError(t, err)
	second, err := b.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, first+1, second)
	assert.Empty(t, slow.calls, "the block the first caller started served the next ones: one round trip in all")
}

// TestBlocksReservationErrorReachesItsWaiters: the callers waiting for a reservation get its
// error, and once Redis answers again the next call reserves a block.
func TestBlocksReservationErrorReachesItsWaiters(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	slow := newGatedScripter(srv.Client)
	b := NewBlocks(slow, testenv.Unique("t"), 100, time.Hour)
	const waiters = 8
	errs := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := b.Next(context.Background())
			errs <- err
		}()
	}
	<-slow.calls
	close(slow.fail)
	for range waiters {
		assert.ErrorIs(t, <-errs, errRefused)
	}

	slow = newGatedScripter(srv.Client)
	close(slow.gate)
	b.gen.client = slow
	_, err := b.Next(context.Background())
	require.NoError(t, err, "the next call reserves again")
	assert.Len(t, slow.calls, 1)
}

// TestBlocksReservationIsBounded: a reservation that Redis never answers ends at its own
// bound, also for a caller whose context has none.
func TestBlocksReservationIsBounded(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	b := NewBlocks(newGatedScripter(srv.Client), testenv.Unique("t"), 100, time.Hour)
	b.timeout = 50 * time.Millisecond
	_, err := b.Next(context.Background())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestBlockAtTheEndOfASecond: a block that would pass 2^32 moves whole to the next second.
func TestBlockAtTheEndOfASecond(t *testing.T) {
	ctx := context.Background()
	srv := testenv.EmbeddedRedis(t)
	at := time.Date(2026, 11, 22, 8, 30, 0, 999_999_000, time.UTC)
	srv.Mini.SetTime(at)
	g := New(srv.Client, testenv.Unique("t"))
	require.NoError(t, srv.Client.HSet(ctx, g.key, "sec", at.Unix(), "seq", int64(1<<32-10)).Err())
	first, err := g.reserve(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, (at.Unix()+1-Epoch.Unix())<<32, first, "the next second, sequence 0")
	next, err := g.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, first+100, next)
}

// TestReserveRejectsABadCount: the script refuses counts outside 1..MaxBlock.
func TestReserveRejectsABadCount(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	g := New(srv.Client, testenv.Unique("t"))
	for _, n := range []int{0, -1, MaxBlock + 1} {
		_, err := g.reserve(context.Background(), n)
		assert.ErrorContains(t, err, "count must be an integer from 1 to 4096", "n=%d", n)
	}
}
