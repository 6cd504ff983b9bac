package asyncpitfall

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite docs/async-pitfalls.md from the embedded run")

// TestLessons: on every Redis under test, each lesson's wrong variant shows its failure and
// the right one, on the same scenario, keeps the books.
func TestLessons(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			results, err := RunAll(context.Background(), srv.Client, testenv.Unique("asyncpitfall"))
			require.NoError(t, err)
			require.Len(t, results, 6)
			for _, r := range results {
				assert.NotEmpty(t, r.Wrong.Broken, "%s wrong: the failure must show\n%s", r.Lesson.ID, strings.Join(r.Wrong.Timeline, "\n"))
				assert.Empty(t, r.Right.Broken, "%s right\n%s", r.Lesson.ID, strings.Join(r.Right.Timeline, "\n"))
				assert.Equal(t, int64(0), r.Right.Lost, "%s right: nothing lost", r.Lesson.ID)
				assert.Equal(t, int64(0), r.Right.Pending, "%s right: nothing left pending", r.Lesson.ID)
			}
			byID := map[string]Result{}
			for _, r := range results {
				byID[r.Lesson.ID] = r
			}
			// The figures each lesson is about.
			assert.Equal(t, int64(-3), byID["A1"].Wrong.RedisStock, "A1: the counter below zero")
			assert.Equal(t, int64(1), byID["A1"].Wrong.Admitted, "A1: one order for two units")
			assert.Equal(t, int64(2), byID["A1"].Right.Admitted)
			assert.Equal(t, int64(1), byID["A2"].Wrong.Rows, "A2: user 3 refused, one unit never sold")
			assert.Equal(t, int64(2), byID["A2"].Right.Rows, "A2: user 3 gets the unit given back")
			assert.Equal(t, int64(2), byID["A3"].Wrong.Lost, "A3: both acknowledged orders lost")
			assert.Equal(t, int64(2), byID["A3"].Right.Rows)
			assert.Equal(t, int64(2), byID["A4"].Wrong.Pending, "A4: both stuck")
			assert.Equal(t, int64(2), byID["A4"].Right.Rows)
			assert.Equal(t, int64(2), byID["A5"].Wrong.Rows, "A5: both units sold")
			assert.Equal(t, int64(1), byID["A5"].Wrong.RedisStock, "A5: and Redis still offers one, after user 3 took another")
			assert.Equal(t, int64(0), byID["A5"].Right.RedisStock)
			// User 3's order 103 was admitted for a unit that is already a row (it waits in the
			// stream), and Redis offers one more: two units over-admitted, not one.
			assert.Equal(t, int64(1), byID["A5"].Wrong.Queued, "A5: order 103 waits in the stream")
			assert.Contains(t, byID["A5"].Wrong.Broken, "2 unit(s) sold twice", "A5: the count includes the order admitted for a sold unit")
			assert.Equal(t, int64(0), byID["A5"].Wrong.Lost, "A5: nothing lost, counted per order (rows that are also dead letters count once)")
			assert.Equal(t, int64(1), byID["A6"].Wrong.Admitted, "A6: one 202, user 2 told 503")
			assert.Equal(t, int64(2), byID["A6"].Wrong.Rows, "A6: and user 2's order written all the same")
			assert.Equal(t, int64(2), byID["A6"].Right.Admitted, "A6: the unit user 2 did not get goes to user 3")
			assert.Equal(t, int64(2), byID["A6"].Right.Rows)
		})
	}
}

// TestDocs keeps docs/async-pitfalls.md equal to the embedded run's rendering; -update
// rewrites it.
func TestDocs(t *testing.T) {
	srv := testenv.EmbeddedRedis(t)
	results, err := RunAll(context.Background(), srv.Client, "docs")
	require.NoError(t, err)
	got := Render(results)
	const path = "../../docs/async-pitfalls.md"
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./lessons/asyncpitfall -run TestDocs -update")
	assert.Equal(t, string(want), got, "docs/async-pitfalls.md is stale: go test ./lessons/asyncpitfall -run TestDocs -update")
}
