#!/usr/bin/env bash
# chaos.sh — what `make chaos` runs: faults under load, each judged by its own thresholds and by
# the load test's SQL verdict (docs/chaos.md).
#
# It starts a MariaDB (mariadb-install-db into a fresh directory) and a Redis of its own, so it
# may kill and freeze them, toxiproxy between the instances and that Redis, and two instances
# behind nginx with scripts/cluster.sh. `bin/harness load` is the client (open or closed loop,
# retrying as docs/chaos.md tells a client to), `bin/harness chaos-check` measures and judges.
# Everything it started is stopped at the end, also on failure or Ctrl-C. Each fault's events
# are written down after the fault was done (kill, SIGSTOP) and before it was undone (restart,
# SIGCONT), so "during the fault" never includes a moment the store was still there; a store
# counts as back (store_up) when it first answers a poll every 50 ms (redis-cli PING through
# toxiproxy, a SELECT 1 with the mariadb client).
#
# Experiments (CHAOS_EXPERIMENTS, space-separated, in this order by default):
#   overload        closed-loop capacity, then 3× that rate open loop, then the capacity again
#                   (MODE=sync only: 3× the asynchronous admission's capacity is more than a
#                   client on the same two cores can offer)
#   kill-instance   kill -9 an instance under a duplicate storm, start it again
#   redis-kill      Redis killed 10 s, restarted empty (MODE=async: restarted from its
#                   append-only file, fsynced before each reply: the kill loses no 202)
#   mariadb-kill    MariaDB killed 10 s, restarted
#   mariadb-freeze  MariaDB frozen (SIGSTOP) 10 s
#   redis-latency   Redis replies 50 ms late, with a 3 s and a 7 s spike
#   sentinel        Redis Sentinel failover under load (scripts/services.sh's group; full run only)
#
# MODE=async runs the instances with SECKILL_ORDER_MODE=async: an order is a 202, a MariaDB
# fault is judged by the admissions going on and the writers catching up, and every verdict
# first waits for the writers to drain, then adds the asynchronous checks (docs/chaos.md,
# "The asynchronous mode").
#
# Settings (environment):
#   MODE                   sync (default) or async: the instances' SECKILL_ORDER_MODE
#   CHAOS_SHORT            1: shorter load and outages, no sentinel slot (make chaos-ci, ~3 min)
#   CHAOS_EXPERIMENTS      which experiments to run (default: all of the above for the mode)
#   CHAOS_RUN_DIR          data directories, logs, results (default <repo>/run/chaos)
#   CHAOS_MYSQL_PORT       the private mariadbd              (default 23306)
#   CHAOS_REDIS_PORT       the private redis-server          (default 26379)
#   CHAOS_REDIS_PROXY_PORT toxiproxy's proxy to that Redis   (default 26380; the instances use it)
#   CHAOS_TOXIPROXY_PORT   toxiproxy's API                   (default 28474)
#   CLUSTER_BASE_PORT      first instance                    (default 28081 here)
#   CLUSTER_NGINX_PORT     nginx                             (default 28080 here)
#   TOXIPROXY              toxiproxy-server binary (default .tools/bin/toxiproxy-server; make chaos installs it)
#   CHAOS_OUTAGE           seconds a store stays killed or frozen (default 10; short: 6)
#   CHAOS_RATE             users/s of the store outages: redis-kill, mariadb-kill, mariadb-freeze,
#                          sentinel (default 50)
#   CHAOS_GOODPUT          overload: the goodput ÷ capacity it must reach (default 0.90, the goal;
#                          short: 0.50, a tripwire: docs/chaos.md, "The short run's tripwires")
#   CHAOS_SHED_P99         overload: the p99 the 503 overloaded answers must stay within
#                          (default 50ms, the goal; short: 400ms, a tripwire, same section)
#   CHAOS_LIGHT_P99        overload: the floor of the light load's p99 from 1 s after, which
#                          must stay within max(2 × its p99 before, this) (default 20ms; short:
#                          250ms, a tripwire, same section)
#   CHAOS_SENTINEL_PORTS   the Sentinel group: primary, replica, three sentinels
#                          (default "27201 27202 27211 27212 27213")
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

SHORT=${CHAOS_SHORT:-0}
RATE=${CHAOS_RATE:-50}
MODE=${MODE:-sync}
case $MODE in
sync | async) ;;
*)
	echo "chaos: MODE=$MODE: want sync or async" >&2
	exit 1
	;;
esac
if [[ -n ${SECKILL_ORDER_MODE:-} && $SECKILL_ORDER_MODE != "$MODE" ]]; then
	echo "chaos: SECKILL_ORDER_MODE=$SECKILL_ORDER_MODE but MODE=$MODE: set MODE (make chaos MODE=async)" >&2
	exit 1
fi
export SECKILL_ORDER_MODE=$MODE
RUN=${CHAOS_RUN_DIR:-$ROOT/run/chaos}
MYSQL_PORT=${CHAOS_MYSQL_PORT:-23306}
REDIS_PORT=${CHAOS_REDIS_PORT:-26379}
PROXY_PORT=${CHAOS_REDIS_PROXY_PORT:-26380}
TOXI_PORT=${CHAOS_TOXIPROXY_PORT:-28474}
TOXIPROXY=${TOXIPROXY:-$ROOT/.tools/bin/toxiproxy-server}
export CLUSTER_BASE_PORT=${CLUSTER_BASE_PORT:-28081}
export CLUSTER_NGINX_PORT=${CLUSTER_NGINX_PORT:-28080}
export CLUSTER_RUN_DIR=$RUN/cluster
export CLUSTER_NGINX_ACCESS_LOG=1
export CLUSTER_INSTANCES=2
DSN="root:@tcp(127.0.0.1:$MYSQL_PORT)/seckill_chaos?parseTime=true&loc=UTC"
export SECKILL_MYSQL_DSN=$DSN
export SECKILL_REDIS_ADDR=127.0.0.1:$PROXY_PORT
export SECKILL_LOCK=redis SECKILL_ADMIN_TOKEN=chaos-admin-token
URL=http://127.0.0.1:$CLUSTER_NGINX_PORT
TOXI=http://127.0.0.1:$TOXI_PORT
SENTINEL_PORTS=${CHAOS_SENTINEL_PORTS:-27201 27202 27211 27212 27213}
export SERVICES_RUN_DIR=$RUN/services SERVICES_SENTINEL_PORTS=$SENTINEL_PORTS
if [[ $SHORT == 1 ]]; then
	OUTAGE=${CHAOS_OUTAGE:-6}
	GOODPUT=${CHAOS_GOODPUT:-0.50}
	SHED_P99=${CHAOS_SHED_P99:-400ms}
	LIGHT_P99=${CHAOS_LIGHT_P99:-250ms}
	default="overload kill-instance redis-kill mariadb-freeze redis-latency"
else
	OUTAGE=${CHAOS_OUTAGE:-10}
	GOODPUT=${CHAOS_GOODPUT:-0.90}
	SHED_P99=${CHAOS_SHED_P99:-50ms}
	LIGHT_P99=${CHAOS_LIGHT_P99:-20ms}
	default="overload kill-instance redis-kill mariadb-kill mariadb-freeze redis-latency sentinel"
fi
[[ $MODE == async ]] && default=${default#overload }
EXPERIMENTS=${CHAOS_EXPERIMENTS:-$default}
if [[ $MODE == async && " $EXPERIMENTS " == *" overload "* ]]; then
	echo "chaos: overload is a MODE=sync experiment: 3× the asynchronous admission's capacity is more than a client on the same cores can offer (docs/chaos.md, \"The asynchronous mode\")" >&2
	exit 1
fi
# The Redis the verdict reads the asynchronous books from: toxiproxy's, or the Sentinel group's
# new primary (exp_sentinel).
VERDICT_REDIS=127.0.0.1:$PROXY_PORT

log() { printf 'chaos: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}
now() { date +%s.%N; }
event() { echo "$1 $(now)" >>"$EVENTS"; }

ensure_pkg() { scripts/cluster.sh ensure-pkg "$@"; }
sbin() { command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"; }

port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }

# ---- the private stores ----

mariadb_args() {
	local as_root=()
	[[ $(id -u) -ne 0 ]] || as_root=(--user=root)
	echo --no-defaults --datadir="$RUN/mariadb/data" --tmpdir="$RUN/mariadb/tmp" --bind-address=127.0.0.1 --port="$MYSQL_PORT" \
		--socket="$RUN/mariadb/sock" --pid-file="$RUN/mariadb/pid" --log-error="$RUN/mariadb/error.log" \
		--skip-log-bin --innodb-buffer-pool-size=64M --max-connections=300 "${as_root[@]}"
}

mariadb_up() { mariadb -h127.0.0.1 -P"$MYSQL_PORT" -uroot --connect-timeout=1 -e 'SELECT 1' >/dev/null 2>&1; }

start_mariadb() {
	# shellcheck disable=SC2046
	nohup "$(sbin mariadbd)" $(mariadb_args) >>"$RUN/mariadb/stdout.log" 2>&1 </dev/null &
	echo $! >"$RUN/mariadb.pid"
}

wait_until() { # wait_until SECONDS COMMAND...: poll every 50 ms
	local deadline=$(($(date +%s) + $1))
	shift
	until "$@"; do
		(($(date +%s) < deadline)) || return 1
		sleep 0.05
	done
}

redis_up() { [[ $(redis-cli -h 127.0.0.1 -p "$PROXY_PORT" ping 2>/dev/null) == PONG ]]; }

# The asynchronous mode's Redis holds the orders admitted and not yet written: it keeps an
# append-only file, fsynced before every reply (appendfsync always), so that a SIGKILL loses no
# order a 202 was answered for. The synchronous mode's keeps nothing (a lock lost with it is the
# experiment).
start_redis() {
	local aof=(--appendonly no)
	[[ $MODE == async ]] && aof=(--appendonly yes --appendfsync always)
	nohup redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" "${aof[@]}" \
		--dir "$RUN/redis" >>"$RUN/redis/redis.log" 2>&1 </dev/null &
	echo $! >"$RUN/redis.pid"
}

toxi() { # toxi METHOD PATH [JSON]
	curl -fsS -X "$1" -H 'Content-Type: application/json' ${3:+-d "$3"} "$TOXI$2" >/dev/null
}
set_latency() { toxi POST /proxies/redis/toxics/replies "{\"attributes\":{\"latency\":$1,\"jitter\":0}}"; }

# pid_of NAME: the pid chaos.sh (or cluster.sh, for seckill-N) recorded; only ever signalled
# while it still runs that program.
pid_of() {
	case $1 in
	seckill-*) cat "$CLUSTER_RUN_DIR/$1.pid" 2>/dev/null || true ;;
	*) cat "$RUN/$1.pid" 2>/dev/null || true ;;
	esac
}
signal() { # signal NAME SIG PATTERN
	local pid
	pid=$(pid_of "$1")
	[[ -n $pid ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$3" && kill "-$2" "$pid"
}
# stop NAME PATTERN: SIGTERM, then wait for the process to exit (SIGKILL after 20 s), so that
# its port is free for the next run once this one has ended.
stop() {
	local pid
	pid=$(pid_of "$1")
	signal "$1" TERM "$2" || return 0
	for _ in $(seq 200); do
		# gone, or a zombie (exited, its parent not yet told)
		[[ $(awk '{sub(/.*\) /, ""); print $1}' "/proc/$pid/stat" 2>/dev/null) =~ ^[^Z]$ ]] || return 0
		sleep 0.1
	done
	signal "$1" KILL "$2" || true
}

stores_up() {
	ensure_pkg redis-server redis-server
	ensure_pkg mariadbd mariadb-server
	ensure_pkg mariadb mariadb-client
	ensure_pkg curl curl
	[[ -x $TOXIPROXY ]] || die "no toxiproxy at $TOXIPROXY (make chaos installs it)"
	for p in "$MYSQL_PORT" "$REDIS_PORT" "$PROXY_PORT" "$TOXI_PORT"; do
		port_free "$p" || die "port $p is taken (ss -ltnp); set the CHAOS_*_PORT settings"
	done
	rm -rf "$RUN/mariadb" "$RUN/redis"
	# Its own tmpdir, not /tmp: a mariadbd deletes the temporary tables it finds in its tmpdir
	# as it starts, those of another server's bootstrap too (internal/testenv's StartMariaDB).
	mkdir -p "$RUN/mariadb/tmp" "$RUN/redis"
	local as_root=()
	[[ $(id -u) -ne 0 ]] || as_root=(--user=root)
	"$(sbin mariadb-install-db)" --no-defaults --datadir="$RUN/mariadb/data" --tmpdir="$RUN/mariadb/tmp" --auth-root-authentication-method=normal \
		--skip-test-db "${as_root[@]}" >"$RUN/mariadb/install.log" 2>&1 || {
		tail "$RUN/mariadb/install.log" >&2
		die "mariadb-install-db failed"
	}
	start_mariadb
	start_redis
	nohup "$TOXIPROXY" -host 127.0.0.1 -port "$TOXI_PORT" >"$RUN/toxiproxy.log" 2>&1 </dev/null &
	echo $! >"$RUN/toxiproxy.pid"
	wait_until 30 mariadb_up || die "mariadbd on :$MYSQL_PORT did not answer (log: $RUN/mariadb/error.log)"
	wait_until 10 curl -fsS -o /dev/null "$TOXI/version" || die "toxiproxy on :$TOXI_PORT did not answer"
	toxi POST /proxies "{\"name\":\"redis\",\"listen\":\"127.0.0.1:$PROXY_PORT\",\"upstream\":\"127.0.0.1:$REDIS_PORT\",\"enabled\":true}"
	wait_until 10 redis_up || die "redis-server on :$REDIS_PORT did not answer through toxiproxy :$PROXY_PORT"
	log "MariaDB :$MYSQL_PORT (pid $(pid_of mariadb)), Redis :$REDIS_PORT (pid $(pid_of redis)) behind toxiproxy :$PROXY_PORT (API :$TOXI_PORT)"
}

teardown() {
	local rc=$?
	signal mariadb CONT mariadbd || true
	scripts/cluster.sh down || true
	[[ ! -d $RUN/services ]] || scripts/services.sh down sentinel || true
	stop toxiproxy toxiproxy || true
	stop redis redis-server || true
	stop mariadb mariadbd || true
	exit $rc
}

# ---- experiments ----

instances_csv() { paste -sd, "$CLUSTER_RUN_DIR/instances"; }

# load NAME ARGS...: the client, in the background; its pid in LOAD_PID.
load() {
	local name=$1
	shift
	mkdir -p "$RUN/$name"
	: >"$RUN/$name/events"
	EVENTS=$RUN/$name/events
	# The nginx log of this experiment only (nginx appends: truncating starts it afresh).
	: >"$CLUSTER_RUN_DIR/nginx/logs/access.log"
	bin/harness load -url "$URL" -admin-token "$SECKILL_ADMIN_TOKEN" -scenario "$name" -out "$RUN/$name" \
		-watch "$(instances_csv)" "$@" >"$RUN/$name/load.txt" 2>&1 &
	LOAD_PID=$!
}

wait_load() {
	local rc=0
	wait "$LOAD_PID" || rc=$?
	cat "$RUN/$1/load.txt"
	return $rc
}

FAILED=()
RESULTS=()
check() { # check NAME ARGS...: judge, print, remember
	local name=$1 rc=0
	shift
	sleep 1.5 # nginx's access log and the instances' counters settle
	local async=()
	[[ $MODE == async ]] && async=(-redis "$VERDICT_REDIS" -url "$URL")
	bin/harness chaos-check -experiment "$name" -order-mode "$MODE" "${async[@]}" -dir "$RUN/$name" -events "$RUN/$name/events" -dsn "$DSN" \
		-instances-file "$CLUSTER_RUN_DIR/instances" -nginx-log "${NGINX_LOG:-$CLUSTER_RUN_DIR/nginx/logs/access.log}" \
		-nginx-error-log "$CLUSTER_RUN_DIR/nginx/logs/error.log" -instance-logs "$CLUSTER_RUN_DIR/seckill-*.log" "$@" |
		tee "$RUN/$name/result.txt" || rc=$?
	if [[ $rc -eq 0 ]]; then
		RESULTS+=("PASS  $name")
	else
		RESULTS+=("FAIL  $name")
		FAILED+=("$name")
	fi
}

exp_overload() {
	local cap_dur=10 dur=30 rate
	[[ $SHORT == 1 ]] && cap_dur=6 dur=10
	# MariaDB was started for this run: its first closed loop meets cold caches and empty
	# tables, so the full run warms up (figures nobody reads) before the capacity it judges
	# the goodput against. The short run does not: in its 10 s open loop at 3 x a warm capacity
	# the load's first second weighs a tenth (docs/chaos.md, "The short run's tripwires"), and its goodput
	# and shed p99 are tripwires, not the goal.
	if [[ $SHORT != 1 ]]; then
		log "overload: warm-up, closed loop, 64 users at a time for 3s (not measured)"
		load warmup -mode closed -workers 64 -duration 3s -retry=false
		wait_load warmup >/dev/null
	fi
	log "overload: capacity, closed loop, 64 users at a time for ${cap_dur}s"
	load capacity -mode closed -workers 64 -duration "${cap_dur}s" -retry=false
	wait_load capacity
	bin/harness chaos-check -experiment capacity -dir "$RUN/capacity" | tee "$RUN/capacity/result.txt"
	rate=$(head -1 "$RUN/capacity/rate.txt")
	log "overload: open loop at $rate users/s for ${dur}s (light 20/s for 3 s before, 5 s after)"
	load overload -mode open -rate "$rate" -duration "${dur}s" -retry=false -head 3s -tail 5s -light-rate 20
	wait_load overload
	sleep 1.5 # nginx's access log settles; the next load starts a new one
	cp "$CLUSTER_RUN_DIR/nginx/logs/access.log" "$RUN/overload/nginx-access.log"
	# The capacity once more, on the tables as the overload left them: a single 10 s closed
	# loop on this shared machine moves by ±6% from run to run, and the goodput is judged
	# against the mean of the two.
	log "overload: capacity again, closed loop, 64 users at a time for ${cap_dur}s"
	load capacity-after -mode closed -workers 64 -duration "${cap_dur}s" -retry=false
	wait_load capacity-after
	NGINX_LOG=$RUN/overload/nginx-access.log check overload -capacity-dir "$RUN/capacity,$RUN/capacity-after" -goodput "$GOODPUT" -overload-p99 "$SHED_P99" -light-p99-floor "$LIGHT_P99"
}

exp_kill_instance() {
	local dur=25
	[[ $SHORT == 1 ]] && dur=15
	log "kill-instance: 40 users/s, 4 concurrent orders each, for ${dur}s; kill -9 instance 1 at 5 s, start it again at 8 s"
	load kill-instance -mode open -rate 40 -burst 4 -duration "${dur}s"
	sleep 5
	signal seckill-1 KILL bin/seckill || die "instance 1 is not running"
	event fault_start
	sleep 3
	event fault_end
	scripts/cluster.sh start-instance 1
	event store_up
	wait_load kill-instance
	check kill-instance
}

exp_redis_kill() {
	local back="restarted empty"
	[[ $MODE == async ]] && back="restarted from its append-only file"
	log "redis-kill: $RATE users/s retrying, for $((OUTAGE + 14))s; Redis killed at 5 s for ${OUTAGE}s, $back"
	load redis-kill -mode open -rate "$RATE" -duration "$((OUTAGE + 14))s"
	sleep 5
	signal redis KILL redis-server
	event fault_start
	sleep "$OUTAGE"
	event fault_end
	start_redis
	wait_until 10 redis_up || die "redis did not come back"
	event store_up
	wait_load redis-kill
	check redis-kill
}

exp_mariadb_kill() {
	log "mariadb-kill: $RATE users/s retrying, for $((OUTAGE + 16))s; MariaDB killed at 5 s for ${OUTAGE}s, restarted"
	load mariadb-kill -mode open -rate "$RATE" -duration "$((OUTAGE + 16))s"
	sleep 5
	signal mariadb KILL mariadbd
	event fault_start
	sleep "$OUTAGE"
	event fault_end
	start_mariadb
	wait_until 60 mariadb_up || die "mariadbd did not come back (log: $RUN/mariadb/error.log)"
	event store_up
	wait_load mariadb-kill
	check mariadb-kill
}

exp_mariadb_freeze() {
	log "mariadb-freeze: $RATE users/s retrying, for $((OUTAGE + 14))s; MariaDB frozen (SIGSTOP) at 5 s for ${OUTAGE}s"
	load mariadb-freeze -mode open -rate "$RATE" -duration "$((OUTAGE + 14))s"
	sleep 5
	signal mariadb STOP mariadbd
	event fault_start
	sleep "$OUTAGE"
	event fault_end
	signal mariadb CONT mariadbd
	event store_up
	wait_load mariadb-freeze
	check mariadb-freeze
}

exp_redis_latency() {
	log "redis-latency: 30 users/s retrying, for 30s; Redis replies 50 ms late, 3 s late at 5-9 s, 7 s late at 13-21 s"
	toxi POST /proxies/redis/toxics '{"name":"replies","type":"latency","stream":"downstream","attributes":{"latency":50,"jitter":0}}'
	load redis-latency -mode open -rate 30 -duration 30s
	sleep 5
	set_latency 3000
	event spike1_start
	sleep 4
	set_latency 50
	event spike1_end
	sleep 4
	set_latency 7000
	event spike2_start
	sleep 8
	set_latency 50
	event spike2_end
	wait_load redis-latency
	toxi DELETE /proxies/redis/toxics/replies
	check redis-latency
}

sentinel_master() { redis-cli -h 127.0.0.1 -p "$1" sentinel get-master-addr-by-name seckill 2>/dev/null | paste -sd:; }
answers_ping() { [[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]; }
primary_gone() { ! answers_ping "$1"; }
switched() { [[ $(sentinel_master "$1") == "127.0.0.1:$2" ]]; }

# Sentinel failover under load: the cluster moves onto Redis with Sentinel (scripts/services.sh's
# group: a primary, a replica, three sentinels, on CHAOS_SENTINEL_PORTS), and
# `scripts/services.sh failover` SIGKILLs the primary under load. Judged as a store outage from
# the primary's last PING to the sentinels naming the replica. The cluster goes back onto the
# toxiproxy'd Redis afterwards.
exp_sentinel() {
	local sp
	read -r -a sp <<<"$SENTINEL_PORTS"
	log "sentinel: primary :${sp[0]}, replica :${sp[1]}, sentinels :${sp[2]} :${sp[3]} :${sp[4]}; the instances follow them"
	rm -rf "$RUN/services"
	scripts/services.sh up sentinel
	scripts/cluster.sh down
	SECKILL_REDIS_SENTINEL="seckill@127.0.0.1:${sp[2]},127.0.0.1:${sp[3]},127.0.0.1:${sp[4]}" scripts/cluster.sh up
	log "sentinel: $RATE users/s retrying, for 24s; the primary SIGKILLed at 5 s"
	load sentinel -mode open -rate "$RATE" -duration 24s
	sleep 5
	scripts/services.sh failover >"$RUN/sentinel/failover.txt" 2>&1 &
	local failover=$!
	wait_until 10 primary_gone "${sp[0]}" || die "the primary :${sp[0]} still answers"
	event fault_start
	wait_until 60 switched "${sp[2]}" "${sp[1]}" || die "the sentinels did not switch to :${sp[1]}"
	event fault_end
	event store_up
	local rc=0
	wait "$failover" || rc=$?
	cat "$RUN/sentinel/failover.txt"
	((rc == 0)) || die "scripts/services.sh failover failed"
	wait_load sentinel
	VERDICT_REDIS=127.0.0.1:${sp[1]} check sentinel
	scripts/cluster.sh down
	scripts/services.sh down sentinel
	scripts/cluster.sh up
}

# ---- main ----

mkdir -p "$RUN"
# One run per run directory: a second one would stop the first one's servers by their pids.
exec 9>"$RUN/.lock"
flock -n 9 || die "another make chaos uses $RUN; set CHAOS_RUN_DIR (and the ports) to run a second one"
for e in $EXPERIMENTS; do
	declare -F "exp_${e//-/_}" >/dev/null || die "unknown experiment $e (see the header of $0)"
done
scripts/cluster.sh down >/dev/null 2>&1 || true
trap teardown EXIT
trap 'exit 130' INT TERM
started=$(date +%s)
echo "== chaos: MODE=$MODE, $(nproc) cores, $(uptime | sed 's/.*load average/load average/'), experiments: $EXPERIMENTS"
stores_up
scripts/cluster.sh up
for e in $EXPERIMENTS; do
	"exp_${e//-/_}"
done
echo
echo "== chaos summary ($(($(date +%s) - started)) s, $(uptime | sed 's/.*load average/load average/'))"
printf '  %s\n' "${RESULTS[@]}"
if ((${#FAILED[@]} > 0)); then
	echo "chaos: FAILED: ${FAILED[*]}"
	exit 1
fi
echo "chaos: OK"
