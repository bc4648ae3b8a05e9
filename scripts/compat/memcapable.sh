#!/usr/bin/env bash
# Runs memcapable (libmemcached's protocol conformance checker, Debian's
# libmemcached-tools) in its ASCII mode against pmserver's memcached port
# and against memcached, and prints the counts side by side.
#
# Usage: scripts/compat/memcapable.sh [--build DIR] [--out DIR]
#   --build DIR   pmindex build directory holding server/pmserver
#                 (default build/release)
#   --out DIR     the two runs' output and summary.txt (default BUILD/compat-memcapable)
#
# Each server is started on a free loopback port (pmserver over a new
# lbtree pool in OUT) and stopped after its run (memcapable flushes it).
# A run is bounded to 300 s. Output: "server passed failed" per server and
# the names of the failed tests. Installs memcached and libmemcached-tools
# if missing (deps.sh). Exit status 0 when both runs completed.
set -euo pipefail
. "$(dirname "$0")/common.sh"

build=build/release
out=
pmserver_args="--threads 2"
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done
pmserver="$build/server/pmserver"
[ -x "$pmserver" ] || die "no pmserver at $pmserver (ninja -C $build pmserver, or give --build DIR)"
"$compat_dir/deps.sh"
# Debian names the tool memccapable (libmemcached 1.1); older ones memcapable.
tool=$(command -v memccapable || command -v memcapable || true)
[ -n "$tool" ] || die "no memccapable or memcapable on PATH (libmemcached-tools)"
out=${out:-$build/compat-memcapable}
mkdir -p "$out"
out=$(cd "$out" && pwd)
trap stop_servers EXIT

summary="$out/summary.txt"
echo "# $(date -u +%FT%TZ) $tool -a; memcached $(memcached -V | cut -d' ' -f2);" \
  "pmserver $("$pmserver" --version | head -n 1)" | tee "$summary"
status=0
for server in memcached pmserver; do
  log="$out/$server.log"
  if [ "$server" = memcached ]; then
    start_memcached || { echo "$server did not start" | tee -a "$summary"; status=1; continue; }
  else
    # shellcheck disable=SC2086
    pm_protocol=memcached start_pmserver "$pmserver" "$out/pmserver-data" $pmserver_args ||
      { echo "$server did not start" | tee -a "$summary"; status=1; continue; }
  fi
  rc=0
  timeout -k 5 300 "$tool" -a -t 10 -h 127.0.0.1 -p "$server_port" >"$log" 2>&1 </dev/null || rc=$?
  stop_pid "$server_pid"
  # A test's line starts with its name; what the server answered may come
  # between the name and the verdict, over several lines.
  failed_names=$(awk '/^(ascii|binary) / { name = $0; sub(/ *\[.*/, "", name) }
                      /\[FAIL\]/ { print name }' "$log" | paste -sd, -)
  passed=$(grep -c '\[pass\]' "$log" || true)
  failed=$(grep -c '\[FAIL\]' "$log" || true)
  line="$server $passed passed, $failed failed"
  [ "$failed" -eq 0 ] || line+=" ($failed_names)"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then line+=" (killed after 300 s)"; status=1; fi
  echo "$line" | tee -a "$summary"
done
exit "$status"
