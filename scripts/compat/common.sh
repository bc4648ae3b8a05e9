# Shared by scripts/compat/*.sh (sourced): starting and stopping the two
# servers they compare. Nothing here fetches anything. Each server is
# started on a free loopback port with its own data directory, bound in
# time, and stopped by its process id (never by name).
compat_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$compat_dir/../.." && pwd)

die() { echo "$(basename "$0"): error: $*" >&2; exit 2; }
note() { echo "$(basename "$0"): $*" >&2; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The process ids of the servers started here, stopped by stop_servers
# (and by the EXIT trap a script sets with `trap stop_servers EXIT`).
compat_pids=()

# stop_pid PID: SIGTERM, up to 15 s for it to exit, then SIGKILL.
stop_pid() {
  local pid=$1
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

stop_servers() {
  local pid
  for pid in "${compat_pids[@]}"; do stop_pid "$pid"; done
  compat_pids=()
}

# start_redis DIR: starts redis-server (the one on PATH, or $REDIS_SERVER)
# with no persistence on a free port; sets server_pid and server_port.
# Returns 1 (its log on stderr) if it does not answer within 30 s.
start_redis() {
  local dir=$1 attempt
  mkdir -p "$dir"
  for attempt in 1 2 3; do  # a free port can be taken before redis binds it
    server_port=$(free_port)
    "${REDIS_SERVER:-redis-server}" --port "$server_port" --bind 127.0.0.1 --save '' \
      --appendonly no --dir "$dir" --logfile "$dir/redis.log" --daemonize no &
    server_pid=$!
    compat_pids+=("$server_pid")
    if wait_port "$server_port" "$server_pid" 30; then return 0; fi
    stop_pid "$server_pid"
  done
  cat "$dir/redis.log" >&2 2>/dev/null || true
  return 1
}

# start_pmserver BINARY DIR [ARGS...]: starts pmserver over a new pool in
# DIR (index kind $pm_index, default lbtree), RESP on a port the kernel
# picks ("auto"), memcached off (or the other way round when $pm_protocol
# is "memcached"); sets server_pid and server_port from its start lines.
# Returns 1 (its log on stderr) if it is not ready within 30 s.
start_pmserver() {
  local bin=$1 dir=$2 ports=(--memcached-port 0 --resp-port auto) name=resp
  shift 2
  if [ "${pm_protocol:-resp}" = memcached ]; then
    ports=(--memcached-port auto --resp-port 0) name=memcached
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  "$bin" --pool "$dir/kv.pool" --create "${pm_index:-lbtree}" "${ports[@]}" --bind 127.0.0.1 "$@" \
    >"$dir/pmserver.log" 2>&1 &
  server_pid=$!
  compat_pids+=("$server_pid")
  server_port=
  for _ in $(seq 300); do
    if grep -q '^pmserver: ready' "$dir/pmserver.log" 2>/dev/null; then
      server_port=$(sed -n "s/^pmserver: $name on .*:\([0-9][0-9]*\)\$/\1/p" "$dir/pmserver.log")
      [ -n "$server_port" ] && return 0
      break
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/pmserver.log" >&2
  stop_pid "$server_pid"
  return 1
}

# start_memcached: starts memcached (the one on PATH, or $MEMCACHED) on a
# free port, TCP only; sets server_pid and server_port.
start_memcached() {
  local attempt
  for attempt in 1 2 3; do
    server_port=$(free_port)
    "${MEMCACHED:-memcached}" -u "$(id -un)" -l 127.0.0.1 -p "$server_port" -U 0 &
    server_pid=$!
    compat_pids+=("$server_pid")
    if wait_port "$server_port" "$server_pid" 30; then return 0; fi
    stop_pid "$server_pid"
  done
  return 1
}

# wait_port PORT PID SECONDS: true once PORT accepts a connection; false if
# PID exits or the time runs out.
wait_port() {
  local port=$1 pid=$2 secs=$3
  for _ in $(seq $((secs * 10))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
