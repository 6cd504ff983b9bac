# own-redis.sh — sourced by scripts/loadtest.sh and scripts/scaling.sh: a redis-server of the
# run's own for the asynchronous mode. Its books start empty, and no other async service on a
# shared Redis discovers the run's streams and writes them into its own database.
#
#   own_redis_start NAME PORT DIR   start it on 127.0.0.1:PORT (data and log in DIR), wait for
#                                   PONG, export SECKILL_REDIS_ADDR; exit 1 if PORT is taken
#   own_redis_stop                  stop it if it runs (safe to call twice)

own_redis_pid=""

own_redis_start() {
	local name=$1 port=$2 dir=$3
	! ss -Hltn "sport = :$port" | grep -q . || { echo "$name: port $port is taken; choose another" >&2; exit 1; }
	rm -rf "$dir" && mkdir -p "$dir"
	redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$dir" \
		>"$dir/redis.log" 2>&1 </dev/null &
	own_redis_pid=$!
	for _ in $(seq 50); do [[ $(redis-cli -p "$port" ping 2>/dev/null) == PONG ]] && break; sleep 0.1; done
	[[ $(redis-cli -p "$port" ping 2>/dev/null) == PONG ]] || { echo "$name: redis-server on :$port did not start ($dir/redis.log)" >&2; exit 1; }
	export SECKILL_REDIS_ADDR=127.0.0.1:$port
}

own_redis_stop() {
	if [[ -n $own_redis_pid ]] && tr '\0' ' ' 2>/dev/null <"/proc/$own_redis_pid/cmdline" | grep -q redis-server; then
		kill -TERM "$own_redis_pid"
		wait "$own_redis_pid" 2>/dev/null || true
	fi
	own_redis_pid=""
}
