#!/usr/bin/env bash
# capacity.sh — the synchronous order path's closed-loop ceiling (what `make capacity` runs), as a
# ratio of the DB baseline measured in the same run, in about two minutes:
#   1. scripts/cluster.sh up (2 instances + nginx), a voucher with more stock than can sell;
#   2. wrk through nginx: CONNECTIONS connections in a closed loop (each sends its next order as
#      soon as the last one is answered), every request a new user, for DURATION seconds, with
#      the CPU time of every process on the path sampled over the middle of the run;
#   3. the stock the database says was sold must equal the 201s wrk counted; cluster down;
#   4. bin/harness baseline: the same order transaction straight at MariaDB from CONNECTIONS
#      goroutines for DURATION seconds;
#   5. service orders/s ÷ baseline orders/s.
# It exits 1 if a step fails, if wrk saw an answer other than 201, or if the books disagree; the
# ratio is printed, never judged: on a machine shared with other jobs it moves with their load.
#
# Settings (environment):
#   CONNECTIONS   closed-loop concurrency of both the service run and the baseline (default 64)
#   DURATION      seconds of load of each (default 20)
#   LOCK          SECKILL_LOCK of the instances (default redis)
#   OUT           results directory (default run/capacity)
#   LOADTEST_DSN, BASELINE_DSN, CLUSTER_BASE_PORT, CLUSTER_NGINX_PORT   as for scripts/loadtest.sh
#   PPROF=1       also take a CPU profile of instance 1 during the load (SECKILL_PPROF_ADDR on
#                 CLUSTER_BASE_PORT+50), written to $OUT/cpu-instance1.pprof
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-20}
OUT=${OUT:-$ROOT/run/capacity}
NGINX_PORT=${CLUSTER_NGINX_PORT:-8080}
BASE_PORT=${CLUSTER_BASE_PORT:-18081}
ADMIN_TOKEN=capacity-admin-token
LOADTEST_DSN=${LOADTEST_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_loadtest?parseTime=true&loc=UTC'}
BASELINE_DSN=${BASELINE_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_baseline?parseTime=true&loc=UTC'}
((DURATION >= 8)) || { echo "capacity: DURATION=$DURATION: want at least 8 seconds" >&2; exit 2; }

command -v wrk >/dev/null || {
	echo "capacity: wrk not found: installing Debian package wrk" >&2
	sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends wrk >/dev/null
}
mkdir -p "$OUT"

export SECKILL_LOCK=${LOCK:-redis} SECKILL_MYSQL_DSN=$LOADTEST_DSN SECKILL_ADMIN_TOKEN=$ADMIN_TOKEN
[[ ${PPROF:-0} == 1 ]] && export CLUSTER_PPROF_BASE_PORT=$((BASE_PORT + 50))

# listener_pid PORT: the process listening on 127.0.0.1:PORT (a shared server: read, never touched).
listener_pid() { ss -Hltnp "sport = :$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n 1; }

# ticks PID...: user+system CPU time of the processes, in clock ticks (0 for one that is gone).
ticks() {
	local t=0 p
	for p in "$@"; do
		[[ -r /proc/$p/stat ]] || continue
		t=$((t + $(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
	done
	echo "$t"
}
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }

# sample NAME PID...: records the group's ticks now, into the array named NAME.
declare -A groups
sample() {
	local -n into=$1
	local g
	for g in "${!groups[@]}"; do
		# shellcheck disable=SC2086 # the group's pids, split on purpose
		into[$g]=$(ticks ${groups[$g]})
	done
	into[machine]=$(machine_ticks)
}

# cpu_table BEFORE AFTER SECONDS: each group's CPU over the window, in cores and as a share of
# the machine's busy time.
cpu_table() {
	local -n a=$1 b=$2
	local secs=$3 hz busy total g
	hz=$(getconf CLK_TCK)
	read -r b_busy b_total <<<"${b[machine]}"
	read -r a_busy a_total <<<"${a[machine]}"
	busy=$((b_busy - a_busy))
	total=$((b_total - a_total))
	printf '  %-22s %6s %8s\n' process cores "of busy"
	for g in $(printf '%s\n' "${!groups[@]}" | sort); do
		awk -v n="$g" -v t=$((b[$g] - a[$g])) -v hz="$hz" -v s="$secs" -v busy="$busy" \
			'BEGIN { printf "  %-22s %6.2f %7.0f%%\n", n, t / hz / s, busy ? 100 * t / busy : 0 }'
	done
	awk -v busy="$busy" -v total="$total" -v n="$(nproc)" \
		'BEGIN { printf "  %-22s %6.2f %7s   (machine busy %.0f%% of %d cores; the rest: other jobs)\n", "all processes", n * busy / total, "100%", 100 * busy / total, n }'
}

echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/') (before)"
scripts/cluster.sh down
trap 'scripts/cluster.sh down' EXIT
scripts/cluster.sh up

now=$(date -u +%s)
voucher=$(curl -fsS -X POST "http://127.0.0.1:$NGINX_PORT/api/vouchers" -H "Authorization: Bearer $ADMIN_TOKEN" \
	-d "{\"title\":\"capacity $now\",\"stock\":100000000,\"beginTime\":\"$(date -u -d @$((now - 60)) +%FT%TZ)\",\"endTime\":\"$(date -u -d @$((now + 3600)) +%FT%TZ)\"}" |
	sed -n 's/.*"id":\([0-9]*\).*/\1/p')
[[ -n $voucher ]] || { echo "capacity: could not create the voucher" >&2; exit 1; }

run=$ROOT/run/cluster
groups[nginx]="$(cat "$run/nginx.pid") $(pgrep -P "$(cat "$run/nginx.pid")" | tr '\n' ' ')"
groups[instances]="$(cat "$run"/seckill-*.pid | tr '\n' ' ')"
groups[mariadb]=$(listener_pid 3306)
groups[redis]=$(listener_pid 6379)

echo "== service: wrk -c$CONNECTIONS -d${DURATION}s through nginx 127.0.0.1:$NGINX_PORT, 2 instances, LOCK=$SECKILL_LOCK, voucher $voucher"
VOUCHER_ID=$voucher wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s loadtest/wrk/order.lua \
	"http://127.0.0.1:$NGINX_PORT" >"$OUT/wrk.txt" 2>&1 &
wrk_pid=$!
groups[wrk]=$wrk_pid
window=$((DURATION - 4))
sleep 2
declare -A s0 s1
sample s0
if [[ ${PPROF:-0} == 1 ]]; then
	curl -fsS -o "$OUT/cpu-instance1.pprof" "http://127.0.0.1:$CLUSTER_PPROF_BASE_PORT/debug/pprof/profile?seconds=$window" &
fi
sleep "$window"
sample s1
wait "$wrk_pid" || { cat "$OUT/wrk.txt" >&2; echo "capacity: wrk failed" >&2; exit 1; }
wait
cat "$OUT/wrk.txt"
echo "== CPU during the service run (${window}s in the middle; mariadb and redis are shared servers)"
cpu_table s0 s1 "$window" | tee "$OUT/cpu-service.txt"

requests=$(awk '/requests in/{print $1}' "$OUT/wrk.txt")
secs=$(awk '/requests in/{sub(/s,$/, "", $4); print $4}' "$OUT/wrk.txt")
non2xx=$(awk '/Non-2xx/{print $NF}' "$OUT/wrk.txt")
errors=$(awk '/Socket errors/{print $0}' "$OUT/wrk.txt")
stock=$(curl -fsS "http://127.0.0.1:$NGINX_PORT/api/vouchers/$voucher" | sed -n 's/.*"stock":\([0-9]*\).*/\1/p')
sold=$((100000000 - stock))
echo "== books: wrk counted $requests answers ($((${non2xx:-0})) not 2xx${errors:+; $errors}), the database sold $sold"
# wrk stops at the deadline with requests still in flight: those may commit unanswered, by at
# most one per connection.
if [[ -n ${non2xx:-} || -n $errors ]] || ((sold < requests || sold > requests + CONNECTIONS)); then
	echo "capacity: FAILED: every answer must be a 201 and each a sold unit" >&2
	exit 1
fi
svc=$(awk -v n="$requests" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')
scripts/cluster.sh down
trap - EXIT

echo "== DB baseline: bin/harness baseline -workers $CONNECTIONS -duration ${DURATION}s (cluster stopped; the same MariaDB)"
unset 'groups[nginx]' 'groups[instances]' 'groups[wrk]'
bin/harness baseline -dsn "$BASELINE_DSN" -workers "$CONNECTIONS" -duration "${DURATION}s" -out "$OUT/baseline.json" >"$OUT/baseline.txt" 2>&1 &
base_pid=$!
groups[harness]=$base_pid
sleep 2
declare -A b0 b1
sample b0
sleep "$window"
sample b1
wait "$base_pid" || { cat "$OUT/baseline.txt" >&2; exit 1; }
cat "$OUT/baseline.txt"
echo "== CPU during the baseline (${window}s in the middle)"
cpu_table b0 b1 "$window" | tee "$OUT/cpu-baseline.txt"
base=$(sed -n 's/.*"ordersPerSec": *\([0-9.]*\).*/\1/p' "$OUT/baseline.json" | head -n 1)

echo "== machine: $(uptime | sed 's/.*load average/load average/') (after)"
awk -v s="$svc" -v b="$base" -v c="$CONNECTIONS" 'BEGIN {
	printf "capacity: service %.1f orders/s, DB baseline %.1f orders/s (%d connections each): ratio %.2f\n", s, b, c, s / b }' |
	tee "$OUT/ratio.txt"
