#!/usr/bin/env bash
# SET and GET throughput of one large value (4 MiB by default: stored in
# pieces by pmserver, docs/server.md "Large values"), pmserver against
# redis-server (no persistence) in the same run, with redis-benchmark.
#
# Usage: scripts/figures/large-values.sh [--build DIR] [--bytes N]
#          [--requests N] [--clients N] [--rounds N]
#   --build DIR     pmindex build directory holding server/pmserver
#                   (default build/release)
#   --bytes N       value size (default 4194304)
#   --requests N    requests per test (default 200)
#   --clients N     redis-benchmark connections (default 2)
#   --rounds N      runs of both servers, alternating (default 2)
# Prints one line per server and round: "server SET_rps GET_rps".
set -euo pipefail
. "$(dirname "$0")/../compat/common.sh"

build=build/release
bytes=4194304
requests=200
clients=2
rounds=2
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
done
command -v redis-benchmark >/dev/null || die "redis-benchmark is not installed (scripts/deps.sh)"
[ -x "$build/server/pmserver" ] || die "$build/server/pmserver is not built"
work=$(mktemp -d /tmp/large-values.XXXXXX)
trap 'stop_servers; rm -rf "$work"' EXIT

# bench NAME: one redis-benchmark run against server_port.
bench() {
  local rps
  rps=$(redis-benchmark -p "$server_port" -t set,get -d "$bytes" -n "$requests" -c "$clients" -q \
          2>&1 | tr '\r' '\n' | sed -n 's/^\(SET\|GET\): \([0-9.]*\) requests per second.*/\2/p' |
          tr '\n' ' ')
  echo "$1 $rps"
}

echo "server SET_rps GET_rps (value $bytes bytes, $requests requests, $clients clients)"
for round in $(seq "$rounds"); do
  start_redis "$work/redis" || die "redis-server did not start"
  bench redis-server
  stop_servers
  # A pool large enough that the run does not time the pool's growth.
  start_pmserver "$build/server/pmserver" "$work/pm" --threads 2 --pool-size-mb 1024 ||
    die "pmserver did not start"
  bench pmserver
  stop_servers
done
