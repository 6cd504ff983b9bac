package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The unit tests run RedLock over five embedded Redis servers (miniredis); a node is made
// unavailable by closing its server, hung by a client hook that blocks until the test
// ends, and made to lose replies by a hook that discards them. redlock_integration_test.go
// repeats the central claims over real redis-server processes.

const redNodeCount = 5

// redNodes is one set of Redis nodes under test, addressed by index.
type redNodes struct {
	addrs []string
	mini  []*miniredis.Miniredis // nil for real servers
}

// embeddedNodes starts n miniredis servers for t.
func embeddedNodes(t *testing.T, n int) redNodes {
	t.Helper()
	var nodes redNodes
	for range n {
		m := miniredis.RunT(t)
		nodes.mini = append(nodes.mini, m)
		nodes.addrs = append(nodes.addrs, m.Addr())
	}
	return nodes
}

// clients opens one go-redis client per node, each connected once (so that dialling is not
// what the node timeout measures) and then given the hooks hooks(i) returns. They are
// closed when t ends.
//
// The clients ignore context deadlines, as go-redis does by default, and wait hungFor for a
// reply: a hung node would make the caller wait that long, were it not for the node
// timeout. A node that is down refuses the connection, and the clients report that at
// once: no command retries, one dial. (go-redis's defaults would redial with backoff until
// the node timeout ran out, and a down node would cost as much as a hung one.)
func (n redNodes) clients(t *testing.T, hooks func(i int) []redis.Hook) []*redis.Client {
	t.Helper()
	cs := make([]*redis.Client, len(n.addrs))
	for i, addr := range n.addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: hungFor, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = cs[i].Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = cs[i].Ping(ctx).Err() // a node already down stays down
		cancel()
		if hooks != nil {
			for _, h := range hooks(i) {
				cs[i].AddHook(h)
			}
		}
	}
	return cs
}

// testNodeTimeout is the node timeout of every test: miniredis runs each script in a fresh
// gopher-lua state, which under -race on a busy 2-core machine can take tens of
// milliseconds, and a starved test process may not read a live node's reply for hundreds; a
// live node timing out would fail a test for the machine's sake. Only hung nodes make a
// test wait it out.
const testNodeTimeout = 2 * time.Second

// family makes one process's RedLocks over the nodes: its own clients and process id.
// opts.NodeTimeout defaults to testNodeTimeout.
func (n redNodes) family(t *testing.T, opts RedLockOptions, hooks func(i int) []redis.Hook) *RedLocks {
	t.Helper()
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = testNodeTimeout
	}
	var rcs []RedisClient
	for _, c := range n.clients(t, hooks) {
		rcs = append(rcs, c)
	}
	return NewRedLocks(rcs, "", opts)
}

// values returns what each node holds at key ("" when absent or unreachable). An embedded
// node is read directly, even when closed; a real one is asked, briefly.
func (n redNodes) values(t *testing.T, key string) []string {
	return n.valuesExcept(t, key, 0)
}

// valuesExcept is values without asking the nodes in mask (unavailable ones: a hung node
// would only make the test wait).
func (n redNodes) valuesExcept(t *testing.T, key string, mask int) []string {
	t.Helper()
	vs := make([]string, len(n.addrs))
	var wg sync.WaitGroup
	for i, addr := range n.addrs {
		switch {
		case mask&(1<<i) != 0:
		case n.mini != nil:
			vs[i], _ = n.mini[i].Get(key)
		default:
			wg.Go(func() {
				c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				vs[i], _ = c.Get(ctx, key).Result()
			})
		}
	}
	wg.Wait()
	return vs
}

// holding counts the nodes whose key holds value.
func holding(values []string, value string) int {
	n := 0
	for _, v := range values {
		if v != "" && v == value {
			n++
		}
	}
	return n
}

// heldValue returns the value l holds, "" when none.
func heldValue(l *RedLock) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

// mustTake takes l once for lease, failing t if it is not free.
func mustTake(t *testing.T, l *RedLock, lease time.Duration) {
	t.Helper()
	ok, err := l.TryLock(context.Background(), lease)
	require.NoError(t, err)
	require.True(t, ok, "%s not free", l.Key())
}

// hook builds a redis.Hook from a ProcessHook wrapper.
type hook func(next redis.ProcessHook) redis.ProcessHook

func (h hook) DialHook(next redis.DialHook) redis.DialHook                               { return next }
func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook                      { return h(next) }
func (h hook) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook { return n }

// hungFor is how long a hung node stays silent at most: longer than any lease the quorum
// tests take, so that an attempt that waited for it would find its validity gone and fail
// the test's assertions instead of hanging it.
const hungFor = 15 * time.Second

// hungHook makes a node hang: every command blocks, ignoring its context as a go-redis
// client without ContextTimeoutEnabled does, until release is closed (or hungFor passed).
func hungHook(release <-chan struct{}) redis.Hook {
	return hook(func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			timer := time.NewTimer(hungFor)
			defer timer.Stop()
			select {
			case <-release:
			case <-timer.C:
			}
			return next(ctx, cmd)
		}
	})
}

// lostReplyHook runs SET on the node but loses its reply: the key is set, the caller sees
// an error.
func lostReplyHook() redis.Hook {
	return hook(func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			err := next(ctx, cmd)
			if err == nil && cmd.Name() == "set" {
				err = errors.New("reply lost")
				cmd.SetErr(err)
			}
			return err
		}
	})
}

// countHook counts the SET commands (acquisition attempts) sent to the node.
func countHook(n *atomic.Int64) redis.Hook {
	return hook(func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if cmd.Name() == "set" {
				n.Add(1)
			}
			return next(ctx, cmd)
		}
	})
}

// onNodes returns a hooks function giving h to the nodes in mask.
func onNodes(mask int, h redis.Hook) func(i int) []redis.Hook {
	return func(i int) []redis.Hook {
		if mask&(1<<i) != 0 {
			return []redis.Hook{h}
		}
		return nil
	}
}

// quorumCase is one subset of unavailable nodes and what acquisition must do.
type quorumCase struct {
	mask      int // bit i set: node i is unavailable
	available int
}

func (c quorumCase) String() string { return fmt.Sprintf("unavailable=%05b", c.mask) }

func quorumCases(n int) []quorumCase {
	var cs []quorumCase
	for mask := range 1 << n {
		cs = append(cs, quorumCase{mask, n - popcount(mask)})
	}
	return cs
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// checkQuorum takes l once with the given nodes unavailable and checks that acquisition
// succeeds exactly when a quorum is reachable, holds a quorum of keys when it does, leaves
// none behind when it does not, that it did not wait for a hung node (which stays silent
// for hungFor), and that Unlock releases a lock it took. It only asserts, so the cases can
// run on goroutines of one test.
func checkQuorum(t *testing.T, nodes redNodes, l *RedLock, c quorumCase) {
	ctx := context.Background()
	start := time.Now()
	ok, err := l.TryLock(ctx, 10*time.Second)
	// The node timeout ends the attempt long before: the bound only catches one that waited.
	assert.Less(t, time.Since(start), hungFor, "%s: TryLock waited for a hung node", c)
	values := nodes.valuesExcept(t, l.Key(), c.mask)
	if c.available >= redNodeCount/2+1 { // the majority, not whatever Quorum says
		if !assert.NoError(t, err, c) || !assert.True(t, ok, "%s: not taken with %d of %d nodes", c, c.available, len(nodes.addrs)) {
			return
		}
		assert.Equal(t, c.available, holding(values, heldValue(l)), "%s: nodes holding the key", c)
		assert.True(t, l.Valid(), "%s: Valid", c)
		value := heldValue(l)
		assert.NoError(t, l.Unlock(ctx), c)
		assert.Zero(t, holding(nodes.valuesExcept(t, l.Key(), c.mask), value), "%s: keys left after Unlock", c)
		return
	}
	assert.ErrorIs(t, err, ErrNoQuorum, "%s: %d of %d nodes", c, c.available, len(nodes.addrs))
	assert.False(t, ok, c)
	assert.False(t, l.Valid(), "%s: Valid", c)
	for i, v := range values {
		assert.Empty(t, v, "%s: node %d kept a key after a failed quorum", c, i)
	}
}

// forQuorumCases runs check for every subset of unavailable nodes, all at once, each on its
// own nodes: a case with hung nodes spends its time waiting out the node timeout, and the
// others are quick.
func forQuorumCases(t *testing.T, check func(c quorumCase)) {
	var wg sync.WaitGroup
	for _, c := range quorumCases(redNodeCount) {
		wg.Go(func() { check(c) })
	}
	wg.Wait()
}

// TestRedLockQuorumEmbedded: for every subset of five nodes down, and every subset hung,
// acquisition succeeds exactly when a quorum is reachable. A down node refuses at once; a
// hung one is silent, and only the node timeout keeps it from stalling the caller (its
// client ignores contexts and has no read timeout to give up by).
func TestRedLockQuorumEmbedded(t *testing.T) {
	t.Parallel()
	t.Run("down", func(t *testing.T) {
		t.Parallel()
		forQuorumCases(t, func(c quorumCase) {
			nodes := embeddedNodes(t, redNodeCount)
			l := nodes.family(t, RedLockOptions{}, nil).RedLock("quorum")
			for i, m := range nodes.mini {
				if c.mask&(1<<i) != 0 {
					m.Close()
				}
			}
			checkQuorum(t, nodes, l, c)
		})
	})
	t.Run("hung", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		forQuorumCases(t, func(c quorumCase) {
			nodes := embeddedNodes(t, redNodeCount)
			l := nodes.family(t, RedLockOptions{}, onNodes(c.mask, hungHook(release))).RedLock("quorum")
			checkQuorum(t, nodes, l, c)
		})
		close(release) // the hung calls go on, to clients that may be closed by now
	})
}

// TestRedLockContended is redsync's quorum test: another owner's key on some nodes. The
// lock is taken exactly when a quorum of nodes was free; otherwise TryLock reports false
// without an error (every node answered) and at once releases the nodes it got.
func TestRedLockContended(t *testing.T) {
	ctx := context.Background()
	for _, c := range quorumCases(redNodeCount) {
		t.Run("held-by-other/"+c.String(), func(t *testing.T) {
			t.Parallel()
			nodes := embeddedNodes(t, redNodeCount)
			l := nodes.family(t, RedLockOptions{}, nil).RedLock("contended")
			for i, m := range nodes.mini {
				if c.mask&(1<<i) != 0 {
					require.NoError(t, m.Set(l.Key(), "other"))
				}
			}
			ok, err := l.TryLock(ctx, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, c.available >= 3, ok, "taken with %d free nodes", c.available)
			values := nodes.values(t, l.Key())
			for i, v := range values {
				switch {
				case c.mask&(1<<i) != 0:
					assert.Equal(t, "other", v, "node %d: another owner's key must stay", i)
				case ok:
					assert.Equal(t, heldValue(l), v, "node %d", i)
				default:
					assert.Empty(t, v, "node %d: a failed attempt must release the nodes it got", i)
				}
			}
			if ok {
				require.NoError(t, l.Unlock(ctx))
				assert.Equal(t, popcount(c.mask), holding(nodes.values(t, l.Key()), "other"))
			}
		})
	}
}

// TestRedLockReleasesLostReplies: a node that set the key but whose reply was lost is
// released too, by Unlock after a success and at once after a failure.
func TestRedLockReleasesLostReplies(t *testing.T) {
	ctx := context.Background()
	for _, lost := range []int{0b00011, 0b10101} {
		t.Run(fmt.Sprintf("lost=%05b", lost), func(t *testing.T) {
			nodes := embeddedNodes(t, redNodeCount)
			l := nodes.family(t, RedLockOptions{}, onNodes(lost, lostReplyHook())).RedLock("lost")
			ok, err := l.TryLock(ctx, 10*time.Second)
			if popcount(lost) <= 2 {
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, redNodeCount, holding(nodes.values(t, l.Key()), heldValue(l)), "SET ran on every node")
				require.NoError(t, l.Unlock(ctx))
			} else {
				require.ErrorIs(t, err, ErrNoQuorum)
				require.False(t, ok)
			}
			for i, v := range nodes.values(t, l.Key()) {
				assert.Empty(t, v, "node %d", i)
			}
		})
	}
}

// testClock is a settable clock for the validity arithmetic.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *testClock) advance(d time.Duration) { c.set(c.now().Add(d)) }

// TestRedLockValidity checks validity = lease - elapsed - drift, drift = lease*factor + 2ms,
// on a clock the test moves: each acquisition "takes" elapsed, as the clock is advanced
// while node 0 handles the SET.
func TestRedLockValidity(t *testing.T) {
	const lease = 10 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		factor  float64
		elapsed time.Duration
		want    bool
	}{
		{"instant", 0, 0, true},
		{"1s", 0, time.Second, true},
		{"last ns of validity", 0, lease - 102*time.Millisecond - 1, true},
		{"no validity left", 0, lease - 102*time.Millisecond, false},
		{"slower than the lease", 0, lease + time.Second, false},
		{"factor 0.1, 1s", 0.1, time.Second, true},
		{"factor 0.1, no validity left", 0.1, lease - time.Second - 2*time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clock := &testClock{t: t0}
			advance := hook(func(next redis.ProcessHook) redis.ProcessHook {
				return func(ctx context.Context, cmd redis.Cmder) error {
					if cmd.Name() == "set" {
						clock.advance(tt.elapsed)
					}
					return next(ctx, cmd)
				}
			})
			nodes := embeddedNodes(t, redNodeCount)
			s := nodes.family(t, RedLockOptions{DriftFactor: tt.factor}, onNodes(1, advance))
			s.now = clock.now
			l := s.RedLock("validity")
			factor := tt.factor
			if factor == 0 {
				factor = DefaultDriftFactor
			}
			drift := time.Duration(float64(lease)*factor) + 2*time.Millisecond

			ok, err := l.TryLock(ctx, lease)
			require.NoError(t, err)
			require.Equal(t, tt.want, ok, "taken after %s of a %s lease", tt.elapsed, lease)
			if !ok {
				assert.False(t, l.Valid())
				assert.True(t, l.Until().IsZero(), "Until of a lock not taken")
				for i, v := range nodes.values(t, l.Key()) {
					assert.Empty(t, v, "node %d: a lock too slow to take must be released", i)
				}
				return
			}
			until := t0.Add(lease - drift)
			require.Equal(t, until, l.Until(), "Until = start + lease - drift")
			clock.set(until.Add(-1))
			assert.True(t, l.Valid(), "Valid 1ns before Until")
			clock.set(until)
			assert.False(t, l.Valid(), "Valid at Until")
			// Every node still holds the key (miniredis's keys do not age with this clock),
			// yet the lock is not held: Unlock says so, and cleans the nodes.
			require.Equal(t, redNodeCount, holding(nodes.values(t, l.Key()), heldValue(l)))
			require.ErrorIs(t, l.Unlock(ctx), ErrNotHeld)
			for i, v := range nodes.values(t, l.Key()) {
				assert.Empty(t, v, "node %d", i)
			}
		})
	}
}

func TestRedLockLease(t *testing.T) {
	nodes := embeddedNodes(t, redNodeCount)
	l := nodes.family(t, RedLockOptions{}, nil).RedLock("lease")
	for _, lease := range []time.Duration{0, -time.Second, time.Millisecond / 2, 2 * time.Millisecond} {
		ok, err := l.TryLock(context.Background(), lease)
		assert.ErrorIs(t, err, ErrInvalidTTL, "lease %s", lease)
		assert.False(t, ok)
		_, err = l.TryLockWait(context.Background(), time.Second, lease)
		assert.ErrorIs(t, err, ErrInvalidTTL, "TryLockWait lease %s", lease)
	}
}

func TestRedLockUnlock(t *testing.T) {
	ctx := context.Background()
	t.Run("never taken", func(t *testing.T) {
		l := embeddedNodes(t, redNodeCount).family(t, RedLockOptions{}, nil).RedLock("u")
		require.ErrorIs(t, l.Unlock(ctx), ErrNotHeld)
	})
	t.Run("twice", func(t *testing.T) {
		l := embeddedNodes(t, redNodeCount).family(t, RedLockOptions{}, nil).RedLock("u")
		mustTake(t, l, time.Minute)
		require.NoError(t, l.Unlock(ctx))
		require.ErrorIs(t, l.Unlock(ctx), ErrNotHeld)
		assert.False(t, l.Valid())
	})
	// Nodes that restart without persistence forget the key: a minority lost is still a
	// lock held by a quorum, a majority lost is a lock no longer held.
	for _, forgot := range []int{0b00001, 0b00011, 0b00111, 0b11111} {
		t.Run(fmt.Sprintf("forgot=%05b", forgot), func(t *testing.T) {
			nodes := embeddedNodes(t, redNodeCount)
			l := nodes.family(t, RedLockOptions{}, nil).RedLock("u")
			mustTake(t, l, time.Minute)
			for i, m := range nodes.mini {
				if forgot&(1<<i) != 0 {
					m.FlushAll()
				}
			}
			err := l.Unlock(ctx)
			if popcount(forgot) <= 2 {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrNotHeld)
			}
		})
	}
	t.Run("nodes down", func(t *testing.T) {
		nodes := embeddedNodes(t, redNodeCount)
		l := nodes.family(t, RedLockOptions{}, nil).RedLock("u")
		mustTake(t, l, time.Minute)
		for _, m := range nodes.mini[:3] {
			m.Close()
		}
		err := l.Unlock(ctx)
		require.Error(t, err, "2 of 5 nodes cannot confirm a release")
		assert.NotErrorIs(t, err, ErrNotHeld, "the key may still be held on the nodes that did not answer")
	})
}

// TestRedLockUnlockAnyGoroutine: the value is a token, not a goroutine id.
func TestRedLockUnlockAnyGoroutine(t *testing.T) {
	ctx := context.Background()
	nodes := embeddedNodes(t, redNodeCount)
	l := nodes.family(t, RedLockOptions{}, nil).RedLock("any")
	mustTake(t, l, time.Minute)
	errc := make(chan error)
	go func() { errc <- l.Unlock(ctx) }()
	require.NoError(t, <-errc)
	assert.Zero(t, holding(nodes.values(t, l.Key()), heldValue(l)))
}

// TestRedLockFreshValue: every acquisition writes a new token.
func TestRedLockFreshValue(t *testing.T) {
	ctx := context.Background()
	nodes := embeddedNodes(t, redNodeCount)
	s := nodes.family(t, RedLockOptions{}, nil)
	l := s.RedLock("fresh")
	seen := map[string]bool{}
	for range 3 {
		mustTake(t, l, time.Minute)
		v := heldValue(l)
		assert.False(t, seen[v], "value %q reused", v)
		assert.Regexp(t, "^"+s.process+"-[0-9a-f]{32}$", v)
		seen[v] = true
		require.NoError(t, l.Unlock(ctx))
	}
}

// heldWithWaiter returns a lock held by one process and the same lock in another, whose
// attempts (SETs on node 0) are counted.
func heldWithWaiter(t *testing.T, opts RedLockOptions) (holder, waiter *RedLock, attempts *atomic.Int64) {
	t.Helper()
	nodes := embeddedNodes(t, redNodeCount)
	attempts = new(atomic.Int64)
	holder = nodes.family(t, opts, nil).RedLock("wait")
	waiter = nodes.family(t, opts, onNodes(1, countHook(attempts))).RedLock("wait")
	mustTake(t, holder, time.Minute)
	return holder, waiter, attempts
}

func TestRedLockTryLockWait(t *testing.T) {
	ctx := context.Background()
	opts := RedLockOptions{RetryDelay: 2 * time.Millisecond}
	t.Run("taken when released", func(t *testing.T) {
		holder, waiter, attempts := heldWithWaiter(t, opts)
		got := make(chan error)
		go func() {
			ok, err := waiter.TryLockWait(ctx, 10*time.Second, time.Minute)
			if err == nil && !ok {
				err = errors.New("wait ran out")
			}
			got <- err
		}()
		require.Eventually(t, func() bool { return attempts.Load() >= 2 }, 10*time.Second, time.Millisecond, "waiter retrying")
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-got)
		assert.True(t, waiter.Valid())
		require.NoError(t, waiter.Unlock(ctx))
	})
	t.Run("wait runs out", func(t *testing.T) {
		_, waiter, attempts := heldWithWaiter(t, opts)
		ok, err := waiter.TryLockWait(ctx, 500*time.Millisecond, time.Minute) // room for two attempts on a loaded machine
		require.NoError(t, err)
		assert.False(t, ok)
		assert.GreaterOrEqual(t, attempts.Load(), int64(2), "attempts within the wait")
		attempts.Store(0)
		ok, err = waiter.TryLockWait(ctx, 0, time.Minute)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, int64(1), attempts.Load(), "wait 0 tries once")
	})
	t.Run("ctx ends", func(t *testing.T) {
		_, waiter, attempts := heldWithWaiter(t, opts)
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error)
		go func() {
			_, err := waiter.TryLockWait(wctx, -1, time.Minute)
			got <- err
		}()
		require.Eventually(t, func() bool { return attempts.Load() >= 2 }, 10*time.Second, time.Millisecond, "waiter retrying")
		cancel()
		require.ErrorIs(t, <-got, context.Canceled)
	})
	t.Run("quorum unreachable", func(t *testing.T) {
		nodes := embeddedNodes(t, redNodeCount)
		l := nodes.family(t, RedLockOptions{}, nil).RedLock("wait")
		for _, m := range nodes.mini[:3] {
			m.Close()
		}
		ok, err := l.TryLockWait(ctx, 20*time.Millisecond, time.Minute)
		assert.False(t, ok)
		require.ErrorIs(t, err, ErrNoQuorum, "the last attempt's error")
	})
}

func TestRedLockRetryPause(t *testing.T) {
	c := redis.NewClient(&redis.Options{})
	defer c.Close()
	s := NewRedLocks([]RedisClient{c}, "", RedLockOptions{RetryDelay: 10 * time.Millisecond})
	lo, hi := time.Hour, time.Duration(0)
	for range 2000 {
		p := s.retryPause()
		lo, hi = min(lo, p), max(hi, p)
	}
	assert.GreaterOrEqual(t, lo, 5*time.Millisecond)
	assert.Less(t, hi, 15*time.Millisecond)
	assert.Greater(t, hi-lo, 5*time.Millisecond, "pauses are spread, not fixed")
}

// checkExclusion runs goroutines of two processes (two RedLocks families over the same
// nodes) that each take the lock rounds times, and fails t if two ever hold it at once.
func checkExclusion(t *testing.T, families [2]*RedLocks, goroutines, rounds int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		inside, overlaps, taken atomic.Int64
		counter                 int // unsynchronised on purpose: only the lock guards it (-race)
		wg                      sync.WaitGroup
	)
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			l := families[g%2].RedLock("exclusion")
			<-start
			for range rounds {
				ok, err := l.TryLockWait(ctx, -1, 10*time.Second)
				if !assert.NoError(t, err) || !assert.True(t, ok) {
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				counter++
				taken.Add(1)
				inside.Add(-1)
				assert.NoError(t, l.Unlock(ctx))
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Zero(t, overlaps.Load(), "overlapping holders")
	assert.Equal(t, int64(goroutines*rounds), taken.Load(), "acquisitions")
	assert.Equal(t, goroutines*rounds, counter, "counter")
}

func TestRedLockExcludesEmbedded(t *testing.T) {
	nodes := embeddedNodes(t, redNodeCount)
	opts := RedLockOptions{RetryDelay: time.Millisecond}
	checkExclusion(t, [2]*RedLocks{nodes.family(t, opts, nil), nodes.family(t, opts, nil)}, 8, 10)
}
