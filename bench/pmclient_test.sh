#!/usr/bin/env bash
# pmclient end to end (ctest pmclient_servers, label client): against a
# real memcached and a real redis-server, each started here on a free
# loopback port and stopped after, when installed (scripts/figures/
# servers-deps.sh installs them; CI does not), and against pmserver when
# $PMSERVER names its binary (YCSB-E through its ordered SCAN). Exit 77
# (skipped) when none is there.
#   - YCSB A-F and deletes with checked values, 2 threads, JSON as documented
#     (memcached: E skipped with its reason; Redis: E through a sorted set);
#   - pipelined batches;
#   - wrong data is caught: records of another seed are misses, and a value
#     overwritten behind the client's back fails its check (exit 1).
# Usage: pmclient_test.sh PATH/TO/pmclient
set -uo pipefail
client=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/pmclient-test-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Waits until something accepts connections on the port (at most 5 s).
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# run NAME EXPECTED_RC pmclient-args...: runs pmclient, output in $work/NAME.out/.err.
run() {
  local name=$1 want=$2
  shift 2
  "$client" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  if [ "$rc" != "$want" ]; then
    fail "$name: exit $rc, expected $want"
    cat "$work/$name.out" "$work/$name.err" >&2
  fi
}

# check_json FILE PROTOCOL SKIPPED_PHASES: every run has 0 errors, ops > 0
# unless skipped, and the documented fields.
check_json() {
  python3 - "$@" <<'EOF' || fail "JSON $1"
import json, sys
path, protocol, skipped = sys.argv[1], sys.argv[2], set(filter(None, sys.argv[3].split(",")))
doc = json.load(open(path))
cfg = doc["config"]
assert cfg["protocol"] == protocol and cfg["records"] == 2000 and cfg["value_size"] == 200, cfg
assert doc["machine"]["cores"] >= 1
for r in doc["runs"]:
    for f in ("index", "phase", "phase_no", "threads", "ops", "throughput_ops_s", "latency_ns",
              "errors", "misses", "load_s", "skipped", "skip_reason"):
        assert f in r, (f, r)
    assert r["errors"] == 0, r
    if r["phase"] in skipped:
        assert r["skipped"] and r["skip_reason"], r
    else:
        assert not r["skipped"] and r["ops"] > 0 and r["throughput_ops_s"] > 0, r
        assert 0 < r["latency_ns"]["p50"] <= r["latency_ns"]["p99"] <= r["latency_ns"]["p999"], r
assert [r["phase"] for r in doc["runs"]] == ["ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e",
                                             "ycsb-f", "delete"], doc["runs"]
EOF
}

common=(--records 2000 --value-size 200 --ops 2000 --threads 2 --dist zipf:0.99 --seed 5)
ycsb=ycsb-a,ycsb-b,ycsb-c,ycsb-d,ycsb-e,ycsb-f,delete:500
tested=0

if command -v memcached >/dev/null; then
  tested=1
  port=$(free_port)
  memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 -m 64 -t 2 &
  pids+=($!)
  wait_port "$port" || fail "memcached did not start on port $port"
  mc=(--server "127.0.0.1:$port" --protocol memcached)
  run mc_ycsb 0 "${mc[@]}" "${common[@]}" --workload "$ycsb" --json "$work/mc.json"
  check_json "$work/mc.json" memcached ycsb-e
  grep -q "skipped: memcached has no ordered range" "$work/mc_ycsb.out" || fail "mc: no skip line"
  run mc_pipeline 0 "${mc[@]}" "${common[@]}" --workload ycsb-a,ycsb-f --pipeline 8
  # The server holds seed 5's records (minus deletes): seed 6's are all absent.
  run mc_other_seed 1 "${mc[@]}" "${common[@]}" --seed 6 --no-load --workload lookup:200
  grep -q "present key not found" "$work/mc_other_seed.err" || fail "mc: misses not reported"
else
  echo "pmclient_test: memcached not installed (scripts/figures/servers-deps.sh): not tested" >&2
fi

if command -v redis-server >/dev/null; then
  tested=1
  port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 --dir "$work" --save '' --appendonly yes \
    --appendfsync everysec --logfile "$work/redis.log" &
  pids+=($!)
  wait_port "$port" || fail "redis-server did not start on port $port"
  rs=(--server "127.0.0.1:$port" --protocol resp)
  run redis_ycsb 0 "${rs[@]}" "${common[@]}" --workload "$ycsb" --json "$work/redis.json"
  check_json "$work/redis.json" resp ""
  run redis_pipeline 0 "${rs[@]}" "${common[@]}" --workload ycsb-e,ycsb-f --pipeline 8
  # Overwrite one record behind the client's back: the lookups that read
  # it must report a value that does not check.
  run redis_load 0 "${rs[@]}" "${common[@]}" --records 50 --workload lookup:10
  python3 - "$port" <<'EOF' || fail "redis: could not overwrite a record"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def call(*args):
    s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    return s.recv(65536)
reply = call(b"SCAN", b"0", b"MATCH", b"user*", b"COUNT", b"1000")
key = [l for l in reply.split(b"\r\n") if l.startswith(b"user")][0]
assert call(b"SET", key, b"0" * 200) == b"+OK\r\n"
EOF
  run redis_corrupt 1 "${rs[@]}" "${common[@]}" --records 50 --no-load --workload lookup:2000 \
    --dist uniform
  grep -q "value of another key\|value with corrupt data" "$work/redis_corrupt.err" ||
    fail "redis: corrupt value not reported"
else
  echo "pmclient_test: redis-server not installed (scripts/figures/servers-deps.sh): not tested" >&2
fi

if [ -n "${PMSERVER:-}" ] && [ -x "$PMSERVER" ]; then
  tested=1
  port=$(free_port)
  mport=$(free_port)
  "$PMSERVER" --pool "$work/kv.pool" --create lbtree --resp-port "$port" --memcached-port "$mport" \
    --bind 127.0.0.1 >"$work/pmserver.log" 2>&1 &
  pids+=($!)
  wait_port "$port" && wait_port "$mport" || { fail "pmserver did not start"; cat "$work/pmserver.log" >&2; }
  run pmserver_resp 0 --server "127.0.0.1:$port" --protocol resp --scan-mode range "${common[@]}" \
    --workload "$ycsb" --json "$work/pmserver.json"
  check_json "$work/pmserver.json" resp ""
  run pmserver_mc 0 --server "127.0.0.1:$mport" --protocol memcached "${common[@]}" \
    --workload ycsb-a,ycsb-d,ycsb-f,delete:500 --pipeline 4
else
  echo "pmclient_test: PMSERVER is not a pmserver binary: pmserver not tested" >&2
fi

if [ "$tested" = 0 ]; then
  echo "pmclient_test: SKIPPED: none of memcached, redis-server and pmserver is there" >&2
  exit 77
fi
[ "$fails" = 0 ] && echo "pmclient_test: all passed" || echo "pmclient_test: $fails failure(s)" >&2
[ "$fails" = 0 ]
