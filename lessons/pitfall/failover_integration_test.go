//go:build integration

package pitfall

import "testing"

// TestPitfallFailover runs pitfall 11 with two real redis-server processes. It needs the
// binary and fails without it.
func TestPitfallFailover(t *testing.T) {
	assertPitfall(t, failover, Env{RedisServerBin: redisServerBin(t, true)})
}
