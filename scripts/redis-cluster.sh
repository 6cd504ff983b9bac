#!/usr/bin/env bash
# redis-cluster.sh up|down|status: a Redis Cluster of three masters (no replicas) on 127.0.0.1,
# for the asynchronous mode's cluster test: its admission script must run unchanged there.
#   REDIS_CLUSTER_PORTS  the masters' ports (default "16710 16711 16712")
#   REDIS_CLUSTER_DIR    where their nodes.conf, logs and pids live (default .cluster/redis-<first port>)
# No persistence: a node that restarts starts empty. Never touches another Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
PORTS=(${REDIS_CLUSTER_PORTS:-16710 16711 16712})
DIR=${REDIS_CLUSTER_DIR:-.cluster/redis-${PORTS[0]}}

up() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
    echo "redis-cluster.sh: needs redis-server and redis-cli (apt-get install --no-install-recommends redis-server redis-tools)" >&2
    exit 1
  }
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd)
  local addrs=()
  for p in "${PORTS[@]}"; do
    if redis-cli -p "$p" ping >/dev/null 2>&1; then
      echo "redis-cluster.sh: something already answers on port $p" >&2
      exit 1
    fi
    redis-server --bind 127.0.0.1 --port "$p" --cluster-enabled yes \
      --cluster-config-file "$DIR/nodes-$p.conf" --cluster-node-timeout 5000 \
      --save '' --appendonly no --dir "$DIR" --logfile "$DIR/redis-$p.log" \
      --pidfile "$DIR/redis-$p.pid" --daemonize yes
    addrs+=("127.0.0.1:$p")
  done
  for p in "${PORTS[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$DIR/create.log"
  # Every slot covered and every node agreeing takes a moment after create.
  for _ in $(seq 200); do
    ok=1
    for p in "${PORTS[@]}"; do
      redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=0
    done
    [ "$ok" = 1 ] && { echo "redis cluster up: ${addrs[*]}"; return 0; }
    sleep 0.05
  done
  echo "redis-cluster.sh: cluster did not reach cluster_state:ok (see $DIR)" >&2
  exit 1
}

down() {
  for p in "${PORTS[@]}"; do
    if [ -f "$DIR/redis-$p.pid" ]; then
      kill "$(cat "$DIR/redis-$p.pid")" 2>/dev/null || true
    fi
  done
  for p in "${PORTS[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 || break; sleep 0.05; done
  done
  rm -rf "$DIR"
}

status() {
  for p in "${PORTS[@]}"; do
    printf '%s: ' "$p"; redis-cli -p "$p" cluster info 2>/dev/null | grep cluster_state || echo down
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
