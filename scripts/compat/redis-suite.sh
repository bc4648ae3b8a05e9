#!/usr/bin/env bash
# Runs Redis's own test suite (its Tcl harness, unmodified) against
# pmserver and against redis-server, file by file, in the harness's
# external-server mode, and prints the counts side by side.
#
# Usage: scripts/compat/redis-suite.sh [options] [REDIS_CHECKOUT]
#   REDIS_CHECKOUT     a local checkout of the Redis sources (runtest and
#                      tests/), or $REDIS_SRC; its version should match
#                      redis-server's (Debian 12: 7.0.15). Nothing is
#                      downloaded; the checkout is only read (the harness
#                      runs from a copy of runtest and tests/ in OUT).
#   --build DIR        pmindex build directory holding server/pmserver
#                      (default build/release)
#   --out DIR          logs and summary.txt (default BUILD/compat-redis-suite)
#   --files LIST       comma-separated test files (default: unit/type/string,
#                      unit/type/incr, unit/expire, unit/keyspace,
#                      unit/protocol, unit/multi, unit/info-command, unit/auth)
#   --test-timeout S   the harness's --timeout: it gives up when no test
#                      progresses for S seconds (default 120)
#   --file-timeout S   wall-clock limit of one file on one server; the run is
#                      killed past it (default 900)
#   --multidb          without the harness's --singledb (it then SELECTs
#                      database 9 and runs the tests that need several
#                      databases); default: --singledb
#   --pmserver-args "ARGS"  more pmserver options (default "--threads 2")
#   --runtest-args "ARGS"   more runtest options for both servers' runs (e.g.
#                      --ignore-encoding: OBJECT ENCODING checks pass
#                      whatever the answer); default none
#
# Each file runs against a fresh redis-server (--save '' --appendonly no)
# and a fresh pmserver (a new lbtree pool in OUT), each on a free loopback
# port and stopped after the file (and on any exit). The harness runs with
# --durable (a test that hits an error is counted as failed and the file
# goes on), tags -needs:debug (DEBUG is off in a default redis-server) and
# -needs:repl (replication). In external mode it skips by itself the tests
# tagged external:skip (every test of unit/auth: it starts servers with a
# password of its own) and, with --singledb, those that need databases.
#
# Output: one line per file, "file redis_passed redis_failed
# pmserver_passed pmserver_failed", then a note when a run did not end
# normally (the harness did not start: its first commands failed; aborted
# after N tests; no progress for --test-timeout; killed at --file-timeout;
# the server exited); then the totals and pmserver_passed / redis_passed.
# OUT/<server>/<file>.log holds each run's whole output, OUT/summary.txt the
# table. Installs redis-server and tcl if missing (deps.sh). Exit status 0
# when every run ended normally (whatever its failures), 1 otherwise.
set -euo pipefail
. "$(dirname "$0")/common.sh"

build=build/release
out=
files=unit/type/string,unit/type/incr,unit/expire,unit/keyspace,unit/protocol,unit/multi,unit/info-command,unit/auth
test_timeout=120
file_timeout=900
singledb=--singledb
pmserver_args="--threads 2"
runtest_args=
checkout=${REDIS_SRC:-}
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --files) files=$2; shift ;;
    --test-timeout) test_timeout=$2; shift ;;
    --file-timeout) file_timeout=$2; shift ;;
    --multidb) singledb= ;;
    --pmserver-args) pmserver_args=$2; shift ;;
    --runtest-args) runtest_args=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) checkout=$1 ;;
  esac
  shift
done

[ -n "$checkout" ] || die "give a checkout of the Redis sources (argument or \$REDIS_SRC); see --help"
[ -f "$checkout/tests/test_helper.tcl" ] && [ -f "$checkout/runtest" ] ||
  die "'$checkout' does not look like a checkout of Redis (no runtest, tests/test_helper.tcl)"
checkout=$(cd "$checkout" && pwd)
pmserver="$build/server/pmserver"
[ -x "$pmserver" ] || die "no pmserver at $pmserver (ninja -C $build pmserver, or give --build DIR)"
pmserver=$(cd "$(dirname "$pmserver")" && pwd)/pmserver
"$compat_dir/deps.sh"
out=${out:-$build/compat-redis-suite}
mkdir -p "$out"
out=$(cd "$out" && pwd)

src_version=$(sed -n 's/^#define REDIS_VERSION "\(.*\)"/\1/p' "$checkout/src/version.h" 2>/dev/null || true)
server_version=$("${REDIS_SERVER:-redis-server}" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
if [ -n "$src_version" ] && [ "$src_version" != "$server_version" ]; then
  note "warning: the checkout is Redis $src_version, redis-server is $server_version: tests of" \
    "newer or older behaviour will fail on redis-server too"
fi

# The harness writes under tests/tmp and cleans it: it runs from a copy.
work="$out/harness"
rm -rf "$work" && mkdir -p "$work"
cp "$checkout/runtest" "$work/"
cp -r "$checkout/tests" "$work/"
[ -d "$checkout/src" ] && ln -s "$checkout/src" "$work/src"

trap stop_servers EXIT

# run_file SERVER FILE: starts SERVER (redis|pmserver), runs FILE against
# it, stops it; leaves the counts in $passed, $failed and a note (empty if
# the run ended normally) in $run_note.
run_file() {
  local server=$1 file=$2 log dir rc=0
  log="$out/$server/${file//\//_}.log"
  dir="$out/$server/data"
  mkdir -p "$out/$server"
  passed=0 failed=0 run_note=
  if [ "$server" = redis ]; then
    rm -rf "$dir"
    start_redis "$dir" || { run_note="redis-server did not start"; return; }
  else
    # shellcheck disable=SC2086
    start_pmserver "$pmserver" "$dir" $pmserver_args || { run_note="pmserver did not start"; return; }
  fi
  {
    echo "# $(date -u +%FT%TZ) $server on 127.0.0.1:$server_port"
    echo "# ./runtest --host 127.0.0.1 --port $server_port $singledb --durable --tags -needs:debug" \
      "--tags -needs:repl --timeout $test_timeout --single $file $runtest_args"
  } >"$log"
  # timeout(1) signals its whole process group: the harness's test client
  # (a second tclsh it starts) goes with it.
  (cd "$work" && TERM=dumb timeout -k 10 "$file_timeout" ./runtest --host 127.0.0.1 \
    --port "$server_port" $singledb --durable --tags -needs:debug --tags -needs:repl \
    --timeout "$test_timeout" --single "$file" $runtest_args) >>"$log" 2>&1 </dev/null || rc=$?
  local alive=1
  kill -0 "$server_pid" 2>/dev/null || alive=0
  stop_pid "$server_pid"
  passed=$(grep -c '^\[ok\]: ' "$log" || true)
  failed=$(grep -c '^\[err\]: ' "$log" || true)
  local exception
  exception=$(sed -n 's/^\[exception\]: \(Executing test client: \)\{0,1\}//p' "$log" | head -n 1)
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    run_note="killed after --file-timeout $file_timeout s"
  elif grep -q 'TIMEOUT\]: clients state report' "$log"; then
    run_note="no progress for --test-timeout $test_timeout s: stopped"
  elif [ -n "$exception" ]; then
    if [ $((passed + failed)) -eq 0 ]; then
      run_note="harness did not start: $exception"
    else
      run_note="aborted after $((passed + failed)) tests: $exception"
    fi
  elif ! grep -q 'The End' "$log"; then
    run_note="runtest ended (status $rc) without its summary"
  fi
  if [ "$alive" = 0 ]; then
    run_note="${run_note:+$run_note; }the server exited during the run"
  fi
  return 0
}

summary="$out/summary.txt"
{
  echo "# $(date -u +%FT%TZ) Redis $src_version test suite ($checkout), external mode" \
    "($singledb${runtest_args:+ $runtest_args})"
  echo "# redis-server $server_version; pmserver $("$pmserver" --version 2>/dev/null | head -n 1)" \
    "($pmserver $pmserver_args)"
  printf '%-22s %12s %12s %15s %15s\n' file redis_passed redis_failed pmserver_passed pmserver_failed
} | tee "$summary"

tr_ok=0 tr_fail=0 tp_ok=0 tp_fail=0 abnormal=0
for file in ${files//,/ }; do
  [ -f "$checkout/tests/$file.tcl" ] || die "no test file tests/$file.tcl in $checkout"
  run_file redis "$file"
  r_ok=$passed r_fail=$failed r_note=$run_note
  run_file pmserver "$file"
  p_ok=$passed p_fail=$failed p_note=$run_note
  tr_ok=$((tr_ok + r_ok)) tr_fail=$((tr_fail + r_fail))
  tp_ok=$((tp_ok + p_ok)) tp_fail=$((tp_fail + p_fail))
  {
    printf '%-22s %12d %12d %15d %15d\n' "$file" "$r_ok" "$r_fail" "$p_ok" "$p_fail"
    [ -z "$r_note" ] || echo "    redis-server: $r_note"
    [ -z "$p_note" ] || echo "    pmserver: $p_note"
    if [ $((r_ok + r_fail)) -eq 0 ] && [ -z "$r_note" ]; then
      echo "    (no test ran on either: the file's tests are all skipped in external mode," \
        "see $out/redis/${file//\//_}.log)"
    fi
  } | tee -a "$summary"
  [ -z "$r_note$p_note" ] || abnormal=1
done
{
  printf '%-22s %12d %12d %15d %15d\n' total "$tr_ok" "$tr_fail" "$tp_ok" "$tp_fail"
  if [ "$tr_ok" -gt 0 ]; then
    echo "pmserver_passed / redis_passed: $tp_ok / $tr_ok =" \
      "$(awk -v a="$tp_ok" -v b="$tr_ok" 'BEGIN { printf "%.1f%%", 100 * a / b }')"
  else
    echo "pmserver_passed / redis_passed: no test passed on redis-server"
  fi
  echo "logs: $out/redis/ and $out/pmserver/"
} | tee -a "$summary"
exit "$abnormal"
