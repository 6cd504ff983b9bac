package pitfall

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite docs/pitfalls.md from the runs")

// envFor returns the runner's Env for a test server: the embedded one means a fresh
// miniredis per run (each run owns its clock); the real one is addressed as is.
func envFor(r testenv.Redis) Env {
	if r.Mini != nil {
		return Env{}
	}
	return Env{RedisAddr: r.Client.Options().Addr}
}

// TestPitfall runs every pitfall that needs no redis-server binary on each server: the wrong
// lock must show its failure, every fix must not.
func TestPitfall(t *testing.T) {
	for _, srv := range testenv.RedisServers(t) {
		for _, p := range All() {
			if p.NeedsServerBin || p.NeedsZooKeeper {
				continue // TestPitfallFailover, TestPitfallZooKeeperLessons: integration suite
			}
			t.Run(srv.Name+"/"+p.Name, func(t *testing.T) {
				t.Parallel()
				assertPitfall(t, p, envFor(srv))
			})
		}
	}
}

func assertPitfall(t *testing.T, p *Pitfall, env Env) {
	t.Helper()
	results, err := p.Run(context.Background(), env)
	require.NoError(t, err)
	require.Len(t, results, len(p.Variants))
	for _, r := range results {
		if r.Variant.Wrong {
			assert.True(t, r.Verdict.Violated, "%s with the wrong lock: got no failure (%q), want one", p.Name, r.Verdict.Outcome)
		} else {
			assert.False(t, r.Verdict.Violated, "%s with fix %s: got a failure (%q), want none", p.Name, r.Variant.Name, r.Verdict.Outcome)
		}
		assert.True(t, r.OK())
		assert.NotEmpty(t, r.Events)
	}
}

// TestPitfallDocs checks that docs/pitfalls.md is what the runner produces (and with
// -update rewrites it). The embedded runs are deterministic, so any difference is a change
// in a pitfall or in the file. The failover section needs redis-server and the ZooKeeper
// lessons need ZooKeeper: they are regenerated when those are here, and their lessons are
// run in the integration suite (TestPitfallFailover, TestPitfallZooKeeperLessons).
func TestPitfallDocs(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "pitfalls.md")
	old, err := os.ReadFile(path)
	if !*update {
		require.NoError(t, err, "docs/pitfalls.md missing: run go test ./lessons/pitfall -run TestPitfallDocs -update")
	}
	env := Env{RedisServerBin: redisServerBin(t, false)}
	if addr := testenv.ZooKeeperAddr(); Reachable(addr) {
		env.ZooKeeperAddr = addr
	}
	sections := map[string]string{}
	for _, p := range All() {
		if p.NeedsServerBin && env.RedisServerBin == "" {
			t.Logf("%s: no redis-server binary here, its section is kept as committed", p.Name)
			continue
		}
		if p.NeedsZooKeeper && env.ZooKeeperAddr == "" {
			t.Logf("%s: no ZooKeeper at %s, its section is kept as committed", p.Name, testenv.ZooKeeperAddr())
			continue
		}
		results, err := p.Run(context.Background(), env)
		require.NoError(t, err)
		sections[p.Name] = DocSection(p, results)
	}
	got := Docs(sections, old)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	assert.Equal(t, string(old), string(got), "docs/pitfalls.md is stale: go test ./lessons/pitfall -run TestPitfallDocs -update")
}

// TestPitfallDeterministic runs each embedded pitfall twice: the timelines must be equal.
func TestPitfallDeterministic(t *testing.T) {
	for _, p := range All() {
		if p.NeedsServerBin || p.NeedsZooKeeper {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			first, err := p.Run(context.Background(), Env{})
			require.NoError(t, err)
			second, err := p.Run(context.Background(), Env{})
			require.NoError(t, err)
			for i := range first {
				assert.Equal(t, first[i].Events, second[i].Events, "%s/%s: timelines differ between runs", p.Name, first[i].Variant.Name)
			}
		})
	}
}

func TestPitfallLookup(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All() {
		assert.False(t, seen[p.Name], "duplicate name %s", p.Name)
		seen[p.Name] = true
		got, ok := Lookup(p.Name)
		assert.True(t, ok)
		assert.Same(t, p, got)
		assert.NotEmpty(t, p.Source, "%s has no source", p.Name)
		require.NotEmpty(t, p.Variants)
		assert.True(t, p.Variants[0].Wrong, "%s: first variant must be the wrong lock", p.Name)
	}
	_, ok := Lookup("no-such-pitfall")
	assert.False(t, ok)
}
