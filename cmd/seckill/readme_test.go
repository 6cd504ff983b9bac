package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/app"
)

// TestREADMEConfigTable: README's configuration table names every setting the service reads,
// and nothing else, each with its flag and its default; its guard table names every
// SECKILL_LOCK. The README is where a user looks these up.
func TestREADMEConfigTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)

	// What parseConfig reads from the environment, asked through getenv.
	var read []string
	_, err = parseConfig("serve", nil, func(k string) string {
		if !slices.Contains(read, k) {
			read = append(read, k)
		}
		return ""
	}, io.Discard, nil)
	require.NoError(t, err)

	rows := markdownTable(t, readme, "| Variable | Flag | Default | Meaning |")
	var documented []string
	for _, r := range rows {
		documented = append(documented, strings.Trim(r[0], "`"))
	}
	assert.ElementsMatch(t, read, documented, "the settings parseConfig reads (first) against README's table's (second)")

	// A default the flag leaves empty stands for a value the service picks; the README gives
	// it in words, or, for these, as the value.
	emptyMeans := map[string]string{"SECKILL_REDLOCK_ADDRS": strings.Join(app.DefaultRedLockAddrs, ",")}
	for _, s := range settings {
		i := slices.IndexFunc(rows, func(r []string) bool { return r[0] == "`"+s.env+"`" })
		if i < 0 {
			continue // reported above
		}
		r := rows[i]
		assert.Equal(t, "`-"+s.flag+"`", r[1], "%s: README's flag", s.env)
		def, words := r[2], strings.HasPrefix(r[2], "*(")
		if !words {
			lit, _, ok := strings.Cut(strings.TrimPrefix(def, "`"), "`")
			if !assert.True(t, strings.HasPrefix(def, "`") && ok, "%s: README's default %q is neither `a value` nor *(words)*", s.env, def) {
				continue
			}
			def = lit
		}
		want := s.def
		if want == "" {
			want = emptyMeans[s.env]
		}
		switch {
		case want == "":
			assert.True(t, words, "%s: the flag's default is empty, README's is %q", s.env, r[2])
		case words:
			t.Errorf("%s: the flag's default is %q, README's %q", s.env, want, r[2])
		case strings.Contains(def, "…"):
			head, tail, _ := strings.Cut(def, "…")
			assert.True(t, strings.HasPrefix(want, head) && strings.HasSuffix(want, tail), "%s: default %q, README's %q", s.env, want, def)
		default:
			assert.True(t, sameSetting(want, def), "%s: default %q, README's %q", s.env, want, def)
		}
	}

	var guards []string
	for _, r := range markdownTable(t, readme, "| `SECKILL_LOCK` | Guard | Choose it when |") {
		guards = append(guards, strings.Trim(r[0], "`"))
	}
	var kinds []string
	for k := range app.LockKinds {
		kinds = append(kinds, k)
	}
	assert.ElementsMatch(t, kinds, guards, "app.LockKinds (first) against README's guard table (second)")
}

// sameSetting reports whether two spellings of a default are the same value: 24h and 24h0m0s.
func sameSetting(a, b string) bool {
	da, errA := time.ParseDuration(a)
	db, errB := time.ParseDuration(b)
	if errA == nil && errB == nil {
		return da == db
	}
	return a == b
}

// markdownTable returns the cells of the rows of the table under the header line header.
func markdownTable(t *testing.T, md, header string) [][]string {
	t.Helper()
	_, after, ok := strings.Cut(md, "\n"+header+"\n")
	require.True(t, ok, "README has no table %q", header)
	lines := strings.Split(after, "\n")[1:] // the |---| line
	var rows [][]string
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	require.NotEmpty(t, rows, "README's table %q has no rows", header)
	return rows
}
