#!/usr/bin/env bash
# The main job (README: "Run the benchmark"): builds pmbench (release) and
# runs it over every registered index, with each persistent index's pool
# file in a temporary directory, on the phases the papers compare: 1M keys
# bulk-loaded, then 300K uniform lookups, 200K inserts, 200K deletes, 10K
# scans of 100 pairs and 200K of YCSB-A (50% lookups, 50% updates), median
# of 3 (the whole run: about 1.25x the wall time, 1.5x the CPU time, of
# pmbench's own default of 1M lookups; docs/RESULTS.md). Extra arguments go
# to pmbench (give --index to choose the indexes, --workload the phases).
# Writes
# build/release/pmbench.json and, with the plot tool, build/release/pmbench.png.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release -j "$(nproc)" pmbench
pooldir=$(mktemp -d)
trap 'rm -rf "$pooldir"' EXIT
args=("$@")
case " $* " in *" --index "*|*" --index="*|*" --list "*|*" --help "*|*" -h "*) ;; *) args=(--index all "${args[@]}") ;; esac
case " $* " in *" --workload "*|*" --workload="*|*" --list "*|*" --help "*|*" -h "*) ;;
  *) args=(--workload lookup:300000,insert:200000,delete:200000,scan:10000,ycsb-a:200000
           "${args[@]}") ;;
esac
rm -f build/release/pmbench.json
build/release/bench/pmbench --pool "$pooldir" --json build/release/pmbench.json "${args[@]}"
if [ -x tools/plot ] && [ -s build/release/pmbench.json ]; then
  build/.venv/bin/python tools/plot build/release/pmbench.json -o build/release/pmbench.png
  echo "plot: build/release/pmbench.png"
fi
