# shellcheck shell=bash
# ticks.sh — sourced by scripts/capacity.sh, scripts/scaling.sh and scripts/abtest.sh: the CPU time of processes,
# read from /proc, for the figures of CPU per answer in docs/loadtest.md.
#
#   ticks PID...   user+system CPU time of the processes so far, in clock ticks (0 for one
#                  that is gone); divide by `getconf CLK_TCK` for seconds
#   machine_ticks  "busy total": the machine's busy and total clock ticks so far (/proc/stat)
#   listener_pid PORT  the process listening on 127.0.0.1:PORT (a shared server: read, never touched)
#   runq_wait PID...   the time the processes' threads have waited so far for a core while ready
#                      to run, in µs (the second field of /proc/PID/task/*/schedstat; threads gone
#                      are not counted)

ticks() {
	local t=0 p
	for p in "$@"; do
		[[ -r /proc/$p/stat ]] || continue
		# Field 2, the command name, may hold spaces: count the fields after its ")".
		t=$((t + $(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
	done
	echo "$t"
}

machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }

listener_pid() { ss -Hltnp "sport = :$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n 1; }

runq_wait() {
	local p
	for p in "$@"; do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done | awk '{ w += $2 } END { printf "%d\n", w / 1000 }'
}
