#!/usr/bin/env bash
# Runs the real YCSB (built here from a local checkout of its sources)
# against pmserver and the reference servers side by side: the redis
# binding against pmserver's RESP port and redis-server (AOF on), then the
# memcached binding against pmserver's memcached port and memcached; load
# plus workloads A, B, C, F, D, E (YCSB's order: D and E insert), and a
# table of ops/s per workload with the ratio pmserver / reference.
#
# Usage: scripts/compat/ycsb.sh [options] [YCSB_CHECKOUT]
#   YCSB_CHECKOUT      a local checkout of YCSB's sources (or $YCSB_SRC).
#                      Nothing of YCSB is downloaded by this script: the
#                      checkout is copied to OUT/ycsb-src and built there
#                      with Maven (`mvn -pl site.ycsb:redis-binding,
#                      site.ycsb:memcached-binding -am package -DskipTests`),
#                      which fetches YCSB's dependencies (jedis 2.9.0,
#                      spymemcached, ...) from Maven Central into ~/.m2.
#   --build DIR        pmindex build directory holding server/pmserver
#                      (default build/release)
#   --out DIR          logs, results.tsv and summary.txt (default
#                      BUILD/compat-ycsb)
#   --indexes LIST     pmserver's index kinds, comma-separated (default
#                      lbtree,nvtree); each pool is created fresh under
#                      --data-dir
#   --fsync LIST       redis-server's appendfsync modes (default
#                      always,everysec); appendonly yes, no RDB saves
#   --data-dir DIR     where pools and AOF files go (default: a fresh
#                      directory under /dev/shm, removed at the end)
#   --aof-dir DIR      put redis-server's AOF there instead (e.g. a disk)
#   --records N        recordcount (default 10000)
#   --operations N     operationcount per workload (default 10000)
#   --threads T        YCSB client threads (default 1)
#   --runs R           runs of the whole matrix; the table shows medians
#                      (default 3)
#   --workloads LIST   default a,b,c,f,d,e
#   --no-memcached     skip the memcached binding
#   --pmserver-args "ARGS"  more pmserver options (default "--threads 2")
#
# Each (server, run) starts a fresh server on a free loopback port, loads
# recordcount records and runs each workload once, then stops it (by
# process id). A phase counts as failed if YCSB exits non-zero, logs an
# exception, or reports any operation whose Return is not OK; the table
# then shows the error count next to it. The memcached binding has no
# scans: workload E runs with the redis binding only. Output: OUT/results.tsv (run,
# server, phase, ops/s, errors), OUT/summary.txt (medians and ratios),
# OUT/logs/ (every YCSB and server log). Needs java and mvn (deps.sh
# installs maven and openjdk-17-jdk-headless), redis-server and memcached.
# Exit status: 0 when every phase ran with 0 errors, 1 otherwise, 2 for a
# usage error.
set -euo pipefail
. "$(dirname "$0")/common.sh"

build=build/release
out=
indexes=lbtree,nvtree
fsyncs=always,everysec
data_dir=
aof_dir=
records=10000
operations=10000
threads=1
runs=3
workloads=a,b,c,f,d,e
memcached=1
pmserver_args="--threads 2"
checkout=${YCSB_SRC:-}
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --indexes) indexes=$2; shift ;;
    --fsync) fsyncs=$2; shift ;;
    --data-dir) data_dir=$2; shift ;;
    --aof-dir) aof_dir=$2; shift ;;
    --records) records=$2; shift ;;
    --operations) operations=$2; shift ;;
    --threads) threads=$2; shift ;;
    --runs) runs=$2; shift ;;
    --workloads) workloads=$2; shift ;;
    --no-memcached) memcached=0 ;;
    --pmserver-args) pmserver_args=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) checkout=$1 ;;
  esac
  shift
done

[ -n "$checkout" ] || die "give a checkout of YCSB's sources (argument or \$YCSB_SRC); see --help"
[ -f "$checkout/pom.xml" ] && [ -d "$checkout/redis" ] && [ -d "$checkout/core" ] ||
  die "'$checkout' does not look like a checkout of YCSB (no pom.xml, core/, redis/)"
checkout=$(cd "$checkout" && pwd)
pmserver="$build/server/pmserver"
[ -x "$pmserver" ] || die "no pmserver at $pmserver (ninja -C $build pmserver, or give --build DIR)"
pmserver=$(cd "$(dirname "$pmserver")" && pwd)/pmserver
"$compat_dir/deps.sh"
command -v mvn >/dev/null && command -v java >/dev/null ||
  die "mvn and java are needed (scripts/compat/deps.sh installs them)"
out=${out:-$build/compat-ycsb}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
remove_data=0
if [ -z "$data_dir" ]; then
  data_dir=$(mktemp -d /dev/shm/pmindex-ycsb-XXXXXX)
  remove_data=1
fi
mkdir -p "$data_dir"
cleanup() {
  stop_servers
  if [ "$remove_data" = 1 ]; then rm -rf "$data_dir"; fi
  return 0
}
trap cleanup EXIT

# ---- build YCSB (core, redis and memcached bindings) from the copy
src="$out/ycsb-src"
note "building YCSB from $checkout in $src (log: $out/logs/mvn.log)"
mkdir -p "$src"
# The copy is refreshed; Maven's own target/ directories are kept so that
# a second run rebuilds nothing that did not change.
(cd "$checkout" && tar --exclude=./.git --exclude='*/target' -cf - .) | (cd "$src" && tar -xf -)
if ! (cd "$src" && mvn -B -q -pl site.ycsb:redis-binding,site.ycsb:memcached-binding -am package \
  dependency:copy-dependencies -DincludeScope=runtime -DskipTests -Dcheckstyle.skip) \
  >"$out/logs/mvn.log" 2>&1; then
  tail -n 30 "$out/logs/mvn.log" >&2
  die "the Maven build of YCSB failed (see $out/logs/mvn.log)"
fi
# classpath BINDING: YCSB's core and the binding, with their dependencies
# (each module's target/dependency), as YCSB's bin/ycsb.sh builds it in a
# source tree.
classpath() {
  echo "$src/core/target/*:$src/core/target/dependency/*:$src/$1/target/*:$src/$1/target/dependency/*"
}

# ---- servers
# start_redis_aof DIR FSYNC: redis-server with appendonly yes.
start_redis_aof() {
  local dir=$1 fsync=$2
  rm -rf "$dir" && mkdir -p "$dir"
  for _ in 1 2 3; do
    server_port=$(free_port)
    "${REDIS_SERVER:-redis-server}" --port "$server_port" --bind 127.0.0.1 --save '' \
      --appendonly yes --appendfsync "$fsync" --dir "$dir" --logfile "$dir/redis.log" \
      --daemonize no &
    server_pid=$!
    compat_pids+=("$server_pid")
    if wait_port "$server_port" "$server_pid" 30; then return 0; fi
    stop_pid "$server_pid"
  done
  return 1
}

# start_server NAME: NAME is pmserver-KIND, pmserver-KIND-mc, redis-FSYNC
# or memcached; sets server_pid, server_port and binding.
start_server() {
  local name=$1
  case $name in
    redis-*)
      binding=redis
      start_redis_aof "${aof_dir:-$data_dir}/$name" "${name#redis-}" ;;
    memcached)
      binding=memcached
      start_memcached ;;
    pmserver-*-mc)
      binding=memcached
      local kind=${name#pmserver-}
      # shellcheck disable=SC2086
      pm_index=${kind%-mc} pm_protocol=memcached start_pmserver "$pmserver" "$data_dir/$name" \
        $pmserver_args ;;
    pmserver-*)
      binding=redis
      # shellcheck disable=SC2086
      pm_index=${name#pmserver-} pm_protocol=resp start_pmserver "$pmserver" "$data_dir/$name" \
        $pmserver_args ;;
  esac
}

# ycsb PHASE WORKLOAD LOG: runs YCSB's client (load or run) against the
# started server; prints "ops/s errors".
ycsb() {
  local phase=$1 w=$2 log=$3 db props rc=0
  if [ "$binding" = redis ]; then
    db=site.ycsb.db.RedisClient
    props=(-p redis.host=127.0.0.1 -p "redis.port=$server_port")
  else
    db=site.ycsb.db.MemcachedClient
    props=(-p "memcached.hosts=127.0.0.1:$server_port")
  fi
  timeout -k 10 1800 java -cp "$(classpath "$binding")" site.ycsb.Client "-$phase" -db "$db" \
    -P "$src/workloads/workload$w" -p "recordcount=$records" -p "operationcount=$operations" \
    -threads "$threads" "${props[@]}" -s >"$log" 2>&1 </dev/null || rc=$?
  local tput errors
  tput=$(sed -n 's/^\[OVERALL\], Throughput(ops\/sec), \([0-9.]*\).*/\1/p' "$log" | head -n 1)
  errors=$(awk -F', ' '$2 ~ /^Return=/ && $2 != "Return=OK" { n += $3 } END { print n + 0 }' "$log")
  errors=$((errors + $(grep -c 'Exception' "$log" || true)))
  if [ "$rc" -ne 0 ] || [ -z "$tput" ]; then errors=$((errors + 1)); fi
  echo "${tput:-0} $errors"
}

servers=()
for k in ${indexes//,/ }; do servers+=("pmserver-$k"); done
for f in ${fsyncs//,/ }; do servers+=("redis-$f"); done
if [ "$memcached" = 1 ]; then
  for k in ${indexes//,/ }; do servers+=("pmserver-$k-mc"); done
  servers+=(memcached)
fi
phases=(load)
for w in ${workloads//,/ }; do phases+=("$w"); done

results="$out/results.tsv"
{
  echo "# $(date -u +%FT%TZ) YCSB ($checkout) recordcount=$records operationcount=$operations" \
    "threads=$threads runs=$runs; pmserver $pmserver_args; data in $data_dir${aof_dir:+, AOF in $aof_dir}"
  printf 'run\tserver\tphase\tops_per_s\terrors\n'
} >"$results"
failed=0
for run in $(seq "$runs"); do
  for s in "${servers[@]}"; do
    if ! start_server "$s"; then
      note "$s did not start (run $run)"
      failed=1
      continue
    fi
    note "run $run: $s on 127.0.0.1:$server_port"
    for p in "${phases[@]}"; do
      # The memcached binding has no scans (workload E): not run.
      if [ "$p" = e ] && [ "$binding" = memcached ]; then continue; fi
      if [ "$p" = load ]; then
        read -r tput errors < <(ycsb load a "$out/logs/$s-run$run-load.log")
      else
        read -r tput errors < <(ycsb t "$p" "$out/logs/$s-run$run-$p.log")
      fi
      printf '%s\t%s\t%s\t%s\t%s\n' "$run" "$s" "$p" "$tput" "$errors" >>"$results"
      [ "$errors" = 0 ] || failed=1
    done
    stop_servers
  done
done

# ---- summary: medians over the runs, ratios pmserver / reference
summary="$out/summary.txt"
python3 - "$results" "${servers[*]}" "${phases[*]}" >"$summary" <<'EOF'
import statistics, sys
results, servers, phases = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
rows = [l.rstrip("\n").split("\t") for l in open(results) if not l.startswith(("#", "run\t"))]
header = open(results).readline().strip()
tput, errs = {}, {}
for run, s, p, t, e in rows:
    tput.setdefault((s, p), []).append(float(t))
    errs[(s, p)] = errs.get((s, p), 0) + int(e)
def med(s, p):
    v = tput.get((s, p))
    return statistics.median(v) if v else None
print(header)
print("ops/s, median of the runs (errors summed over the runs when not 0)")
groups = [[s for s in servers if not s.endswith("-mc") and s != "memcached"],
          [s for s in servers if s.endswith("-mc") or s == "memcached"]]
for g in groups:
    if not g:
        continue
    pms = [s for s in g if s.startswith("pmserver-")]
    refs = [s for s in g if not s.startswith("pmserver-")]
    ratios = [(a, b) for a in pms for b in refs]
    cols = g + ["%s/%s" % (a.replace("pmserver-", "pm-"), b) for a, b in ratios]
    print()
    print("%-6s" % "phase" + "".join(" %20s" % c for c in cols))
    for p in phases:
        line = "%-6s" % p
        for s in g:
            m = med(s, p)
            cell = "-" if m is None else "%.0f" % m
            if errs.get((s, p), 0):
                cell += " (%d err)" % errs[(s, p)]
            line += " %20s" % cell
        for a, b in ratios:
            ma, mb = med(a, p), med(b, p)
            line += " %20s" % ("-" if not ma or not mb else "%.2f" % (ma / mb))
        print(line)
EOF
cat "$summary"
echo "results: $results; logs: $out/logs/"
exit "$failed"
