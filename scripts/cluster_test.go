// Package scripts_test checks the shell scripts' behaviour that the Go tests of the service
// cannot see: how scripts/cluster.sh stops what it started.
package scripts_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeInstance stands in for bin/seckill (cluster.sh recognises an instance by "bin/seckill"
// in its command line): on SIGTERM it marks that it got it, then takes up to 6 s to stop,
// waiting for the mark of instance $2, and records whether it saw that mark before it exited.
const fakeInstance = `dir=$1 me=$2 other=$3
on_term() {
	: >"$dir/term-$me"
	for _ in $(seq 60); do
		if [[ -e $dir/term-$other ]]; then echo saw >"$dir/result-$me"; exit 0; fi
		sleep 0.1
	done
	echo alone >"$dir/result-$me"
	exit 0
}
trap on_term TERM
: >"$dir/up-$me"
while :; do sleep 0.1; done
`

// TestDownStopsTheInstancesTogether: `cluster.sh down` sends every instance its SIGTERM before
// it waits for any of them, so instances that each take their whole stop bound hold it for the
// longest bound, not for the sum. Each fake instance, once signalled, waits for the other's
// signal before it exits: stopped one after the other, the first gave up waiting ("alone")
// before the second was signalled.
func TestDownStopsTheInstancesTogether(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("cluster.sh needs bash: %v", err)
	}
	run := t.TempDir()
	bin := filepath.Join(run, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	fake := filepath.Join(bin, "seckill")
	require.NoError(t, os.WriteFile(fake, []byte(fakeInstance), 0o755))

	var procs []*exec.Cmd
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_, _ = p.Process.Wait()
		}
	})
	for i, other := range []int{2, 1} {
		n := i + 1
		p := exec.Command("bash", fake, run, fmt.Sprint(n), fmt.Sprint(other))
		require.NoError(t, p.Start())
		procs = append(procs, p)
		pid := []byte(fmt.Sprint(p.Process.Pid))
		require.NoError(t, os.WriteFile(filepath.Join(run, fmt.Sprintf("seckill-%d.pid", n)), pid, 0o644))
		// Each states a stop bound of 7 s, as an instance does when it starts serving: down
		// allows it 12 s before a SIGKILL, longer than the fake's 6 s of waiting.
		line := `time=2026-11-27T00:00:00Z level=INFO msg="seckill serving" addr=127.0.0.1:0 stop_within=7s` + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(run, fmt.Sprintf("seckill-%d.log", n)), []byte(line), 0o644))
	}
	for n := 1; n <= 2; n++ {
		// The trap is set before the mark: a SIGTERM sent once the mark is there is handled.
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(run, fmt.Sprintf("up-%d", n)))
			return err == nil
		}, 10*time.Second, 10*time.Millisecond, "fake instance %d did not start", n)
	}

	down := exec.Command("bash", "cluster.sh", "down")
	down.Env = append(os.Environ(), "CLUSTER_RUN_DIR="+run)
	out, err := down.CombinedOutput()
	require.NoError(t, err, "cluster.sh down: %s", out)
	for n := 1; n <= 2; n++ {
		got, err := os.ReadFile(filepath.Join(run, fmt.Sprintf("result-%d", n)))
		require.NoError(t, err, "instance %d never got its SIGTERM; cluster.sh down said:\n%s", n, out)
		if strings.TrimSpace(string(got)) != "saw" {
			t.Errorf("instance %d: got %q, want \"saw\": it was stopped before the other got its SIGTERM\n%s", n, got, out)
		}
	}
	for n := 1; n <= 2; n++ {
		_, err := os.Stat(filepath.Join(run, fmt.Sprintf("seckill-%d.pid", n)))
		require.True(t, os.IsNotExist(err), "seckill-%d.pid left behind", n)
	}
}
