#!/usr/bin/env bash
# capacity.sh — the synchronous order path's closed-loop ceiling (what `make capacity` runs), as a
# ratio of the DB baseline measured in the same run, in about a minute:
#   1. scripts/cluster.sh up (2 instances + nginx), a voucher with more stock than can sell;
#   2. ROUNDS times, back to back:
#      a. wrk through nginx: CONNECTIONS connections in a closed loop (each sends its next order
#         as soon as the last one is answered), every request a new user, for DURATION seconds;
#      b. bin/harness baseline: the same order transaction straight at MariaDB (the service's
#         own store) from CONNECTIONS goroutines for DURATION seconds, the cluster idle;
#      with the CPU time of every process on the path sampled over the middle of each;
#   3. the stock the database says was sold must equal the 201s wrk counted; cluster down, the
#      voucher's sale ended (also on failure or Ctrl-C);
#   4. each round's ratio service orders/s ÷ baseline orders/s, and their median.
# Short alternating rounds, not one long run of each, because the machine is shared: a burst of
# other jobs then weighs on both sides of a ratio instead of on one.
# It exits 1 if a step fails, if wrk saw an answer other than 201, or if the books disagree; the
# ratio is printed, never judged: on a machine shared with other jobs it moves with their load.
#
# Settings (environment):
#   CONNECTIONS   closed-loop concurrency of both the service and the baseline (default 64)
#   DURATION      seconds of load of each, per round (default 10)
#   ROUNDS        rounds (default 3)
#   LOCK          SECKILL_LOCK of the instances (default redis)
#   OUT           results directory (default run/capacity)
#   LOADTEST_DSN, BASELINE_DSN, CLUSTER_BASE_PORT, CLUSTER_NGINX_PORT   as for scripts/loadtest.sh
#   PPROF=1       also take a CPU profile of instance 1 during the first round's service load
#                 (SECKILL_PPROF_ADDR on CLUSTER_BASE_PORT+50), written to $OUT/cpu-instance1.pprof
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$ROOT/run/capacity}
NGINX_PORT=${CLUSTER_NGINX_PORT:-8080}
BASE_PORT=${CLUSTER_BASE_PORT:-18081}
ADMIN_TOKEN=capacity-admin-token
STOCK=100000000
LOADTEST_DSN=${LOADTEST_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_loadtest?parseTime=true&loc=UTC'}
BASELINE_DSN=${BASELINE_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_baseline?parseTime=true&loc=UTC'}
((DURATION >= 6 && ROUNDS >= 1)) || { echo "capacity: want DURATION >= 6 seconds and ROUNDS >= 1" >&2; exit 2; }

command -v wrk >/dev/null || {
	echo "capacity: wrk not found: installing Debian package wrk" >&2
	sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends wrk >/dev/null
}
mkdir -p "$OUT"
rm -f "$OUT"/*.txt "$OUT"/*.json "$OUT"/*.pprof

export SECKILL_LOCK=${LOCK:-redis} SECKILL_MYSQL_DSN=$LOADTEST_DSN SECKILL_ADMIN_TOKEN=$ADMIN_TOKEN
[[ ${PPROF:-0} == 1 ]] && export CLUSTER_PPROF_BASE_PORT=$((BASE_PORT + 50))

# shellcheck source=ticks.sh
source scripts/ticks.sh

# The process groups whose CPU is sampled: name → pids.
declare -A groups
# snapshot NAME: every group's ticks and the machine's "busy total" ticks, into the array NAME.
snapshot() {
	local -n into=$1
	local g
	for g in "${!groups[@]}"; do
		# shellcheck disable=SC2086 # the group's pids, split on purpose
		into[$g]=$(ticks ${groups[$g]})
	done
	into[machine]=$(machine_ticks)
}

# accumulate ACC BEFORE AFTER SECONDS: adds the window's ticks of every group, the machine's
# busy and total ticks, and its seconds to the totals in the array ACC.
accumulate() {
	local -n acc=$1 a=$2 b=$3
	local g ab at bb bt
	for g in "${!groups[@]}"; do acc[$g]=$((${acc[$g]:-0} + b[$g] - a[$g])); done
	read -r ab at <<<"${a[machine]}"
	read -r bb bt <<<"${b[machine]}"
	acc[busy]=$((${acc[busy]:-0} + bb - ab))
	acc[total]=$((${acc[total]:-0} + bt - at))
	acc[secs]=$((${acc[secs]:-0} + $4))
}

# cpu_table ACC ORDERS_PER_SEC: each group's CPU over the sampled windows, in cores, as a share
# of the machine's busy time, and per order at the side's mean rate.
cpu_table() {
	local -n acc=$1
	local rate=$2 hz g
	hz=$(getconf CLK_TCK)
	printf '  %-14s %6s %8s %13s\n' process cores "of busy" "CPU ms/order"
	for g in $(printf '%s\n' "${!acc[@]}" | grep -vx 'busy\|total\|secs' | sort); do
		((acc[$g] > 0)) || continue
		awk -v n="$g" -v t="${acc[$g]}" -v hz="$hz" -v s="${acc[secs]}" -v busy="${acc[busy]}" -v r="$rate" \
			'BEGIN { printf "  %-14s %6.2f %7.0f%% %13.2f\n", n, t / hz / s, busy ? 100 * t / busy : 0, 1000 * t / hz / s / r }'
	done
	awk -v busy="${acc[busy]}" -v total="${acc[total]}" -v n="$(nproc)" \
		'BEGIN { printf "  machine busy %.0f%% of %d cores (the part not listed: other jobs)\n", 100 * busy / total, n }'
}

# reaped_ticks: user+system CPU time of this shell's children that have been waited for.
reaped_ticks() { awk '{sub(/.*\) /, ""); print $14 + $15}' "/proc/$$/stat"; }

# timed NAME ACC: runs the command after the two arguments in the background, samples the
# CPU of the groups over its middle (from 1 s after the start to 1 s before the end) into ACC,
# and adds the command's own CPU as NAME, from its whole run (read when it is reaped) scaled to
# the middle's length.
timed() {
	local name=$1 acc=$2 pid c0 status=0
	shift 2
	c0=$(reaped_ticks)
	"$@" &
	pid=$!
	sleep 1
	declare -A t0 t1
	snapshot t0
	sleep $((DURATION - 2))
	snapshot t1
	accumulate "$acc" t0 t1 $((DURATION - 2))
	wait "$pid" || status=$?
	local -n into=$acc
	into[$name]=$((${into[$name]:-0} + ($(reaped_ticks) - c0) * (DURATION - 2) / DURATION))
	return "$status"
}

# end_sales: end the sale of the run's voucher (on sale 1 h, tens of thousands of orders) once
# the cluster is down, at the end and at exit (scripts/end-sales.sh).
# shellcheck source=end-sales.sh
source scripts/end-sales.sh
voucher=""
end_sales() {
	[[ -n $voucher ]] || return 0
	end_sales_of capacity "$voucher"
}

echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/') (before)"
scripts/cluster.sh down
trap 'scripts/cluster.sh down; end_sales || true' EXIT
scripts/cluster.sh up

now=$(date -u +%s)
voucher=$(curl -fsS -X POST "http://127.0.0.1:$NGINX_PORT/api/vouchers" -H "Authorization: Bearer $ADMIN_TOKEN" -H "Content-Type: application/json" \
	-d "{\"title\":\"capacity $now\",\"stock\":$STOCK,\"beginTime\":\"$(date -u -d @$((now - 60)) +%FT%TZ)\",\"endTime\":\"$(date -u -d @$((now + 3600)) +%FT%TZ)\"}" |
	sed -n 's/.*"id":\([0-9]*\).*/\1/p')
[[ -n $voucher ]] || { echo "capacity: could not create the voucher" >&2; exit 1; }

run=${CLUSTER_RUN_DIR:-$ROOT/run/cluster}
nginx_pid=$(cat "$run/nginx.pid")
groups[nginx]="$nginx_pid $(pgrep -P "$nginx_pid" | tr '\n' ' ')"
groups[instances]="$(cat "$run"/seckill-*.pid | tr '\n' ' ')"
groups[mariadb]=$(listener_pid 3306)
groups[redis]=$(listener_pid 6379)

echo "== $ROUNDS rounds of: wrk -c$CONNECTIONS -d${DURATION}s through nginx 127.0.0.1:$NGINX_PORT (2 instances, LOCK=$SECKILL_LOCK, voucher $voucher), then bin/harness baseline -workers $CONNECTIONS -duration ${DURATION}s"
declare -A svc_cpu base_cpu
requests=0
printf '%-6s %14s %14s %6s  %s\n' round "service o/s" "baseline o/s" ratio "load average" | tee "$OUT/rounds.txt"
for ((r = 1; r <= ROUNDS; r++)); do
	if [[ ${PPROF:-0} == 1 && $r == 1 ]]; then
		curl -fsS -o "$OUT/cpu-instance1.pprof" \
			"http://127.0.0.1:$CLUSTER_PPROF_BASE_PORT/debug/pprof/profile?seconds=$((DURATION - 2))" &
	fi
	VOUCHER_ID=$voucher USER_BASE=$((3000000000 + r * 100000000)) timed wrk svc_cpu \
		wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s loadtest/wrk/order.lua \
		"http://127.0.0.1:$NGINX_PORT" >"$OUT/wrk-$r.txt" 2>&1 || { cat "$OUT/wrk-$r.txt" >&2; exit 1; }
	wait # the profile
	n=$(awk '/requests in/{print $1}' "$OUT/wrk-$r.txt")
	secs=$(awk '/requests in/{sub(/s,$/, "", $4); print $4}' "$OUT/wrk-$r.txt")
	if grep -q 'Non-2xx\|Socket errors' "$OUT/wrk-$r.txt"; then
		cat "$OUT/wrk-$r.txt" >&2
		echo "capacity: FAILED: every answer must be a 201" >&2
		exit 1
	fi
	requests=$((requests + n))
	svc=$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')

	timed harness base_cpu bin/harness baseline -dsn "$BASELINE_DSN" -workers "$CONNECTIONS" -duration "${DURATION}s" \
		-out "$OUT/baseline-$r.json" >"$OUT/baseline-$r.txt" 2>&1 || { cat "$OUT/baseline-$r.txt" >&2; exit 1; }
	base=$(sed -n 's/.*"ordersPerSec": *\([0-9.]*\).*/\1/p' "$OUT/baseline-$r.json" | head -n 1 | xargs printf '%.1f')
	ratio=$(awk -v s="$svc" -v b="$base" 'BEGIN { printf "%.2f", s / b }')
	printf '%-6s %14s %14s %6s  %s\n' "$r" "$svc" "$base" "$ratio" "$(uptime | sed 's/.*load average: //')" | tee -a "$OUT/rounds.txt"
done
stock=$(curl -fsS "http://127.0.0.1:$NGINX_PORT/api/vouchers/$voucher" | sed -n 's/.*"stock":\([0-9]*\).*/\1/p')
sold=$((STOCK - stock))
echo "== books: wrk counted $requests answers, all 201; the database sold $sold"
# wrk stops at its deadline with requests in flight: those may commit unanswered, at most one
# per connection and round.
if ((sold < requests || sold > requests + CONNECTIONS * ROUNDS)); then
	echo "capacity: FAILED: the 201s and the stock sold disagree" >&2
	exit 1
fi
scripts/cluster.sh down
trap - EXIT
end_sales

read -r svc_mean base_mean < <(awk 'NR > 1 { s += $2; b += $3; n++ } END { printf "%.1f %.1f\n", s / n, b / n }' "$OUT/rounds.txt")
median=$(awk 'NR > 1 { print $4 }' "$OUT/rounds.txt" | sort -n |
	awk '{ r[NR] = $1 } END { printf "%.2f\n", NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2 }')
echo "== latency of the last round's service load (wrk)"
sed -n '/Latency Distribution/,/99%/p' "$OUT/wrk-$ROUNDS.txt"
echo "== CPU while wrk drove the service (the middle $((DURATION - 2)) s of each round; mariadb and redis are shared servers)"
cpu_table svc_cpu "$svc_mean" | tee "$OUT/cpu-service.txt"
echo "== CPU while the baseline ran"
cpu_table base_cpu "$base_mean" | tee "$OUT/cpu-baseline.txt"
echo "== machine: $(uptime | sed 's/.*load average/load average/') (after)"
printf 'capacity: service %.1f orders/s, DB baseline %.1f orders/s (means of %d rounds, %d connections each); median ratio %.2f\n' \
	"$svc_mean" "$base_mean" "$ROUNDS" "$CONNECTIONS" "$median" | tee "$OUT/ratio.txt"
