//go:build integration

package pitfall

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

// TestPitfallRedLockRestartProcesses runs the RedLock lesson on five real redis-server
// processes: node 3 is killed with SIGKILL and started again, without persistence, after
// one max lease, or with appendfsync always.
func TestPitfallRedLockRestartProcesses(t *testing.T) {
	assertPitfall(t, redlockRestart, Env{RedisServerBin: redisServerBin(t, true), RedLockProcesses: true})
}

// TestPitfallZooKeeperLessons runs the ZooKeeper lessons against the real ZooKeeper
// (scripts/services.sh up zookeeper); they fail, never skip, without it.
func TestPitfallZooKeeperLessons(t *testing.T) {
	for _, p := range All() {
		if !p.NeedsZooKeeper {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			env := Env{ZooKeeperAddr: testenv.ZooKeeperAddr()}
			assertPitfall(t, p, env)
			// Against a real server too, two runs print the same timelines (docs/pitfalls.md
			// is generated from them).
			first, err := p.Run(context.Background(), env)
			require.NoError(t, err)
			second, err := p.Run(context.Background(), env)
			require.NoError(t, err)
			for i := range first {
				assert.Equal(t, first[i].Events, second[i].Events, "%s/%s: timelines differ between runs", p.Name, first[i].Variant.Name)
			}
		})
	}
}

// TestPitfallDBNoExpiryMySQL runs the database lesson on the real MariaDB/MySQL.
func TestPitfallDBNoExpiryMySQL(t *testing.T) {
	assertPitfall(t, dbNoExpiry, Env{MySQLDSN: testenv.MySQLDSN(t)})
}
