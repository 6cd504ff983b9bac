package async

import (
	"strconv"
	"sync"
	"time"
)

// redisClockWindow is how long a reading of Redis's clock is kept as the best one: the
// estimate is the tightest reading of the last window or so, so that a clock stepped since
// (on Redis's host or the instance's) counts for at most that long.
const redisClockWindow = 10 * time.Second

// redisClock estimates Redis's clock from the instance's, for the deadlines async_admit.lua
// compares with its TIME. Each admission call's answer carries Redis's time of the call, at
// most the instance's time when the answer arrived plus the true offset: so redisMs less that
// arrival is a lower bound of the offset (Redis's ms less the instance's), exact but for the
// answer's way back. The estimate is the largest such bound of the current window. A deadline
// moved onto Redis's clock with an offset no larger than the true one falls at or before the
// true moment: a call that Redis runs after the admission's deadline on the instance's clock
// (after Place may have answered that nothing was admitted) is refused; one that Redis runs
// within the answer's way back before the deadline may be refused too, and its answer, which
// would arrive past the deadline, is one Place no longer waits for.
type redisClock struct {
	mu     sync.Mutex
	offset int64     // ms: Redis's clock less the instance's, a lower bound
	since  time.Time // when the current window began; zero until the first reading
}

// observe records Redis's time redisMs (ms since the Unix epoch), read in a call whose answer
// arrived at the instance at received.
func (c *redisClock) observe(redisMs int64, received time.Time) {
	// Both readings are whole milliseconds, truncated: one more keeps the bound a bound.
	bound := redisMs - received.UnixMilli() - 1
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() || received.Sub(c.since) > redisClockWindow {
		c.offset, c.since = bound, received
		return
	}
	c.offset = max(c.offset, bound)
}

// estimate returns the offset (ms, Redis's clock less the instance's) and whether there was a
// reading to take it from.
func (c *redisClock) estimate() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset, !c.since.IsZero()
}

// onRedis writes deadline on Redis's clock, offset ms ahead of the instance's, as the admission
// script's argument: ms since the Unix epoch, or "" (no deadline) for a zero deadline.
func onRedis(deadline time.Time, offset int64) string {
	if deadline.IsZero() {
		return ""
	}
	return strconv.FormatInt(deadline.UnixMilli()+offset, 10)
}
