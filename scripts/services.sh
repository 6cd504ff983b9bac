#!/usr/bin/env bash
# services.sh — the extra servers the RedLock, ZooKeeper and etcd locks need, for development,
# the tests and the load test: five independent redis-server processes on 127.0.0.1:7001-7005
# (RedLock's nodes: no persistence, no replication, nothing shared), one ZooKeeper on
# 127.0.0.1:2181 and one etcd on 127.0.0.1:2379 (its peer port 2380). Each server is its own process with its own directory and pidfile under
# the state directory, so a test or a person can stop one and start it again:
#
#   scripts/services.sh up [NAME...]      start what is not running (all by default), wait until
#                                         each answers; idempotent. A server that already answers
#                                         on its port, started elsewhere, is used as it is
#   scripts/services.sh down [NAME...]    stop what `up` started (all by default), by its pidfile
#   scripts/services.sh status [NAME...]  one line per server; exit 1 if any is not answering
#   scripts/services.sh failover          the Sentinel group's experiment: SIGKILL its current
#                                         primary, wait for the sentinels to switch to the replica,
#                                         restart the killed server (it rejoins as the replica)
#
# NAME is redis-7001 ... redis-7005, zookeeper or etcd (what `up` with no NAME starts), `mysql`
# (only when named; below), or the group `sentinel` (only when named): Redis with Sentinel for SECKILL_REDIS_SENTINEL — a primary
# (redis-7101), its replica (redis-7102) and three sentinels (sentinel-27101 ... -27103,
# quorum 2) watching it as master "seckill"; its members can be named one by one too. The
# sentinels fail over fast, for tests: the primary is down after 1 s without an answer
# (down-after-milliseconds 1000), a stalled failover is given up after 3 s (failover-timeout).
# A member (re)started while the sentinels know a primary joins it as its replica.
# Debian's redis-server, zookeeper (ZooKeeper 3.8 and the JRE it pulls) and etcd-server (etcd
# 3.4) packages are installed when absent. The sentinels are redis-server in sentinel mode, the binary Debian's
# redis-sentinel package links to: that package would also start a system sentinel watching
# 127.0.0.1:6379.
#
# `mysql` is Oracle's MySQL server (not MariaDB) on 127.0.0.1:3307, root with no password, for
# `make test-mysql`: the same suites against MySQL. Debian 12 has no MySQL server package; Debian
# unstable ("sid") has mysql-server-core (MySQL 9.7 as of 2026-11). apt, with a configuration
# of this script's own (sid's index only, an empty package status: nothing of the host's apt
# state is read or changed), downloads that package and every package it needs (about 60 MB, each
# checked against sid's signed index with the host's debian-archive-keyring); they are
# unpacked into a directory of their own, and mysqld runs chrooted in it, since sid's
# binaries need a newer C library than Debian 12's. Needs root (chroot, mknod). The unpacked
# tree stays under the state directory for the next `up` (about 700 MB). The packages stay in a
# cache of the machine's (SERVICES_MYSQL_CACHE), shared by every checkout, with the list of the
# last resolution: a checkout made later on the same machine (a CI clone) downloads nothing,
# and when sid cannot be read or cannot resolve mysql-server-core (sid is a moving target) `up`
# says so and unpacks the packages resolved last time instead of failing.
#
# Settings (environment):
#   SERVICES_RUN_DIR   state: one directory per server   (default <repo>/run/services)
#   SERVICES_WAIT      seconds `up` waits for each server (default 60; the JVM is slow to start),
#                      and `failover` for the switch
#   SERVICES_MYSQL_PORT  the MySQL server's port (default 3307)
#   SERVICES_MYSQL_CACHE the MySQL packages' cache (default /var/cache/seckill/mysql)
#   SERVICES_SENTINEL_PORTS  the Sentinel group's ports: primary, replica, three sentinels
#                      (default "7101 7102 27101 27102 27103"), so that tests and load tests can
#                      run their own group beside the default one
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN_DIR=${SERVICES_RUN_DIR:-$ROOT/run/services}
WAIT=${SERVICES_WAIT:-60}
REDIS_PORTS=(7001 7002 7003 7004 7005)
ZK_PORT=2181
ZK_JAR=/usr/share/java/zookeeper.jar
ETCD_PORT=2379
MYSQL_PORT=${SERVICES_MYSQL_PORT:-3307}
MYSQL_ROOT=$RUN_DIR/mysql/root # the unpacked packages, mysqld's / ; its state under /srv/mysql
MYSQL_CACHE=${SERVICES_MYSQL_CACHE:-/var/cache/seckill/mysql}
ALL=()
for p in "${REDIS_PORTS[@]}"; do ALL+=("redis-$p"); done
ALL+=(zookeeper etcd)
read -r -a SENTINEL_PORTS <<<"${SERVICES_SENTINEL_PORTS:-7101 7102 27101 27102 27103}"
((${#SENTINEL_PORTS[@]} == 5)) || { echo "services: SERVICES_SENTINEL_PORTS needs five ports" >&2; exit 2; }
SENTINEL_MASTER=seckill
SENTINEL=(redis-"${SENTINEL_PORTS[0]}" redis-"${SENTINEL_PORTS[1]}")
for p in "${SENTINEL_PORTS[@]:2}"; do SENTINEL+=("sentinel-$p"); done

log() { printf 'services: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

apt_updated=
ensure_pkg() { # ensure_pkg PATH-OR-COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 || [[ -e $1 ]] && return 0
	log "$1 not found: installing Debian package $2"
	local sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	if [[ -z $apt_updated ]]; then
		"${sudo[@]}" apt-get update -qq
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}

# alive NAME: the process recorded in NAME's pidfile runs and is the program we started (a
# recycled pid belonging to something else is never signalled).
alive() {
	local pidfile=$RUN_DIR/$1/pid pid pattern
	[[ -s $pidfile ]] || return 1
	pid=$(<"$pidfile")
	case $1 in
	redis-* | sentinel-*) pattern="redis-server 127.0.0.1:${1#*-}" ;;
	zookeeper) pattern=QuorumPeerMain ;;
	etcd) pattern="etcd --name seckill-dev" ;;
	mysql) pattern="mysqld --no-defaults --user=root --datadir=/srv/mysql/data --port=$MYSQL_PORT" ;;
	esac
	tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$pattern"
}

# answers NAME: the server replies to its health probe.
answers() {
	case $1 in
	redis-* | sentinel-*) [[ $(timeout 2 redis-cli -h 127.0.0.1 -p "${1#*-}" ping 2>/dev/null) == PONG ]] ;;
	zookeeper) [[ $(zk_command ruok) == imok ]] ;;
	etcd) [[ $(etcd_get /health) == *'"health":"true"'* ]] ;;
	mysql) [[ -n $(mysql_greeting) ]] ;;
	esac
}

# mysql_greeting: the server version a MySQL-protocol server on MYSQL_PORT announces in its
# first packet (the protocol's greeting; no client program needed), or nothing.
mysql_greeting() {
	timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$MYSQL_PORT && head -c 48 <&3" 2>/dev/null |
		tail -c +6 | tr '\0' '\n' | head -n1 | tr -cd '[:print:]' || true
}

in_sentinel_group() { [[ " ${SENTINEL[*]} " == *" $1 "* ]]; }

# sentinel_master: host:port of the primary as the first answering sentinel of the group
# knows it; nothing when none answers.
sentinel_master() {
	local p out
	for p in "${SENTINEL_PORTS[@]:2}"; do
		out=$(timeout 2 redis-cli -h 127.0.0.1 -p "$p" sentinel get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | paste -sd:) || continue
		[[ $out == *:* ]] && { echo "$out"; return 0; }
	done
	return 0
}

# sentinel_ready: the group can fail over — the primary has a replica in sync, and every
# sentinel knows the primary, the replica and the two other sentinels.
sentinel_ready() {
	local p info
	for p in "${SENTINEL_PORTS[@]:2}"; do
		info=$(timeout 2 redis-cli -h 127.0.0.1 -p "$p" sentinel master "$SENTINEL_MASTER" 2>/dev/null | paste -sd' ') || return 1
		[[ " $info " == *" flags master "* && " $info " == *" num-slaves 1 "* && " $info " == *" num-other-sentinels 2 "* ]] || return 1
		[[ $(timeout 2 redis-cli -h 127.0.0.1 -p "$p" sentinel replicas "$SENTINEL_MASTER" 2>/dev/null | paste -sd' ') == *"master-link-status ok"* ]] || return 1
	done
}

# zk_command WORD: a ZooKeeper four-letter command over bash's /dev/tcp (no nc needed); the
# zoo.cfg below whitelists ruok and srvr.
zk_command() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ZK_PORT && printf %s '$1' >&3 && cat <&3" 2>/dev/null || true
}

# etcd_get PATH: a GET of etcd's client port over bash's /dev/tcp (no curl needed).
etcd_get() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ETCD_PORT && printf 'GET %s HTTP/1.0\r\n\r\n' '$1' >&3 && cat <&3" 2>/dev/null || true
}

port_taken() { ss -Hltn "sport = :$1" | grep -q .; }

start_redis() {
	local name=$1 port=${1#redis-} dir=$RUN_DIR/$1
	mkdir -p "$dir"
	port_taken "$port" && die "$name: port $port is taken by a process this script did not start (ss -ltnp)"
	# The Sentinel group's servers: a replica of the primary the sentinels know, or on a
	# fresh start the second one of the first; the first syncs its replica at once (no 5 s delay).
	local role=() master
	if in_sentinel_group "$name"; then
		master=$(sentinel_master)
		[[ -z $master && $port == "${SENTINEL_PORTS[1]}" ]] && master=127.0.0.1:${SENTINEL_PORTS[0]}
		[[ -n $master && $master != "127.0.0.1:$port" ]] && role=(--replicaof "${master%:*}" "${master##*:}")
		role+=(--repl-diskless-sync-delay 0)
	fi
	# --daemonize: redis forks, detaches and writes the pidfile itself. No RDB, no AOF: a
	# node that restarts comes back empty, the case RedLock's delayed-restart advice is about.
	redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --pidfile "$dir/pid" \
		--dir "$dir" --logfile "$dir/redis.log" --save '' --appendonly no ${role[@]+"${role[@]}"}
}

# start_sentinel NAME: redis-server in sentinel mode. Its configuration is written once and
# then rewritten by the sentinel itself (the current primary, the other sentinels), so that a
# sentinel restarted after a failover watches the new primary; `down` of the whole group
# removes it.
start_sentinel() {
	local name=$1 port=${1#sentinel-} dir=$RUN_DIR/$1
	mkdir -p "$dir"
	port_taken "$port" && die "$name: port $port is taken by a process this script did not start (ss -ltnp)"
	[[ -s $dir/sentinel.conf ]] || cat >"$dir/sentinel.conf" <<-EOF
		# written by scripts/services.sh: a sentinel of the development/test Sentinel group
		bind 127.0.0.1
		port $port
		daemonize yes
		pidfile $dir/pid
		dir $dir
		logfile $dir/redis.log
		sentinel monitor $SENTINEL_MASTER 127.0.0.1 ${SENTINEL_PORTS[0]} 2
		sentinel down-after-milliseconds $SENTINEL_MASTER 1000
		sentinel failover-timeout $SENTINEL_MASTER 3000
		sentinel parallel-syncs $SENTINEL_MASTER 1
	EOF
	redis-server "$dir/sentinel.conf" --sentinel
}

start_zookeeper() {
	local dir=$RUN_DIR/zookeeper
	mkdir -p "$dir/data" "$dir/conf"
	port_taken "$ZK_PORT" && die "zookeeper: port $ZK_PORT is taken by a process this script did not start (ss -ltnp)"
	cat >"$dir/conf/zoo.cfg" <<-EOF
		# written by scripts/services.sh: one standalone server for development and tests
		tickTime=2000
		dataDir=$dir/data
		clientPortAddress=127.0.0.1
		clientPort=$ZK_PORT
		admin.enableServer=false
		4lw.commands.whitelist=ruok,srvr
		maxSessionTimeout=60000
	EOF
	cat >"$dir/conf/log4j.properties" <<-'EOF'
		log4j.rootLogger=INFO, FILE
		log4j.appender.FILE=org.apache.log4j.FileAppender
		log4j.appender.FILE.File=${zookeeper.log.dir}/zookeeper.log
		log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
		log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n
	EOF
	# Our conf directory first on the class path, so its log4j.properties wins; the jar's
	# manifest names its other dependencies but no SLF4J binding (without one, no log).
	# setsid: the JVM outlives this shell and its process group.
	local cp=$dir/conf:$ZK_JAR jar
	for jar in /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar; do
		[[ -e $jar ]] && cp+=:$jar
	done
	setsid nohup java -Xms32m -Xmx256m -Dzookeeper.log.dir="$dir" \
		-cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/conf/zoo.cfg" \
		>"$dir/stdout.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
}

# start_etcd: one member of its own cluster, data under the run directory. Its lease
# minimum (1.5 × the election timeout, 1 s by default) lets the tests use 2 s leases.
start_etcd() {
	local dir=$RUN_DIR/etcd peer=$((ETCD_PORT + 1))
	mkdir -p "$dir"
	port_taken "$ETCD_PORT" && die "etcd: port $ETCD_PORT is taken by a process this script did not start (ss -ltnp)"
	port_taken "$peer" && die "etcd: peer port $peer is taken by a process this script did not start (ss -ltnp)"
	setsid nohup etcd --name seckill-dev --data-dir "$dir/data" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "seckill-dev=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
}

# mysql_tree: unpack Debian sid's mysql-server-core and all it needs into MYSQL_ROOT, unless
# an earlier `up` did.
mysql_tree() {
	[[ -e $MYSQL_ROOT/.ready ]] && return 0
	[[ $(id -u) -eq 0 ]] || die "mysql: needs root (chroot, mknod)"
	command -v dpkg-deb >/dev/null || die "mysql: needs dpkg-deb and apt-get (a Debian host)"
	local cache=$MYSQL_CACHE a deb tmp=$MYSQL_ROOT.tmp l resolved
	a=$cache/apt
	resolved=$cache/resolved.txt
	mkdir -p "$a/lists/partial" "$cache/debs/partial"
	: >"$a/status" # an empty package status: apt resolves every dependency
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${SERVICES_DEBIAN_MIRROR:-http://deb.debian.org/debian} sid main" >"$a/sources.list"
	local apt=(apt-get -q -o Dir::Etc::SourceList="$a/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
		-o Dir::State::Lists="$a/lists" -o Dir::State::status="$a/status"
		-o Dir::Cache::Archives="$cache/debs" -o Dir::Cache::pkgcache="$a/pkgcache.bin" -o Dir::Cache::srcpkgcache="$a/srcpkgcache.bin"
		-o APT::Architecture=amd64 -o APT::Architectures::=amd64 -o Acquire::Languages=none
		-o APT::Install-Recommends=false -o Debug::NoLocking=true -o Acquire::Retries=3
		-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
		-o Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false
		-o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false)
	local debs=() why=""
	log "mysql: resolving Debian sid's mysql-server-core and its dependencies (packages cached in $cache)"
	# A failed update keeps the index of the last one, if any: the resolution below then uses it.
	"${apt[@]}" -qq update 2>&1 | grep -v -e DirectoryExists -e 'Unable to read /dev/null' >&2 || true
	"${apt[@]}" -y -qq --download-only install mysql-server-core 2>&1 |
		grep -v -e DirectoryExists -e 'Unable to read /dev/null' >&2 || true
	# The packages of this resolution: the lines "Inst NAME (VERSION ..." of a simulated install.
	local name version
	while read -r name version; do
		deb=$(compgen -G "$cache/debs/${name}_${version//:/%3a}_*.deb" | head -n1) || true
		[[ -n $deb ]] || { why="$name $version was not downloaded"; break; }
		debs+=("$deb")
	done < <("${apt[@]}" -s install mysql-server-core 2>/dev/null | awk '$1 == "Inst" {print $2, $3}' | tr -d '(')
	[[ -n $why ]] || ((${#debs[@]} > 10)) || why="apt could not resolve mysql-server-core in Debian sid"
	if [[ -z $why ]]; then
		printf '%s\n' "${debs[@]}" >"$resolved.tmp" && mv "$resolved.tmp" "$resolved"
		# Packages of earlier resolutions that this one replaced.
		for deb in "$cache"/debs/*.deb; do grep -qxF "$deb" "$resolved" || rm -f "$deb"; done
	else
		# sid moves every day: a package that is briefly uninstallable, or a mirror out of reach,
		# should not take the tests down on a machine that has a working set already.
		debs=()
		[[ -s $resolved ]] && mapfile -t debs <"$resolved"
		for deb in "${debs[@]}"; do [[ -f $deb ]] || die "mysql: $why, and the cached $deb is gone"; done
		((${#debs[@]} > 0)) || die "mysql: $why, and no earlier resolution is cached in $cache"
		log "mysql: WARNING: $why; unpacking the ${#debs[@]} packages resolved on $(date -u -r "$resolved" +%FT%TZ) instead"
	fi
	rm -rf --one-file-system "$tmp"
	mkdir -p "$tmp"
	log "mysql: unpacking ${#debs[@]} packages into $MYSQL_ROOT"
	for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$tmp"; done
	# What base-files and dpkg would have made: the merged-/usr links, a few devices, /tmp, root.
	for l in bin sbin lib lib64; do [[ -e $tmp/usr/$l ]] && ln -sfn "usr/$l" "$tmp/$l"; done
	mkdir -p "$tmp/dev" "$tmp/tmp" "$tmp/etc"
	chmod 1777 "$tmp/tmp"
	mknod -m 666 "$tmp/dev/null" c 1 3
	mknod -m 666 "$tmp/dev/zero" c 1 5
	mknod -m 666 "$tmp/dev/random" c 1 8
	mknod -m 666 "$tmp/dev/urandom" c 1 9
	echo 'root:x:0:0:root:/root:/bin/sh' >"$tmp/etc/passwd"
	echo 'root:x:0:' >"$tmp/etc/group"
	printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >"$tmp/etc/hosts"
	chroot "$tmp" /usr/sbin/mysqld --version >/dev/null || die "mysql: mysqld does not run in $tmp"
	rm -rf --one-file-system "$MYSQL_ROOT"
	mv "$tmp" "$MYSQL_ROOT"
	touch "$MYSQL_ROOT/.ready"
}

# start_mysql: mysqld chrooted in MYSQL_ROOT, its data directory initialized on the first start
# (root@localhost with no password), no binary log, no X protocol port.
start_mysql() {
	local dir=$RUN_DIR/mysql state=/srv/mysql
	port_taken "$MYSQL_PORT" && die "mysql: port $MYSQL_PORT is taken by a process this script did not start (ss -ltnp)"
	mysql_tree
	mkdir -p "$MYSQL_ROOT$state/run" "$MYSQL_ROOT$state/files"
	chmod 700 "$MYSQL_ROOT$state/files"
	if [[ ! -d $MYSQL_ROOT$state/data/mysql ]]; then
		log "mysql: initializing its data directory ($(chroot "$MYSQL_ROOT" /usr/sbin/mysqld --version | sed 's/^.*Ver //'))"
		rm -rf --one-file-system "$MYSQL_ROOT$state/data"
		chroot "$MYSQL_ROOT" /usr/sbin/mysqld --no-defaults --initialize-insecure --user=root \
			--datadir=$state/data --log-error=$state/init.log ||
			{ cat "$MYSQL_ROOT$state/init.log" >&2; die "mysql: mysqld --initialize-insecure failed"; }
	fi
	ln -sfn "$MYSQL_ROOT$state/error.log" "$dir/mysqld.log"
	# --user=root: mysqld refuses to run as root without it. setsid: it outlives this shell.
	setsid chroot "$MYSQL_ROOT" /usr/sbin/mysqld --no-defaults --user=root --datadir=$state/data \
		--port="$MYSQL_PORT" --bind-address=127.0.0.1 --socket=$state/run/mysqld.sock \
		--pid-file=$state/run/mysqld.pid --log-error=$state/error.log --mysqlx=OFF \
		--secure-file-priv=$state/files --disable-log-bin </dev/null >/dev/null 2>&1 &
	echo $! >"$dir/pid" # chroot execs mysqld: the same process
}

cmd_up() {
	local name i redis=0 zk=0 etcd=0
	for name in "$@"; do
		case $name in redis-* | sentinel-*) redis=1 ;; zookeeper) zk=1 ;; etcd) etcd=1 ;; mysql) mkdir -p "$RUN_DIR/mysql" ;; esac
	done
	((redis)) && ensure_pkg redis-server redis-server
	((redis)) && ensure_pkg redis-cli redis-tools
	((zk)) && ensure_pkg "$ZK_JAR" zookeeper
	((zk)) && ensure_pkg java default-jre-headless
	((etcd)) && ensure_pkg etcd etcd-server
	local start=()
	for name in "$@"; do
		if alive "$name"; then
			log "$name already runs (pid $(<"$RUN_DIR/$name/pid"))"
			continue
		fi
		# One that answers on the port but was started elsewhere (another checkout's
		# services.sh, a system service) serves as well; `down` leaves it alone.
		if answers "$name"; then
			log "$name answers on its port (not started by this script in $RUN_DIR): using it"
			continue
		fi
		start+=("$name")
		case $name in
		redis-*) start_redis "$name" ;;
		sentinel-*) start_sentinel "$name" ;;
		zookeeper) start_zookeeper ;;
		etcd) start_etcd ;;
		mysql) start_mysql ;;
		esac
	done
	for name in ${start[@]+"${start[@]}"}; do
		for ((i = 0; i < WAIT * 10; i++)); do
			answers "$name" && break
			# A redis pidfile appears only once the daemon has forked: give it a moment.
			if ((i > 20)) && ! alive "$name"; then
				tail -20 "$RUN_DIR/$name"/*.log >&2 || true
				die "$name died while starting (logs in $RUN_DIR/$name)"
			fi
			sleep 0.1
		done
		answers "$name" || die "$name did not answer within ${WAIT}s (logs in $RUN_DIR/$name)"
		log "$name ready (pid $(<"$RUN_DIR/$name/pid"))"
	done
	for name in "$@"; do
		[[ $name == sentinel-* ]] || continue
		for ((i = 0; i < WAIT * 10; i++)); do
			sentinel_ready && break
			sleep 0.1
		done
		sentinel_ready || die "Sentinel group not ready within ${WAIT}s: a replica in sync and three sentinels that know each other (logs in $RUN_DIR/sentinel-*)"
		log "Sentinel group ready: master \"$SENTINEL_MASTER\" at $(sentinel_master); SECKILL_REDIS_SENTINEL=$SENTINEL_MASTER@$(sentinel_addrs)"
		break
	done
}

sentinel_addrs() {
	local p out=()
	for p in "${SENTINEL_PORTS[@]:2}"; do out+=("127.0.0.1:$p"); done
	(IFS=,; echo "${out[*]}")
}

# stop NAME: SIGTERM, SIGKILL after 10 s. A stopped (SIGSTOPped) server is continued first so
# that it can act on the SIGTERM.
cmd_stop() {
	local name=$1 pid i
	if ! alive "$name"; then
		rm -f "$RUN_DIR/$name/pid"
		return 0
	fi
	pid=$(<"$RUN_DIR/$name/pid")
	kill -TERM "$pid"
	kill -CONT "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive "$name" || break
		sleep 0.1
	done
	if alive "$name"; then
		log "$name (pid $pid) ignored SIGTERM for 10 s; SIGKILL"
		kill -KILL "$pid"
	fi
	rm -f "$RUN_DIR/$name/pid"
	log "stopped $name (pid $pid)"
}

cmd_down() {
	local name
	for name in "$@"; do cmd_stop "$name"; done
	# The whole Sentinel group down: the next `up` starts afresh, the first server primary.
	for name in "${SENTINEL[@]}"; do
		alive "$name" && return 0
	done
	for name in "${SENTINEL[@]:2}"; do rm -f "$RUN_DIR/$name/sentinel.conf"; done
}

# cmd_failover: SIGKILL the Sentinel group's primary (one this script started), wait for the
# sentinels to name another (their +switch-master), then restart the killed server, which
# joins the new primary as its replica, and wait until the group could fail over again. Prints
# one line with the times; exit 1 if no switch within SERVICES_WAIT seconds.
cmd_failover() {
	local old new name pid start switched i
	sentinel_ready || die "the Sentinel group is not ready: scripts/services.sh up sentinel (status: scripts/services.sh status sentinel)"
	old=$(sentinel_master)
	name=redis-${old##*:}
	in_sentinel_group "$name" && alive "$name" || die "primary $old is not a server of this group that this script started"
	pid=$(<"$RUN_DIR/$name/pid")
	start=$(date +%s%N)
	kill -KILL "$pid"
	for ((i = 0; i < WAIT * 20; i++)); do
		new=$(sentinel_master)
		[[ -n $new && $new != "$old" ]] && break
		sleep 0.05
	done
	[[ -n $new && $new != "$old" ]] || die "no switch from $old within ${WAIT}s (logs in $RUN_DIR/sentinel-*)"
	switched=$(date +%s%N)
	rm -f "$RUN_DIR/$name/pid"
	cmd_up "$name" 2>/dev/null
	for ((i = 0; i < WAIT * 10; i++)); do
		sentinel_ready && break
		sleep 0.1
	done
	sentinel_ready || die "$name did not rejoin as the replica of $new within ${WAIT}s"
	printf 'failover: primary %s killed (SIGKILL); sentinels switched to %s after %d ms; %s back as its replica after %d ms\n' \
		"$old" "$new" $(((switched - start) / 1000000)) "$old" $((($(date +%s%N) - start) / 1000000))
}

cmd_status() {
	local name state rc=0 addr version
	printf '%-14s %-8s %-16s %s\n' NAME PID ADDRESS STATE
	for name in "$@"; do
		case $name in
		redis-* | sentinel-*) addr=127.0.0.1:${name#*-} ;;
		zookeeper) addr=127.0.0.1:$ZK_PORT ;;
		etcd) addr=127.0.0.1:$ETCD_PORT ;;
		mysql) addr=127.0.0.1:$MYSQL_PORT ;;
		esac
		if ! alive "$name" && answers "$name"; then
			state="ready (not started by this script)"
		elif ! alive "$name"; then
			state=stopped
			rc=1
		elif answers "$name"; then
			state=ready
			if [[ $name == etcd ]]; then
				version=$(etcd_get /version | sed -n 's/.*"etcdserver":"\([^"]*\)".*/etcd \1/p')
				state="ready${version:+ ($version)}"
			elif [[ $name == mysql ]]; then
				state="ready (MySQL $(mysql_greeting))"
			elif [[ $name == zookeeper ]]; then
				version=$(zk_command srvr | sed -n 's/^Zookeeper version: \([^-,]*\).*/ZooKeeper \1/p')
				state="ready${version:+ ($version)}"
			elif in_sentinel_group "$name" && [[ $name == redis-* ]]; then
				state="ready ($(timeout 2 redis-cli -h 127.0.0.1 -p "${name#redis-}" role 2>/dev/null | head -1 | sed 's/^slave$/replica/; s/^master$/primary/'))"
			elif [[ $name == sentinel-* ]]; then
				state="ready (sentinel: $SENTINEL_MASTER at $(timeout 2 redis-cli -h 127.0.0.1 -p "${name#sentinel-}" sentinel get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | paste -sd:))"
			fi
		else
			state="NOT ANSWERING"
			rc=1
		fi
		printf '%-14s %-8s %-16s %s\n' "$name" "$(cat "$RUN_DIR/$name/pid" 2>/dev/null || echo -)" "$addr" "$state"
	done
	return $rc
}

cmd=${1:-}
shift || true
names=()
for n in "$@"; do
	if [[ $n == sentinel ]]; then names+=("${SENTINEL[@]}"); else names+=("$n"); fi
done
((${#names[@]})) || names=("${ALL[@]}")
for n in "${names[@]}"; do
	[[ " ${ALL[*]} mysql ${SENTINEL[*]} " == *" $n "* ]] || die "unknown server $n (one of: ${ALL[*]} mysql; sentinel: ${SENTINEL[*]})"
done
case $cmd in
up) cmd_up "${names[@]}" ;;
down) cmd_down "${names[@]}" ;;
status) cmd_status "${names[@]}" ;;
failover) cmd_failover ;;
*)
	echo "usage: $0 up|down|status [redis-7001 ... redis-7005 zookeeper etcd | mysql | sentinel | ${SENTINEL[*]}]; $0 failover" >&2
	exit 2
	;;
esac
