#!/usr/bin/env bash
# Installs what pmindex needs on a Debian machine, only if it is missing.
# Safe to run any number of times. Needs root (or sudo) the first time.
#
#   scripts/deps.sh [BUILD]              apt packages, then BUILD/.venv (default build/)
#   scripts/deps.sh --python-venv DIR    apt packages, then a NEW virtual environment DIR
#                                        (removed first) with what `pip install .` and the
#                                        Python binding's tests need (python/requirements.txt)
set -euo pipefail

# python3-dev: the headers the Python module (pip install .) compiles against.
# clang-format: scripts/check-format.sh (git-clang-format comes with it).
# clang: scripts/check-thread-safety.sh (Clang's -Wthread-safety; Debian 12
# has clang 14) and the ctest thread_safety_negative.
pkgs=(cmake ninja-build g++ libgtest-dev libnuma-dev libcli11-dev nlohmann-json3-dev
      libabsl-dev libasio-dev pkg-config python3 python3-venv python3-dev clang-format clang)
"$(dirname "$0")/apt-missing.sh" "deps" "${pkgs[@]}"

if [ "${1:-}" = "--python-venv" ]; then
  venv=${2:?usage: scripts/deps.sh --python-venv DIR}
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    -r "$(dirname "$0")/../python/requirements.txt"
  exit 0
fi

# Python packages for tools/plot and the server protocol tests (pymemcache,
# redis-py), in a virtual environment inside the build folder (argument 1,
# default build/).
if [ "${PMINDEX_NO_VENV:-0}" != 1 ]; then
  build=${1:-build}
  venv="$build/.venv"
  if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$build"
    python3 -m venv "$venv"
  fi
  if ! "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
    "$venv/bin/pip" install -q -r "$(dirname "$0")/../tools/requirements.txt"
  fi
  if ! "$venv/bin/python" -c "import pymemcache, redis" 2>/dev/null; then
    "$venv/bin/pip" install -q -r "$(dirname "$0")/../tests/server/requirements.txt"
  fi
fi
