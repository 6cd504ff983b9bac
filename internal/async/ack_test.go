package async_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/scripts/lua"
)

var ackScript = redis.NewScript(lua.AsyncAck)

// TestAckLeavesExactlyTheUnacknowledged: whichever way async_ack.lua deletes a batch (XTRIM
// MINID for the ids below the oldest entry a group still needs, XDEL for the others), the stream
// afterwards holds exactly the entries not acknowledged: pending ones of other consumers and
// ones never delivered stay, whatever the order the batches are acknowledged in. The entries
// span several listpack nodes (stream-node-max-entries is 100 by default), and one batch is
// acknowledged out of the stream's order. On a redis-server of the test's own, its command
// counts show which deletions took the cheap path.
func TestAckLeavesExactlyTheUnacknowledged(t *testing.T) {
	t.Parallel()
	servers := testenv.RedisServers(t)
	if testenv.Integration {
		servers = append(servers, testenv.Redis{Name: "own", Client: testenv.StartRedisServer(t).Client()})
	}
	for _, r := range servers {
		t.Run(r.Name, func(t *testing.T) {
			ctx := context.Background()
			stream, orders, attempts := testenv.Unique("test:ack:"), testenv.Unique("test:ack:o:"), testenv.Unique("test:ack:a:")
			t.Cleanup(func() { _ = r.Client.Del(context.Background(), stream, orders, attempts).Err() })
			const group = "writers"
			var ids []string
			for i := range 500 {
				id, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: fmt.Sprintf("1700000000000-%d", i),
					Values: []any{"order", i}}).Result()
				require.NoError(t, err)
				ids = append(ids, id)
				require.NoError(t, r.Client.HSet(ctx, orders, fmt.Sprint(i), "pending").Err())
			}
			require.NoError(t, r.Client.XGroupCreate(ctx, stream, group, "0").Err())
			read := func(consumer string, n int) {
				t.Helper()
				_, err := r.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer,
					Streams: []string{stream, ">"}, Count: int64(n), Block: -1}).Result()
				require.NoError(t, err)
			}
			left := map[string]bool{}
			for _, id := range ids {
				left[id] = true
			}
			ack := func(from, to int) {
				t.Helper()
				args := []any{group}
				for i := from; i < to; i++ {
					args = append(args, ids[i], fmt.Sprint(i))
					delete(left, ids[i])
				}
				n, err := ackScript.Run(ctx, r.Client, []string{stream, orders, attempts}, args...).Int()
				require.NoError(t, err)
				assert.Equal(t, to-from, n, "acknowledged of [%d, %d)", from, to)
				msgs, err := r.Client.XRange(ctx, stream, "-", "+").Result()
				require.NoError(t, err)
				var got []string
				for _, m := range msgs {
					got = append(got, m.ID)
				}
				var want []string
				for _, id := range ids {
					if left[id] {
						want = append(want, id)
					}
				}
				require.Equal(t, want, got, "the stream after acknowledging [%d, %d)", from, to)
				held, err := r.Client.HLen(ctx, orders).Result()
				require.NoError(t, err)
				assert.Equal(t, int64(len(want)), held, "orders still pending in the orders hash")
			}
			read("a", 150) // 0-149 pending for a
			read("b", 150) // 150-299 pending for b; 300-499 not delivered
			ack(150, 300)  // above the floor (a's 0 is pending): XDEL
			ack(0, 150)    // below the floor (300, never delivered): XTRIM
			read("a", 120) // 300-419
			ack(350, 420)  // above the floor (300 pending): XDEL
			ack(300, 350)  // below it (420): XTRIM, in the middle of a node
			read("b", 80)  // 420-499
			ack(420, 499)  // all but the last: the floor is its pending 499
			ack(499, 500)  // the last: the stream is empty
			// Acknowledged again (redelivered and written by another consumer): nothing
			// acknowledged, nothing deleted, no error.
			n, err := ackScript.Run(ctx, r.Client, []string{stream, orders, attempts}, group, ids[0], "0").Int()
			require.NoError(t, err)
			assert.Zero(t, n)
			if r.Name == "own" {
				stats, err := r.Client.Info(ctx, "commandstats").Result()
				require.NoError(t, err)
				// [0, 150), [300, 350), [420, 499), [499, 500) and the repeat, which found nothing.
				assert.Equal(t, 5, commandCalls(t, stats, "xtrim"), "acknowledgements that trimmed")
				// [150, 300) and [350, 420).
				assert.Equal(t, 2, commandCalls(t, stats, "xdel"), "acknowledgements that deleted id by id")
			}
		})
	}
}

// TestAckOnAStreamGone: a batch written after Redis lost its stream (it restarted empty) is
// acknowledged without an error: nothing is left to acknowledge or delete.
func TestAckOnAStreamGone(t *testing.T) {
	t.Parallel()
	for _, r := range testenv.RedisServers(t) {
		t.Run(r.Name, func(t *testing.T) {
			stream := testenv.Unique("test:ack:gone:")
			n, err := ackScript.Run(context.Background(), r.Client, []string{stream, stream + ":o", stream + ":a"},
				"writers", "1700000000000-0", "1").Int()
			require.NoError(t, err)
			assert.Zero(t, n)
		})
	}
}

// commandCalls is the calls of cmd in INFO commandstats.
func commandCalls(t *testing.T, stats, cmd string) int {
	t.Helper()
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}
