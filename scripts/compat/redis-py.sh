#!/usr/bin/env bash
# Runs redis-py's own tests (its pytest suite, unmodified) against pmserver
# and against redis-server, with the client's default settings, and prints
# the counts side by side: test_connection.py, test_pipeline.py (pipelines
# and MULTI/EXEC transactions), test_lock.py, and test_commands.py's string
# and key commands (its "BASIC KEY COMMANDS" section; redis_py_tests.py
# selects them).
#
# Usage: scripts/compat/redis-py.sh [options] [REDIS_PY_CHECKOUT]
#   REDIS_PY_CHECKOUT  a local checkout of redis-py's repository (its tests/
#                      and pyproject.toml), or $REDIS_PY_SRC. Nothing is
#                      downloaded from it or for it but the Python packages
#                      below; the checkout is only read (pytest runs a copy
#                      of tests/ in OUT, beside no redis/ package, so the
#                      tests import the release installed in the venv).
#   --build DIR        pmindex build directory holding server/pmserver; the
#                      venv is DIR/compat-venv (default build/release)
#   --out DIR          logs, JUnit reports and summary.txt (default BUILD/compat-redis-py)
#   --redis-py SPEC    the redis-py the venv gets from PyPI (default
#                      redis==VERSION, the checkout's version: the tests
#                      then match the library they test)
#   --protocol N       pass --protocol N to the tests (default: none, the
#                      client's default: RESP3 since redis-py 8)
#   --test-timeout S   per test (pytest-timeout; default 30)
#   --run-timeout S    wall-clock limit of one server's run (default 900)
#   --pmserver-args "ARGS"  more pmserver options (default "--threads 2")
#
# Each server is started fresh (redis-server --save '' --appendonly no; a
# pmserver over a new lbtree pool in OUT), on a free loopback port, and
# stopped after its run and on any exit. The tests run with the markers
# redis-py's own CI uses for a standalone server less those needing TLS or
# replicas: not onlycluster, redismod, ssl, fixed_client,
# multidb_integration, replica. Many of test_connection.py's tests are
# client-side (mocked connections) and pass whatever the server; a few
# name localhost:6379 themselves and fail on both unless a server listens
# there.
#
# Then scripts/compat/redis_py_check.py calls 45 common client methods
# against a fresh server of each kind (the client's defaults, and protocol
# 2 too unless --protocol is given) and OUT/check.txt says which work.
#
# Output: "file redis_passed redis_failed pmserver_passed pmserver_failed"
# per test file (failed: failures and errors; skips are in the JUnit
# reports), a note when a run did not complete (the harness did not start:
# the conftest's first INFO failed; killed at --run-timeout; the server
# exited), the totals and pmserver_passed / redis_passed. Installs
# redis-server and python3-venv if missing (deps.sh), and into the venv
# redis-py, pytest, pytest-timeout, pytest-asyncio and packaging from PyPI.
# Exit status 0 when both runs completed (whatever their failures), 1
# otherwise.
set -euo pipefail
. "$(dirname "$0")/common.sh"

build=build/release
out=
redis_py_spec=
protocol=
test_timeout=30
run_timeout=900
pmserver_args="--threads 2"
checkout=${REDIS_PY_SRC:-}
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --redis-py) redis_py_spec=$2; shift ;;
    --protocol) protocol=$2; shift ;;
    --test-timeout) test_timeout=$2; shift ;;
    --run-timeout) run_timeout=$2; shift ;;
    --pmserver-args) pmserver_args=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) checkout=$1 ;;
  esac
  shift
done

[ -n "$checkout" ] || die "give a checkout of redis-py (argument or \$REDIS_PY_SRC); see --help"
[ -f "$checkout/tests/conftest.py" ] && [ -f "$checkout/redis/__init__.py" ] ||
  die "'$checkout' does not look like a checkout of redis-py (no tests/conftest.py, redis/__init__.py)"
checkout=$(cd "$checkout" && pwd)
pmserver="$build/server/pmserver"
[ -x "$pmserver" ] || die "no pmserver at $pmserver (ninja -C $build pmserver, or give --build DIR)"
build=$(cd "$build" && pwd)
pmserver="$build/server/pmserver"
"$compat_dir/deps.sh"
out=${out:-$build/compat-redis-py}
mkdir -p "$out"
out=$(cd "$out" && pwd)

checkout_version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$checkout/redis/__init__.py")
[ -n "$redis_py_spec" ] || redis_py_spec="redis==$checkout_version"
venv="$build/compat-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
want=("$redis_py_spec" pytest pytest-timeout pytest-asyncio packaging)
if ! "$venv/bin/pip" install -q "${want[@]}" >"$out/pip.log" 2>&1; then
  cat "$out/pip.log" >&2
  die "could not install ${want[*]} into $venv"
fi
installed=$("$venv/bin/python" -c 'import redis; print(redis.__version__)')
[ "$installed" = "$checkout_version" ] ||
  note "warning: the tests are redis-py $checkout_version's, the library is $installed"

# The tests run from a copy, beside no redis/ package.
work="$out/tests-copy"
rm -rf "$work" && mkdir -p "$work"
cp -r "$checkout/tests" "$work/"
cp "$checkout/pyproject.toml" "$work/"  # pytest's settings (markers, asyncio mode)
mapfile -t nodes < <(python3 "$compat_dir/redis_py_tests.py" select "$work/tests")
markers='not onlycluster and not redismod and not ssl and not fixed_client and not multidb_integration and not replica'

trap stop_servers EXIT

# run SERVER: starts SERVER (redis|pmserver), runs the tests against it,
# stops it; leaves per-file counts in OUT/SERVER.counts and a note (empty
# if the run completed) in $run_note.
run() {
  local server=$1
  local dir="$out/$server-data" log="$out/$server.log" xml="$out/$server.xml" rc=0
  run_note=
  rm -f "$xml" "$out/$server.counts"
  : >"$out/$server.counts"
  if [ "$server" = redis ]; then
    rm -rf "$dir"
    start_redis "$dir" || { run_note="redis-server did not start"; return; }
  else
    # shellcheck disable=SC2086
    start_pmserver "$pmserver" "$dir" $pmserver_args || { run_note="pmserver did not start"; return; }
  fi
  local url="redis://127.0.0.1:$server_port/0"
  local args=(-p no:cacheprovider --redis-url "$url" --redis-mod-url "$url" -m "$markers"
              --timeout "$test_timeout" -v -rfE --junit-xml "$xml")
  [ -z "$protocol" ] || args+=(--protocol "$protocol")
  {
    echo "# $(date -u +%FT%TZ) $server on 127.0.0.1:$server_port, redis-py $installed"
    echo "# python -m pytest ${args[*]} <${#nodes[@]} node ids>"
  } >"$log"
  (cd "$work" && PYTHONUNBUFFERED=1 timeout -k 10 "$run_timeout" "$venv/bin/python" -m pytest "${args[@]}" \
    "${nodes[@]}") >>"$log" 2>&1 </dev/null || rc=$?
  local alive=1
  kill -0 "$server_pid" 2>/dev/null || alive=0
  stop_pid "$server_pid"
  if [ -f "$xml" ]; then
    python3 "$compat_dir/redis_py_tests.py" count "$xml" >"$out/$server.counts"
  else
    python3 "$compat_dir/redis_py_tests.py" count-log "$log" >"$out/$server.counts"
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    run_note="killed after --run-timeout $run_timeout s (counts: the tests it finished)"
  elif [ ! -f "$xml" ]; then
    local why
    why=$(grep -E '^INTERNALERROR> [A-Za-z_.]*(Error|Exception)' "$log" | tail -n 1 |
      sed 's/^INTERNALERROR> //')
    run_note="harness did not start: ${why:-pytest exited with status $rc, no report}"
  fi
  if [ "$alive" = 0 ]; then
    run_note="${run_note:+$run_note; }the server exited during the run"
  fi
  return 0
}

run redis
r_note=$run_note
run pmserver
p_note=$run_note

# Then redis_py_check.py's 45 calls against a fresh server of each kind:
# with the client's defaults (or --protocol), and, when no --protocol is
# given, with protocol 2 as well (the RESP2 clients of before redis-py 8).
check="$out/check.txt"
: >"$check"
if start_redis "$out/redis-data"; then
  redis_port=$server_port redis_pid=$server_pid
  if start_pmserver "$pmserver" "$out/pmserver-data" $pmserver_args; then
    for proto in ${protocol:-default 2}; do
      popt=()
      [ "$proto" = default ] || popt=(--protocol "$proto")
      timeout -k 5 300 "$venv/bin/python" "$compat_dir/redis_py_check.py" "${popt[@]}" \
        "redis-server=127.0.0.1:$redis_port" "pmserver=127.0.0.1:$server_port" >>"$check" 2>&1 ||
        echo "redis_py_check.py failed (status $?)" >>"$check"
      echo >>"$check"
    done
    stop_pid "$server_pid"
  else
    echo "pmserver did not start: no redis_py_check.py run" >>"$check"
  fi
  stop_pid "$redis_pid"
else
  echo "redis-server did not start: no redis_py_check.py run" >>"$check"
fi

# count FILE SERVER FIELD (1 passed, 2 failed): 0 when absent.
count() { awk -v f="$1" -v i="$3" '$1 == f { print $(i + 1); found = 1 } END { if (!found) print 0 }' \
  "$out/$2.counts"; }
summary="$out/summary.txt"
{
  echo "# $(date -u +%FT%TZ) redis-py $installed tests ($checkout), protocol ${protocol:-default}"
  echo "# redis-server $("${REDIS_SERVER:-redis-server}" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p');" \
    "pmserver $("$pmserver" --version | head -n 1) ($pmserver $pmserver_args)"
  printf '%-20s %12s %12s %15s %15s\n' file redis_passed redis_failed pmserver_passed pmserver_failed
  t=(0 0 0 0)
  for f in test_connection.py test_commands.py test_pipeline.py test_lock.py; do
    v=("$(count $f redis 1)" "$(count $f redis 2)" "$(count $f pmserver 1)" "$(count $f pmserver 2)")
    printf '%-20s %12d %12d %15d %15d\n' "$f" "${v[@]}"
    for i in 0 1 2 3; do t[i]=$((t[i] + v[i])); done
  done
  printf '%-20s %12d %12d %15d %15d\n' total "${t[@]}"
  [ -z "$r_note" ] || echo "redis-server: $r_note"
  [ -z "$p_note" ] || echo "pmserver: $p_note"
  if [ "${t[0]}" -gt 0 ]; then
    echo "pmserver_passed / redis_passed: ${t[2]} / ${t[0]} =" \
      "$(awk -v a="${t[2]}" -v b="${t[0]}" 'BEGIN { printf "%.1f%%", 100 * a / b }')"
  else
    echo "pmserver_passed / redis_passed: no test passed on redis-server"
  fi
  grep -E '^(redis-py |works: )' "$check" | paste -d ' ' - - | sed 's/^/redis_py_check.py: /'
  echo "logs: $out/redis.log, $out/pmserver.log (JUnit: $out/*.xml); the 45 calls: $check"
} | tee "$summary"
[ -z "$r_note$p_note" ]
