package main

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/lessons/pitfall"
)

func runPitfallsCmd(t *testing.T, getenv func(string) string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"seckill", "pitfalls"}, args...), getenv, &out, &errb)
	return out.String() + errb.String(), err
}

func noPath(string) string { return "" }

func TestRunPitfallsOne(t *testing.T) {
	out, err := runPitfallsCmd(t, noPath, "plain-del", "get-then-del")
	require.NoError(t, err, out)
	for _, want := range []string{
		"== 5. Unlock by plain DEL (plain-del)",
		"A deletes B's lock",
		"outcome: FAILS, as the articles say — B and C both inside the critical section from t=9 to t=10",
		"outcome: holds — the lock let in A, then B, one at a time, and refused C at t=9",
		"all 4 runs as expected",
	} {
		assert.Contains(t, out, want)
	}
}

func TestRunPitfallsMermaidAndFlagsAfterNames(t *testing.T) {
	out, err := runPitfallsCmd(t, noPath, "clock-skew", "--mermaid")
	require.NoError(t, err, out)
	assert.Contains(t, out, "sequenceDiagram")
	assert.Contains(t, out, "A->>Redis: t=1 SET lock:job A-g1 NX PXAT T0-5s")
}

func TestRunPitfallsList(t *testing.T) {
	out, err := runPitfallsCmd(t, noPath, "--list")
	require.NoError(t, err)
	for _, p := range pitfall.All() {
		assert.Contains(t, out, p.Name)
	}
}

func TestRunPitfallsErrors(t *testing.T) {
	_, err := runPitfallsCmd(t, noPath, "no-such")
	assert.ErrorContains(t, err, `no pitfall "no-such"`)
	_, err = runPitfallsCmd(t, noPath, "failover")
	assert.ErrorContains(t, err, "needs redis-server")
	_, err = runPitfallsCmd(t, noPath, "--no-such-flag")
	assert.Error(t, err)
	_, err = runPitfallsCmd(t, noPath, "zk-herd", "--zookeeper", noZooKeeper)
	assert.ErrorContains(t, err, "needs ZooKeeper")
	assert.ErrorContains(t, err, "scripts/services.sh up zookeeper")
}

// noZooKeeper is an address where nothing answers.
const noZooKeeper = "127.0.0.1:1"

// TestRunPitfallsAllWithoutServerBin runs everything on the embedded Redis, as on a bare
// machine: failover and the ZooKeeper lessons are left out and said so, in the summary too;
// everything else must be as expected.
func TestRunPitfallsAllWithoutServerBin(t *testing.T) {
	out, err := runPitfallsCmd(t, noPath, "--zookeeper", noZooKeeper)
	require.NoError(t, err, out)
	assert.Contains(t, out, "(failover): not run, needs redis-server")
	assert.Contains(t, out, "(zk-herd): not run, needs ZooKeeper and nothing answers at "+noZooKeeper)
	assert.Contains(t, out, "every wrong lock failed, every fix held")
	assert.Contains(t, out, "not run (nothing to show, not passed): failover, zk-session-expiry, zk-herd")
}

func TestDefaultZooKeeper(t *testing.T) {
	assert.Equal(t, "127.0.0.1:2181", defaultZooKeeper(noPath))
	env := func(k string) string { return map[string]string{"SECKILL_ZOOKEEPER_ADDRS": " zk1:2181 ,zk2:2181"}[k] }
	assert.Equal(t, "zk1:2181", defaultZooKeeper(env))
}

// TestRunPitfallsServerBinFromPath finds redis-server through the PATH that getenv gives.
func TestRunPitfallsServerBinFromPath(t *testing.T) {
	dir := t.TempDir()
	bin := dir + "/redis-server"
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	assert.Equal(t, bin, lookPath("redis-server", "/nonexistent:"+dir))
	assert.Empty(t, lookPath("redis-server", "/nonexistent"))
}

// TestPitfallsSummaryFails checks the exit status: a wrong lock that shows no failure, or
// a fix that fails, makes the command fail.
func TestPitfallsSummaryFails(t *testing.T) {
	p, _ := pitfall.Lookup("plain-del")
	tests := []struct {
		name     string
		variant  pitfall.Variant
		violated bool
		wantErr  bool
	}{
		{"wrong fails", pitfall.Variant{Name: "wrong", Wrong: true}, true, false},
		{"wrong does not fail", pitfall.Variant{Name: "wrong", Wrong: true}, false, true},
		{"fix holds", pitfall.Variant{Name: "fix"}, false, false},
		{"fix fails", pitfall.Variant{Name: "fix"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			r := pitfall.Result{Pitfall: p, Variant: tt.variant, Verdict: pitfall.Verdict{Violated: tt.violated, Outcome: "x"}}
			err := printSummary(&out, []pitfall.Result{r}, nil)
			assert.Equal(t, tt.wantErr, err != nil, "got err %v", err)
		})
	}
}
