#!/usr/bin/env bash
# Throughput of a pmserver cluster of 1, 2 and 3 nodes on this machine,
# next to a Redis Cluster of as many nodes in the same run, measured by
# redis-benchmark --cluster (docs/cluster.md, docs/RESULTS.md).
#
#   scripts/cluster/bench.sh [--nodes "1 2 3"] [--requests N] [--clients C]
#                            [--tests set,get,incr,mset] [--pmserver PATH]
#                            [--fsync always|everysec|no] [--repeat R]
#
# One node is a plain server of each kind (redis-benchmark --cluster needs
# two). Every node of either kind gets one event-loop thread (pmserver
# --threads 1; Redis is single-threaded), its data on /dev/shm. Redis's
# nodes write an AOF with appendfsync as --fsync says (default always:
# pmserver acknowledges a write once it is durable). Prints one line per
# (server, nodes, test, run) and the median requests/s per (server, nodes,
# test) with pmserver/redis.
set -euo pipefail
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
nodes_list="1 2 3"
requests=100000
clients=50
tests=set,get,incr,mset
pmserver="$repo_root/build/release/server/pmserver"
fsync=always
repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes_list=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --pmserver) pmserver=$2; shift 2 ;;
    --fsync) fsync=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
for tool in redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "bench.sh: $tool is missing (scripts/compat/deps.sh)" >&2; exit 2; }
done
# free_ports N: N distinct free loopback ports (all held open while they
# are picked, so none is picked twice).
free_ports() {
  python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
work=$(mktemp -d /dev/shm/pmcluster-bench-XXXXXX)
redis_pids=()
cleanup() {
  "$repo_root/scripts/cluster/local.sh" stop "$work/pm" >/dev/null 2>&1 || true
  for p in "${redis_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  rm -rf "$work"
}
trap cleanup EXIT

results="$work/results"
: > "$results"
# run LABEL N PORT: redis-benchmark --cluster against the cluster at PORT
# (one node: a plain server, which redis-benchmark --cluster refuses).
run() {
  local label=$1 n=$2 port=$3 r line mode=--cluster
  [ "$n" -gt 1 ] || mode=""
  for r in $(seq "$repeat"); do
    { redis-benchmark $mode -p "$port" -t "$tests" -n "$requests" -c "$clients" -q --csv \
      2>&1 || true; } | tr -d '"' | { grep -E '^[A-Z]+( [^,]*)?,' || true; } |
      while IFS=, read -r test rps _; do
        [[ "$rps" =~ ^[0-9.]+$ ]] || { echo "bench.sh: $label: $test: $rps" >&2; continue; }
        line="$label $n ${test%% *} $r $rps"
        echo "$line"
        echo "$line" >> "$results"
      done
  done
}

start_redis_cluster() {
  local n=$1 i ports=() picked=() cluster=yes
  [ "$n" -gt 1 ] || cluster=no
  redis_pids=()
  read -r -a picked <<< "$(free_ports "$n")"
  for i in $(seq "$n"); do
    local p=${picked[$((i - 1))]} d
    d="$work/redis-$n-$i"
    mkdir -p "$d"
    redis-server --port "$p" --bind 127.0.0.1 --dir "$d" --cluster-enabled "$cluster" \
      --cluster-config-file nodes.conf --appendonly yes --appendfsync "$fsync" \
      --save "" --daemonize no --logfile "$d/log" &
    redis_pids+=($!)
    ports+=("$p")
  done
  for p in "${ports[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$p" ping >/dev/null 2>&1 ||
      { cat "$work"/redis-"$n"-*/log >&2; echo "bench.sh: redis-server on $p did not start" >&2; exit 1; }
  done
  redis_port=${ports[0]}
  [ "$n" -gt 1 ] || return 0
  if [ "$n" -ge 3 ]; then
    redis-cli --cluster create $(printf '127.0.0.1:%s ' "${ports[@]}") --cluster-yes >/dev/null
  else
    # redis-cli --cluster create needs 3 masters: assign the slots by hand.
    local k=0
    for p in "${ports[@]}"; do
      redis-cli -p "$p" cluster addslotsrange $((16384 * k / n)) $((16384 * (k + 1) / n - 1)) >/dev/null
      [ "$p" = "${ports[0]}" ] || redis-cli -p "$p" cluster meet 127.0.0.1 "${ports[0]}" >/dev/null
      k=$((k + 1))
    done
  fi
  for _ in $(seq 200); do
    redis-cli -p "${ports[0]}" cluster info | grep -q "cluster_state:ok" && break
    sleep 0.1
  done
  sleep 1  # let every node learn the others' slots
}

for n in $nodes_list; do
  rm -rf "$work/pm"
  if [ "$n" -gt 1 ]; then
    "$repo_root/scripts/cluster/local.sh" start "$n" "$work/pm" --pmserver "$pmserver" \
      --no-proxy > "$work/pm.txt"
  else
    mkdir -p "$work/pm/node-1"
    "$pmserver" --pool "$work/pm/node-1/pool" --create lbtree --threads 1 --resp-port auto \
      --memcached-port 0 > "$work/pm/node-1/log" 2>&1 &
    echo $! > "$work/pm/node-1/pid"
    for _ in $(seq 100); do grep -q "ready" "$work/pm/node-1/log" && break; sleep 0.1; done
    sed -n 's/pmserver: resp on \(.*\)/node \1/p' "$work/pm/node-1/log" > "$work/pm.txt"
  fi
  pm_port=$(head -1 "$work/pm.txt" | cut -d: -f2)
  start_redis_cluster "$n"
  # Interleaved: pmserver, then Redis, per run.
  run pmserver "$n" "$pm_port"
  run redis "$n" "$redis_port"
  "$repo_root/scripts/cluster/local.sh" stop "$work/pm"
  for p in "${redis_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  redis_pids=()
done

echo
echo "median requests/s (redis-benchmark --cluster -n $requests -c $clients, $repeat runs; Redis appendfsync $fsync)"
python3 - "$results" <<'PY'
import statistics, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, n, test, _, rps = line.split()
    runs[(label, int(n), test)].append(float(rps))
tests = sorted({t for (_, _, t) in runs})
print(f"{'nodes':>5} {'test':>6} {'pmserver':>10} {'redis':>10} {'pm/redis':>8}")
for n in sorted({n for (_, n, _) in runs}):
    for t in tests:
        pm, rd = runs.get(("pmserver", n, t)), runs.get(("redis", n, t))
        if not pm or not rd:
            continue
        a, b = statistics.median(pm), statistics.median(rd)
        print(f"{n:>5} {t:>6} {a:>10.0f} {b:>10.0f} {a / b:>8.2f}")
PY
