#!/usr/bin/env bash
# Three shardkeeper nodes on loopback behind HAProxy on one port.
#   scripts/cluster.sh start   # build, start n1..n3 and haproxy (port $PORT, default 8080)
#   scripts/cluster.sh stop    # stop everything (SIGTERM: nodes leave gracefully)
#   scripts/cluster.sh status  # the cluster as node n1 sees it
# State lives in ./data/cluster (data dirs, logs, pids, haproxy.cfg).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${CLUSTER_DIR:-./data/cluster}
PORT=${PORT:-8080}
BIN=./bin/shardkeeper

node_flags() { # $1 = 1..3
  local i=$1
  echo "--node-id n$i --data-dir $DIR/n$i --http-addr 127.0.0.1:$((18080 + i)) \
    --gossip-addr 127.0.0.1:$((17945 + i)) --raft-addr 127.0.0.1:$((17000 + i)) \
    --remote-addr 127.0.0.1:$((18090 + i)) --bootstrap-expect 3 --join 127.0.0.1:17946 \
    --raft-heartbeat-timeout 300ms --raft-election-timeout 300ms"
}

start() {
  if ! command -v haproxy >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
      echo "installing haproxy (Debian package)"; apt-get install -y haproxy >/dev/null
    else
      echo "haproxy is not installed: apt-get install haproxy" >&2; exit 1
    fi
  fi
  make build >/dev/null
  mkdir -p "$DIR"
  for i in 1 2 3; do
    # shellcheck disable=SC2046
    $BIN serve $(node_flags $i) >>"$DIR/n$i.log" 2>&1 &
    echo $! >"$DIR/n$i.pid"
  done
  cat >"$DIR/haproxy.cfg" <<CFG
global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  retries 0
frontend shardkeeper
  bind 127.0.0.1:$PORT
  default_backend nodes
backend nodes
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2
  server n1 127.0.0.1:18081 check
  server n2 127.0.0.1:18082 check
  server n3 127.0.0.1:18083 check
CFG
  haproxy -f "$DIR/haproxy.cfg" -D -p "$DIR/haproxy.pid"
  echo -n "waiting for the cluster"
  for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null; then
      echo; echo "cluster ready on http://127.0.0.1:$PORT (nodes on 18081-18083, logs in $DIR)"; return
    fi
    echo -n .; sleep 0.5
  done
  echo; echo "cluster did not become ready; see $DIR/n*.log" >&2; exit 1
}

stop() {
  [ -f "$DIR/haproxy.pid" ] && kill "$(cat "$DIR/haproxy.pid")" 2>/dev/null || true
  for i in 1 2 3; do
    [ -f "$DIR/n$i.pid" ] && kill -TERM "$(cat "$DIR/n$i.pid")" 2>/dev/null || true
  done
  for i in 1 2 3; do
    if [ -f "$DIR/n$i.pid" ]; then
      while kill -0 "$(cat "$DIR/n$i.pid")" 2>/dev/null; do sleep 0.1; done
      rm -f "$DIR/n$i.pid"
    fi
  done
  rm -f "$DIR/haproxy.pid"
  echo "cluster stopped (data kept in $DIR)"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) ./bin/shardkeeper status --addr 127.0.0.1:18081 ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
