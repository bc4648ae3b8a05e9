#!/usr/bin/env bash
# Runs redis-benchmark's default run (every test it has: PING, SET, GET,
# INCR, the list, set, hash and sorted-set tests, LRANGE, MSET) against
# pmserver and against redis-server with Redis's strictest durability
# (appendonly yes, appendfsync always), in the same run, and prints the
# requests per second of each test on both and their ratio.
#
# Usage: scripts/compat/redis-benchmark.sh [options]
#   --build DIR        pmindex build directory holding server/pmserver
#                      (default build/release)
#   --out DIR          logs, CSVs and summary.txt (default
#                      BUILD/compat-redis-benchmark)
#   --pipelines LIST   comma-separated -P values, one run each (default 1,16)
#   --requests N       redis-benchmark -n (default 100000, its default)
#   --clients N        redis-benchmark -c (default 50, its default)
#   --data-dir DIR     where pmserver's pool and Redis's AOF live (default
#                      /dev/shm: tmpfs, so that neither pays a device)
#   --pmserver-args "ARGS"  more pmserver options (default "--threads 2")
#   --list-scale N     then, on both servers, list_scale.py: LPUSH/LPOP on
#                      a list of N elements against one of 10, time per
#                      operation and the ratio (default 0: not run)
#
# Each -P value runs redis-benchmark once against each server (the same
# binary, the same options, no -t: its default list of tests), the servers
# started fresh for the script (pmserver over a new lbtree pool, Redis
# with an empty AOF), each on a free loopback port, stopped on exit (by
# process id). A benchmark that reports an error (a reply it did not
# expect, or exit status non-zero) is noted and makes the exit status 1.
#
# Output: per -P, one line per test: "test redis_rps pmserver_rps
# pmserver/redis"; OUT/<server>-P<n>.csv holds redis-benchmark's CSV and
# OUT/<server>-P<n>.err its standard error. Installs redis-server and
# redis-tools if missing (deps.sh).
set -euo pipefail
. "$(dirname "$0")/common.sh"

build=build/release
out=
pipelines=1,16
requests=100000
clients=50
data_dir=/dev/shm
pmserver_args="--threads 2"
list_scale=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --pipelines) pipelines=$2; shift ;;
    --requests) requests=$2; shift ;;
    --clients) clients=$2; shift ;;
    --data-dir) data_dir=$2; shift ;;
    --pmserver-args) pmserver_args=$2; shift ;;
    --list-scale) list_scale=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
  shift
done

pmserver="$build/server/pmserver"
[ -x "$pmserver" ] || die "no $pmserver (build it: ninja -C $build pmserver)"
out=${out:-$build/compat-redis-benchmark}
mkdir -p "$out"
out=$(cd "$out" && pwd)
"$compat_dir/deps.sh"
command -v redis-benchmark >/dev/null || die "no redis-benchmark (Debian: redis-tools)"

work=$(mktemp -d "$data_dir/pmindex-redis-benchmark.XXXXXX")
cleanup() {
  stop_servers
  rm -rf "$work"
}
trap cleanup EXIT

# Redis with every write in the AOF, fsynced before its reply.
start_redis_aof() {
  local dir=$1 attempt
  mkdir -p "$dir"
  for attempt in 1 2 3; do
    server_port=$(free_port)
    "${REDIS_SERVER:-redis-server}" --port "$server_port" --bind 127.0.0.1 --save '' \
      --appendonly yes --appendfsync always --dir "$dir" --logfile "$out/redis.log" \
      --daemonize no &
    server_pid=$!
    compat_pids+=("$server_pid")
    if wait_port "$server_port" "$server_pid" 30; then return 0; fi
    stop_pid "$server_pid"
  done
  return 1
}

start_redis_aof "$work/redis" || die "redis-server did not start ($out/redis.log)"
redis_port=$server_port
# shellcheck disable=SC2086
start_pmserver "$pmserver" "$work/pmserver" $pmserver_args || die "pmserver did not start"
pm_port=$server_port

status=0
{
  echo "redis-benchmark $(redis-benchmark --version 2>/dev/null | awk '{print $2}') -n $requests" \
    "-c $clients, $(date -u '+%Y-%m-%d %H:%M UTC'); redis-server appendonly yes appendfsync always" \
    "(AOF in $data_dir), pmserver $pmserver_args (pool in $data_dir)"
} | tee "$out/summary.txt"
IFS=, read -r -a pipe_list <<<"$pipelines"
for p in "${pipe_list[@]}"; do
  for server in redis pmserver; do
    port=$redis_port
    [ $server = pmserver ] && port=$pm_port
    rc=0
    timeout 1800 redis-benchmark -h 127.0.0.1 -p "$port" -n "$requests" -c "$clients" -P "$p" \
      --csv >"$out/$server-P$p.csv" 2>"$out/$server-P$p.err" || rc=$?
    # Errors from the server are printed on stderr ("Error from server").
    if [ $rc -ne 0 ] || grep -qi 'error' "$out/$server-P$p.err"; then
      echo "$server -P $p: redis-benchmark exit $rc: $(head -c 300 "$out/$server-P$p.err")" |
        tee -a "$out/summary.txt"
      status=1
    fi
  done
  python3 - "$out/redis-P$p.csv" "$out/pmserver-P$p.csv" "$p" <<'EOF' | tee -a "$out/summary.txt"
import csv, sys

def load(path):
    rows = {}
    order = []
    with open(path) as f:
        for row in csv.reader(f):
            if not row or row[0] == "test":
                continue
            rows[row[0]] = float(row[1])
            order.append(row[0])
    return rows, order

redis, order = load(sys.argv[1])
pm, pm_order = load(sys.argv[2])
for t in pm_order:
    if t not in redis:
        order.append(t)
print(f"\n-P {sys.argv[3]}")
print(f"{'test':<42} {'redis rps':>12} {'pmserver rps':>13} {'pm/redis':>9}")
for t in order:
    r, p = redis.get(t), pm.get(t)
    ratio = f"{p / r:9.2f}" if r and p else f"{'-':>9}"
    rs = f"{r:12.0f}" if r is not None else f"{'missing':>12}"
    ps = f"{p:13.0f}" if p is not None else f"{'missing':>13}"
    print(f"{t:<42} {rs} {ps} {ratio}")
EOF
done
if [ "$list_scale" -gt 0 ]; then
  for server in redis pmserver; do
    port=$redis_port
    [ $server = pmserver ] && port=$pm_port
    echo "list scale, $server:" | tee -a "$out/summary.txt"
    timeout 1800 python3 "$compat_dir/list_scale.py" --port "$port" --big "$list_scale" |
      tee -a "$out/summary.txt" || status=1
  done
fi
exit $status
