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
# --version: the project's version (PMINDEX_VERSION, set by ctest), exit 0.
if [ -n "${PMINDEX_VERSION:-}" ]; then
  out=$("$pmbench" --version 2>&1); rc=$?
  if [ "$rc" -ne 0 ] || [ "$out" != "pmbench (pmindex) $PMINDEX_VERSION" ]; then
    echo "FAIL: pmbench --version -> rc=$rc: $out"; fail=1
  fi
fi
expect_error "bad --api 'foo': must be index or db" --api foo
expect_error "bad --threads" --threads 0
expect_error "phase distribution" --workload 'update@zipf:x'
expect_error "bad --dist 'hotrange:0.1:1:2'" --dist hotrange:0.1:1:2
expect_error "bad --numa-nodes: must be <= 64" --numa-nodes 65
expect_error "bad --remote-ns: needs --numa-nodes 2 or more" --remote-ns 10
expect_error "bad --pm-model 'optane': must be dram, fixed or xpline" --pm-model optane
expect_error "bad --pm-write-ns: it is the fixed model's constant" --pm-model xpline --pm-write-ns 300
expect_error "bad --pm-cache-kb" --pm-model xpline --pm-cache-kb 99999999
expect_error "--pm-read-ns: invalid value" --pm-model xpline --pm-read-ns -1
# Unsigned options refuse a sign instead of wrapping it around to 2^64 - 5.
expect_error "--keys: invalid value '-5': must be a non-negative integer" --keys -5
expect_error "--seed: invalid value '-1'" --index null --keys 10 --ops 10 --seed -1
expect_error "--pool-max-mb: invalid value" --index null --keys 10 --ops 10 --pool-max-mb -1
# Out of memory (an address-space limit here) is one line and exit 2, not an
# abort on an uncaught std::bad_alloc. Skipped where the limit keeps pmbench
# from starting at all (sanitizer builds reserve huge shadow mappings).
if bash -c 'ulimit -v 4000000 && exec "$0" --list' "$pmbench" >/dev/null 2>&1; then
  bash -c 'ulimit -v 4000000 && exec "$0" "$@"' "$pmbench" --index null --keys 4000000000 --ops 10 \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q "out of memory" "$tmp/err"; then
    echo "FAIL: pmbench --keys 4000000000 under ulimit -v -> rc=$rc, stderr:"; cat "$tmp/err"; fail=1
  fi
fi
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
# A per-phase distribution (PHASE@DIST), the index's own counters
# (index_stats, nvtree's rebuilds/splits/...) and --crash-reopen.
if "$pmbench" --list | grep -q '^nvtree persistent'; then
  "$pmbench" --index nvtree,dram-btree --keys 20000 --repeat 1 --dist hotrange:0.05 --crash-reopen \
    --workload insert:20000,update:5000@hotrange:0.05:1:0.5,update:5000 --opt nvtree:node=512 \
    --pool "$tmp/pools" --json "$tmp/x.json" >"$tmp/table" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 0 ]; then echo "FAIL: nvtree run rc=$rc"; cat "$tmp/err" "$tmp/table"; fail=1; fi
  grep -q 'index stats (this phase): rebuilds' "$tmp/table" || { echo "FAIL: no index stats line"; cat "$tmp/table"; fail=1; }
  python3 - "$tmp/x.json" <<'PY' || fail=1
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
nv = [r for r in runs if r["index"] == "nvtree"]
assert len(nv) == 3, nv
assert {"rebuilds", "rebuild_s", "splits", "replaces", "merges"} <= set(nv[0]["index_stats"]), nv[0]
assert nv[0]["index_stats"]["splits"] > 0, nv[0]
assert nv[2]["index_stats_total"]["splits"] >= nv[0]["index_stats"]["splits"]
assert nv[1]["dist"] == "hotrange:0.05:1:0.5" and nv[2]["dist"] == "hotrange:0.05:0.95:0", nv
assert nv[0]["dist"] == "", nv[0]
assert nv[2]["crash_recovery_s"] > 0 and nv[2]["recovery_s"] > 0, nv[2]
assert nv[0]["crash_recovery_s"] == 0
dr = [r for r in runs if r["index"] == "dram-btree"]
assert all(r["index_stats"] == {} and r["crash_recovery_s"] == 0 for r in dr), dr
PY
fi

# --pm-model xpline: media bytes and modelled reads per op, in the table
# and the JSON; an lbtree insert writes at least one 256-byte block and
# reads its 256-byte leaf (4 lines); dram-btree (volatile) reads no PM.
if "$pmbench" --list | grep -q '^lbtree persistent'; then
  "$pmbench" --index lbtree,dram-btree --keys 20000 --ops 5000 --repeat 1 --workload insert,lookup \
    --pm-model xpline --pm-block-write-ns 0 --pm-read-ns 0 --pm-read-seq-ns 0 --pm-cache-kb 64 \
    --pool "$tmp/pools" --json "$tmp/xp.json" >"$tmp/table" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 0 ]; then echo "FAIL: xpline run rc=$rc"; cat "$tmp/err" "$tmp/table"; fail=1; fi
  grep -q 'model xpline' "$tmp/table" || { echo "FAIL: model not in the table's header"; fail=1; }
  grep -q 'lbtree       phase 1: xpline per op: media bytes' "$tmp/table" ||
    { echo "FAIL: no xpline line"; cat "$tmp/table"; fail=1; }
  python3 - "$tmp/xp.json" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["config"]["pm_model"] == "xpline" and doc["config"]["pm_cache_kb"] == 64, doc["config"]
runs = {(r["index"], r["phase"]): r["per_op"] for r in doc["runs"]}
ins, look = runs[("lbtree", "insert")], runs[("lbtree", "lookup")]
assert ins["media_bytes"] >= 256, ins
assert look["media_bytes"] == 0 and look["model_lines_read"] == 4, look
assert runs[("dram-btree", "lookup")]["model_lines_read"] == 0, runs
PY
fi

# --api db: the same loop through the user's handle pmindex::Db, over every
# index (persistent ones in a pool file, created, reopened and, with
# --crash-reopen, opened from a crash image through Db), checked results.
"$pmbench" --api db --index all --keys 5000 --ops 2000 --repeat 1 --threads 2 --crash-reopen \
  --workload insert,lookup,update,delete,scan:200,rmw --pool "$tmp/pools" --json "$tmp/db.json" \
  --verify >"$tmp/table" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 0 ]; then echo "FAIL: --api db run rc=$rc"; cat "$tmp/err" "$tmp/table"; fail=1; fi
grep -q 'api db' "$tmp/table" || { echo "FAIL: --api db not in the table's header"; fail=1; }
python3 - "$tmp/db.json" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["config"]["api"] == "db", doc["config"]
runs = doc["runs"]
assert runs and all(r["errors"] == 0 and r["throughput_ops_s"] > 0 for r in runs), runs
last = [r for r in runs if r["persistent"] and r["phase_no"] == 6]
assert last and all(r["recovery_s"] > 0 and r["crash_recovery_s"] > 0 for r in last), last
PY

# Key files (--write-keys, --keys-file, --op-keys): raw little-endian uint64.
"$pmbench" --write-keys "$tmp/all.keys" --keys 12000 --seed 5 >/dev/null || { echo "FAIL: --write-keys"; fail=1; }
python3 - "$tmp" <<'PY' || fail=1
import random, struct, sys
d = sys.argv[1]
raw = open(d + "/all.keys", "rb").read()
assert len(raw) == 12000 * 8, len(raw)
keys = list(struct.unpack("<12000Q", raw))
assert len(set(keys)) == 12000 and all(0 < k < 2**63 for k in keys), "not distinct keys in [1, 2^63)"
load, fresh = keys[:10000], keys[10000:]
rng = random.Random(1)
def put(name, ks):
    open(d + "/" + name, "wb").write(struct.pack("<%dQ" % len(ks), *ks))
put("load.keys", load)
put("look.keys", rng.sample(load, 3000))
put("ins.keys", fresh)
put("del.keys", rng.sample(load, 1000))
put("absent.keys", fresh[:50])
open(d + "/odd.keys", "wb").write(b"\0" * 12)
PY
expect_error "does not exist" --index dram-btree --keys-file "$tmp/nosuch.keys"
expect_error "not a whole number of 8-byte keys" --index dram-btree --keys-file "$tmp/odd.keys"
expect_error "has 10000 keys, 20000 needed" --index dram-btree --keys-file "$tmp/load.keys" --keys 20000
expect_error "has 3000 keys, 4000 needed" --index dram-btree --keys-file "$tmp/load.keys" \
  --workload lookup:4000 --op-keys lookup="$tmp/look.keys"
expect_error "bad --op-keys" --index dram-btree --op-keys ycsb-a="$tmp/look.keys"
# Lookups of the file's keys after loading the file's keys: no wrong result.
"$pmbench" --index all --keys-file "$tmp/load.keys" --repeat 1 --pool "$tmp/pools" \
  --workload lookup:3000,insert:2000,delete:1000,ycsb-a:2000 --op-keys lookup="$tmp/look.keys",insert="$tmp/ins.keys" \
  --op-keys delete="$tmp/del.keys" --json "$tmp/kf.json" >"$tmp/table" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 0 ]; then echo "FAIL: key-file run rc=$rc"; cat "$tmp/err" "$tmp/table"; fail=1; fi
python3 - "$tmp/kf.json" "$tmp" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
c = doc["config"]
assert c["keys"] == 10000 and c["keys_file"].endswith("load.keys"), c
assert set(c["op_keys"]) == {"lookup", "insert", "delete"}, c["op_keys"]
for r in doc["runs"]:
    assert r["errors"] == 0, r
    assert r["dist"] == ("file" if r["phase"] in ("lookup", "insert", "delete") else "uniform"), r
PY
# Lookups of keys that are not loaded: every one is a miss (exit 1), so
# pmbench really looked up the file's keys.
"$pmbench" --index dram-btree --keys-file "$tmp/load.keys" --repeat 1 --workload lookup:50 \
  --op-keys lookup="$tmp/absent.keys" --json "$tmp/miss.json" >"$tmp/table" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 1 ]; then echo "FAIL: absent op keys rc=$rc (want 1)"; cat "$tmp/err"; fail=1; fi
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['runs'][0]
assert r['misses'] == 50, r
" "$tmp/miss.json" || fail=1

# Pool files are removed after each run.
if [ -n "$(ls -A "$tmp/pools" 2>/dev/null)" ]; then echo "FAIL: pool files left behind"; ls "$tmp/pools"; fail=1; fi

[ "$fail" -eq 0 ] && echo "pmbench CLI: all checks passed"
exit "$fail"
