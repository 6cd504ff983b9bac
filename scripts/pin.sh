# shellcheck shell=bash
# pin.sh — sourced by abtest.sh and scaling.sh (after ticks.sh, for listener_pid): a pinned run
# puts the service (nginx and the instances) on the first half of the cores and the stores
# (MariaDB, a Redis of the run's own) and the load generators on the other half, with taskset,
# the nearest a single machine comes to the stores and the clients on machines of their own.
# The machine's MariaDB is set back to every core by pin_undo (call it at exit).

PIN_NCPU=$(nproc)
PIN_ALL=0-$((PIN_NCPU - 1))
PIN_SERVICE=0-$((PIN_NCPU / 2 - 1))
PIN_REST=$((PIN_NCPU / 2))-$((PIN_NCPU - 1))

# pin_check: a pinned run needs two cores or more.
pin_check() { ((PIN_NCPU >= 2)) || { echo "pin: a pinned run needs two cores or more, this machine has $PIN_NCPU" >&2; exit 2; }; }

# pin_rest CPUS [PID...]: MariaDB (the listener on 3306), every thread of each PID and this
# shell (so the load generators it starts from now on) on CPUS.
pin_rest() {
	local cpus=$1 pid
	shift
	for pid in "$(listener_pid 3306)" "$@"; do
		[[ -z $pid ]] || taskset -a -c -p "$cpus" "$pid" >/dev/null
	done
	taskset -c -p "$cpus" $$ >/dev/null
}

# pin_undo: MariaDB back on every core.
pin_undo() {
	local pid
	pid=$(listener_pid 3306)
	[[ -z $pid ]] || taskset -a -c -p "$PIN_ALL" "$pid" >/dev/null 2>&1 || true
}
