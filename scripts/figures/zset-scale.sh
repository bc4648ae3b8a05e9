#!/usr/bin/env bash
# Scale of one sorted set: the per-operation time of ZADD (a member's
# score changed) and of ZRANGEBYSCORE ... LIMIT 0 10 on a sorted set of
# --big members (default 1M) against the same on one of 10 members, over
# pmserver's RESP port, measured with redis-benchmark (one client, no
# pipelining, so each request is one round trip and one store
# transaction). The goal is a ratio big / small within 2.
#
# Usage: scripts/figures/zset-scale.sh [options]
#   --build DIR      holds server/pmserver (default build/release)
#   --index KIND     pmserver's index kind (default lbtree)
#   --big N          members of the big set (default 1000000)
#   --requests N     requests per measurement (default 20000)
#   --data-dir DIR   where the pool goes (default: a new directory under
#                    /dev/shm, removed at the end)
# The sets hold members m:000000000000 ... (redis-benchmark's
# __rand_int__ form), so every measured ZADD updates an existing member:
# the set keeps its size. Prints one line per measurement and the
# ratios of the medians of three interleaved runs. Needs redis-benchmark and redis-cli (scripts/compat/deps.sh).
set -euo pipefail
. "$(dirname "$0")/../compat/common.sh"

build=build/release
index=lbtree
big=1000000
requests=20000
data_dir=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2 ;;
    --index) index=$2 ;;
    --big) big=$2 ;;
    --requests) requests=$2 ;;
    --data-dir) data_dir=$2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift 2
done
pmserver="$build/server/pmserver"
[ -x "$pmserver" ] || die "no pmserver at $pmserver"
remove_data=0
if [ -z "$data_dir" ]; then
  data_dir=$(mktemp -d /dev/shm/pmindex-zscale-XXXXXX)
  remove_data=1
fi
cleanup() {
  stop_servers
  if [ "$remove_data" = 1 ]; then rm -rf "$data_dir"; fi
  return 0
}
trap cleanup EXIT

pm_index=$index start_pmserver "$pmserver" "$data_dir/pmserver" --pool-size-mb 1024 ||
  die "pmserver did not start"
port=$server_port

# fill KEY N: members m:%012d with score i, 1000 to a ZADD.
fill() {
  python3 - "$1" "$2" <<'EOF' | redis-cli -p "$port" --pipe >/dev/null
import sys
key, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
for start in range(0, n, 1000):
    args = [b"ZADD", key.encode()]
    for i in range(start, min(n, start + 1000)):
        args += [str(i).encode(), b"m:%012d" % i]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
EOF
}

echo "# $(date -u +%FT%TZ) pmserver --create $index, $(nproc) CPUs; $(uptime)"
start=$(date +%s)
fill big "$big"
fill small 10
echo "# filled: ZCARD big $(redis-cli -p "$port" zcard big), small" \
  "$(redis-cli -p "$port" zcard small) in $(($(date +%s) - start)) s"

# bench KEY RANGE CMD...: microseconds per request.
bench() {
  local range=$1
  shift
  redis-benchmark -p "$port" -c 1 -n "$requests" -r "$range" --csv "$@" |
    awk -F'","' 'NR == 2 { gsub(/"/, "", $2); printf "%.2f\n", 1e6 / $2 }'
}
# Each measurement three times, small and big interleaved; the medians.
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
zs=() zb=() rs=() rb=()
for _ in 1 2 3; do
  zs+=("$(bench 10 zadd small __rand_int__ m:__rand_int__)")
  zb+=("$(bench "$big" zadd big __rand_int__ m:__rand_int__)")
  rs+=("$(bench 10 zrangebyscore small __rand_int__ +inf LIMIT 0 10)")
  rb+=("$(bench "$big" zrangebyscore big __rand_int__ +inf LIMIT 0 10)")
done
zadd_small=$(median3 "${zs[@]}") zadd_big=$(median3 "${zb[@]}")
range_small=$(median3 "${rs[@]}") range_big=$(median3 "${rb[@]}")
echo "# us/op of the three runs: ZADD 10: ${zs[*]}; ZADD $big: ${zb[*]};" \
  "ZRANGEBYSCORE 10: ${rs[*]}; ZRANGEBYSCORE $big: ${rb[*]}"
printf '%-34s %12s %12s %8s\n' operation "10 (us/op)" "$big (us/op)" ratio
printf '%-34s %12s %12s %8.2f\n' "ZADD (score update)" "$zadd_small" "$zadd_big" \
  "$(echo "$zadd_big / $zadd_small" | bc -l)"
printf '%-34s %12s %12s %8.2f\n' "ZRANGEBYSCORE min +inf LIMIT 0 10" "$range_small" "$range_big" \
  "$(echo "$range_big / $range_small" | bc -l)"
