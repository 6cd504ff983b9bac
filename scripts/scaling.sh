#!/usr/bin/env bash
# scaling.sh — the two order modes side by side, in one run (what `make scaling` runs; the
# figures of docs/loadtest.md "Scaling" come from it):
#   1. for each mode (sync, async) and each instance count in INSTANCES_LIST: scripts/cluster.sh
#      up with that many instances behind nginx, a voucher with more stock than can sell, then
#      wrk through nginx in a closed loop of CONNECTIONS connections, every request a new user,
#      DURATION seconds; and GET /healthz the same way (the trivial endpoint: the limit of
#      nginx + instances on this machine, measured in the same run). With 2 instances, the
#      same for every connection count in CONNECTIONS_LIST.
#      In async mode every point ends with `harness drain`: the writers empty the backlog before
#      the next point, and the time they take is their drain rate (writers that kept pace, no
#      backlog of 2,000, are judged on what they wrote during a load: a lower bound of their
#      rate); with 2 instances, GET /healthz follows on the same async cluster (adjacent.csv),
#      so that the ratio of admissions to the trivial endpoint is also judged on two loads
#      seconds apart, not minutes (the sync sweep's /healthz), which a drift of a shared
#      machine's speed would move.
#   2. bin/harness baseline: the single-order transaction straight at MariaDB from CONNECTIONS
#      goroutines (the DB baseline of docs/loadtest.md).
#   3. async, 2 instances: an open loop at 80% of the admission ceiling (the best point of the
#      connection sweep) for DURATION seconds, latency from each request's due time (harness rate);
#      the p99 of the whole run is judged, that of the requests due after its first second printed.
#      Then the control: GET /healthz in the same open loop at 80% of its own best point
#      (harness rate -get), printed beside the admissions' p99, not judged. For both, the time
#      spent inside the instances (their handlers, and the admission script's calls), from the
#      instances' histograms scraped around the load (scripts/timing.sh), printed.
#   4. async, 2 instances: a sale of SALE seconds at 50% of that ceiling, open loop, with each
#      instance's RSS and Go heap, Redis's memory and the stream's length sampled every 10 s.
#   5. points.csv → the chart (harness chart → docs/loadtest-scaling.svg unless CHART is set)
#      and summary.txt: the ratios issue 10 asks for, each against its goal.
# The ratios are printed and judged against the goals, but the script exits non-zero only when
# a step fails or an answer is wrong (not 2xx where 2xx is the only right answer): speed on a
# shared machine is a measurement, not a test.
#
# Settings (environment):
#   DURATION          seconds per point (default 8)
#   CONNECTIONS       connections of the instance sweep and of the baseline (default 64)
#   INSTANCES_LIST    instance counts (default "1 2 3 4")
#   CONNECTIONS_LIST  connection counts, with 2 instances (default "16 64 256 512")
#   MODES             default "sync async"
#   SALE              seconds of the memory run (default 300; 0 skips it)
#   OUT               results directory (default run/scaling)
#   CHART             the SVG to write (default docs/loadtest-scaling.svg)
#   SCALING_REDIS_PORT  the run's own redis-server (default 16389; scripts/own-redis.sh), unless
#                     SECKILL_REDIS_ADDR names one to use instead
#   LOADTEST_DSN      the service's database (default .../seckill_scaling: its own, see below)
#   SCALING_PIN=1     nginx and the instances on the first half of the cores, MariaDB, the run's
#                     Redis and the load generators on the other half (scripts/pin.sh; the
#                     stores and the clients as if on machines of their own); default 0: shared
#   BASELINE_DSN, CLUSTER_BASE_PORT, CLUSTER_NGINX_PORT   as for scripts/loadtest.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-64}
INSTANCES_LIST=${INSTANCES_LIST:-1 2 3 4}
CONNECTIONS_LIST=${CONNECTIONS_LIST:-16 64 256 512}
MODES=${MODES:-sync async}
SALE=${SALE:-300}
OUT=${OUT:-$ROOT/run/scaling}
CHART=${CHART:-$ROOT/docs/loadtest-scaling.svg}
NGINX_PORT=${CLUSTER_NGINX_PORT:-8080}
RUN=${CLUSTER_RUN_DIR:-$ROOT/run/cluster}
ADMIN_TOKEN=scaling-admin-token
STOCK=100000000
# A database of its own: this script runs its own Redis, whose fencing counters are not the
# shared Redis's. On the database that make capacity and make loadtest use with the shared
# Redis, a user id both had used would be fenced (409 lock_expired) by the other Redis's
# higher tokens in lock_fences (docs/locks.md, "One token source per database").
LOADTEST_DSN=${LOADTEST_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_scaling?parseTime=true&loc=UTC'}
BASELINE_DSN=${BASELINE_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_baseline?parseTime=true&loc=UTC'}
((DURATION >= 4)) || { echo "scaling: want DURATION >= 4 seconds" >&2; exit 2; }
command -v wrk >/dev/null || scripts/cluster.sh ensure-pkg wrk wrk

mkdir -p "$OUT"
rm -f "$OUT"/*.txt "$OUT"/*.json "$OUT"/*.csv
export SECKILL_MYSQL_DSN=$LOADTEST_DSN SECKILL_ADMIN_TOKEN=$ADMIN_TOKEN
export SECKILL_LOCK=${LOCK:-redis}
BASE=http://127.0.0.1:$NGINX_PORT
echo "sweep,mode,instances,connections,ok_per_sec,p99_ms" >"$OUT/points.csv"
log() { printf '== %s\n' "$*"; }
machine() { uptime | sed 's/.*load average/load average/'; }

cleanup() { scripts/cluster.sh down >/dev/null 2>&1 || true; }
# The vouchers this run created, each on sale for 2 h with up to millions of orders: end_sales
# ends the sales of those still on sale once the cluster that sold them is down, before each
# new cluster and at exit (scripts/end-sales.sh).
# shellcheck source=end-sales.sh
source scripts/end-sales.sh
vouchers=()
end_sales() {
	((${#vouchers[@]} > 0)) || return 0
	end_sales_of scaling "${vouchers[@]}"
}
# shellcheck source=own-redis.sh
source scripts/own-redis.sh
# shellcheck source=ticks.sh
source scripts/ticks.sh
# shellcheck source=timing.sh
source scripts/timing.sh
# shellcheck source=pin.sh
source scripts/pin.sh
trap 'cleanup; end_sales || true; own_redis_stop; pin_undo' EXIT
[[ -n ${SECKILL_REDIS_ADDR:-} ]] || own_redis_start scaling "${SCALING_REDIS_PORT:-16389}" "$OUT/redis"
REDIS_ADDR=$SECKILL_REDIS_ADDR
SERVICE_CPUS=$PIN_ALL
TOPOLOGY="nginx, the instances, MariaDB, Redis and wrk on one machine"
case ${SCALING_PIN:-0} in
0) ;;
1)
	pin_check
	pin_rest "$PIN_REST" ${own_redis_pid:+"$own_redis_pid"}
	SERVICE_CPUS=$PIN_SERVICE
	TOPOLOGY="nginx and the instances on cores $PIN_SERVICE, MariaDB, Redis and wrk on $PIN_REST"
	log "pinned: $TOPOLOGY"
	;;
*) echo "scaling: SCALING_PIN is 0 or 1, not $SCALING_PIN" >&2; exit 2 ;;
esac

# up MODE N: a fresh cluster of N instances in MODE and a voucher on sale, its id in $voucher.
up() {
	scripts/cluster.sh down >/dev/null 2>&1
	end_sales
	taskset -c "$SERVICE_CPUS" env CLUSTER_INSTANCES="$2" SECKILL_ORDER_MODE="$1" scripts/cluster.sh up 2>"$OUT/cluster.log" || { cat "$OUT/cluster.log" >&2; exit 1; }
	local now
	now=$(date -u +%s)
	voucher=$(curl -fsS -X POST "$BASE/api/vouchers" -H "Authorization: Bearer $ADMIN_TOKEN" -H "Content-Type: application/json" \
		-d "{\"title\":\"scaling $1 $2\",\"stock\":$STOCK,\"beginTime\":\"$(date -u -d @$((now - 60)) +%FT%TZ)\",\"endTime\":\"$(date -u -d @$((now + 7200)) +%FT%TZ)\"}" |
		sed -n 's/.*"id":\([0-9]*\).*/\1/p')
	[[ -n $voucher ]] || { echo "scaling: could not create the voucher" >&2; exit 1; }
	vouchers+=("$voucher")
}

# instance_cpu: user+system CPU of the running instances so far, in clock ticks. Read around a
# load, it gives the instances' CPU per 2xx answer, printed for every closed-loop point and for
# the open loop at 80% (an admission costs the instances less CPU the deeper the queues it
# meets, which is why an open loop's latency rises well before the closed-loop ceiling;
# docs/loadtest.md, Scaling). The 503s nginx's gate sheds never reach an instance, so they are
# not counted in.
instance_cpu() {
	local pids=() f
	for f in "$RUN"/seckill-*.pid; do [[ -r $f ]] && pids+=("$(<"$f")"); done
	ticks "${pids[@]}"
}
HZ=$(getconf CLK_TCK)

users=4000000000
# point SWEEP MODE N C: wrk, C connections, DURATION s; orders in sync/async, GET /healthz in
# healthz. Appends to points.csv; in async mode the backlog is drained after it.
point() {
	local sweep=$1 mode=$2 n=$3 c=$4 script=order.lua f json ok p99 threads=2
	[[ $mode == healthz ]] && script=healthz.lua
	f=$OUT/wrk-$mode-$n-$c.txt
	users=$((users + 100000000))
	local cpu0 cpu
	cpu0=$(instance_cpu)
	VOUCHER_ID=$voucher USER_BASE=$users wrk -t$threads -c"$c" -d"${DURATION}s" --timeout 10s -s "loadtest/wrk/$script" "$BASE" >"$f" 2>&1 ||
		{ cat "$f" >&2; exit 1; }
	json=$(sed -n 's/^wrk-json //p' "$f")
	[[ -n $json ]] || { cat "$f" >&2; echo "scaling: no figures from wrk" >&2; exit 1; }
	read -r ok p99 non2xx errors requests < <(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print("%.1f %.2f %d %d %d" % ((j["requests"]-j["non2xx"])/j["seconds"], j["p99ms"], j["non2xx"], j["errors"], j["requests"]))' "$json")
	cpu=$(awk -v t=$(($(instance_cpu) - cpu0)) -v hz="$HZ" -v n=$((requests - non2xx)) 'BEGIN { printf "%.0f", n ? 1e6 * t / hz / n : 0 }')
	printf '%-11s %-7s %2d inst %4d conns: %9.1f 2xx/s  p99 %8.2f ms  non-2xx %d  socket errors %d  instances %s µs CPU/2xx\n' "$sweep" "$mode" "$n" "$c" "$ok" "$p99" "$non2xx" "$errors" "$cpu" | tee -a "$OUT/points.txt"
	# Below the admission limit every answer must be 2xx; past it, 503 overloaded is the service
	# shedding as designed and counts against the 2xx/s. The limit: in sync mode nginx's order
	# gate, as scripts/cluster.sh wrote it; in async mode the instances' bound on admissions
	# (SECKILL_MAX_INFLIGHT's async default, 1,024 each); for /healthz, which nothing bounds,
	# 64 per instance as always.
	local limit=$((64 * n))
	case $mode in
	sync) limit=$(sed -n 's/^limit_conn orders \([0-9]*\);$/\1/p' "$RUN/nginx/conf/order-gate.conf") ;;
	async) limit=$((1024 * n)) ;;
	esac
	[[ -n $limit ]] || { echo "scaling: no order gate in $RUN/nginx/conf/order-gate.conf" >&2; exit 1; }
	if ((c <= limit && (non2xx > 0 || errors > 0))); then
		echo "scaling: $non2xx non-2xx answers and $errors socket errors at $c connections (at most the admission limit): wrong" >&2
		exit 1
	fi
	echo "$sweep,$mode,$n,$c,$ok,$p99" >>"$OUT/points.csv"
	if [[ $mode == async ]]; then
		bin/harness drain -dsn "$LOADTEST_DSN" -redis "$REDIS_ADDR" -voucher "$voucher" -out "$OUT/drain-$n-$c.json" | tee -a "$OUT/points.txt"
		if [[ $n == 2 ]]; then adjacent "$c" "$ok"; fi
	fi
}

# adjacent C ASYNC: GET /healthz on the async cluster that just answered ASYNC admissions/s at C
# connections (2 instances), right after its drain: the same nginx and instances within
# DURATION seconds, so that a drift of the machine's speed between the sync and async sweeps
# (minutes apart) does not land on one side of the ratio of the two. Appends "C,ASYNC,HEALTHZ" to
# adjacent.csv (not to points.csv: the chart's /healthz points stay the sync sweep's).
adjacent() {
	local c=$1 a=$2 f=$OUT/wrk-adjacent-healthz-2-$1.txt json ok
	VOUCHER_ID=$voucher wrk -t2 -c"$c" -d"${DURATION}s" --timeout 10s -s loadtest/wrk/healthz.lua "$BASE" >"$f" 2>&1 || { cat "$f" >&2; exit 1; }
	json=$(sed -n 's/^wrk-json //p' "$f")
	[[ -n $json ]] || { cat "$f" >&2; echo "scaling: no figures from wrk" >&2; exit 1; }
	ok=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print("%.1f" % ((j["requests"]-j["non2xx"])/j["seconds"]))' "$json")
	printf '%-11s %-7s %2d inst %4d conns: %9.1f 2xx/s  (on the async cluster, right after its admissions: %.1f/s, ratio %.2f)\n' adjacent healthz 2 "$c" "$ok" "$a" \
		"$(awk -v a="$a" -v h="$ok" 'BEGIN { print (h > 0 ? a / h : 0) }')" | tee -a "$OUT/points.txt"
	echo "$c,$a,$ok" >>"$OUT/adjacent.csv"
}

log "machine: $PIN_NCPU cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(machine) (before)"
log "DURATION=${DURATION}s per point, CONNECTIONS=$CONNECTIONS, INSTANCES_LIST=$INSTANCES_LIST, CONNECTIONS_LIST=$CONNECTIONS_LIST"
for mode in $MODES; do
	for n in $INSTANCES_LIST; do
		up "$mode" "$n"
		point instances "$mode" "$n" "$CONNECTIONS"
		[[ $mode == sync ]] && point instances healthz "$n" "$CONNECTIONS"
		if [[ $n == 2 ]]; then
			for c in $CONNECTIONS_LIST; do
				if [[ $c == "$CONNECTIONS" ]]; then
					grep "^instances,$mode,2,$c," "$OUT/points.csv" | sed 's/^instances/connections/' >>"$OUT/points.csv"
					[[ $mode == sync ]] && grep "^instances,healthz,2,$c," "$OUT/points.csv" | sed 's/^instances/connections/' >>"$OUT/points.csv"
					continue
				fi
				point connections "$mode" 2 "$c"
				[[ $mode == sync ]] && point connections healthz 2 "$c"
			done
		fi
		log "$(machine)"
	done
done
cleanup

log "DB baseline: the order transaction straight at MariaDB, $CONNECTIONS workers, ${DURATION}s"
bin/harness baseline -dsn "$BASELINE_DSN" -workers "$CONNECTIONS" -duration "${DURATION}s" -out "$OUT/baseline.json" | tee "$OUT/baseline.txt"

# val KEY FIELD: a field of the points.csv line that starts with KEY.
val() { awk -F, -v k="$1" -v f="$2" 'index($0, k ",") == 1 { print $f; exit }' "$OUT/points.csv"; }
# best MODE: "orders/s connections" of MODE's best point of the connection sweep (2 instances).
best() { awk -F, -v m="$1" '$1 == "connections" && $2 == m && $5 > b { b = $5; c = $4 } END { print b + 0, c + 0 }' "$OUT/points.csv"; }
sync_ceiling=$(val "instances,sync,2,$CONNECTIONS" 5)
healthz=$(val "instances,healthz,2,$CONNECTIONS" 5)
baseline=$(sed -n 's/.*"ordersPerSec": *\([0-9.]*\).*/\1/p' "$OUT/baseline.json" | head -n 1)
async_ceiling=$(val "instances,async,2,$CONNECTIONS" 5)
read -r sync_best sync_best_c < <(best sync)
read -r async_best async_best_c < <(best async)
# The trivial endpoint's own ceiling: its best point of the sweep, wherever that is. Issue 10
# asks for admissions at >= 50% of "what the same nginx + instances answer on a trivial
# endpoint"; against /healthz's best, not /healthz at the async best, whose connection count
# may be past /healthz's own best (wrk's and nginx's cost per request grow with connections).
read -r healthz_best healthz_best_c < <(best healthz)
healthz_at_async_best=$(val "connections,healthz,2,$async_best_c" 5)
# Sync measured where async has its ceiling: the ratio at one connection count there too.
sync_at_async_best=$(val "connections,sync,2,$async_best_c" 5)
drain=$(python3 -c 'import glob,json; r=[json.load(open(f)) for f in glob.glob("'"$OUT"'/drain-*.json")]; r=[x for x in r if x["backlogAtStart"]>=2000]; b=max(r, key=lambda x: x["ratePerSec"]) if r else None; print("%.1f %d" % (b["ratePerSec"], b["backlogAtStart"]) if b else "0 0")' 2>/dev/null || echo "0 0")
read -r drain_rate drain_backlog <<<"$drain"
# Writers that keep pace leave no backlog to time: then what they wrote while a point's load ran
# is a lower bound of their rate: the point's admissions (its 2xx/s times DURATION) less the
# backlog left at its end, over DURATION + 1 s (the second covers the gap between the load's
# end and the drain's first read, so the bound errs low); the highest of the async points.
kept=$(python3 -c '
import csv, json, os, sys
out, d = sys.argv[1], float(sys.argv[2])
best = 0.0
for row in csv.DictReader(open(os.path.join(out, "points.csv"))):
    f = os.path.join(out, "drain-%s-%s.json" % (row["instances"], row["connections"]))
    if row["mode"] == "async" and os.path.exists(f):
        best = max(best, (float(row["ok_per_sec"]) * d - json.load(open(f))["backlogAtStart"]) / (d + 1))
print("%.1f" % best)' "$OUT" "$DURATION" 2>/dev/null || echo 0)

# open_loop80 NAME ROUTE OK ARGS...: bin/harness rate ARGS... for DURATION s into $OUT/NAME.json
# and $OUT/NAME.txt, the instances' histograms scraped around it (scripts/timing.sh); prints "p99
# p99-after-the-first-second time-inside-the-instances", or "void" when the client could not send
# on schedule or, with OK (a status code), an answer was not OK.
open_loop80() {
	local name=$1 route=$2 ok=$3
	shift 3
	scrape "$RUN/instances" "$OUT/$name.buckets0"
	if ! bin/harness rate -url "$BASE" "$@" -duration "${DURATION}s" -out "$OUT/$name.json" >"$OUT/$name.txt" 2>&1 ||
		[[ -n $ok && $(sed -n 's/^ *"'"$ok"'": *\([0-9]*\).*/\1/p' "$OUT/$name.json") != "$(sed -n 's/^  "sent": *\([0-9]*\).*/\1/p' "$OUT/$name.json")" ]]; then
		echo void
		return
	fi
	scrape "$RUN/instances" "$OUT/$name.buckets1"
	# The run's p99 (two spaces in), not one of its seconds' (deeper).
	echo "$(sed -n 's/^  "p99Ms": *\([0-9.]*\).*/\1/p' "$OUT/$name.json")" \
		"$(sed -n 's/^  "p99AfterFirstSecondMs": *\([0-9.]*\).*/\1/p' "$OUT/$name.json")" \
		"$(timing "$OUT/$name.buckets0" "$OUT/$name.buckets1" "$route")"
}

if [[ -n $async_ceiling ]]; then
	up async 2
	rate80=$(awk -v c="$async_best" 'BEGIN { printf "%d", 0.8 * c }')
	log "async, 2 instances: open loop at 80% of the ceiling ($rate80/s) for ${DURATION}s"
	# A client that cannot send on schedule voids the figure (harness rate fails): the summary
	# then says so instead of a p99, and the run goes on.
	cpu0=$(instance_cpu)
	read -r p99_80 p99_80_rest inside_80 <<<"$(open_loop80 rate80 "POST /api/vouchers/:id/orders" "" \
		-voucher "$voucher" -rate "$rate80" -user-base 7000000000)"
	awk -v t=$(($(instance_cpu) - cpu0)) -v hz="$HZ" -v n=$((rate80 * DURATION)) \
		'BEGIN { printf "instances %.0f µs CPU/2xx in the open loop\n", 1e6 * t / hz / n }' >>"$OUT/rate80.txt"
	cat "$OUT/rate80.txt"
	bin/harness drain -dsn "$LOADTEST_DSN" -redis "$REDIS_ADDR" -voucher "$voucher" -timeout 5m | tee -a "$OUT/rate80.txt"

	# The control (printed, not judged): the trivial endpoint in the same open loop at 80% of its
	# own best closed-loop figure, through the same nginx and instances. Where GET /healthz misses
	# 20 ms there too, the p99 at 80% is the machine's (the generator, nginx, the instances'
	# HTTP on two shared cores), not the admission's (docs/loadtest.md, "Why the open loop at 80%
	# of the ceiling misses 20 ms here"). Every answer must be 200, else it is void like the
	# admissions' figure. No /healthz point (MODES without sync): no control.
	h80=$(awk -v c="${healthz_best:-0}" 'BEGIN { printf "%d", 0.8 * c }')
	if ((h80 > 0)); then
		log "async, 2 instances: the control, GET /healthz in an open loop at 80% of its best ($h80/s) for ${DURATION}s"
		read -r p99_h80 p99_h80_rest inside_h80 <<<"$(open_loop80 healthz80 "GET /healthz" 200 -get /healthz -rate "$h80")"
		cat "$OUT/healthz80.txt"
	fi

	if ((SALE > 0)); then
		half=$(awk -v c="$async_best" 'BEGIN { printf "%d", 0.5 * c }')
		log "async, 2 instances: a ${SALE}s sale at 50% of the ceiling ($half/s), memory sampled every 10 s"
		echo "second,instance1_rss_mb,instance2_rss_mb,instance1_heap_mb,instance2_heap_mb,redis_used_mb,stream_len,backlog" >"$OUT/memory.csv"
		bin/harness rate -url "$BASE" -voucher "$voucher" -rate "$half" -duration "${SALE}s" -user-base 8000000000 -out "$OUT/sale.json" >"$OUT/sale.txt" &
		sale_pid=$!
		stream="seckill:{voucher:$voucher}:stream"
		for ((s = 0; s <= SALE; s += 10)); do
			row=$s
			for i in 1 2; do
				pid=$(cat "$RUN/seckill-$i.pid")
				row+=,$(awk '/VmRSS/{printf "%.1f", $2 / 1024}' "/proc/$pid/status")
			done
			for u in $(cat "$RUN/instances"); do
				row+=,$(curl -fsS "$u/metrics" | awk '/^go_memstats_heap_inuse_bytes /{printf "%.1f", $2 / 1048576}')
			done
			row+=,$(redis-cli -h "${REDIS_ADDR%:*}" -p "${REDIS_ADDR#*:}" info memory | awk -F: '/^used_memory:/{printf "%.1f", $2 / 1048576}')
			row+=,$(redis-cli -h "${REDIS_ADDR%:*}" -p "${REDIS_ADDR#*:}" xlen "$stream")
			row+=,$(bin/harness drain -dsn "$LOADTEST_DSN" -redis "$REDIS_ADDR" -voucher "$voucher" -peek | sed -n 's/.*backlog \([0-9]*\) of.*/\1/p')
			echo "$row" >>"$OUT/memory.csv"
			((s + 10 <= SALE)) && sleep 10
		done
		wait "$sale_pid" || { cat "$OUT/sale.txt" >&2; exit 1; }
		cat "$OUT/sale.txt"
		bin/harness drain -dsn "$LOADTEST_DSN" -redis "$REDIS_ADDR" -voucher "$voucher" -timeout 5m | tee -a "$OUT/sale.txt"
		column -s, -t "$OUT/memory.csv"
	fi
	cleanup
fi

bin/harness chart -in "$OUT/points.csv" -out "$CHART" \
	-title "$PIN_NCPU cores, $(date -u +%F), ${DURATION}s per point; $TOPOLOGY"

{
	echo "scaling summary ($(date -u +%FT%TZ), $PIN_NCPU cores, $(machine) after; $TOPOLOGY)"
	awk -v a="$async_ceiling" -v s="$sync_ceiling" -v h="$healthz" -v b="$baseline" -v d="$drain_rate" -v db="$drain_backlog" -v k="$kept" -v p="${p99_80:-}" -v pr="${p99_80_rest:-}" -v pt="${inside_80:-}" -v ph="${p99_h80:-}" -v phr="${p99_h80_rest:-}" -v pht="${inside_h80:-}" -v hr="${h80:-0}" -v c="$CONNECTIONS" \
		-v ab="$async_best" -v abc="$async_best_c" -v sb="$sync_best" -v sbc="$sync_best_c" -v hb="$healthz_at_async_best" -v sab="${sync_at_async_best:-0}" -v hbb="${healthz_best:-0}" -v hbc="${healthz_best_c:-0}" \
		-v adj="$(tr '\n' ' ' <"$OUT/adjacent.csv" 2>/dev/null)" -v dur="$DURATION" 'BEGIN {
		printf "  at %d connections, 2 instances: sync %.1f orders/s, async %.1f admissions/s, GET /healthz %.1f/s\n", c, s, a, h
		printf "  best of the connection sweep:   sync %.1f (%d connections), async %.1f (%d connections; GET /healthz %.1f there)\n", sb, sbc, ab, abc, hb
		printf "  DB baseline (%d workers)        %.1f orders/s\n", c, b
		if (s > 0 && sb > 0) {
			printf "  async / sync at %d connections   %6.1fx  (goal >= 10x)   %s\n", c, a / s, a >= 10 * s ? "met" : "NOT met"
			printf "  async / sync, best of each      %6.1fx  (goal >= 10x)   %s\n", ab / sb, ab >= 10 * sb ? "met" : "NOT met"
			# Not judged: past the nginx order gate (32 per instance) sync sheds with 503, and the
			# CPU its 503s take lowers its 2xx/s, so there it is not the ceiling of sync.
			if (sab > 0) printf "  async / sync at the async best (%d conns) %6.1fx  (not judged: sync sheds past its order gate there)\n", abc, ab / sab
		}
		if (adj != "") {
			# The same nginx + instances on /healthz right after the admissions (adjacent.csv):
			# ratios a drift of the machine between the sweeps, minutes apart, cannot move.
			n = split(adj, pairs, " ")
			for (i = 1; i <= n; i++) {
				split(pairs[i], x, ",")
				if (x[1] == c && x[3] > 0) r64 = x[2] / x[3]
				if (x[3] > hmax) { hmax = x[3]; hmaxc = x[1] }
			}
			printf "  async / healthz, /healthz on the async cluster right after each admission point:\n"
			printf "    at %d connections   %6.2f  (goal >= 0.50)  %s\n", c, r64, r64 >= 0.5 ? "met" : "NOT met"
			if (hmax > 0) printf "    async best / the best of those /healthz (%d against %d conns) %6.2f  (goal >= 0.50)  %s\n", abc, hmaxc, ab / hmax, ab >= 0.5 * hmax ? "met" : "NOT met"
		}
		if (h > 0 && hb > 0) {
			printf "  async / healthz at %d connections %6.2f  (goal >= 0.50)  %s\n", c, a / h, a >= 0.5 * h ? "met" : "NOT met"
			printf "  async / healthz at the async best (%d conns) %6.2f  (goal >= 0.50)  %s\n", abc, ab / hb, ab >= 0.5 * hb ? "met" : "NOT met"
			if (hbb > 0) printf "  async best / healthz best (%d against %d conns) %6.2f  (goal >= 0.50)  %s\n", abc, hbc, ab / hbb, ab >= 0.5 * hbb ? "met" : "NOT met"
		}
		if (db > 0 && b > 0) printf "  drain / DB baseline   %6.1fx  (goal >= 3x)    %s  (writers: %.1f orders/s emptying a backlog of %d)\n", d / b, d >= 3 * b ? "met" : "NOT met", d, db
		else if (k > 0 && b > 0) printf "  drain / DB baseline  >= %5.1fx  (goal >= 3x)    %s  (no backlog of 2,000 or more to time: the writers kept pace, writing at least %.1f orders/s during a load)\n", k / b, k >= 3 * b ? "met" : "NOT met", k
		else printf "  drain                 no backlog of 2,000 or more built up: the writers kept up with admission\n"
		if (p == "void") printf "  admission p99 at 80%% of the ceiling  void: the client could not send on schedule (run/scaling/rate80.txt)\n"
		else if (p != "") printf "  admission p99 at 80%% of the ceiling  %.2f ms  (goal <= 20 ms)  %s\n", p, p <= 20 ? "met" : "NOT met"
		if (p != "void" && pr != "") printf "    of the requests due after its first second: %.2f ms  (not judged: a cluster just up is slower for a second; docs/loadtest-journal.md)\n", pr
		if (p != "void" && pt != "") printf "    inside the instances (bucket bounds of their histograms): %s\n", pt
		if (ph == "void") printf "    the control, GET /healthz at 80%% of its best (%d/s)  void: the client could not send on schedule, or an answer was not 200 (run/scaling/healthz80.txt)\n", hr
		else if (ph != "") printf "    the control, GET /healthz at 80%% of its best (%d/s)  p99 %.2f ms, %.2f ms after its first second  (not judged: the same goal for the trivial endpoint)\n", hr, ph, phr
		if (ph != "void" && pht != "") printf "      inside the instances: %s\n", pht
	}'
	if [[ -s $OUT/memory.csv ]]; then
		# The first sample, the one at 60 s (after the warm-up's growth) when the sale lasts longer,
		# and the last.
		awk -F, 'NR == 1 { next } NR == 2 { r0 = $2 + $3; h0 = $4 + $5 } $1 == 60 && NR > 2 { r1 = $2 + $3; h1 = $4 + $5; m = 1 }
			END {
				printf "  instance memory over the sale (two instances summed): RSS %.1f MB at 0 s", r0
				if (m && $1 > 60) printf ", %.1f MB at 60 s", r1
				printf ", %.1f MB at %d s; heap in use %.1f MB", $2 + $3, $1, h0
				if (m && $1 > 60) printf ", %.1f MB", h1
				printf ", %.1f MB\n", $4 + $5
			}' "$OUT/memory.csv"
	fi
} | tee "$OUT/summary.txt"
