# shellcheck shell=bash
# ticks.sh — sourced by scripts/capacity.sh and scripts/scaling.sh: the CPU time of processes,
# read from /proc, for the figures of CPU per answer in docs/loadtest.md.
#
#   ticks PID...   user+system CPU time of the processes so far, in clock ticks (0 for one
#                  that is gone); divide by `getconf CLK_TCK` for seconds

ticks() {
	local t=0 p
	for p in "$@"; do
		[[ -r /proc/$p/stat ]] || continue
		# Field 2, the command name, may hold spaces: count the fields after its ")".
		t=$((t + $(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
	done
	echo "$t"
}
