#!/usr/bin/env bash
# A pmserver cluster on this machine, as Redis's utils/create-cluster is
# for Redis (docs/cluster.md).
#
#   scripts/cluster/local.sh start N DIR [options]
#       Starts N pmservers in cluster mode, each over its own pool under
#       DIR/node-I, with a map that splits the 16384 slots evenly, and
#       nutcracker (twemproxy) in front of their memcached ports. Prints
#       one line `node HOST:PORT` per node (its RESP address) and one line
#       `proxy HOST:PORT` (nutcracker's memcached address). Running it
#       again on a DIR of a stopped cluster restarts it on its pools and
#       maps.
#   scripts/cluster/local.sh add DIR [--pmserver PATH] [--index KIND]
#       Starts one more node for the running cluster of DIR, with no slots,
#       and adds it to every node's map (scripts/cluster/pmcluster.py
#       add-node); `pmcluster.py rebalance` then gives it slots. Prints
#       `node HOST:PORT` of the new node. nutcracker's pool is not changed
#       (docs/cluster.md: the proxy's servers are static).
#   scripts/cluster/local.sh stop DIR
#       Stops every process that `start` or `add` started for DIR
#       (SIGTERM: the pools close cleanly).
#
# Options of start:
#   --pmserver PATH   the binary (default: build/release/server/pmserver)
#   --index KIND      index kind of new pools (default: lbtree)
#   --base-port P     RESP ports P..P+N-1, memcached ports P+100..,
#                     the proxy P+200 (default: free ports picked now)
#   --threads T       event-loop threads per node (default: 1)
#   --no-proxy        do not start nutcracker
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "local.sh: error: $*" >&2; exit 2; }

# free_ports N: N distinct free loopback ports (all held open while they
# are picked, so none is picked twice).
free_ports() {
  python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# stop_pid PID: SIGTERM, up to 15 s to exit, then SIGKILL.
stop_pid() {
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_stop() {
  local dir=$1 f
  [ -d "$dir" ] || die "no cluster directory $dir"
  for f in "$dir"/nutcracker.pid "$dir"/node-*/pid; do
    [ -f "$f" ] || continue
    stop_pid "$(cat "$f")"
    rm -f "$f"
  done
}

# The node id of node I of DIR: 40 hex digits, fixed for the directory.
node_id() { printf '%s node %s' "$(cd "$1" && pwd)" "$2" | sha1sum | cut -c1-40; }

cmd_start() {
  local n=$1 dir=$2
  shift 2
  local pmserver="$repo_root/build/release/server/pmserver" index=lbtree base="" threads=1 proxy=1
  while [ $# -gt 0 ]; do
    case "$1" in
      --pmserver) pmserver=$2; shift 2 ;;
      --index) index=$2; shift 2 ;;
      --base-port) base=$2; shift 2 ;;
      --threads) threads=$2; shift 2 ;;
      --no-proxy) proxy=0; shift ;;
      *) die "unknown option $1 (see the comment at the top of this script)" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 100 ] || die "N is 1 to 100"
  [ -x "$pmserver" ] || die "no pmserver at $pmserver (ninja -C build/release pmserver)"
  if [ "$proxy" = 1 ]; then
    command -v nutcracker >/dev/null || die "nutcracker is not installed (apt-get install nutcracker, or --no-proxy)"
  fi
  mkdir -p "$dir"
  local i resp=() mc=() ids=() spare=()
  read -r -a spare <<< "$(free_ports $((2 * n + 2)))"
  for i in $(seq "$n"); do
    ids+=("$(node_id "$dir" "$i")")
    if [ -n "$base" ]; then
      resp+=($((base + i - 1)))
      mc+=($((base + 100 + i - 1)))
    elif [ -f "$dir/node-$i/ports" ]; then
      read -r r m < "$dir/node-$i/ports"
      resp+=("$r")
      mc+=("$m")
    else
      resp+=("${spare[$((2 * i - 2))]}")
      mc+=("${spare[$((2 * i - 1))]}")
    fi
  done
  # The map: slots split evenly, node I gets [start, end].
  local map
  map=$(
    echo "# pmserver cluster map written by scripts/cluster/local.sh"
    echo "epoch 1"
    for i in $(seq 0 $((n - 1))); do
      echo "node ${ids[$i]} 127.0.0.1:${resp[$i]} $((16384 * i / n))-$((16384 * (i + 1) / n - 1))"
    done
  )
  for i in $(seq "$n"); do
    local nd="$dir/node-$i"
    mkdir -p "$nd"
    echo "${resp[$((i - 1))]} ${mc[$((i - 1))]}" > "$nd/ports"
    # A node keeps the map it last accepted (PMCLUSTER SETMAP rewrites it).
    [ -f "$nd/cluster.map" ] || echo "$map" > "$nd/cluster.map"
    if [ -f "$nd/pid" ] && kill -0 "$(cat "$nd/pid")" 2>/dev/null; then
      die "node $i of $dir is running (local.sh stop $dir first)"
    fi
    "$pmserver" --pool "$nd/pool" --create "$index" --threads "$threads" \
      --resp-port "${resp[$((i - 1))]}" --memcached-port "${mc[$((i - 1))]}" \
      --cluster-config "$nd/cluster.map" --cluster-node-id "${ids[$((i - 1))]}" \
      > "$nd/log" 2>&1 &
    echo $! > "$nd/pid"
  done
  for i in $(seq "$n"); do
    local nd="$dir/node-$i" ok=0
    for _ in $(seq 300); do
      if grep -q "pmserver: ready" "$nd/log"; then ok=1; break; fi
      kill -0 "$(cat "$nd/pid")" 2>/dev/null || break
      sleep 0.1
    done
    if [ "$ok" != 1 ]; then
      cat "$nd/log" >&2
      cmd_stop "$dir"
      die "node $i did not start (its log is above)"
    fi
  done
  if [ "$proxy" = 1 ]; then
    local pport
    if [ -n "$base" ]; then pport=$((base + 200));
    elif [ -f "$dir/proxy-port" ]; then pport=$(cat "$dir/proxy-port");
    else pport=${spare[$((2 * n))]}; fi
    echo "$pport" > "$dir/proxy-port"
    # ketama over murmur: the keys split evenly over the nodes; the
    # default fnv1a_64 sends almost every key to one node (docs/cluster.md
    # has the measurement).
    {
      echo "pmserver:"
      echo "  listen: 127.0.0.1:$pport"
      echo "  hash: murmur"
      echo "  distribution: ketama"
      echo "  timeout: 2000"
      echo "  auto_eject_hosts: false"
      echo "  servers:"
      for i in $(seq "$n"); do echo "    - 127.0.0.1:${mc[$((i - 1))]}:1 node-$i"; done
    } > "$dir/nutcracker.yml"
    nutcracker -c "$dir/nutcracker.yml" -o "$dir/nutcracker.log" -p "$dir/nutcracker.pid" \
      -s "${spare[$((2 * n + 1))]}" -a 127.0.0.1 -d
    local ok=0
    for _ in $(seq 100); do
      if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $pport), 1)" 2>/dev/null; then
        ok=1; break
      fi
      sleep 0.1
    done
    [ "$ok" = 1 ] || { cmd_stop "$dir"; die "nutcracker did not start (see $dir/nutcracker.log)"; }
  fi
  for i in $(seq "$n"); do echo "node 127.0.0.1:${resp[$((i - 1))]}"; done
  if [ "$proxy" = 1 ]; then echo "proxy 127.0.0.1:$(cat "$dir/proxy-port")"; fi
}

cmd_add() {
  local dir=$1
  shift
  local pmserver="$repo_root/build/release/server/pmserver" index=lbtree
  while [ $# -gt 0 ]; do
    case "$1" in
      --pmserver) pmserver=$2; shift 2 ;;
      --index) index=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [ -f "$dir/node-1/ports" ] || die "no cluster in $dir (local.sh start first)"
  local n=1
  while [ -d "$dir/node-$((n + 1))" ]; do n=$((n + 1)); done
  local i=$((n + 1)) nd="$dir/node-$((n + 1))" first resp mc id
  read -r first _ < "$dir/node-1/ports"
  read -r resp mc <<< "$(free_ports 2)"
  id=$(node_id "$dir" "$i")
  mkdir -p "$nd"
  echo "$resp $mc" > "$nd/ports"
  # The cluster's map (without node 1's own moves) naming the new node.
  { python3 "$repo_root/scripts/cluster/pmcluster.py" map "127.0.0.1:$first" |
      grep -v -e '^migrating' -e '^importing'
    echo "node $id 127.0.0.1:$resp"; } > "$nd/cluster.map"
  "$pmserver" --pool "$nd/pool" --create "$index" --threads 1 --resp-port "$resp" \
    --memcached-port "$mc" --cluster-config "$nd/cluster.map" --cluster-node-id "$id" \
    > "$nd/log" 2>&1 &
  echo $! > "$nd/pid"
  for _ in $(seq 300); do grep -q "pmserver: ready" "$nd/log" && break; sleep 0.1; done
  grep -q "pmserver: ready" "$nd/log" || { cat "$nd/log" >&2; die "node $i did not start"; }
  python3 "$repo_root/scripts/cluster/pmcluster.py" add-node "127.0.0.1:$first" "$id" \
    "127.0.0.1:$resp" >&2
  echo "node 127.0.0.1:$resp"
}

case "${1:-}" in
  add) [ $# -ge 2 ] || die "usage: local.sh add DIR [options]"; shift; cmd_add "$@" ;;
  start) [ $# -ge 3 ] || die "usage: local.sh start N DIR [options]"; shift; cmd_start "$@" ;;
  stop) [ $# -eq 2 ] || die "usage: local.sh stop DIR"; cmd_stop "$2" ;;
  *) die "usage: local.sh start N DIR [options] | local.sh add DIR | local.sh stop DIR" ;;
esac
