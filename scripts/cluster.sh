#!/usr/bin/env bash
# cluster.sh — the load-test topology without Docker: N seckill instances on loopback ports
# and nginx (Debian's package, run as whoever calls this script, in the foreground of its own
# prefix) round-robin in front of them on 127.0.0.1:8080, against the MariaDB/MySQL and Redis
# you point it at. It uses the same deploy/nginx/nginx.conf as docker-compose.yml; only the
# upstream addresses (and the listen address, pinned to loopback) differ.
#
#   scripts/cluster.sh up       build, create the database, migrate, start everything, wait healthy
#   scripts/cluster.sh status   each part, its pid and its health; exit 1 if any part is down
#   scripts/cluster.sh down     stop what `up` started, by the pids it recorded: SIGTERM (the
#                               instances all at once, after nginx), and
#                               SIGKILL only past the stop bound each instance logged
#   scripts/cluster.sh start-instance N   start instance N again after it died (make chaos)
#   scripts/cluster.sh ensure-pkg CMD PKG install Debian's PKG when CMD is missing (make chaos)
#
# Settings (environment):
#   CLUSTER_INSTANCES   number of seckill instances            (default 2)
#   CLUSTER_BASE_PORT   port of the first instance             (default 18081; then 18082, ...)
#   CLUSTER_RUN_DIR     pids, logs, nginx prefix               (default <repo>/run/cluster)
#   CLUSTER_NGINX_PORT  nginx's loopback port                  (default 8080)
#   CLUSTER_GOMAXPROCS  GOMAXPROCS of each instance            (default: cores / instances, at least 1:
#                       instances sharing a machine's cores, as a CPU quota per container would)
#   GOGC                the instances' garbage collector target (default 400, as deploy/Dockerfile:
#                       an instance's live heap is a few MB, so at Go's 100 it collected about ten
#                       times a second under load; docs/loadtest.md, "GOGC=400")
#   GODEBUG             the instances' runtime settings (default schedtrace=2147483647, as
#                       deploy/Dockerfile: with schedtrace set, the runtime's sysmon thread never
#                       parks when the instance goes idle, so the first system call after each idle
#                       spell no longer wakes it back to polling every 20 µs: 27-32 % less CPU per
#                       order at 2,000 a second, 15-31 % at the ceiling; the period, 24.8 days,
#                       bounds the trace to a line per period; docs/loadtest.md, "The runtime's
#                       sysmon"). A GODEBUG in the caller's environment wins, an empty one too
#   CLUSTER_PPROF_BASE_PORT  set: instance i serves Go's profiles on 127.0.0.1:(this + i - 1)
#                       (SECKILL_PPROF_ADDR; default unset: none)
#   CLUSTER_ORDER_GATE  order POSTs nginx lets through at once, the next answered 503
#                       overloaded by nginx (deploy/nginx/order-gate.conf); 0: no gate
#                       (default: 32 per instance, one per database connection, in sync mode;
#                       0 with SECKILL_ORDER_MODE=async, whose orders hold no connection)
#   CLUSTER_NGINX_ACCESS_LOG  1: log every request with its upstream attempts to
#                       <run dir>/nginx/logs/access.log (default 0: no access log)
#   CLUSTER_NGINX_WORKERS  nginx's worker processes (default: the config's, auto: one a core)
#   SECKILL_MYSQL_DSN   go-sql-driver DSN; the database is created if missing
#                       (default root:@tcp(127.0.0.1:3306)/seckill_loadtest?parseTime=true&loc=UTC)
#   SECKILL_REDIS_ADDR  (default 127.0.0.1:6379, unless SECKILL_REDIS_SENTINEL is set)
#   SECKILL_ADMIN_TOKEN (default loadtest-admin-token)
#   SECKILL_LOCK, SECKILL_LOCK_TTL, SECKILL_ORDER_DELAY   passed to every instance
#                       (defaults redis, 10s, 0s — see docs/loadtest.md for the delay)
#   SECKILL_REDLOCK_ADDRS, SECKILL_ZOOKEEPER_ADDRS, SECKILL_ETCD_ENDPOINTS   the servers of
#                       SECKILL_LOCK=redlock, zookeeper and etcd; unset, `up` starts them with
#                       scripts/services.sh (RedLock's five nodes on 127.0.0.1:7001-7005, ZooKeeper
#                       on :2181, etcd on :2379) and leaves them running
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN_DIR=${CLUSTER_RUN_DIR:-$ROOT/run/cluster}
INSTANCES=${CLUSTER_INSTANCES:-2}
BASE_PORT=${CLUSTER_BASE_PORT:-18081}
NGINX_PORT=${CLUSTER_NGINX_PORT:-8080}
NGINX_ADDR=127.0.0.1:$NGINX_PORT
# Each instance's Go scheduler gets its share of the cores. With GOMAXPROCS = all cores, two
# instances on two cores each run up to two threads, which spin looking for work and preempt
# each other and MariaDB; one each does the same work with less CPU per order
# (docs/loadtest.md, Capacity).
PROCS=${CLUSTER_GOMAXPROCS:-$(($(nproc) / INSTANCES))}
((PROCS >= 1)) || PROCS=1
GO=${GO:-go}

export SECKILL_MYSQL_DSN=${SECKILL_MYSQL_DSN:-'root:@tcp(127.0.0.1:3306)/seckill_loadtest?parseTime=true&loc=UTC'}
# SECKILL_REDIS_SENTINEL (make chaos's sentinel experiment) replaces SECKILL_REDIS_ADDR.
if [[ -n ${SECKILL_REDIS_SENTINEL:-} ]]; then
	unset SECKILL_REDIS_ADDR
else
	export SECKILL_REDIS_ADDR=${SECKILL_REDIS_ADDR:-127.0.0.1:6379}
fi
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-loadtest-admin-token}
export SECKILL_LOCK=${SECKILL_LOCK:-redis}
export SECKILL_LOCK_TTL=${SECKILL_LOCK_TTL:-10s}
export SECKILL_ORDER_DELAY=${SECKILL_ORDER_DELAY:-0s}

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# alive PIDFILE PATTERN: the recorded process still runs and is the program we started (a
# recycled pid belonging to something else is never signalled).
alive() {
	local pidfile=$1 pattern=$2 pid
	[[ -s $pidfile ]] || return 1
	pid=$(<"$pidfile")
	tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$pattern"
}

# stop PIDFILE PATTERN NAME SECONDS: SIGTERM (graceful: in-flight orders finish), SIGKILL if
# it still runs SECONDS later.
stop() {
	local pidfile=$1 pattern=$2 name=$3 secs=$4 pid i
	if ! alive "$pidfile" "$pattern"; then
		rm -f "$pidfile"
		return 0
	fi
	pid=$(<"$pidfile")
	kill -TERM "$pid"
	for ((i = 0; i < secs * 10; i++)); do
		alive "$pidfile" "$pattern" || break
		sleep 0.1
	done
	if alive "$pidfile" "$pattern"; then
		log "$name (pid $pid) still running ${secs} s after SIGTERM; SIGKILL"
		kill -KILL "$pid"
	fi
	rm -f "$pidfile"
	log "stopped $name (pid $pid)"
}

# stop_within LOG: the longest the instance writing LOG may take to stop gracefully, in whole
# seconds rounded up, as it stated when it last started serving ("seckill serving …
# stop_within=24.5s", a Go duration): the grace for in-flight requests (15 s, or the longest
# an order may run + 5 s), then in async mode the order writer's stop (a batch's deadline +
# 5 s). The instance works it out from its own settings, so nothing here repeats the rule.
# Fails when LOG states none.
stop_within() {
	awk '/msg="seckill serving"/ && match($0, /stop_within=[0-9hms.]+/) { d = substr($0, RSTART + 12, RLENGTH - 12) }
	END {
		if (d == "") exit 1
		s = 0
		if (match(d, /^[0-9]+h/)) { s += 3600 * substr(d, 1, RLENGTH - 1); d = substr(d, RLENGTH + 1) }
		if (match(d, /^[0-9]+m/)) { s += 60 * substr(d, 1, RLENGTH - 1); d = substr(d, RLENGTH + 1) }
		if (d !~ /^[0-9]+(\.[0-9]+)?s$/) exit 1
		s += substr(d, 1, length(d) - 1)
		printf "%d\n", (s == int(s)) ? s : int(s) + 1
	}' "$1" 2>/dev/null
}

# instance_stop_secs N: how long `down` lets instance N stop before a SIGKILL: its stop_within,
# and 5 s for closing its stores and exiting. One that stated none never started serving, with
# nothing in flight; it gets 15 s, nginx's.
instance_stop_secs() {
	local secs
	secs=$(stop_within "$RUN_DIR/seckill-$1.log") || secs=10
	echo $((secs + 5))
}

# wait_http URL SECONDS PIDFILE: poll until URL answers 2xx or the process died. (kill -0, not
# alive: just after `cmd &` the child may not have exec'd yet and still looks like bash.)
wait_http() {
	local url=$1 secs=$2 pid i
	pid=$(<"$3")
	for ((i = 0; i < secs * 10; i++)); do
		curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

ensure_pkg() { # ensure_pkg COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 || [[ -x /usr/sbin/$1 ]] && return 0
	log "$1 not found: installing Debian package $2"
	local sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}

nginx_bin() { command -v nginx 2>/dev/null || echo /usr/sbin/nginx; }

instance_port() { echo $((BASE_PORT + $1 - 1)); }

# start_instance N: instance N in the background, appending to its log.
start_instance() {
	SECKILL_HTTP_ADDR=127.0.0.1:$(instance_port "$1") GOMAXPROCS=$PROCS GOGC=${GOGC:-400} \
		GODEBUG=${GODEBUG-schedtrace=2147483647} \
		SECKILL_PPROF_ADDR=${CLUSTER_PPROF_BASE_PORT:+127.0.0.1:$((${CLUSTER_PPROF_BASE_PORT:-0} + $1 - 1))} \
		nohup "$ROOT/bin/seckill" serve \
		>>"$RUN_DIR/seckill-$1.log" 2>&1 </dev/null &
	echo $! >"$RUN_DIR/seckill-$1.pid"
}

# cmd_start_instance N: start instance N again (after a crash), as `up` did, and wait until ready.
cmd_start_instance() {
	local i=${1:-} port
	[[ $i =~ ^[1-9][0-9]*$ && $i -le $INSTANCES ]] || die "start-instance: want an instance number 1..$INSTANCES"
	alive "$RUN_DIR/seckill-$i.pid" bin/seckill && die "instance $i already runs"
	port=$(instance_port "$i")
	ss -Hltn "sport = :$port" | grep -q . && die "port $port is taken (ss -ltnp to see by what)"
	start_instance "$i"
	wait_http "http://127.0.0.1:$port/readyz" 30 "$RUN_DIR/seckill-$i.pid" || die "instance $i on :$port did not become ready (log: $RUN_DIR/seckill-$i.log)"
	log "instance $i ready on 127.0.0.1:$port (pid $(<"$RUN_DIR/seckill-$i.pid"))"
}

cmd_up() {
	local i port n params
	mkdir -p "$RUN_DIR"
	for ((i = 1; i <= INSTANCES; i++)); do
		alive "$RUN_DIR/seckill-$i.pid" bin/seckill && die "instance $i already runs; scripts/cluster.sh down first"
	done
	alive "$RUN_DIR/nginx.pid" nginx && die "nginx already runs; scripts/cluster.sh down first"
	ensure_pkg nginx nginx
	ensure_pkg curl curl

	ports=("$NGINX_ADDR")
	for ((i = 1; i <= INSTANCES; i++)); do ports+=("127.0.0.1:$(instance_port "$i")"); done
	for p in "${ports[@]}"; do
		ss -Hltn "sport = :${p##*:}" | grep -q . && die "port ${p##*:} is taken (ss -ltnp to see by what)"
	done

	log "building bin/seckill and bin/harness"
	(cd "$ROOT" && "$GO" build -o bin/seckill ./cmd/seckill && "$GO" build -o bin/harness ./loadtest/harness)

	log "database: create if missing, migrate"
	# Each instance's pool opens up to 32 MySQL connections (cmd/seckill/instance.go).
	"$ROOT/bin/harness" createdb -dsn "$SECKILL_MYSQL_DSN" -need-connections $((INSTANCES * 32 + 2))
	"$ROOT/bin/seckill" migrate >"$RUN_DIR/migrate.log" 2>&1 || {
		cat "$RUN_DIR/migrate.log" >&2
		die "migrate failed"
	}

	case $SECKILL_LOCK in
	local | none) log "WARNING: SECKILL_LOCK=$SECKILL_LOCK — a broken guard, on purpose" ;;
	redlock) [[ -n ${SECKILL_REDLOCK_ADDRS:-} ]] || "$ROOT/scripts/services.sh" up redis-7001 redis-7002 redis-7003 redis-7004 redis-7005 ;;
	zookeeper) [[ -n ${SECKILL_ZOOKEEPER_ADDRS:-} ]] || "$ROOT/scripts/services.sh" up zookeeper ;;
	etcd) [[ -n ${SECKILL_ETCD_ENDPOINTS:-} ]] || "$ROOT/scripts/services.sh" up etcd ;;
	esac
	: >"$RUN_DIR/instances"
	for ((i = 1; i <= INSTANCES; i++)); do
		: >"$RUN_DIR/seckill-$i.log"
		start_instance "$i"
		echo "http://127.0.0.1:$(instance_port "$i")" >>"$RUN_DIR/instances"
	done
	for ((i = 1; i <= INSTANCES; i++)); do
		port=$(instance_port "$i")
		wait_http "http://127.0.0.1:$port/readyz" 30 "$RUN_DIR/seckill-$i.pid" || {
			tail -20 "$RUN_DIR/seckill-$i.log" >&2
			cmd_down
			die "instance $i on :$port did not become ready (log: $RUN_DIR/seckill-$i.log)"
		}
		log "instance $i ready on 127.0.0.1:$port (pid $(<"$RUN_DIR/seckill-$i.pid"), GOMAXPROCS=$PROCS)"
	done

	# nginx: the shared config, listening on loopback only, with this topology's upstream.
	n=$RUN_DIR/nginx
	mkdir -p "$n/conf" "$n/logs"
	sed "s/^\([[:space:]]*\)listen 8080\([ ;]\)/\1listen $NGINX_ADDR\2/" "$ROOT/deploy/nginx/nginx.conf" >"$n/conf/nginx.conf"
	grep -q "listen $NGINX_ADDR[ ;]" "$n/conf/nginx.conf" || die "deploy/nginx/nginx.conf has no 'listen 8080' line to pin to loopback"
	if [[ -n ${CLUSTER_NGINX_WORKERS:-} ]]; then
		[[ $CLUSTER_NGINX_WORKERS =~ ^[1-9][0-9]*$ ]] || die "CLUSTER_NGINX_WORKERS is a number of processes, not $CLUSTER_NGINX_WORKERS"
		sed -i "s/^worker_processes [^;]*;/worker_processes $CLUSTER_NGINX_WORKERS;/" "$n/conf/nginx.conf"
		grep -q "^worker_processes $CLUSTER_NGINX_WORKERS;" "$n/conf/nginx.conf" || die "deploy/nginx/nginx.conf has no 'worker_processes' line to set"
	fi
	if [[ ${CLUSTER_NGINX_ACCESS_LOG:-0} == 1 ]]; then
		# One line per request with every upstream attempt: make chaos reads it (docs/chaos.md).
		awk -v q="'" '/^[[:space:]]*access_log off;/ {
			print "    log_format chaos " q "$msec|$request_method|$status|$upstream_status|$upstream_bytes_sent|$upstream_addr|$request_time" q ";"
			# Buffered: one write a second instead of one per request (at 2,500 requests a
			# second that was CPU taken from the load being measured); make chaos waits
			# longer than the flush before it reads the log.
			print "    access_log logs/access.log chaos buffer=256k flush=1s;"
			next
		} { print }' "$n/conf/nginx.conf" >"$n/conf/nginx.conf.tmp" && mv "$n/conf/nginx.conf.tmp" "$n/conf/nginx.conf"
		grep -q 'access_log logs/access.log chaos ' "$n/conf/nginx.conf" || die "deploy/nginx/nginx.conf has no 'access_log off;' line to replace"
	fi
	# The server lines' parameters (max_fails=0) are those of deploy/nginx/upstream.conf.
	params=$(sed -n 's/^[[:space:]]*server[[:space:]]\{1,\}[^[:space:];]\{1,\}\([^;]*\);.*/\1/p' "$ROOT/deploy/nginx/upstream.conf" | head -n 1)
	[[ -n $params ]] || die "deploy/nginx/upstream.conf has no 'server ADDRESS PARAMETERS;' line"
	{
		echo "# written by scripts/cluster.sh up; included in the upstream block of nginx.conf"
		for ((i = 1; i <= INSTANCES; i++)); do echo "server 127.0.0.1:$(instance_port "$i")$params;"; done
	} >"$n/conf/upstream.conf"
	# The order gate (deploy/nginx/order-gate.conf): one order in progress per database
	# connection of the instances (32 each), unless the orders hold none (async).
	local gate=${CLUSTER_ORDER_GATE:-}
	if [[ -z $gate ]]; then
		gate=$((32 * INSTANCES))
		[[ ${SECKILL_ORDER_MODE:-sync} != async ]] || gate=0
	fi
	[[ $gate =~ ^[0-9]+$ ]] || die "CLUSTER_ORDER_GATE=$gate: want a number, 0 for no gate"
	{
		echo "# written by scripts/cluster.sh up; included in the order location of nginx.conf"
		if ((gate > 0)); then echo "limit_conn orders $gate;"; else echo "# no gate (CLUSTER_ORDER_GATE=0 or async mode)"; fi
	} >"$n/conf/order-gate.conf"
	local nginx_args=(-p "$n/" -c conf/nginx.conf -e logs/error.log -g "daemon off; pid $n/nginx.pid;")
	"$(nginx_bin)" -t -q "${nginx_args[@]}" || die "nginx config test failed"
	nohup "$(nginx_bin)" "${nginx_args[@]}" >"$n/logs/stdout.log" 2>&1 </dev/null &
	echo $! >"$RUN_DIR/nginx.pid"
	wait_http "http://$NGINX_ADDR/healthz" 10 "$RUN_DIR/nginx.pid" || {
		tail -20 "$n/logs/error.log" >&2
		cmd_down
		die "nginx did not come up on $NGINX_ADDR"
	}
	log "nginx ready on $NGINX_ADDR (pid $(<"$RUN_DIR/nginx.pid")), round-robin over $INSTANCES instances, SECKILL_LOCK=$SECKILL_LOCK"
}

# cmd_down: nginx first, so that no new request reaches an instance, then every instance at
# once, each within its own bound: instances that each take their whole bound hold `down` for
# the longest of the bounds, not for their sum.
cmd_down() {
	local i f stops=() rc=0
	stop "$RUN_DIR/nginx.pid" nginx nginx 15
	for f in "$RUN_DIR"/seckill-*.pid; do
		[[ -e $f ]] || continue
		i=${f##*/seckill-}
		i=${i%.pid}
		stop "$f" bin/seckill "instance $i" "$(instance_stop_secs "$i")" &
		stops+=($!)
	done
	for i in "${stops[@]}"; do wait "$i" || rc=1; done
	return $rc
}

# status_line PART PIDFILE PATTERN ADDR PATH: one row of `status`; fails if the part is down.
status_line() {
	local part=$1 pidfile=$2 pattern=$3 addr=$4 path=$5 state rc=0
	if ! alive "$pidfile" "$pattern"; then
		state=stopped
		rc=1
	elif curl -fsS -o /dev/null --max-time 2 "http://$addr$path"; then
		state="ready ($path 200)"
	else
		state="NOT READY ($path failed)"
		rc=1
	fi
	printf '%-12s %-8s %-18s %s\n' "$part" "$(cat "$pidfile" 2>/dev/null || echo -)" "$addr" "$state"
	return $rc
}

cmd_status() {
	local ok=0 f i
	if [[ -z $(compgen -G "$RUN_DIR/*.pid") ]]; then
		echo "cluster is down (no pid files in $RUN_DIR)"
		return 1
	fi
	printf '%-12s %-8s %-18s %s\n' PART PID ADDRESS HEALTH
	for f in "$RUN_DIR"/seckill-*.pid; do
		[[ -e $f ]] || continue
		i=${f##*/seckill-}
		i=${i%.pid}
		status_line "seckill-$i" "$f" bin/seckill "127.0.0.1:$(instance_port "$i")" /readyz || ok=1
	done
	# Through nginx: /healthz of whichever instance round-robin picks.
	status_line nginx "$RUN_DIR/nginx.pid" nginx "$NGINX_ADDR" /healthz || ok=1
	return $ok
}

case ${1:-} in
up) cmd_up ;;
start-instance) cmd_start_instance "${2:-}" ;;
ensure-pkg) ensure_pkg "${2:?ensure-pkg COMMAND PACKAGE}" "${3:?ensure-pkg COMMAND PACKAGE}" ;;
down) cmd_down ;;
status) cmd_status ;;
*)
	echo "usage: $0 up|down|status|start-instance N" >&2
	exit 2
	;;
esac
