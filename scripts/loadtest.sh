#!/usr/bin/env bash
# loadtest.sh — one load test end to end (what `make loadtest` runs):
#   native cluster up (scripts/cluster.sh) → k6 (loadtest/k6/seckill.js) → verify → cluster down
#   (always, also on failure or Ctrl-C) → DB baseline (optional).
# It exits 0 only when the verdict is what the guard deserves: a clean run for a real lock, a
# detected failure for LOCK=local or none (see docs/loadtest.md), and k6's thresholds held.
#
# Settings (environment; the Makefile passes its variables of the same names):
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
# SELLOUT_P99_MS, USER_BASE) pass through.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

LOCK=${LOCK:-redis}
case $LOCK in
local | none) EXPECT_FAILURE=${EXPECT_FAILURE:-1} ;;
*) EXPECT_FAILURE=${EXPECT_FAILURE:-0} ;;
esac
DURATION=${DURATION:-30}
BASELINE=${BASELINE:-1}
K6=${K6:-$ROOT/.tools/bin/k6}
OUT=${OUT:-$ROOT/run/loadtest/$LOCK}
LOADTEST_DSN=${LOADTEST_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_loadtest?parseTime=true&loc=UTC'}
BASELINE_DSN=${BASELINE_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_baseline?parseTime=true&loc=UTC'}
ADMIN_TOKEN=loadtest-admin-token

[[ -x $K6 ]] || {
	echo "loadtest: no k6 at $K6 (make loadtest installs it: go install go.k6.io/k6@<pinned>)" >&2
	exit 1
}
mkdir -p "$OUT"
rm -f "$OUT"/{summary.json,orders.log,k6.txt,verdict.txt,baseline.txt,baseline.json,dashboard.html}

export SECKILL_LOCK=$LOCK SECKILL_MYSQL_DSN=$LOADTEST_DSN SECKILL_ADMIN_TOKEN=$ADMIN_TOKEN
export SECKILL_ORDER_DELAY=${ORDER_DELAY:-0s}

CLUSTER=${CLUSTER:-native}
case $CLUSTER in
native)
	# A cluster left over from an interrupted run would carry old metrics: start from nothing.
	scripts/cluster.sh down
	trap 'scripts/cluster.sh down' EXIT
	scripts/cluster.sh up
	instances=(-instances-file run/cluster/instances)
	;;
external)
	[[ -n ${INSTANCES:-} ]] || { echo "loadtest: CLUSTER=external needs INSTANCES (base URLs of the instances)" >&2; exit 1; }
	(cd "$ROOT" && go build -o bin/harness ./loadtest/harness)
	instances=(-instances "$INSTANCES")
	;;
*)
	echo "loadtest: CLUSTER=$CLUSTER: want native or external" >&2
	exit 1
	;;
esac

echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/') (before the load)"
echo "== k6: LOCK=$LOCK, ${DURATION}s storm then ${DURATION}s sell-out, results in ${OUT#"$ROOT"/}"
k6_env=(-e "BASE_URL=${BASE_URL:-http://127.0.0.1:${CLUSTER_NGINX_PORT:-8080}}" -e "LOCK=$LOCK" -e "EXPECT_FAILURE=$EXPECT_FAILURE" -e "DURATION=$DURATION" -e "ADMIN_TOKEN=$ADMIN_TOKEN" -e "SUMMARY=$OUT/summary.json")
for v in STORM_RATE STORM_BURST SELLOUT_RATE SELLOUT_STOCK STORM_P99_MS SELLOUT_P99_MS USER_BASE; do
	[[ -z ${!v:-} ]] || k6_env+=(-e "$v=${!v}")
done
if [[ ${DASHBOARD:-0} == 1 ]]; then
	export K6_WEB_DASHBOARD=true K6_WEB_DASHBOARD_HOST=127.0.0.1 K6_WEB_DASHBOARD_EXPORT=$OUT/dashboard.html
fi
k6_status=0
"$K6" run --quiet --no-color --log-format=json --console-output="$OUT/orders.log" \
	"${k6_env[@]}" loadtest/k6/seckill.js 2>"$OUT/k6.stderr" | tee "$OUT/k6.txt" || k6_status=$?
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
verify_args=(-dsn "$LOADTEST_DSN" -summary "$OUT/summary.json" -orders "$OUT/orders.log" "${instances[@]}")
[[ $EXPECT_FAILURE == 1 ]] && verify_args+=(-expect-failure)
verify_status=0
bin/harness verify "${verify_args[@]}" | tee "$OUT/verdict.txt" || verify_status=$?

if [[ $CLUSTER == native ]]; then
	scripts/cluster.sh down
	trap - EXIT
fi

if [[ $BASELINE == 1 ]]; then
	echo "== DB baseline (cluster stopped; the same MariaDB)"
	bin/harness baseline -dsn "$BASELINE_DSN" -workers "${BASELINE_WORKERS:-16,64}" -duration "${BASELINE_DURATION:-10s}" \
		-k6-summary "$OUT/summary.json" -out "$OUT/baseline.json" | tee "$OUT/baseline.txt"
fi

if [[ $k6_status -ne 0 || $verify_status -ne 0 ]]; then
	echo "loadtest: FAILED (LOCK=$LOCK: k6 exit $k6_status, verify exit $verify_status)" >&2
	exit 1
fi
echo "loadtest: OK (LOCK=$LOCK$([[ $EXPECT_FAILURE == 1 ]] && echo ', failure expected and detected'))"
