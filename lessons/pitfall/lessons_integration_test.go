//go:build integration

package pitfall

import (
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// TestPitfallRedLockRestartProcesses runs the RedLock lesson on five real redis-server
// processes: node 3 is killed with SIGKILL and started again, without persistence, after
// one max lease, or with appendfsync always.
func TestPitfallRedLockRestartProcesses(t *testing.T) {
	assertPitfall(t, redlockRestart, Env{RedisServerBin: redisServerBin(t, true), RedLockProcesses: true})
}

// TestPitfallDBNoExpiryMySQL runs the database lesson on the real MariaDB/MySQL.
func TestPitfallDBNoExpiryMySQL(t *testing.T) {
	assertPitfall(t, dbNoExpiry, Env{MySQLDSN: testenv.MySQLDSN(t)})
}
