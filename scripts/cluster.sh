#!/usr/bin/env bash
# Three shardkeeper nodes on loopback behind HAProxy on one port (make cluster,
# make cluster-restart NODE=n2, make cluster-stop).
#
#   scripts/cluster.sh start         build, start n1..n3 (mutual TLS between them, gossip
#                                    encrypted; material in CLUSTER_DIR/tls) and haproxy,
#                                    wait until all serve
#   scripts/cluster.sh restart n2    stop n2 if it runs (SIGTERM), start it again with the
#                                    same flags and data, wait until its /readyz answers 200;
#                                    refused when the cluster is not running, and when
#                                    stopping n2 would leave fewer than a quorum of nodes
#                                    running (another node is down) unless --force is given
#   scripts/cluster.sh stop          SIGTERM every node (they leave gracefully) and haproxy,
#                                    wait for them, report any node that exited non-zero
#   scripts/cluster.sh status        the cluster as the first running node sees it
#
# Environment:
#   CLUSTER_DIR    state: data dirs, logs (nN.log), pid files, exit statuses, haproxy.cfg
#                  (default ./data/cluster)
#   PORT           HAProxy's port (default 8080)
#   BASE_PORT      node nN listens on BASE_PORT+N (HTTP), +10+N (actor remoting), +20+N
#                  (gossip), +30+N (Raft); default 18080, so HTTP on 18081-18083
#   BIN            the shardkeeper binary; when set, start does not build it
#   START_TIMEOUT  seconds to wait for nodes to serve (default 60)
#   STOP_TIMEOUT   seconds to wait for processes to exit after SIGTERM (default 30); a
#                  forced restart kills (SIGKILL) a node still running after it
#
# PORT and BASE_PORT are recorded in CLUSTER_DIR at start: later commands, and a later start
# on the same data, use the recorded ones unless set again.
#
# start refuses to run over a live cluster (any node or haproxy of CLUSTER_DIR running) and
# fails, printing the end of the node's log, if a node exits before it serves. Each node runs
# under a small wrapper that writes its exit status to CLUSTER_DIR/nN.exit, so that stop,
# which runs in another shell, can tell a clean exit (0) from a failed one. Every command
# exits 0 only if it did all it says.
#
# restart keeps the cluster serving: the node's peers must be running, and enough of them to
# form a quorum (a majority of the nodes) while the node is down. Restarting a node that is
# not running needs only that it forms a quorum with the peers that run. --force restarts a
# running node even when that stops the cluster until it is back (its peers that run are
# then short of a quorum), and kills it if it is still running STOP_TIMEOUT seconds after
# SIGTERM (a node waits for others to take over its replicas before it exits, which a
# cluster short of a node may never do).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=$(realpath -m "${CLUSTER_DIR:-./data/cluster}")
NODES=(1 2 3)
START_TIMEOUT=${START_TIMEOUT:-60}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
BUILD=1
if [ -n "${BIN:-}" ]; then BUILD=0; else BIN=./bin/shardkeeper; fi
BIN=$(realpath -m "$BIN")

# The recorded ports of this cluster directory, unless the environment says otherwise.
REC_PORT="" REC_BASE_PORT=""
if [ -f "$DIR/cluster.env" ]; then
  REC_PORT=$(sed -n 's/^PORT=//p' "$DIR/cluster.env")
  REC_BASE_PORT=$(sed -n 's/^BASE_PORT=//p' "$DIR/cluster.env")
fi
PORT=${PORT:-${REC_PORT:-8080}}
BASE_PORT=${BASE_PORT:-${REC_BASE_PORT:-18080}}

say() { echo "cluster: $*"; }
fail() { echo "cluster: $*" >&2; exit 1; }

http_port() { echo $((BASE_PORT + $1)); }

# node_args N sets ARGS to node nN's serve arguments.
node_args() {
  local i=$1
  ARGS=(serve --node-id "n$i" --data-dir "$DIR/n$i"
    --http-addr "127.0.0.1:$((BASE_PORT + i))" --remote-addr "127.0.0.1:$((BASE_PORT + 10 + i))"
    --gossip-addr "127.0.0.1:$((BASE_PORT + 20 + i))" --raft-addr "127.0.0.1:$((BASE_PORT + 30 + i))"
    --join "127.0.0.1:$((BASE_PORT + 21))" --bootstrap-expect 3
    --raft-heartbeat-timeout 300ms --raft-election-timeout 300ms
    --tls-ca "$DIR/tls/ca.pem" --tls-cert "$DIR/tls/n$i.pem" --tls-key "$DIR/tls/n$i-key.pem"
    --gossip-key-file "$DIR/tls/gossip.key")
}

# make_secrets makes, once per cluster directory, a development CA and each node's
# certificate (shardkeeper tls) and a gossip key, in CLUSTER_DIR/tls: every node-to-node
# connection of the cluster is mutual TLS, and its gossip is encrypted.
make_secrets() {
  local i
  mkdir -p "$DIR/tls"
  [ -f "$DIR/tls/ca.pem" ] || "$BIN" tls ca --dir "$DIR/tls" >/dev/null
  for i in "${NODES[@]}"; do
    [ -f "$DIR/tls/n$i.pem" ] || "$BIN" tls node --dir "$DIR/tls" --name "n$i" --hosts 127.0.0.1,localhost >/dev/null
  done
  if [ ! -f "$DIR/tls/gossip.key" ]; then
    (umask 077 && "$BIN" gossip-key generate >"$DIR/tls/gossip.key")
  fi
}

# is_running PID: the process exists and is not a zombie (a child exited but not yet reaped,
# which kill -0 still finds).
is_running() {
  local state
  kill -0 "$1" 2>/dev/null || return 1
  state=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 0
  [ "$state" != Z ]
}

# alive_pid FILE PATTERN prints the pid in FILE if that process runs and its command line
# contains PATTERN (a pid file may outlive its process, and the pid be reused by another).
alive_pid() {
  local file=$1 pattern=$2 pid args
  [ -f "$file" ] || return 1
  pid=$(cat "$file" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  is_running "$pid" || return 1
  args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || ps -ww -o args= -p "$pid" 2>/dev/null) || return 1
  [[ "$args " == *"$pattern"* ]] || return 1
  echo "$pid"
}
node_pid() { alive_pid "$DIR/n$1.pid" "--node-id n$1 "; }
haproxy_pid() { alive_pid "$DIR/haproxy.pid" "$DIR/haproxy.cfg"; }

# exit_status N prints node nN's recorded exit status, waiting briefly for the wrapper to
# write it after the process is gone; "unknown" if it never does.
exit_status() {
  local f="$DIR/n$1.exit"
  for _ in $(seq 1 50); do
    if [ -s "$f" ]; then cat "$f"; return; fi
    sleep 0.1
  done
  echo unknown
}

# describe_status STATUS says in words how a process ended.
describe_status() {
  case "$1" in
    0) echo "exited 0" ;;
    unknown) echo "ended with an unknown exit status" ;;
    *)
      if [ "$1" -gt 128 ] 2>/dev/null; then
        echo "was killed by signal $(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128))) (status $1)"
      else
        echo "exited with status $1"
      fi ;;
  esac
}

http_code() { curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null || true; }

# log_tail N prints the end of node nN's log, for a failure message.
log_tail() {
  echo "--- last lines of $DIR/n$1.log ---" >&2
  tail -n 25 "$DIR/n$1.log" >&2 || true
  echo "---" >&2
}

# start_node N launches node nN under the exit-status wrapper, in a session of its own (so
# that a Ctrl-C of this script does not reach it), and waits for its pid file.
start_node() {
  local i=$1
  node_args "$i"
  rm -f "$DIR/n$i.pid" "$DIR/n$i.exit"
  echo "=== $(date -u +%FT%TZ) cluster.sh starts n$i" >>"$DIR/n$i.log"
  # shellcheck disable=SC2016 # expanded by the wrapper
  setsid bash -c '
    pidfile=$1 exitfile=$2; shift 2
    "$@" &
    pid=$!
    echo "$pid" >"$pidfile"
    wait "$pid"
    echo $? >"$exitfile.tmp" && mv "$exitfile.tmp" "$exitfile"
  ' wrapper "$DIR/n$i.pid" "$DIR/n$i.exit" "$BIN" "${ARGS[@]}" </dev/null >>"$DIR/n$i.log" 2>&1 &
  for _ in $(seq 1 100); do
    [ -s "$DIR/n$i.pid" ] && return
    sleep 0.05
  done
  fail "n$i: the wrapper did not record a pid"
}

# wait_ready N... waits until every node given answers 200 on /readyz; it fails, with the end
# of the node's log, as soon as one of them exits.
wait_ready() {
  local deadline=$((SECONDS + START_TIMEOUT)) pending=("$@") left i
  while :; do
    left=()
    for i in "${pending[@]}"; do
      if ! node_pid "$i" >/dev/null; then
        echo >&2
        echo "cluster: n$i $(describe_status "$(exit_status "$i")") before it served" >&2
        log_tail "$i"
        return 1
      fi
      [ "$(http_code "http://127.0.0.1:$(http_port "$i")/readyz")" = 200 ] || left+=("$i")
    done
    [ ${#left[@]} -eq 0 ] && break
    pending=("${left[@]}")
    if [ $SECONDS -ge "$deadline" ]; then
      echo >&2
      echo "cluster: not ready after ${START_TIMEOUT}s: $(printf 'n%s ' "${pending[@]}")(logs in $DIR)" >&2
      return 1
    fi
    echo -n .
    sleep 0.5
  done
  echo
}

# stop_pids NAME:PID... sends SIGTERM to each and waits up to STOP_TIMEOUT for all to exit;
# it prints the survivors and returns 1 if any is left.
stop_pids() {
  local entry deadline=$((SECONDS + STOP_TIMEOUT)) survivors
  for entry in "$@"; do kill -TERM "${entry#*:}" 2>/dev/null || true; done
  while :; do
    survivors=()
    for entry in "$@"; do
      if is_running "${entry#*:}"; then survivors+=("$entry"); fi
    done
    [ ${#survivors[@]} -eq 0 ] && return 0
    if [ $SECONDS -ge "$deadline" ]; then
      echo "cluster: still running ${STOP_TIMEOUT}s after SIGTERM: $(printf '%s ' "${survivors[@]/:/ pid }")" >&2
      return 1
    fi
    sleep 0.1
  done
}

# find_running sets LIVE to the live processes of this cluster directory (NAME:PID) and STALE
# to the nodes whose pid file outlived them (they exited since the last command); it removes
# the stale pid files, saying how each of those nodes ended.
find_running() {
  local i pid
  LIVE=() STALE=()
  for i in "${NODES[@]}"; do
    if pid=$(node_pid "$i"); then
      LIVE+=("n$i:$pid")
    elif [ -f "$DIR/n$i.pid" ]; then
      STALE+=("$i")
      echo "cluster: n$i (pid $(cat "$DIR/n$i.pid")) is not running: it $(describe_status "$(exit_status "$i")"); removing its pid file" >&2
      rm -f "$DIR/n$i.pid"
    fi
  done
  if pid=$(haproxy_pid); then
    LIVE+=("haproxy:$pid")
  elif [ -f "$DIR/haproxy.pid" ]; then
    echo "cluster: haproxy (pid $(cat "$DIR/haproxy.pid")) is not running; removing its pid file" >&2
    rm -f "$DIR/haproxy.pid"
  fi
}

start() {
  if ! command -v haproxy >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing haproxy (Debian package)"; apt-get install -y -qq haproxy >/dev/null
    else
      fail "haproxy is not installed: apt-get install haproxy"
    fi
  fi
  mkdir -p "$DIR"
  find_running
  if [ ${#LIVE[@]} -gt 0 ]; then
    fail "a cluster is already running in $DIR: $(printf '%s ' "${LIVE[@]/:/ pid }")
  (scripts/cluster.sh stop stops it; scripts/cluster.sh restart nN restarts one node)"
  fi
  if [ "$BUILD" = 1 ]; then
    make build >/dev/null
  fi
  [ -x "$BIN" ] || fail "no binary at $BIN"
  printf 'PORT=%s\nBASE_PORT=%s\n' "$PORT" "$BASE_PORT" >"$DIR/cluster.env"
  make_secrets

  local i
  for i in "${NODES[@]}"; do start_node "$i"; done
  echo -n "cluster: waiting for n1..n3 to serve"
  if ! wait_ready "${NODES[@]}"; then
    echo "cluster: start failed; stopping the nodes it started" >&2
    stop >&2 || true
    exit 1
  fi

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
  server n1 127.0.0.1:$(http_port 1) check
  server n2 127.0.0.1:$(http_port 2) check
  server n3 127.0.0.1:$(http_port 3) check
CFG
  if ! haproxy -f "$DIR/haproxy.cfg" -D -p "$DIR/haproxy.pid" >>"$DIR/haproxy.log" 2>&1; then
    echo "cluster: haproxy did not start (port $PORT in use?):" >&2
    tail -n 10 "$DIR/haproxy.log" >&2
    echo "cluster: stopping the nodes" >&2
    stop >&2 || true
    exit 1
  fi
  local deadline=$((SECONDS + 10))
  until [ "$(http_code "http://127.0.0.1:$PORT/readyz")" = 200 ]; do
    if ! haproxy_pid >/dev/null || [ $SECONDS -ge "$deadline" ]; then
      fail "haproxy on port $PORT does not serve /readyz (see $DIR/haproxy.log); the nodes run: scripts/cluster.sh stop"
    fi
    sleep 0.2
  done
  say "ready on http://127.0.0.1:$PORT (nodes' HTTP on $(http_port 1)-$(http_port 3), logs in $DIR)"
}

# words ITEM... joins its arguments as a phrase: "n1", "n1 and n3", "n1, n2 and n3".
words() {
  case $# in
    0) ;;
    1) echo "$1" ;;
    *) local all=("$@"); echo "$(IFS=,; echo "${all[*]:0:$#-1}" | sed 's/,/, /g') and ${all[$#-1]}" ;;
  esac
}

# is_are N: the verb for N nodes.
is_are() { if [ "$1" -eq 1 ]; then echo is; else echo are; fi; }

restart() {
  local name="" force=0 arg i j pid quorum up=() down=()
  for arg in "$@"; do
    case "$arg" in
      --force) force=1 ;;
      *) [ -z "$name" ] || fail "usage: $0 restart nN [--force]"; name=$arg ;;
    esac
  done
  [[ "$name" =~ ^n[0-9]+$ ]] || fail "usage: $0 restart nN [--force] (nN one of $(words $(printf 'n%s ' "${NODES[@]}")))"
  i=${name#n}
  [[ " ${NODES[*]} " == *" $i "* ]] || fail "no node $name (nodes: $(printf 'n%s ' "${NODES[@]}"))"
  [ -d "$DIR/$name" ] || fail "no data for $name in $DIR: start the cluster first"
  [ -x "$BIN" ] || fail "no binary at $BIN (make build)"

  # The node's peers must run, enough of them to keep a quorum while the node is down.
  find_running
  for j in "${NODES[@]}"; do
    [ "$j" = "$i" ] && continue
    if node_pid "$j" >/dev/null; then up+=("n$j"); else down+=("n$j"); fi
  done
  pid=$(node_pid "$i") || pid=""
  quorum=$((${#NODES[@]} / 2 + 1))
  if [ ${#up[@]} -eq 0 ] && [ -z "$pid" ]; then
    fail "refusing to restart $name: the cluster is not running in $DIR (no node runs); scripts/cluster.sh start starts it"
  fi
  if [ ${#up[@]} -eq 0 ]; then
    fail "refusing to restart $name: its peers $(words "${down[@]}") are not running, and $name alone has no quorum
  and would never serve again; scripts/cluster.sh stop, then start, brings the cluster back"
  fi
  if [ -z "$pid" ] && [ $((${#up[@]} + 1)) -lt "$quorum" ]; then
    fail "refusing to restart $name: $(words "${down[@]}") $(is_are ${#down[@]}) not running either, and $name with $(words "${up[@]}")
  would still be short of a quorum ($quorum of ${#NODES[@]} nodes); scripts/cluster.sh stop, then start, brings the cluster back"
  fi
  if [ -n "$pid" ] && [ ${#up[@]} -lt "$quorum" ]; then
    if [ "$force" = 0 ]; then
      fail "refusing to restart $name: $(words "${down[@]}") $(is_are ${#down[@]}) not running, and with $name stopped only $(words "${up[@]}") would run:
  less than a quorum ($quorum of ${#NODES[@]} nodes), so the cluster would stop serving until $name is back.
  Restart $(words "${down[@]}") first (scripts/cluster.sh restart ${down[0]}), or give --force to restart $name anyway"
    fi
    say "--force: restarting $name while $(words "${down[@]}") $(is_are ${#down[@]}) not running: the cluster has no quorum until $name is back"
  fi

  if [ -n "$pid" ]; then
    say "stopping $name (pid $pid)"
    if ! stop_pids "$name:$pid"; then
      [ "$force" = 1 ] || exit 1
      say "--force: killing $name (pid $pid)"
      kill -KILL "$pid" 2>/dev/null || true
      local deadline=$((SECONDS + 10))
      while is_running "$pid"; do
        [ $SECONDS -lt "$deadline" ] || fail "$name (pid $pid) survived SIGKILL"
        sleep 0.1
      done
    fi
    say "$name $(describe_status "$(exit_status "$i")")"
  fi
  start_node "$i"
  echo -n "cluster: waiting for $name to serve"
  wait_ready "$i" || exit 1
  say "$name ready on http://127.0.0.1:$(http_port "$i")"
  haproxy_pid >/dev/null || say "note: haproxy is not running (scripts/cluster.sh stop, then start)"
}

stop() {
  local entry i st bad=0
  find_running
  if [ ${#LIVE[@]} -eq 0 ]; then
    say "nothing running in $DIR"
  else
    stop_pids "${LIVE[@]}" || bad=1
  fi
  # A node that had died unnoticed was reported by find_running, and is a failure too.
  [ ${#STALE[@]} -eq 0 ] || bad=1
  for entry in "${LIVE[@]}"; do
    [[ "$entry" == n* ]] || continue
    i=${entry%%:*}
    i=${i#n}
    if node_pid "$i" >/dev/null; then continue; fi # a survivor, reported by stop_pids
    st=$(exit_status "$i")
    if [ "$st" != 0 ]; then
      echo "cluster: n$i $(describe_status "$st") (see $DIR/n$i.log)" >&2
      bad=1
    fi
    rm -f "$DIR/n$i.pid"
  done
  haproxy_pid >/dev/null || rm -f "$DIR/haproxy.pid"
  if [ $bad = 0 ] && [ ${#LIVE[@]} -gt 0 ]; then
    say "stopped (data kept in $DIR)"
  fi
  return $bad
}

status() {
  local i
  for i in "${NODES[@]}"; do
    if node_pid "$i" >/dev/null; then
      "$BIN" status --addr "127.0.0.1:$(http_port "$i")"
      return
    fi
  done
  fail "no node running in $DIR"
}

case "${1:-}" in
  start) start ;;
  restart) shift; restart "$@" ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|restart nN [--force]|stop|status (see the top of $0)" >&2; exit 2 ;;
esac
