package async_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/scripts/lua"
)

var heldScript = redis.NewScript(lua.AsyncHeld)

// heldStream is the stream the held check's cases ask about: 12 entries in each millisecond
// 9 to 12 (seqs 0 to 11, so that "10" follows "9" in both parts of an id), 200 in millisecond
// 20, and ids whose seqs need all 64 bits in millisecond 30.
func heldStream() []string {
	var ids []string
	for ms := 9; ms <= 12; ms++ {
		for seq := 0; seq < 12; seq++ {
			ids = append(ids, fmt.Sprintf("%d-%d", ms, seq))
		}
	}
	for seq := 0; seq < 200; seq++ {
		ids = append(ids, fmt.Sprintf("20-%d", seq))
	}
	return append(ids, "30-9", "30-10000000000000000000", "30-18446744073709551614", "30-18446744073709551615", "31-0")
}

// idRange is the ids of heldStream from ms-from to ms-to, every step-th.
func idRange(ms, from, to, step int) []string {
	var ids []string
	for seq := from; seq <= to; seq += step {
		ids = append(ids, fmt.Sprintf("%d-%d", ms, seq))
	}
	return ids
}

// TestHeldCountsEntriesGone: async_held.lua answers how many of a batch's entries are no longer
// in the stream, as one lookup per id did, whatever the batch's shape: contiguous, interleaved
// with other consumers' entries, spread wider than the one range it reads (claimed entries of a
// long backlog), in any order, with ids that order differently as strings or as doubles than in
// the stream.
func TestHeldCountsEntriesGone(t *testing.T) {
	t.Parallel()
	contiguous := append(idRange(9, 5, 11, 1), idRange(10, 0, 6, 1)...)
	interleaved := append(append(idRange(9, 0, 11, 2), idRange(10, 1, 11, 2)...), idRange(11, 0, 11, 2)...)
	spread := idRange(20, 0, 199, 40) // 5 ids over 161 entries: past the range's bound of 2 entries per id
	for _, c := range []struct {
		name    string
		batch   []string
		deleted []string // XDEL'd before the check
		missing bool     // the stream does not exist
		want    int
	}{
		{name: "contiguous", batch: contiguous},
		{name: "contiguous, some deleted", batch: contiguous, deleted: []string{"9-5", "9-10", "10-3"}, want: 3},
		{name: "contiguous, all deleted", batch: contiguous, deleted: contiguous, want: len(contiguous)},
		{name: "interleaved", batch: interleaved},
		{name: "interleaved, some deleted", batch: interleaved, deleted: []string{"9-0", "10-1", "10-2", "11-10"}, want: 3},
		{name: "unsorted", batch: reversed(contiguous)},
		{name: "unsorted, some deleted", batch: reversed(interleaved), deleted: []string{"11-10", "9-2"}, want: 2},
		{name: "spread beyond the bound", batch: spread},
		{name: "spread, one deleted in the range read, one past it", batch: spread, deleted: []string{"20-0", "20-120"}, want: 2},
		{name: "spread, unsorted, the last deleted", batch: reversed(spread), deleted: []string{"20-160"}, want: 1},
		{name: "spread, all deleted", batch: spread, deleted: spread, want: len(spread)},
		{name: "64-bit seqs", batch: []string{"31-0", "30-18446744073709551615", "30-18446744073709551614", "30-10000000000000000000", "30-9"}},
		{name: "64-bit seqs that a double cannot tell apart, the larger first", batch: []string{"30-18446744073709551615", "30-18446744073709551614"}},
		{name: "64-bit seqs that a double cannot tell apart, the larger deleted", batch: []string{"30-18446744073709551614", "30-18446744073709551615"},
			deleted: []string{"30-18446744073709551615"}, want: 1},
		{name: "one entry", batch: []string{"12-11"}},
		{name: "one entry deleted", batch: []string{"12-11"}, deleted: []string{"12-11"}, want: 1},
		{name: "missing stream", batch: contiguous, missing: true, want: len(contiguous)},
		{name: "a millisecond, not an entry id, asked as given", batch: []string{"9", "13"}, want: 1},
		{name: "no ids"},
	} {
		for _, r := range testenv.RedisServers(t) {
			t.Run(c.name+"/"+r.Name, func(t *testing.T) {
				ctx := context.Background()
				stream := testenv.Unique("test:held:")
				t.Cleanup(func() { _ = r.Client.Del(context.Background(), stream).Err() })
				if !c.missing {
					for _, id := range heldStream() {
						require.NoError(t, r.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: id, Values: []any{"order", "1"}}).Err())
					}
					if len(c.deleted) > 0 {
						require.NoError(t, r.Client.XDel(ctx, stream, c.deleted...).Err())
					}
				}
				args := make([]any, len(c.batch))
				for i, id := range c.batch {
					args[i] = id
				}
				got, err := heldScript.Run(ctx, r.Client, []string{stream}, args...).Int()
				require.NoError(t, err)
				assert.Equal(t, c.want, got, "entries of %v gone", c.batch)
			})
		}
	}
}

func reversed(ids []string) []string {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

// TestInStreamOrder: the writer hands the held check its batch in the stream's order, (ms, seq)
// as unsigned 64-bit numbers, so that the check reads it in one range from the first id to the
// last.
func TestInStreamOrder(t *testing.T) {
	t.Parallel()
	got := async.InStreamOrder([]string{"10-0", "9-10", "9-9", "18446744073709551615-0", "9-18446744073709551615", "9-18446744073709551614", "+"})
	want := []any{"+", "9-9", "9-10", "9-18446744073709551614", "9-18446744073709551615", "10-0", "18446744073709551615-0"}
	assert.Equal(t, want, got)
}

// TestStreamIDTime: the time part of an entry id, which the oldest-pending gauge reports; an id
// whose ms part is no number, or past what a time holds, has none.
func TestStreamIDTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   string
		want int64 // ms since the epoch
		ok   bool
	}{
		{"1700000000123-5", 1700000000123, true},
		{"1700000000123", 1700000000123, true},
		{"x-1", 0, false},
		{"18446744073709551615-0", 0, false},
	} {
		got, ok := async.StreamIDTime(tc.id)
		assert.Equal(t, tc.ok, ok, tc.id)
		if tc.ok {
			assert.Equal(t, tc.want, got.UnixMilli(), tc.id)
		}
	}
}
