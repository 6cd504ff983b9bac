#!/usr/bin/env bash
# abtest.sh — two or more settings of the service (the asynchronous mode unless a setting says
# otherwise) against each other, in alternating rounds (what `make abtest` runs; the A/B figures of
# docs/loadtest.md come from it):
#
#   scripts/abtest.sh SECKILL_ADMIT_BATCH=1 SECKILL_ADMIT_BATCH=32
#   scripts/abtest.sh "SECKILL_STREAM_LINGER=2ms SECKILL_STREAM_BATCH=200" "SECKILL_STREAM_LINGER=50ms SECKILL_STREAM_BATCH=1000"
#   scripts/abtest.sh SECKILL_ORDER_MODE=sync SECKILL_ORDER_MODE=async   # issue 10's 10x, round by round
#   scripts/abtest.sh "GODEBUG=" "GODEBUG=schedtrace=2147483647"      # Go's default against the instances' setting
#
# Each argument is one setting: environment assignments for the instances (and scripts/cluster.sh:
# SECKILL_ORDER_MODE=sync runs the synchronous mode, its orders answered 201, behind its order
# gate; CLUSTER_GOMAXPROCS=2 two Ps per instance; AB_REDIS_PRIORITY=fifo runs the run's own
# redis-server under the real-time policy SCHED_FIFO, so it runs whenever it has work instead of
# waiting for a core behind the instances, nginx and the load generator, and AB_REDIS_PRIORITY=-10,
# say, renices it instead; AB_PIN=1 gives nginx and the instances the first half of the cores and
# the run's Redis, the machine's MariaDB and the load generators (wrk, bin/harness) the other half,
# with taskset, as if the stores and the clients ran on machines of their own: MariaDB's affinity
# is set back to every core by the next setting and at exit). Each round, for
# each setting in turn: a fresh redis-server of the run's own, scripts/cluster.sh up (two
# instances behind nginx, async, a fresh database), a voucher with more stock than can sell,
# then wrk through nginx, CONNECTIONS connections in a closed loop for DURATION seconds on
# orders (every request a new user) and then the same on GET /healthz, with the CPU time of
# each process read from /proc around each load. It prints, per round and setting, the
# admissions/s, their p99, the /healthz/s of the same cluster, the ratio of the two (the
# admission ceiling as a share of the trivial endpoint's), and the CPU per answer of the
# instances, nginx, Redis and MariaDB and of the whole machine. wrk's output and Redis's INFO
# commandstats of each load are kept in $OUT/order-<round>-<setting number>.txt and
# .commandstats (healthz-… likewise). Rounds alternate the settings because this machine's
# speed drifts by a third within minutes: a ratio of two settings is read round by round.
# It exits 1 when a step fails or a closed loop's answer is not 2xx (202 in async mode, 201 in
# sync); an open loop whose answers are not all 201/202 is printed void. Speed is printed, never
# judged.
#
# Settings (environment):
#   ROUNDS        rounds (default 3)
#   DURATION      seconds of each load (default 10)
#   CONNECTIONS   wrk's connections (default 64)
#   AB_REDIS_PORT the run's own redis-server (default 16388)
#   LOADTEST_DSN  the instances' database (default .../seckill_abtest, dropped and created per run)
#   OUT           results directory (default run/abtest)
#   RATES         also, after those loads, an open loop (bin/harness rate, requests sent on a
#                 schedule, latency counted from when each was due) at each of these admissions
#                 per second for DURATION seconds, e.g. RATES="300 1000 3000": its p50, p99 (and
#                 p99 after its first second), busy share of the machine, in brackets the same
#                 requests' time in the instances' handlers and in the admission script's calls
#                 (bucket bounds of the instances' histograms) and how long the instances' and
#                 Redis's threads waited for a core per answer, and the CPU per
#                 admission of each process (the rest of the machine: the load generator and
#                 the kernel), in $OUT/rates.txt
#                 (default none). At a moderate rate a request shares its wake-ups with few
#                 others, so what a setting costs there differs from what it costs at the ceiling
#   FRACTIONS     also, after those, open loops at each of these fractions of the round's own
#                 closed-loop figures, on orders and on GET /healthz alike, e.g. FRACTIONS="0.5 0.8":
#                 the admission p99 at 80 % of the ceiling with its control, the trivial endpoint at
#                 the same share of its own ceiling through the same nginx and instances; p50,
#                 p99 (and p99 after the first second) and busy share of each in
#                 $OUT/fractions.txt (default none)
#   PPROF=1       also take a CPU profile of instance 1 during each setting's order load in the
#                 first round (SECKILL_PPROF_ADDR on CLUSTER_BASE_PORT+50), written to
#                 $OUT/cpu-instance1-<setting number>.pprof
#   CLUSTER_BASE_PORT, CLUSTER_NGINX_PORT   as for scripts/cluster.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
(($# >= 1)) || { sed -n '2,30p' "$0" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
OUT=${OUT:-$ROOT/run/abtest}
NGINX_PORT=${CLUSTER_NGINX_PORT:-8080}
LOADTEST_DSN=${LOADTEST_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_abtest?parseTime=true&loc=UTC'}
ADMIN_TOKEN=abtest-admin-token
((DURATION >= 4 && ROUNDS >= 1)) || { echo "abtest: want DURATION >= 4 seconds and ROUNDS >= 1" >&2; exit 2; }
scripts/cluster.sh ensure-pkg wrk wrk
mkdir -p "$OUT"
rm -f "$OUT"/*.pprof "$OUT"/rates.txt "$OUT"/rate-* "$OUT"/fractions.txt "$OUT"/fraction-*
[[ ${PPROF:-0} == 1 ]] && export CLUSTER_PPROF_BASE_PORT=$((${CLUSTER_BASE_PORT:-18081} + 50))

# shellcheck source=own-redis.sh
source scripts/own-redis.sh
# shellcheck source=ticks.sh
source scripts/ticks.sh
# shellcheck source=timing.sh
source scripts/timing.sh
# shellcheck source=pin.sh
source scripts/pin.sh
export SECKILL_ORDER_MODE=async SECKILL_MYSQL_DSN=$LOADTEST_DSN SECKILL_ADMIN_TOKEN=$ADMIN_TOKEN

# The run's own database, dropped before each setting and at the end: no voucher of the run is
# left on sale for another async instance on it to load.
DB=$(sed -n 's|.*/\([A-Za-z_0-9]*\)?.*|\1|p' <<<"$LOADTEST_DSN")
[[ $DB == seckill_* ]] || { echo "abtest: LOADTEST_DSN must name a database seckill_*, the run's own (it is dropped)" >&2; exit 2; }
stop() {
	scripts/cluster.sh down >/dev/null 2>&1 || true
	pin_undo
	own_redis_stop
	mysql -uroot -h127.0.0.1 -e "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
}
trap stop EXIT


# sample: the CPU clock ticks so far of the instances, nginx, Redis and MariaDB, then the
# machine's busy and total ticks, then the instances' and Redis's wait for a core (runq_wait);
# taken before and after a load.
sample() { echo "$(ticks "${inst[@]}") $(ticks "${ngx[@]}") $(ticks "$redis_pid") $(ticks "$maria_pid") $(machine_ticks) $(runq_wait "${inst[@]}") $(runq_wait "$redis_pid")"; }

# waited BEFORE AFTER N: the instances' and Redis's threads' wait for a core while ready to run, in
# µs per answer over the N answers between two samples, "waited inst X redis Y µs".
waited() {
	awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { split(a, x, " "); split(b, y, " "); printf "waited for a core: inst %.0f redis %.0f µs", (y[7] - x[7]) / n, (y[8] - x[8]) / n }'
}

# cpu_per BEFORE AFTER N: each process group's CPU in µs per answer over the N answers between two
# samples, "inst nginx redis maria machine busy%" (machine: the two cores' busy time per answer).
cpu_per() {
	awk -v hz="$(getconf CLK_TCK)" -v a="$1" -v b="$2" -v n="$3" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		u = 1e6 / hz / n
		printf "%.1f %.1f %.1f %.1f %.1f %.0f\n", (y[1] - x[1]) * u, (y[2] - x[2]) * u, (y[3] - x[3]) * u, (y[4] - x[4]) * u, (y[5] - x[5]) * u, 100 * (y[5] - x[5]) / (y[6] - x[6])
	}'
}

# load NAME LUA: wrk on LUA; prints "rate p99ms inst nginx redis mariadb machine busy%" (CPU in µs
# per answer) and fails unless every answer was 2xx.
load() {
	local name=$1 lua=$2 prof=${3:-} s0 s1 n rate p99 curl_pid=
	if [[ -n $prof ]]; then
		curl -fsS -o "$prof" "http://127.0.0.1:$CLUSTER_PPROF_BASE_PORT/debug/pprof/profile?seconds=$((DURATION - 2))" &
		curl_pid=$!
	fi
	redis-cli -p "$redis_port" config resetstat >/dev/null
	s0=$(sample)
	VOUCHER_ID=$voucher USER_BASE=$((3000000000 + RANDOM * 100000)) \
		wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "loadtest/wrk/$lua" "http://127.0.0.1:$NGINX_PORT" >"$OUT/$name.txt" 2>&1 ||
		{ cat "$OUT/$name.txt" >&2; return 1; }
	redis-cli -p "$redis_port" info commandstats >"$OUT/$name.commandstats"
	[[ -z $curl_pid ]] || wait "$curl_pid" || echo "abtest: the profile $prof could not be taken" >&2
	s1=$(sample)
	if grep -q 'Non-2xx\|Socket errors' "$OUT/$name.txt"; then
		cat "$OUT/$name.txt" >&2
		echo "abtest: FAILED: every answer must be 2xx" >&2
		return 1
	fi
	read -r n rate p99 < <(awk '
		/requests in/ { n = $1; s = $4; sub(/s,$/, "", s) }
		/^ +99%/ { p = $2; v = p + 0; if (p ~ /us$/) v /= 1000; else if (p ~ /[0-9]s$/ && p !~ /ms$/) v *= 1000; p99 = v }
		END { printf "%d %.0f %.1f\n", n, n / s, p99 }' "$OUT/$name.txt")
	echo "$rate $p99 $(cpu_per "$s0" "$s1" "$n")"
}

# open_loop NAME RATE USERBASE [PATH]: bin/harness rate at RATE admissions/s for DURATION s (with
# PATH, GET PATH at RATE requests/s instead); prints "p50ms p99ms (p99ms after the first second)
# busy% [in-instance p50<=Xms p99<=Yms; calls p50<=Xms p99<=Yms] | inst nginx redis maria machine"
# (CPU in µs per answer; the bracket the same requests' time in the instances' handlers and, for
# the admissions, their script calls' time, from the instances' metrics), or "void" and why when the
# client could not keep to the schedule or an answer was not 201/202 (200 for PATH). The first
# second, while the generator and nginx open their connections, can hold most of the tail.
open_loop() {
	local name=$1 rate=$2 ub=$3 path=${4:-} s0 s1 p50 p99 rest n i g rd d m busy what=(-voucher "$voucher" -user-base "$ub") ok='20[12]' okname='201 or 202'
	local route='POST /api/vouchers/:id/orders'
	[[ -z $path ]] || what=(-get "$path") ok=200 okname=200 route="GET $path"
	scrape "$run/instances" "$OUT/$name.buckets0"
	s0=$(sample)
	if ! bin/harness rate -url "http://127.0.0.1:$NGINX_PORT" "${what[@]}" -rate "$rate" -duration "${DURATION}s" \
		-out "$OUT/$name.json" >"$OUT/$name.txt" 2>&1; then
		echo "void: $(tail -1 "$OUT/$name.txt")"
		return
	fi
	s1=$(sample)
	scrape "$run/instances" "$OUT/$name.buckets1"
	# 202 in async mode, 201 in sync (200 for PATH): every answer must be one of them. The run's
	# own fields are the JSON's two-space-indented lines; its seconds' fields sit deeper.
	n=$(sed -n 's/^ *"'"$ok"'": *\([0-9]*\).*/\1/p' "$OUT/$name.json" | awk '{ n += $1 } END { print n + 0 }')
	if [[ $n != "$(sed -n 's/^  "sent": *\([0-9]*\).*/\1/p' "$OUT/$name.json")" ]]; then
		echo "void: not every answer was $okname ($OUT/$name.json)"
		return
	fi
	p50=$(sed -n 's/^  "p50Ms": *\([0-9.]*\).*/\1/p' "$OUT/$name.json")
	p99=$(sed -n 's/^  "p99Ms": *\([0-9.]*\).*/\1/p' "$OUT/$name.json")
	rest=$(sed -n 's/^  "p99AfterFirstSecondMs": *\([0-9.]*\).*/\1/p' "$OUT/$name.json")
	read -r i g rd d m busy < <(cpu_per "$s0" "$s1" "$n")
	printf '%.1f %.1f (%.1f) %s%% [%s; %s] | %.0f %.0f %.0f %.0f %.0f\n' "$p50" "$p99" "$rest" "$busy" \
		"$(timing "$OUT/$name.buckets0" "$OUT/$name.buckets1" "$route")" "$(waited "$s0" "$s1" "$n")" "$i" "$g" "$rd" "$d" "$m"
}

echo "== $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(uptime | sed 's/.*load average/load average/')"
echo "== $ROUNDS rounds of, for each setting: wrk -t2 -c$CONNECTIONS -d${DURATION}s on orders, then on GET /healthz; CPU in µs per answer"
printf '%-5s %-44s %9s %7s %9s %6s | %s\n' round setting "orders/s" "p99 ms" "healthz/s" ratio \
	"orders: inst nginx redis maria machine busy% | healthz: inst nginx machine" | tee "$OUT/rounds.txt"
[[ -z ${RATES:-} ]] || echo "round setting rate: p50ms p99ms (p99ms after the first second) busy [time in the instances' handlers; the admission script's calls; waits for a core per answer] | µs CPU per admission: inst nginx redis maria machine" >"$OUT/rates.txt"
[[ -z ${FRACTIONS:-} ]] || echo "round setting fraction: orders rate p50ms p99ms (p99ms after the first second) busy [time in the instances' handlers; the admission script's calls; waits for a core per answer] | µs CPU per answer: inst nginx redis maria machine || /healthz the same" >"$OUT/fractions.txt"
for ((r = 1; r <= ROUNDS; r++)); do
	k=0
	for setting in "$@"; do
		k=$((k + 1))
		stop
		redis_port=${AB_REDIS_PORT:-16388}
		own_redis_start abtest "$redis_port" "$OUT/redis"
		prio=$(sed -n 's/.*\bAB_REDIS_PRIORITY=\([^ ]*\).*/\1/p' <<<"$setting")
		case $prio in
		'') ;;
		fifo) chrt -f -p 50 "$own_redis_pid" ;;
		-[0-9]* | [0-9]*) renice -n "$prio" -p "$own_redis_pid" >/dev/null ;;
		*) echo "abtest: AB_REDIS_PRIORITY is fifo or a nice value, not $prio" >&2; exit 2 ;;
		esac
		pin=$(sed -n 's/.*\bAB_PIN=\([^ ]*\).*/\1/p' <<<"$setting")
		service_cpus=$PIN_ALL
		case $pin in
		'' | 0) pin_rest "$PIN_ALL" "$own_redis_pid" ;;
		1)
			pin_check
			pin_rest "$PIN_REST" "$own_redis_pid"
			service_cpus=$PIN_SERVICE
			;;
		*) echo "abtest: AB_PIN is 1 or 0, not $pin" >&2; exit 2 ;;
		esac
		# shellcheck disable=SC2086 # the setting's assignments, split on purpose
		taskset -c "$service_cpus" env $setting scripts/cluster.sh up >"$OUT/up.log" 2>&1 || { cat "$OUT/up.log" >&2; exit 1; }
		now=$(date -u +%s)
		voucher=$(curl -fsS -X POST "http://127.0.0.1:$NGINX_PORT/api/vouchers" -H "Authorization: Bearer $ADMIN_TOKEN" -H "Content-Type: application/json" \
			-d "{\"title\":\"abtest $now\",\"stock\":100000000,\"beginTime\":\"$(date -u -d @$((now - 60)) +%FT%TZ)\",\"endTime\":\"$(date -u -d @$((now + 3600)) +%FT%TZ)\"}" |
			sed -n 's/.*"id":\([0-9]*\).*/\1/p')
		[[ -n $voucher ]] || { echo "abtest: could not create the voucher" >&2; exit 1; }
		run=${CLUSTER_RUN_DIR:-$ROOT/run/cluster}
		ngx=("$(cat "$run/nginx.pid")")
		mapfile -t -O 1 ngx < <(pgrep -P "${ngx[0]}")
		mapfile -t inst < <(cat "$run"/seckill-*.pid)
		redis_pid=$own_redis_pid
		maria_pid=$(listener_pid 3306)
		prof=
		[[ ${PPROF:-0} == 1 && $r == 1 ]] && prof=$OUT/cpu-instance1-$k.pprof
		read -r orate op99 oi on or od om ob <<<"$(load "order-$r-$k" order.lua "$prof")"
		read -r hrate _ hi hn _ _ hm _ <<<"$(load "healthz-$r-$k" healthz.lua)"
		printf '%-5s %-44s %9s %7s %9s %6s | %s %s %s %s %s %s%% | %s %s %s\n' "$r" "$setting" "$orate" "$op99" "$hrate" \
			"$(awk -v a="$orate" -v b="$hrate" 'BEGIN { printf "%.3f", a / b }')" "$oi" "$on" "$or" "$od" "$om" "$ob" "$hi" "$hn" "$hm" | tee -a "$OUT/rounds.txt"
		ub=7000000000
		for rate in ${RATES:-}; do
			ub=$((ub + 100000000))
			echo "$r $setting $rate $(open_loop "rate-$r-$k-$rate" "$rate" "$ub")" >>"$OUT/rates.txt"
		done
		for f in ${FRACTIONS:-}; do
			ub=$((ub + 100000000))
			ro=$(awk -v c="$orate" -v f="$f" 'BEGIN { printf "%d", c * f }')
			rh=$(awk -v c="$hrate" -v f="$f" 'BEGIN { printf "%d", c * f }')
			echo "$r $setting $f: orders $ro/s $(open_loop "fraction-$r-$k-$f-orders" "$ro" "$ub") || /healthz $rh/s $(open_loop "fraction-$r-$k-$f-healthz" "$rh" 0 /healthz)" >>"$OUT/fractions.txt"
		done
	done
done
stop
trap - EXIT
if [[ -n ${RATES:-} ]]; then
	echo "== open loops (bin/harness rate, ${DURATION}s each) after each round's closed loops:"
	cat "$OUT/rates.txt"
fi
if [[ -n ${FRACTIONS:-} ]]; then
	echo "== open loops at fractions of each round's closed-loop figures, orders and GET /healthz (${DURATION}s each):"
	cat "$OUT/fractions.txt"
fi
