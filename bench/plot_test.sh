#!/usr/bin/env bash
# tools/plot on pmbench's JSON: a small run of the default phases over
# every index, plotted alone and side by side with a second run; each PNG
# is written, and every index of the JSON has a colour of its own.
# Usage: plot_test.sh PATH/TO/pmbench PATH/TO/tools/plot
# Exit 77 (skipped) when no python with matplotlib can be found (the plot
# tool looks in build/.venv, which scripts/deps.sh makes).
set -uo pipefail
pmbench=$1
plot=$2
root=$(cd "$(dirname "$plot")/.." && pwd)
if ! python3 -c "import matplotlib" 2>/dev/null && [ ! -x "$root/build/.venv/bin/python" ]; then
  echo "SKIP: no matplotlib (scripts/deps.sh makes build/.venv)"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
phases=lookup:2000,insert:1000,delete:1000,scan:100,ycsb-a:1000
for seed in 1 2; do
  if ! "$pmbench" --index all --keys 5000 --repeat 1 --workload "$phases" --seed "$seed" \
       --pool "$tmp" --json "$tmp/run$seed.json" >"$tmp/out$seed" 2>&1; then
    echo "FAIL: pmbench run $seed"; cat "$tmp/out$seed"; exit 1
  fi
done
png_ok() { [ -s "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = "211PNG" ]; }
python3 "$plot" "$tmp/run1.json" -o "$tmp/one.png" >"$tmp/plot1" 2>&1
png_ok "$tmp/one.png" || { echo "FAIL: no PNG from one file"; cat "$tmp/plot1"; fail=1; }
python3 "$plot" "$tmp/run1.json" "$tmp/run2.json" -o "$tmp/two.png" >"$tmp/plot2" 2>&1
png_ok "$tmp/two.png" || { echo "FAIL: no PNG from two files"; cat "$tmp/plot2"; fail=1; }

python3 "$plot" "$tmp/run1.json" -o /dev/null --print-colours >"$tmp/colours"
indexes=$(grep -o '"index": *"[^"]*"' "$tmp/run1.json" | sed 's/.*"\([^"]*\)"$/\1/' | sort -u)
n_idx=$(echo "$indexes" | wc -l)
n_lines=$(wc -l <"$tmp/colours")
n_colours=$(awk '{print $2}' "$tmp/colours" | sort -u | wc -l)
if [ "$n_idx" -lt 5 ] || [ "$n_lines" -ne "$n_idx" ] || [ "$n_colours" -ne "$n_idx" ]; then
  echo "FAIL: $n_idx indexes, $n_lines colour lines, $n_colours distinct colours:"
  cat "$tmp/colours"; fail=1
fi
for i in $indexes; do
  grep -q "^$i " "$tmp/colours" || { echo "FAIL: no colour for $i"; fail=1; }
done
# The side-by-side page on scripts/peers/compare.py's --json schema: two
# comparisons (one with CPU times, one without), one colour per tree, and a
# pmbench file mixed in is refused with a message, not a traceback.
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def doc(tree, index, cpu):
    ph = {}
    for i, p in enumerate(("lookup", "insert", "delete")):
        o, m = [900.0 + i, 950.0, 1000.0], [800.0, 850.0 + i, 900.0]
        v = {"original_ns": o, "pmindex_ns": m, "original_median": o[1], "pmindex_median": m[1],
             "ratio": o[1] / m[1], "pmindex_lines_fences": [1.0 + i, 1.0],
             "original_lines_fences": None if p == "lookup" else [1.5, 1.0]}
        if cpu:
            v.update(original_cpu_ns=o, pmindex_cpu_ns=m, cpu_ratio=o[1] / m[1])
        ph[p] = v
    return {"tree": tree, "index": index, "options": "", "keys": 1000, "ops": 100, "fill": 0.7,
            "repeat": 3, "pm_dir": "/dev/shm", "date": "2026-11-28 00:00 UTC",
            "command": "scripts/peers/compare.py --tree " + tree, "phases": ph}
json.dump(doc("lbtree", "lbtree", False), open(f"{tmp}/peer-lbtree.json", "w"))
json.dump(doc("fptree", "fptree", True), open(f"{tmp}/peer-fptree.json", "w"))
PY
python3 "$plot" "$tmp/peer-lbtree.json" "$tmp/peer-fptree.json" -o "$tmp/peers.png" \
  >"$tmp/plot3" 2>&1
png_ok "$tmp/peers.png" || { echo "FAIL: no PNG from the peers files"; cat "$tmp/plot3"; fail=1; }
python3 "$plot" "$tmp/peer-lbtree.json" "$tmp/peer-fptree.json" -o /dev/null --print-colours \
  >"$tmp/peer-colours"
if [ "$(awk '{print $2}' "$tmp/peer-colours" | sort -u | wc -l)" -ne 2 ]; then
  echo "FAIL: the two compared trees do not have two colours:"; cat "$tmp/peer-colours"; fail=1
fi
if python3 "$plot" "$tmp/peer-lbtree.json" "$tmp/run1.json" -o "$tmp/mixed.png" \
     >"$tmp/plot4" 2>&1 || ! grep -q "cannot be mixed" "$tmp/plot4" || grep -q Traceback "$tmp/plot4"; then
  echo "FAIL: a peers file mixed with a pmbench file was not refused cleanly:"; cat "$tmp/plot4"
  fail=1
fi
[ $fail -eq 0 ] && echo "plot: $n_idx indexes, $n_colours colours, both PNGs and the peers page written"
exit $fail
