#!/usr/bin/env bash
# The Python binding's step of the test command (scripts/test.sh): builds
# the package with `pip install .` into a fresh virtual environment and runs
# its pytest suite (python/tests). The CMake build folder is kept in
# BUILD/cmake (default build/python/cmake), so a second run recompiles only
# what changed; the virtual environment (BUILD/venv) is new every run.
# Usage: scripts/test-python.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/python}
venv=$build/venv

scripts/deps.sh --python-venv "$venv"
# No build isolation: the build requirements are in the venv already (no
# second download); warnings are errors, as in every build of the tests.
"$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
  --config-settings=build-dir="$build/cmake" \
  --config-settings=cmake.define.PMINDEX_WERROR=ON .
# From outside the source tree, so that `import pmindex` is the installed
# package, not python/pmindex.
(cd "$build" && "$OLDPWD/$venv/bin/python" -m pytest -q -p no:cacheprovider "$OLDPWD/python/tests")
