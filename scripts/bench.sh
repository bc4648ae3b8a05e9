#!/usr/bin/env bash
# The main job (README: "Run the benchmark"): builds pmbench (release) and
# runs it on its default workload, with every persistent index's pool file
# in a temporary directory; extra arguments go to pmbench. Writes
# build/release/pmbench.json and, with the plot tool, build/release/pmbench.png.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release -j "$(nproc)" pmbench
pooldir=$(mktemp -d)
trap 'rm -rf "$pooldir"' EXIT
build/release/bench/pmbench --pool "$pooldir" --json build/release/pmbench.json "$@"
if [ -x tools/plot ]; then
  build/.venv/bin/python tools/plot build/release/pmbench.json -o build/release/pmbench.png
  echo "plot: build/release/pmbench.png"
fi
