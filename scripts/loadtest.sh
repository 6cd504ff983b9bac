#!/usr/bin/env bash
# loadtest.sh — one load test end to end (what `make loadtest` runs):
#   native cluster up (scripts/cluster.sh) → k6 (loadtest/k6/seckill.js) → verify → cluster down
#   and the end of the sales of the vouchers k6 created (always, also on failure or Ctrl-C) →
#   DB baseline (optional).
# It exits 0 only when the verdict is what the guard deserves: a clean run for a real lock, a
# detected failure for LOCK=local or none (see docs/loadtest.md), and k6's thresholds held.
#
# MODE=async runs the instances with SECKILL_ORDER_MODE=async against a redis-server of its own
# (started fresh, stopped at the end, unless SECKILL_REDIS_ADDR is set), adds k6's flash peak,
# and the verifier first waits for the stream writers to drain, then adds the asynchronous
# checks: every 202 one row and "created" on GET /api/orders/{id}, Redis stock + pending +
# orders = initial stock, nothing dead-lettered. KILL=1 (async only) freezes instance 2 in the
# middle of the sell-out and kills -9 it once it holds delivered, unacknowledged orders (see
# kill_instance): they must be claimed
# and written by instance 1; k6 retries the requests the kill cut off (RETRIES, default 3).
#
# Settings (environment; the Makefile passes its variables of the same names):
#   MODE            sync (default) or async: SECKILL_ORDER_MODE of the instances
#   KILL            1: kill instance 2 mid-sell-out (MODE=async only; default 0)
#   LOADTEST_REDIS_PORT  MODE=async: port of the load test's own redis-server (default 16379)
#   DRAIN_TIMEOUT   MODE=async: bound on the writers' drain after the load (default 60s)
#   LOCK            guard under test: redis (default), local, none, or any SECKILL_LOCK value
#   EXPECT_FAILURE  1 when the guard is expected to let duplicates through (default: 1 for
#                   local and none, 0 otherwise)
#   DURATION        seconds of load per scenario (default 30; two scenarios run one after the other)
#   ORDER_DELAY     SECKILL_ORDER_DELAY of the instances (default 0s: the race shows without it
#                   on MariaDB; see docs/loadtest.md)
#   BASELINE        1: measure the DB baseline after the cluster is down (default 1)
#   BASELINE_WORKERS, BASELINE_DURATION   (defaults 16,64 and 10s each; the instances'
#                   two pools open up to 64 connections, so 64 is the service's own concurrency)
#   DASHBOARD       1: export k6's web dashboard as HTML next to the summary (default 0)
#   K6              the k6 binary (default .tools/bin/k6, which `make loadtest` installs)
#   CLUSTER         native (default): scripts/cluster.sh starts and stops the topology;
#                   external: it already runs (docker compose up): use LOADTEST_DSN and
#                   INSTANCES as given, start and stop nothing (LOCK must match the running one)
#   INSTANCES       with CLUSTER=external: comma-separated base URLs of the instances (/metrics)
#   OUT             results directory (default run/loadtest/$LOCK)
#   LOADTEST_DSN    go-sql-driver DSN of the service's database (created if missing)
#   BASELINE_DSN    DSN of the baseline's own database (created if missing)
#   BASE_URL        where k6 sends its requests (default nginx: http://127.0.0.1:$CLUSTER_NGINX_PORT,
#                   8080 unless set; CLUSTER_BASE_PORT and CLUSTER_NGINX_PORT move a native cluster)
# and the k6 script's knobs (STORM_RATE, STORM_BURST, SELLOUT_RATE, SELLOUT_STOCK, STORM_P99_MS,
# SELLOUT_P99_MS, USER_BASE, FLASH_USERS, FLASH_BATCH, FLASH_VUS, FLASH_STOCK, RETRIES) pass through.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

LOCK=${LOCK:-redis}
MODE=${MODE:-sync}
KILL=${KILL:-0}
case $MODE in
sync) [[ $KILL == 0 ]] || { echo "loadtest: KILL=1 needs MODE=async (the sync kill is make chaos's kill-instance)" >&2; exit 1; } ;;
async) ;;
*) echo "loadtest: MODE=$MODE: want sync or async" >&2; exit 1 ;;
esac
[[ $KILL == 0 || $KILL == 1 ]] || { echo "loadtest: KILL=$KILL: want 0 or 1" >&2; exit 1; }
if [[ $MODE == async && ( $LOCK == local || $LOCK == none ) ]]; then
	# Admission in the asynchronous mode is one Redis script: no lock guards it, so a broken
	# lock breaks nothing there and its "failure expected" run could only fail.
	echo "loadtest: MODE=async takes no lock: LOCK=$LOCK tests nothing (docs/loadtest.md)" >&2
	exit 1
fi
case $LOCK in
local | none) EXPECT_FAILURE=${EXPECT_FAILURE:-1} ;;
*) EXPECT_FAILURE=${EXPECT_FAILURE:-0} ;;
esac
DURATION=${DURATION:-30}
BASELINE=${BASELINE:-1}
K6=${K6:-$ROOT/.tools/bin/k6}
if [[ $MODE == async ]]; then
	if [[ $KILL == 1 ]]; then
		OUT=${OUT:-$ROOT/run/loadtest/async-$LOCK-kill}
		RETRIES=${RETRIES:-3}
		# Stock for 4/5 of the sell-out (not 1/5): the kill, halfway, lands while orders flow.
		SELLOUT_STOCK=${SELLOUT_STOCK:-$((${SELLOUT_RATE:-300} * DURATION * 4 / 5))}
	else
		OUT=${OUT:-$ROOT/run/loadtest/async-$LOCK}
	fi
else
	OUT=${OUT:-$ROOT/run/loadtest/$LOCK}
fi
# MODE=async runs its own Redis (below), so it gets a database of its own: fencing tokens
# come from one Redis per database (see scripts/scaling.sh).
default_db=seckill_loadtest
[[ $MODE == async ]] && default_db=seckill_loadtest_async
LOADTEST_DSN=${LOADTEST_DSN:-"root:@tcp(127.0.0.1:3306)/$default_db?parseTime=true&loc=UTC"}
BASELINE_DSN=${BASELINE_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_baseline?parseTime=true&loc=UTC'}
ADMIN_TOKEN=loadtest-admin-token

[[ -x $K6 ]] || {
	echo "loadtest: no k6 at $K6 (make loadtest installs it: go install go.k6.io/k6@<pinned>)" >&2
	exit 1
}
mkdir -p "$OUT"
rm -f "$OUT"/{summary.json,orders.log,k6.txt,verdict.txt,baseline.txt,baseline.json,dashboard.html,kill-held,end-sales.txt}

export SECKILL_LOCK=$LOCK SECKILL_MYSQL_DSN=$LOADTEST_DSN SECKILL_ADMIN_TOKEN=$ADMIN_TOKEN
export SECKILL_ORDER_DELAY=${ORDER_DELAY:-0s}
export SECKILL_ORDER_MODE=$MODE

# end_sales: end the sales of the vouchers this run's k6 setup() created (on sale 2 h; the
# storm's unsold, with its users; scripts/end-sales.sh). setup() records each in k6's console
# output as it creates it, so their ids are there however k6 ended (the summary is written at
# its end, and not at all by a k6 killed). A failure is said, and fails a run that got to its
# verdict (end_status).
# shellcheck source=end-sales.sh
source scripts/end-sales.sh
end_status=0
end_sales() {
	[[ -f $OUT/orders.log ]] || return 0
	end_sales_of loadtest -k6-log "$OUT/orders.log" || end_status=1
}
# cleanup: stop what this script started (the cluster, the async run's redis-server), then end
# the run's sales: once the cluster that sold them is down, at the end and at exit, failed or
# interrupted too (the EXIT trap, which bash runs on SIGINT and SIGTERM as well).
# shellcheck source=own-redis.sh
source scripts/own-redis.sh
cleanup() {
	[[ ${CLUSTER:-native} != native ]] || scripts/cluster.sh down
	own_redis_stop
	end_sales
}
if [[ $MODE == async && -z ${SECKILL_REDIS_ADDR:-} && ${CLUSTER:-native} == native ]]; then
	trap cleanup EXIT
	own_redis_start "loadtest (set LOADTEST_REDIS_PORT)" "${LOADTEST_REDIS_PORT:-16379}" "$OUT/redis"
fi

CLUSTER=${CLUSTER:-native}
case $CLUSTER in
native)
	# A cluster left over from an interrupted run would carry old metrics: start from nothing.
	scripts/cluster.sh down
	trap cleanup EXIT
	scripts/cluster.sh up
	instances=(-instances-file run/cluster/instances)
	;;
external)
	[[ -n ${INSTANCES:-} ]] || { echo "loadtest: CLUSTER=external needs INSTANCES (base URLs of the instances)" >&2; exit 1; }
	(cd "$ROOT" && go build -o bin/harness ./loadtest/harness)
	trap cleanup EXIT # stops nothing, ends the run's sales
	instances=(-instances "$INSTANCES")
	;;
*)
	echo "loadtest: CLUSTER=$CLUSTER: want native or external" >&2
	exit 1
	;;
esac

# Write back what the build left in the page cache (k6, installed just before by make, and the
# binaries: a hundred megabytes and more) now, not 30 s into the load, when the kernel's
# periodic writeback would hold up the database's commit fsyncs: a CI run on a quiet machine
# (load average 1.0) had its sync sell-out stall about 0.4 s some 20 s in, and nginx's order
# gate shed 21 orders (server_errors 21) that no instance ever saw.
sync
echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/') (before the load)"
base_url=${BASE_URL:-http://127.0.0.1:${CLUSTER_NGINX_PORT:-8080}}
echo "== k6: MODE=$MODE LOCK=$LOCK, ${DURATION}s storm then ${DURATION}s sell-out$([[ $MODE == async ]] && echo ' then the flash peak')$([[ $KILL == 1 ]] && echo ', instance 2 killed mid-sell-out'), results in ${OUT#"$ROOT"/}"
k6_env=(-e "BASE_URL=$base_url" -e "MODE=$MODE" -e "LOCK=$LOCK" -e "EXPECT_FAILURE=$EXPECT_FAILURE" -e "DURATION=$DURATION" -e "ADMIN_TOKEN=$ADMIN_TOKEN" -e "SUMMARY=$OUT/summary.json")
for v in STORM_RATE STORM_BURST SELLOUT_RATE SELLOUT_STOCK STORM_P99_MS SELLOUT_P99_MS USER_BASE FLASH_USERS FLASH_BATCH FLASH_VUS FLASH_STOCK RETRIES; do
	[[ -z ${!v:-} ]] || k6_env+=(-e "$v=${!v}")
done
if [[ ${DASHBOARD:-0} == 1 ]]; then
	export K6_WEB_DASHBOARD=true K6_WEB_DASHBOARD_HOST=127.0.0.1 K6_WEB_DASHBOARD_EXPORT=$OUT/dashboard.html
fi
# kill_instance: in the middle of the sell-out (k6 starts it DURATION+3 s after its start),
# SIGSTOP instance 2 and SIGKILL it once its writer holds delivered, unacknowledged orders,
# which instance 1 must then claim. Frozen while it waits in XREADGROUP, it is handed the next
# orders admitted (by instance 1) within moments. Frozen anywhere else (between two reads: a
# few microseconds on a quiet machine, but as long as the instance waits for a core on a busy
# one) it is handed nothing and holds nothing, and the claim would go untested: then it is let
# run for 0.1 s and frozen again, up to 10 times. It writes how many orders the instance held
# to $OUT/kill-held: the verdict wants at least that many claimed, and fails on 0 (every try
# missed, the claim untested) as on a missing file (no kill).
kill_instance() {
	local run_dir=${CLUSTER_RUN_DIR:-$ROOT/run/cluster} pid held=0 try i
	sleep $((DURATION + 3 + DURATION / 2 + 1))
	pid=$(cat "$run_dir/seckill-2.pid")
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q bin/seckill || { echo "loadtest: instance 2 (pid $pid) is not running" >&2; return 1; }
	for ((try = 1; try <= 10; try++)); do
		kill -STOP "$pid"
		for ((i = 0; i < 10; i++)); do
			sleep 0.1
			held=$(held_by "$pid")
			((held > 0)) && break 2
		done
		kill -CONT "$pid"
		sleep 0.1
	done
	kill -KILL "$pid"
	echo "$held" >"$OUT/kill-held"
	echo "== killed instance 2 (pid $pid): SIGSTOP, SIGKILL at $(date -u +%T) holding $held delivered, unacknowledged orders (freeze $((try > 10 ? 10 : try)) of at most 10)"
}

# held_by PID: the entries delivered to the writer of the instance with that pid and not
# acknowledged, over every voucher's stream (its consumer name is host-PID-random).
held_by() {
	local addr=${SECKILL_REDIS_ADDR:-127.0.0.1:6379} key
	local cli=(redis-cli -h "${addr%:*}" -p "${addr##*:}")
	"${cli[@]}" --scan --pattern 'seckill:{voucher:*}:stream' | while read -r key; do
		"${cli[@]}" xinfo consumers "$key" seckill-writers # async.DefaultGroup
	done | awk -v pid="-$1-" 'prev == "name" { mine = index($0, pid) > 0 } prev == "pending" && mine { n += $0 } { prev = $0 } END { print n + 0 }'
}
kill_pid=""
if [[ $KILL == 1 ]]; then
	kill_instance &
	kill_pid=$!
fi
k6_status=0
"$K6" run --quiet --no-color --log-format=json --console-output="$OUT/orders.log" \
	"${k6_env[@]}" loadtest/k6/seckill.js 2>"$OUT/k6.stderr" | tee "$OUT/k6.txt" || k6_status=$?
kill_status=0
[[ -z $kill_pid ]] || wait "$kill_pid" || kill_status=$?
if [[ $k6_status -eq 130 ]]; then
	echo "loadtest: interrupted" >&2
	exit 130 # the EXIT trap stops the cluster
fi
if [[ $k6_status -ne 0 ]]; then
	tail -20 "$OUT/k6.stderr" >&2
	echo "loadtest: k6 exited $k6_status (99: a threshold failed)" >&2
fi

echo "== machine: $(uptime | sed 's/.*load average/load average/') (right after k6)"
echo "== verify"
if [[ $KILL == 1 ]]; then
	# The survivor's /metrics only: the killed instance's counters died with it.
	instances=(-instances "$(head -n 1 "${CLUSTER_RUN_DIR:-$ROOT/run/cluster}/instances")")
fi
verify_args=(-dsn "$LOADTEST_DSN" -summary "$OUT/summary.json" -orders "$OUT/orders.log" "${instances[@]}")
[[ $EXPECT_FAILURE == 1 ]] && verify_args+=(-expect-failure)
if [[ $MODE == async ]]; then
	verify_args+=(-redis "${SECKILL_REDIS_ADDR:-127.0.0.1:6379}" -url "$base_url" -drain-timeout "${DRAIN_TIMEOUT:-60s}")
	[[ $KILL == 1 ]] && verify_args+=(-killed-holding "$(cat "$OUT/kill-held" 2>/dev/null || echo 0)")
fi
verify_status=0
bin/harness verify "${verify_args[@]}" | tee "$OUT/verdict.txt" || verify_status=$?

cleanup
trap - EXIT

if [[ $BASELINE == 1 ]]; then
	echo "== DB baseline (cluster stopped; the same MariaDB)"
	bin/harness baseline -dsn "$BASELINE_DSN" -workers "${BASELINE_WORKERS:-16,64}" -duration "${BASELINE_DURATION:-10s}" \
		-k6-summary "$OUT/summary.json" -out "$OUT/baseline.json" | tee "$OUT/baseline.txt"
fi

if [[ $k6_status -ne 0 || $verify_status -ne 0 || $kill_status -ne 0 || $end_status -ne 0 ]]; then
	echo "loadtest: FAILED (MODE=$MODE LOCK=$LOCK: k6 exit $k6_status, verify exit $verify_status$([[ $KILL == 1 ]] && echo ", kill exit $kill_status")$( ((end_status == 0)) || echo ", the run's sales not ended"))" >&2
	exit 1
fi
echo "loadtest: OK (MODE=$MODE LOCK=$LOCK$([[ $KILL == 1 ]] && echo ', instance 2 killed')$([[ $EXPECT_FAILURE == 1 ]] && echo ', failure expected and detected'))"
