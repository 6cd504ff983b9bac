package pitfall

import (
	"os/exec"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// redisServerBin finds redis-server: SECKILL_TEST_REDIS_SERVER_BIN, else on PATH. With
// required, a missing binary fails the test (the integration suite never skips).
func redisServerBin(t *testing.T, required bool) string {
	t.Helper()
	if bin := testenv.Getenv("SECKILL_TEST_REDIS_SERVER_BIN", ""); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil && required {
		t.Fatalf("redis-server not found (set SECKILL_TEST_REDIS_SERVER_BIN or install redis-server): %v", err)
	}
	return bin
}
