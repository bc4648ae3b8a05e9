#!/usr/bin/env bash
# Clang's thread-safety analysis over the library (src/) and the server
# (server/): every translation unit is compiled with clang++ -fsyntax-only
# -Wthread-safety, the thread-safety group as errors. Nothing is built or
# linked; a CMake configure (build dir, default build/clang-tsa) only
# provides the compile commands (compile_commands.json) and the generated
# headers (precompiled headers off: nothing is built, and so every unit is
# checked to include what it uses). The annotations are the PMINDEX_* macros of
# src/sync/thread_annotations.h; GCC builds ignore them, so this step is what
# checks them. Other Clang warnings are shown but do not fail the step.
#   scripts/check-thread-safety.sh [BUILD_DIR]     (PMINDEX_JOBS: parallel jobs)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/clang-tsa}
jobs=${PMINDEX_JOBS:-$(nproc)}
clangxx=${CLANGXX:-clang++}
command -v "$clangxx" >/dev/null || {
  echo "check-thread-safety: $clangxx not found (scripts/deps.sh installs Debian's clang)" >&2
  exit 1
}

cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$clangxx" \
  -DPMINDEX_BUILD_TESTS=OFF -DPMINDEX_BUILD_BENCH=OFF -DPMINDEX_BUILD_CRASHSIM=OFF \
  -DPMINDEX_BUILD_TOOLS=OFF -DPMINDEX_BUILD_SERVER=ON -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON >/dev/null

# One line per translation unit of src/ and server/: the directory, then the
# compile command with its output (-o FILE) and its -c dropped.
python3 - "$dir/compile_commands.json" "$PWD" >"$dir/tsa-commands.txt" <<'EOF'
import json, shlex, sys
root = sys.argv[2]
for e in json.load(open(sys.argv[1])):
    f = e["file"]
    if not (f.startswith(root + "/src/") or f.startswith(root + "/server/")):
        continue
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    out, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c":
            out.append(a)
    print(shlex.quote(e["directory"]) + " " + " ".join(shlex.quote(a) for a in out))
EOF
n=$(wc -l <"$dir/tsa-commands.txt")
[ "$n" -gt 0 ] || { echo "check-thread-safety: no translation unit found" >&2; exit 1; }

export clangxx
status=0
# xargs exits 123 when one command failed; every unit still runs.
xargs -a "$dir/tsa-commands.txt" -P "$jobs" -L 1 sh -c \
  'cd "$1" && shift && exec "$clangxx" -fsyntax-only -Wthread-safety -Werror=thread-safety "$@"' \
  tsa || status=$?
if [ "$status" -ne 0 ]; then
  echo "check-thread-safety: thread-safety errors above ($n translation units)" >&2
  exit 1
fi
echo "check-thread-safety: $n translation units clean"
