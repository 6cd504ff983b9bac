package async

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRedisClock: before any reading there is no estimate; each reading is a lower bound of the
// offset (Redis's time less the arrival of its answer, less a millisecond for the truncation),
// the estimate the largest bound of its window, so that a slow answer does not pull it down; a
// window over, the next reading starts a new one, so that a clock stepped back counts for at
// most a window. A deadline goes to the script that far ahead, and no deadline as "".
func TestRedisClock(t *testing.T) {
	var c redisClock
	base := time.UnixMilli(1_700_000_000_000)
	deadline := base.Add(2 * time.Second)
	_, known := c.estimate()
	assert.False(t, known, "no reading yet")

	c.observe(base.UnixMilli()+5_000, base) // Redis 5 s ahead, the answer back at once
	on := func() int64 {
		t.Helper()
		offset, known := c.estimate()
		assert.True(t, known)
		v, err := strconv.ParseInt(onRedis(deadline, offset), 10, 64)
		assert.NoError(t, err)
		return v - deadline.UnixMilli()
	}
	assert.Equal(t, int64(4_999), on())
	assert.Equal(t, "", onRedis(time.Time{}, 4_999), "no deadline stays none")

	c.observe(base.UnixMilli()+5_000, base.Add(300*time.Millisecond)) // an answer 300 ms on its way back
	assert.Equal(t, int64(4_999), on(), "a looser bound leaves the estimate")
	c.observe(base.UnixMilli()+5_010, base.Add(5*time.Millisecond))
	assert.Equal(t, int64(5_004), on(), "a tighter bound raises it")

	later := base.Add(redisClockWindow + time.Second)
	c.observe(later.UnixMilli()+1_000, later) // Redis's clock stepped back by 4 s
	assert.Equal(t, int64(999), on(), "a new window starts from its first reading")
}
