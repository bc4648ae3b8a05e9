#!/usr/bin/env bash
# Issue 11's server figures: YCSB A-F with pmclient against pmserver
# (lbtree and nvtree backends, over RESP and over the memcached protocol),
# Redis from Debian (AOF with appendfsync always, and everysec) and
# memcached from Debian. Each server is started here on a free loopback
# port with its own data directory and stopped after its run.
#
# Usage: scripts/figures/ycsb.sh [options]
#        scripts/figures/ycsb.sh --real-ycsb [scripts/compat/ycsb.sh's options] YCSB_CHECKOUT
#   --real-ycsb        (first argument) runs the real YCSB instead of
#                      pmclient's imitation: scripts/compat/ycsb.sh builds
#                      it from a local checkout and runs its redis binding
#                      against pmserver and redis-server (appendfsync
#                      always and everysec) and its memcached binding
#                      against pmserver and memcached; see its --help
#   --pmserver PATH    pmserver binary (default build/release/server/pmserver;
#                      if it does not exist, the pmserver runs are skipped)
#   --pmclient PATH    (default build/release/bench/pmclient)
#   --out DIR          JSON, tables and summary.txt (default figures-ycsb)
#   --data-dir DIR     where the servers' AOF files and pools go (default: a
#                      fresh directory under /dev/shm, removed at the end)
#   --redis-dir DIR    where Redis's append-only file goes (default: under
#                      --data-dir). On tmpfs (/dev/shm) fsync costs nothing;
#                      give a directory on a disk for what a deployment pays
#   --servers LIST     comma list of: redis-always, redis-everysec, memcached,
#                      pmserver-KIND (RESP) and pmserver-KIND-mc (memcached
#                      protocol) for any persistent index KIND of pmbench --list
#                      (default: redis-always, redis-everysec, memcached,
#                      pmserver-lbtree, pmserver-nvtree, pmserver-lbtree-mc,
#                      pmserver-nvtree-mc)
#   --records N (1000000)  --value-size B (1024)  --ops M per phase (1000000)
#   --dist D (zipf:0.99)   --threads T client threads (2)  --repeat R (1)
#   --workload W (ycsb-a,ycsb-b,ycsb-c,ycsb-f,ycsb-d,ycsb-e)  --seed S (1)
#   --timeout-ms MS    pmclient's wait for a reply (120000: pmserver's
#                      flush_all before each repeat removes every key, about
#                      3 us each, 13 s for 4M keys)
# Environment: SERVER_CPUS / CLIENT_CPUS (taskset -c lists; default: not
# pinned; see docs/benchmarking.md on placement on a small guest).
#
# Installs redis-server and memcached if missing (servers-deps.sh).
# pmclient's tables go to OUT/NAME.txt (with the date and `uptime`
# before), its JSON to OUT/NAME.json, and a summary of every run
# (throughput and p99 per phase) to OUT/summary.txt. A server that does
# not start or a pmclient run that fails does not stop the others; the
# script then exits 1 naming them.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --real-ycsb ]; then
  shift
  exec scripts/compat/ycsb.sh "$@"
fi

pmserver=build/release/server/pmserver
pmclient=build/release/bench/pmclient
out=figures-ycsb
data_dir=
redis_dir=
servers=redis-always,redis-everysec,memcached,pmserver-lbtree,pmserver-nvtree,pmserver-lbtree-mc,pmserver-nvtree-mc
records=1000000 value_size=1024 ops=1000000 dist=zipf:0.99 threads=2 repeat=1 seed=1
timeout_ms=120000
# D and E insert: after A, B, C and F, which only read and update the loaded
# records, as YCSB's own runs order them.
workload=ycsb-a,ycsb-b,ycsb-c,ycsb-f,ycsb-d,ycsb-e
while [ $# -gt 0 ]; do
  case $1 in
    --pmserver) pmserver=$2 ;;
    --pmclient) pmclient=$2 ;;
    --out) out=$2 ;;
    --data-dir) data_dir=$2 ;;
    --redis-dir) redis_dir=$2 ;;
    --servers) servers=$2 ;;
    --records) records=$2 ;;
    --value-size) value_size=$2 ;;
    --ops) ops=$2 ;;
    --dist) dist=$2 ;;
    --threads) threads=$2 ;;
    --repeat) repeat=$2 ;;
    --workload) workload=$2 ;;
    --seed) seed=$2 ;;
    --timeout-ms) timeout_ms=$2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "ycsb.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done

[ -x "$pmclient" ] || { echo "ycsb.sh: no pmclient at $pmclient (ninja -C build/release pmclient)" >&2; exit 2; }
scripts/figures/servers-deps.sh
mkdir -p "$out"
if [ -z "$data_dir" ]; then
  data_dir=$(mktemp -d /dev/shm/pmclient-ycsb-XXXXXX)
  remove_data=1
else
  mkdir -p "$data_dir"
  remove_data=0
fi

server_pid=
stop_server() {  # stops the server this script started, if one runs
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
cleanup() {
  stop_server
  [ "$remove_data" = 1 ] && rm -rf "$data_dir"
  return 0
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {  # port, seconds
  for _ in $(seq $(($2 * 10))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
pin() { [ -n "${1:-}" ] && echo "taskset -c $1"; return 0; }

# memcached's memory limit and pmserver's first pool file: the records'
# keys and values with room for growth and overheads, at least 64 MiB.
mib=$(python3 -c "print(max(64, int($records * ($value_size + 100) * 1.5 / 2**20)))")

# start NAME PORT: starts server NAME listening on PORT; sets server_pid,
# protocol, scan mode and server_dir.
start() {
  local name=$1 port=$2 dir="$data_dir/$1"
  case $name in redis-*) [ -n "$redis_dir" ] && dir="$redis_dir/$1" ;; esac
  rm -rf "$dir" && mkdir -p "$dir"
  server_dir=$dir
  case $name in
    redis-always|redis-everysec)
      $(pin "${SERVER_CPUS:-}") redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' \
        --appendonly yes --appendfsync "${name#redis-}" --logfile "$dir/redis.log" &
      protocol=resp scan_mode=zset ;;
    memcached)
      # As many worker threads as pmserver's default (one per CPU).
      $(pin "${SERVER_CPUS:-}") memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 -m "$mib" \
        -t "$(nproc)" &
      protocol=memcached scan_mode=none ;;
    pmserver-*)
      local kind=${name#pmserver-}
      kind=${kind%-mc}
      if [[ $name == *-mc ]]; then
        set -- --memcached-port "$port" --resp-port 0
        protocol=memcached scan_mode=none
      else
        set -- --resp-port "$port" --memcached-port 0
        protocol=resp scan_mode=range
      fi
      $(pin "${SERVER_CPUS:-}") "$pmserver" --pool "$dir/kv.pool" --create "$kind" \
        --pool-size-mb "$mib" --bind 127.0.0.1 "$@" >"$dir/pmserver.log" 2>&1 &
      ;;
  esac
  server_pid=$!
}

ran=() failed=()
for name in ${servers//,/ }; do
  case $name in
    redis-always|redis-everysec|memcached) ;;
    pmserver-?*)
      if [ ! -x "$pmserver" ]; then
        echo "ycsb.sh: $name skipped: no pmserver binary at $pmserver (give --pmserver PATH)" >&2
        continue
      fi ;;
    *) echo "ycsb.sh: unknown server '$name'" >&2; exit 2 ;;
  esac
  port=$(free_port)
  start "$name" "$port"
  if ! wait_port "$port" 30; then
    echo "ycsb.sh: $name did not start on port $port; its log:" >&2
    cat "$server_dir"/*.log >&2 2>/dev/null || true
    stop_server
    failed+=("$name (did not start)")
    continue
  fi
  echo "== $name ($protocol on port $port)" >&2
  { date -u +%FT%TZ; uptime; echo "+ $name: pmclient --protocol $protocol --scan-mode $scan_mode" \
      "--records $records --value-size $value_size --workload $workload --ops $ops --dist $dist" \
      "--threads $threads --repeat $repeat --seed $seed"; } >"$out/$name.txt"
  rc=0
  $(pin "${CLIENT_CPUS:-}") "$pmclient" --server "127.0.0.1:$port" --protocol "$protocol" \
    --scan-mode "$scan_mode" --label "$name" --records "$records" --value-size "$value_size" \
    --workload "$workload" --ops "$ops" --dist "$dist" --threads "$threads" --repeat "$repeat" \
    --seed "$seed" --timeout-ms "$timeout_ms" --json "$out/$name.json" >>"$out/$name.txt" 2>&1 || rc=$?
  stop_server
  # Its AOF or pool is not needed any more (1M records of 1 KiB are GiBs
  # of /dev/shm, which is memory).
  rm -rf "${server_dir:?}"
  cat "$out/$name.txt"
  # Exit 1 (wrong results) still wrote the JSON, with the errors in it.
  if [ "$rc" != 0 ]; then
    echo "ycsb.sh: pmclient against $name exited $rc (see $out/$name.txt)" >&2
    failed+=("$name (pmclient exit $rc)")
  fi
  if [ -f "$out/$name.json" ]; then ran+=("$out/$name.json"); fi
done

[ ${#ran[@]} -gt 0 ] || { echo "ycsb.sh: no server ran" >&2; exit 1; }
python3 - "${ran[@]}" >"$out/summary.txt" <<'EOF'
# Throughput (Kops/s) and p99 latency (us) per server and phase.
import json, sys
docs = [json.load(open(p)) for p in sys.argv[1:]]
cfg = docs[0]["config"]
phases = [r["phase"] for r in docs[0]["runs"]]
# Ops per phase as run (a workload of name:count phases overrides --ops).
counts = sorted({r["ops"] for r in docs[0]["runs"] if not r["skipped"]}) or [cfg["ops"]]
per_phase = "/".join(str(c) for c in counts)
print(f"YCSB: {cfg['records']} records x {cfg['value_size']} B, dist {cfg['dist']}, "
      f"{cfg['threads']} client threads, {per_phase} ops per phase, median of {cfg['repeat']}; "
      f"{docs[0]['machine']['cpu']}, {docs[0]['machine']['cores']} cores")
print("Kops/s (p99 us); '-' = skipped")
print(f"{'server':<20} {'version':<16} {'load s':>7} " + " ".join(f"{p:>16}" for p in phases))
for d in docs:
    by = {r["phase"]: r for r in d["runs"]}
    cells = []
    for p in phases:
        r = by.get(p)
        if r is None or r["skipped"]:
            cells.append(f"{'-':>16}")
        else:
            cells.append(f"{r['throughput_ops_s'] / 1e3:>8.1f} ({r['latency_ns']['p99'] / 1e3:>5.0f})")
    load = d["runs"][0]["load_s"] if d["runs"] else 0
    errors = sum(r["errors"] for r in d["runs"]) + (d["runs"][0]["load_errors"] if d["runs"] else 0)
    print(f"{d['config']['label']:<20} {d['config']['server_version'][:16]:<16} {load:>7.1f} " +
          " ".join(cells) + (f"  {errors} WRONG RESULTS" if errors else ""))
EOF
cat "$out/summary.txt"
if [ ${#failed[@]} -gt 0 ]; then
  echo "ycsb.sh: failed: ${failed[*]}" >&2
  exit 1
fi
