#!/usr/bin/env bash
# pmbench's CLI contract (docs/benchmarking.md): errors give one line on
# stderr and exit 2; a small run of every kind of phase prints a table,
# writes the documented JSON and exits 0 with no wrong results.
# Usage: pmbench_test.sh PATH/TO/pmbench
set -uo pipefail
pmbench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

expect_error() {  # expect_error "needle" args...
  local needle=$1; shift
  "$pmbench" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$needle" "$tmp/err"; then
    echo "FAIL: pmbench $* -> rc=$rc, stderr:"; cat "$tmp/err"; fail=1
  fi
}

expect_error "unknown index 'nosuch'" --index nosuch
expect_error "known: " --index nosuch
expect_error "bad --opt for dram-btree" --index dram-btree --opt node=abc
expect_error "bad --fill" --fill 2
expect_error "bad --dist 'zipf:x'" --dist zipf:x
expect_error "unknown workload" --workload ycsb-z
expect_error "present keys to delete" --index dram-btree --keys 100 --workload delete --ops 101
expect_error "not a directory" --index dram-btree --pool /etc/passwd
expect_error "not expected" --no-such-flag
expect_error "bad --threads" --threads 0
persistent=$("$pmbench" --list | awk '$2 == "persistent" {print $1; exit}')
if [ -n "$persistent" ]; then
  expect_error "out of space" --index "$persistent" --keys 100000 --workload insert:2000000 \
    --repeat 1 --pool-size-mb 4 --pool-max-mb 16 --pool "$tmp/oos"
fi

# --list: name, persistent|volatile, options.
"$pmbench" --list >"$tmp/list" || { echo "FAIL: --list"; fail=1; }
grep -q '^dram-btree volatile' "$tmp/list" || { echo "FAIL: --list lacks dram-btree"; fail=1; }
grep -q '^null volatile' "$tmp/list" || { echo "FAIL: --list lacks null"; fail=1; }

# A small run over every index and many phase kinds, checked results.
"$pmbench" --index all --keys 20000 --ops 5000 --repeat 2 --threads 2 --dist zipf:0.9 \
  --workload insert,lookup,update,delete,scan:500,rmw,ycsb-a,ycsb-d,ycsb-e,dense-insert:2000,mix:insert=1,delete=1,lookup=2 \
  --pool "$tmp/pools" --json "$tmp/out.json" --verify >"$tmp/table" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 0 ]; then echo "FAIL: run rc=$rc"; cat "$tmp/err" "$tmp/table"; fail=1; fi
python3 - "$tmp/out.json" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
for key in ("machine", "config", "runs"):
    assert key in doc, key
runs = doc["runs"]
assert runs, "no runs"
need = {"index", "options", "phase", "phase_no", "threads", "ops", "repeat", "throughput_ops_s",
        "latency_ns", "per_op", "pm_bytes", "dram_bytes", "recovery_s"}
for r in runs:
    missing = need - set(r)
    assert not missing, f"run lacks {missing}"
    assert set(r["latency_ns"]) >= {"p50", "p90", "p99", "p999"}
    assert set(r["per_op"]) >= {"lines_flushed", "fences", "naws"}
    assert r["errors"] == 0, r
    assert r["throughput_ops_s"] > 0, r
persistent = [r for r in runs if r["persistent"] and r["phase_no"] == 11]
assert all(r["recovery_s"] > 0 for r in persistent), "no recovery time"
assert any(r["per_op"]["lines_flushed"] > 0 for r in runs if r["persistent"] and r["phase"] == "insert")
PY
# Pool files are removed after each run.
if [ -n "$(ls -A "$tmp/pools" 2>/dev/null)" ]; then echo "FAIL: pool files left behind"; ls "$tmp/pools"; fail=1; fi

[ "$fail" -eq 0 ] && echo "pmbench CLI: all checks passed"
exit "$fail"
