package async_test

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/order"
)

// leavingMembers is the members of the set of vouchers leaving the registry that are
// voucherID's, one per retirement (ID:token).
func (f *fixture) leavingMembers(voucherID int64) []string {
	f.t.Helper()
	ms, err := f.rdb.SMembers(context.Background(), async.LeavingKey).Result()
	require.NoError(f.t, err)
	prefix := strconv.FormatInt(voucherID, 10) + ":"
	var out []string
	for _, m := range ms {
		if strings.HasPrefix(m, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// leaving reports whether voucherID is among the vouchers leaving the registry.
func (f *fixture) leaving(voucherID int64) bool {
	f.t.Helper()
	return len(f.leavingMembers(voucherID)) > 0
}

// TestLeftoverOfAStoppedRetirementIsSettled: a writer's retirement puts the voucher among
// those leaving the registry, takes it out of the registry, and fails the steps after (the
// check and the put-back), then the writer stops: it alone remembered the voucher, which stayed
// among those leaving for ever, every lookup asking its orders hash, and a sale reopened
// before its SREM stayed out of the registry, its orders never written. Another writer's
// discovery now settles it: retired, it leaves the set; reopened, or its sale hash missing
// (a reload may be creating it), it goes back into the registry first, and its orders are
// written and found. The same holds for the bare voucher id a retirement of an earlier version,
// before each had a member of its own, left there: an upgrade finds it in Redis.
func TestLeftoverOfAStoppedRetirementIsSettled(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// at is what happens just before the retirement's SREM: "reopen", "delete" the sale
		// hash, or nothing.
		at string
	}{
		{name: "retired"},
		{name: "reopened", at: "reopen"},
		{name: "sale hash missing", at: "delete"},
	}
	for _, tc := range cases {
		for _, bare := range []bool{false, true} {
			name := tc.name
			if bare {
				name += ", bare id"
			}
			t.Run(name, func(t *testing.T) {
				leftoverSettled(t, tc.at, bare)
			})
		}
	}
}

// leftoverSettled is TestLeftoverOfAStoppedRetirementIsSettled's case: point is what happens just
// before the stopped retirement's SREM, bare rewrites its member as the voucher's bare id.
func leftoverSettled(t *testing.T, point string, bare bool) {
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid, bought := f.retiredSale(c)
		var reopened map[int64]int64
		at := func() {
			switch point {
			case "reopen":
				reopened = f.reopen(c, vid)
			case "delete":
				sale, _, _, _, _ := async.KeysOf(vid)
				require.NoError(t, f.rdb.Del(ctx, sale).Err())
			}
		}
		fail := &failing{cmds: map[string]int{"hexists": 1, "sadd": 1}, from: "srem"}
		stoppedWriter := f.hookedWriter(&atCommand{cmd: "srem", do: at}, fail)
		_, err := async.Retire(ctx, stoppedWriter, vid)
		require.ErrorIs(t, err, errInjected)
		require.False(t, f.registered(vid), "out of the registry after the failed steps")
		require.True(t, f.leaving(vid), "among the vouchers leaving it")
		// The writer stops here: it never runs another discovery.
		bareID := strconv.FormatInt(vid, 10)
		if bare {
			require.NoError(t, f.rdb.SRem(ctx, async.LeavingKey, f.leavingMembers(vid)[0]).Err())
			require.NoError(t, f.rdb.SAdd(ctx, async.LeavingKey, bareID).Err())
			// A lookup reads the bare id as its voucher.
			for id, u := range reopened {
				assert.Contains(t, []order.State{order.StatePending, order.StateCreated}, f.state(u, id),
					"order %d, admitted since the reopening, while only the bare id keeps it found", id)
			}
		}

		other := f.idleWriter()
		async.SetLeftoverAfter(other, 0)
		async.Discover(other)
		stopped(t, other)
		assert.False(t, f.leaving(vid), "settled: no longer among the vouchers leaving the registry")
		assert.False(t, f.rdb.SIsMember(ctx, async.LeavingKey, bareID).Val(), "nor its bare id")
		for id, u := range bought {
			assert.Equal(t, order.StateCreated, f.state(u, id), "order %d, written before the retirement", id)
		}
		switch point {
		case "reopen":
			// Found, not 404: pending, or already written by the loop the other
			// writer's discovery may have started before it stopped.
			for id, u := range reopened {
				assert.Contains(t, []order.State{order.StatePending, order.StateCreated}, f.state(u, id),
					"order %d, admitted since the reopening", id)
			}
			f.readAgain(c, vid, bought, reopened)
		case "delete":
			assert.True(t, f.registered(vid), "without a sale hash: back in the registry, for the reload to find")
		default:
			assert.False(t, f.registered(vid), "retired: out of the registry")
		}
	})
}

// TestRetirementUnderWayIsNoLeftover: a voucher a retirement has just put among those leaving
// the registry is not settled by another writer's discovery before leftoverAfter: taken out of
// the set between that retirement's SREM and its put-back, a sale reopened before the SREM
// would answer 404 for its orders. The retirement then settles it itself.
func TestRetirementUnderWayIsNoLeftover(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		vid, bought := f.retiredSale(c)
		var reopened map[int64]int64
		// Another writer on the real clock: the sale is not over for it, so that its
		// discovery retires nothing itself.
		cfg := f.cfg
		cfg.Now = nil
		other := async.NewWriter(f.rdb, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg)
		discovered := false
		w := f.hookedWriter(&atCommand{cmd: "srem", do: func() { reopened = f.reopen(c, vid) }},
			&atCommand{cmd: "hexists", do: func() {
				async.Discover(other)
				discovered = true
				assert.True(t, f.leaving(vid), "still among the vouchers leaving the registry")
				for id, u := range reopened {
					assert.Contains(t, []order.State{order.StatePending, order.StateCreated}, f.state(u, id),
						"order %d, admitted since the reopening", id)
				}
			}})
		retired, err := async.Retire(context.Background(), w, vid)
		require.NoError(t, err)
		require.True(t, discovered)
		assert.False(t, retired, "reopened")
		stopped(t, other)
		f.readAgain(c, vid, bought, maps.Clone(reopened))
	})
}

// TestLeftoverIsOneRetirementsMember: each retirement has a member of its own among those
// leaving the registry (ID:token), and a leftover is one member seen there for
// leftoverAfter, not a voucher: a voucher whose stopped retirement left a member long ago is
// retired again (the sale reopened during it), and another writer's discovery, which settles
// the old member between the new retirement's SREM and its put-back, leaves the new one, under
// way, in the set, which keeps the reopened sale's orders found until that retirement settles
// it itself.
func TestLeftoverIsOneRetirementsMember(t *testing.T) {
	t.Parallel()
	withClock(t, async.Config{}, func(t *testing.T, f *fixture, c *clock) {
		ctx := context.Background()
		vid, bought := f.retiredSale(c)
		fail := &failing{cmds: map[string]int{"hexists": 1, "sadd": 1}, from: "srem"}
		_, err := async.Retire(ctx, f.hookedWriter(fail), vid)
		require.ErrorIs(t, err, errInjected)
		old := f.leavingMembers(vid)
		require.Len(t, old, 1, "the stopped retirement's member")

		// Another writer sees the old member once; on its next round it has been there for
		// leftoverAfter, and whatever it sees then for the first time has not.
		other := f.idleWriter()
		async.SetLeftoverAfter(other, time.Nanosecond)
		async.Discover(other)
		require.Equal(t, old, f.leavingMembers(vid), "seen once: no leftover yet")

		var reopened map[int64]int64
		settled := false
		w := f.hookedWriter(&atCommand{cmd: "srem", do: func() { reopened = f.reopen(c, vid) }},
			&atCommand{cmd: "hexists", do: func() {
				under := f.leavingMembers(vid)
				require.Len(t, under, 2, "the old member and the retirement's under way")
				async.Discover(other)
				settled = true
				now := f.leavingMembers(vid)
				assert.NotContains(t, now, old[0], "the leftover settled")
				assert.Len(t, now, 1, "the retirement under way keeps its member")
				for id, u := range reopened {
					assert.Contains(t, []order.State{order.StatePending, order.StateCreated}, f.state(u, id),
						"order %d, admitted since the reopening", id)
				}
			}})
		retired, err := async.Retire(ctx, w, vid)
		require.NoError(t, err)
		require.True(t, settled)
		assert.False(t, retired, "reopened")
		assert.Empty(t, f.leavingMembers(vid), "the retirement settled its own member")
		stopped(t, other)
		f.readAgain(c, vid, bought, maps.Clone(reopened))
	})
}
