#!/usr/bin/env bash
# The main job (README: "Run the benchmark"): builds pmbench (release) and
# runs it on its default workload (1M keys bulk-loaded, 1M uniform lookups,
# median of 3) over every registered index, with each persistent index's
# pool file in a temporary directory. Extra arguments go to pmbench (give
# --index to choose the indexes). Writes
# build/release/pmbench.json and, with the plot tool, build/release/pmbench.png.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release -j "$(nproc)" pmbench
pooldir=$(mktemp -d)
trap 'rm -rf "$pooldir"' EXIT
args=("$@")
case " $* " in *" --index "*|*" --index="*|*" --list "*|*" --help "*|*" -h "*) ;; *) args=(--index all "$@") ;; esac
rm -f build/release/pmbench.json
build/release/bench/pmbench --pool "$pooldir" --json build/release/pmbench.json "${args[@]}"
if [ -x tools/plot ] && [ -s build/release/pmbench.json ]; then
  build/.venv/bin/python tools/plot build/release/pmbench.json -o build/release/pmbench.png
  echo "plot: build/release/pmbench.png"
fi
