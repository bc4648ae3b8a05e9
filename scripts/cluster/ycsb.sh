#!/usr/bin/env bash
# The real YCSB against a local pmserver cluster (docs/cluster.md):
#   1. the redis binding with redis.cluster=true (Jedis's JedisCluster)
#      over 3 nodes: load, then workloads A, B, C, F, D, E;
#   2. workload A again while scripts/cluster/pmcluster.py moves half the
#      slots of node 1 to node 2, then workload C with YCSB's data
#      integrity check (every field of every record read back and
#      compared with what YCSB wrote), and every record's key checked;
#   3. the memcached binding through nutcracker over a fresh 3-node
#      cluster: load, A, B, C, F, D, and the items per node.
# Prints ops/s and errors per phase, the resharding's time per slot and
# the keys per node; exit status 0 only if every phase had 0 errors.
#
#   scripts/cluster/ycsb.sh YCSB_SRC [--records N] [--operations N]
#                           [--threads T] [--pmserver PATH] [--out DIR]
#
# YCSB_SRC: a YCSB source tree already built with its redis and memcached
# bindings and their dependencies copied (scripts/compat/ycsb.sh builds
# one as OUT/ycsb-src); nothing is downloaded here.
set -euo pipefail
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "ycsb.sh: error: $*" >&2; exit 2; }
[ $# -ge 1 ] || die "usage: scripts/cluster/ycsb.sh YCSB_SRC [options]"
src=$(cd "$1" && pwd)
shift
records=10000
operations=10000
threads=4
pmserver="$repo_root/build/release/server/pmserver"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --records) records=$2; shift 2 ;;
    --operations) operations=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --pmserver) pmserver=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
for m in core redis memcached; do
  ls "$src/$m/target/"*.jar >/dev/null 2>&1 || die "$src/$m is not built (scripts/compat/ycsb.sh builds it)"
done
command -v java >/dev/null || die "java is missing (scripts/compat/deps.sh)"
work=$(mktemp -d /dev/shm/pmcluster-ycsb-XXXXXX)
out=${out:-$work/out}
mkdir -p "$out"
trap '"$repo_root/scripts/cluster/local.sh" stop "$work/c" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

"$repo_root/scripts/cluster/local.sh" start 3 "$work/c" --pmserver "$pmserver" > "$work/nodes"
cat "$work/nodes"
node1=$(sed -n 1p "$work/nodes" | cut -d' ' -f2)
node2=$(sed -n 2p "$work/nodes" | cut -d' ' -f2)
proxy=$(grep '^proxy' "$work/nodes" | cut -d' ' -f2)

failed=0
# ycsb BINDING PHASE WORKLOAD LABEL [props...]: one YCSB client run.
ycsb() {
  local binding=$1 phase=$2 w=$3 label=$4 db rc=0
  shift 4
  if [ "$binding" = redis ]; then
    db=site.ycsb.db.RedisClient
    set -- -p redis.host=127.0.0.1 -p "redis.port=${node1#*:}" -p redis.cluster=true "$@"
  else
    db=site.ycsb.db.MemcachedClient
    set -- -p "memcached.hosts=$proxy" "$@"
  fi
  local log="$out/$label.log"
  timeout -k 10 1800 java -cp "$src/core/target/*:$src/core/target/dependency/*:$src/$binding/target/*:$src/$binding/target/dependency/*" \
    site.ycsb.Client "$([ "$phase" = load ] && echo -load || echo -t)" -db "$db" -P "$src/workloads/workload$w" \
    -p "recordcount=$records" -p "operationcount=$operations" -threads "$threads" "$@" -s \
    > "$log" 2>&1 < /dev/null || rc=$?
  local tput errors
  tput=$(sed -n 's/^\[OVERALL\], Throughput(ops\/sec), \([0-9.]*\).*/\1/p' "$log" | head -n 1)
  errors=$(awk -F', ' '$2 ~ /^Return=/ && $2 != "Return=OK" { n += $3 } END { print n + 0 }' "$log")
  errors=$((errors + $(grep -c 'Exception' "$log" || true)))
  # The data integrity check counts wrong reads under [VERIFY].
  errors=$((errors + $(awk -F', ' '$1 == "[VERIFY]" && $2 ~ /^Return=/ && $2 != "Return=OK" { n += $3 } END { print n + 0 }' "$log")))
  if [ "$rc" -ne 0 ] || [ -z "$tput" ]; then errors=$((errors + 1)); fi
  printf '%-28s %10s ops/s  %s errors\n' "$label" "${tput:-0}" "$errors"
  [ "$errors" = 0 ] || failed=1
}

echo "== redis binding, JedisCluster over 3 nodes"
ycsb redis load a cluster-load -p dataintegrity=true
for w in a b c f d e; do ycsb redis run "$w" "cluster-$w" -p dataintegrity=true; done

echo "== workload A while half of node 1's slots move to node 2"
half=$(python3 "$repo_root/scripts/cluster/pmcluster.py" map "$node1" |
  awk -v me="$node1" '$1 == "node" && $3 == me { n = 0; for (i = 4; i <= NF; i++) { split($i, r, "-"); n += (r[2] == "" ? 1 : r[2] - r[1] + 1) } print int(n / 2) }')
python3 "$repo_root/scripts/cluster/pmcluster.py" reshard "$node1" --from "$node1" --to "$node2" \
  --slots "$half" --batch 256 > "$out/reshard.log" 2>&1 &
reshard=$!
ycsb redis run a resharding-a -p dataintegrity=true
wait "$reshard" || { cat "$out/reshard.log" >&2; failed=1; }
python3 - "$out/reshard.log" <<'PY'
import re, sys
slots = secs = 0
for line in open(sys.argv[1]):
    m = re.search(r"\((\d+)\) with \d+ keys .* in ([0-9.]+)s", line)
    if m:
        slots += int(m.group(1)); secs += float(m.group(2))
print(f"resharding: {slots} slots in {secs:.2f}s, {1000 * secs / max(slots, 1):.2f} ms per slot")
PY
ycsb redis run c after-resharding-c -p dataintegrity=true -p operationcount="$records" \
  -p requestdistribution=uniform
# Every record's key, on whichever node serves it now.
"$repo_root/build/.venv/bin/python" - "$node1" "$records" <<'PY' || failed=1
import sys
from redis.cluster import RedisCluster
host, port = sys.argv[1].split(":")
rc = RedisCluster(host=host, port=int(port))
keys = set()
for node in rc.get_primaries():
    n = 0
    for k in rc.scan_iter(count=1000, target_nodes=node):
        keys.add(k)
        n += 1
    print(f"node {node.host}:{node.port}: {n} keys")
missing = [k for k in keys if not rc.exists(k)]
print(f"records: {len(keys)} keys found (recordcount {sys.argv[2]}), {len(missing)} unreadable")
sys.exit(0 if len(keys) >= int(sys.argv[2]) and not missing else 1)
PY

echo "== memcached binding through nutcracker (a fresh cluster: the keys are YCSB's again)"
"$repo_root/scripts/cluster/local.sh" stop "$work/c" >/dev/null
rm -rf "$work/c"
"$repo_root/scripts/cluster/local.sh" start 3 "$work/c" --pmserver "$pmserver" > "$work/nodes"
proxy=$(grep '^proxy' "$work/nodes" | cut -d' ' -f2)
ycsb memcached load a proxy-load
for w in a b c f d; do ycsb memcached run "$w" "proxy-$w"; done
for f in "$work"/c/node-*/ports; do
  mc=$(cut -d' ' -f2 "$f")
  python3 - "$mc" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"stats\r\n")
d = b""
while not d.endswith(b"END\r\n"):
    d += s.recv(65536)
items = [l.split()[2] for l in d.decode().split("\r\n") if l.startswith("STAT curr_items ")]
print(f"memcached port {sys.argv[1]}: {items[0]} items")
PY
done
exit "$failed"
