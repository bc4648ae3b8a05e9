#!/usr/bin/env bash
# The install test (ctest: install_package). Installs a build into a fresh
# prefix, then builds the first ```c++ block after "## Using the library" in
# README.md, exactly as written, against it twice:
#   1. CMake:      find_package(pmindex CONFIG) (tests/install/CMakeLists.txt);
#   2. pkg-config: $CXX -std=c++20 example.cc $(pkg-config --cflags --libs pmindex);
# and runs each with a fresh pool path: it must exit 0 and print "42 -> 4200".
#
#   tests/install/run.sh CMAKE BUILD_DIR CXX GENERATOR VERSION
# e.g. tests/install/run.sh cmake build/release c++ Ninja 0.1
set -euo pipefail
[ $# -eq 5 ] || { echo "usage: $0 CMAKE BUILD_DIR CXX GENERATOR VERSION" >&2; exit 2; }
cmake=$1 build=$2 cxx=$3 generator=$4 version=$5
here=$(cd "$(dirname "$0")" && pwd)
readme="$here/../../README.md"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pmindex-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }

# The example, byte for byte.
awk '/^## Using the library[[:space:]]*$/ { s = 1; next }
     s == 1 && /^## / { exit }
     s == 1 && /^```c\+\+[[:space:]]*$/ { s = 2; next }
     s == 2 && /^```[[:space:]]*$/ { exit }
     s == 2 { print }' "$readme" > "$tmp/example.cc"
grep -q 'int main' "$tmp/example.cc" ||
  fail "no c++ block with main() after \"## Using the library\" in README.md"

echo "== cmake --install $build --prefix $tmp/prefix"
"$cmake" --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" ||
  { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
# Only the user API is installed: include/pmindex/*.h, version.h included.
for h in db.h status.h types.h version.h; do
  [ -f "$tmp/prefix/include/pmindex/$h" ] || fail "include/pmindex/$h not installed"
done
stray=$(cd "$tmp/prefix/include" && find . -type f ! -path './pmindex/*.h')
[ -z "$stray" ] || fail "installed headers outside include/pmindex/*.h: $stray"
pc=$(find "$tmp/prefix" -name pmindex.pc)
[ -n "$pc" ] || fail "pmindex.pc not installed"

run() {  # name, binary
  local out
  out=$("$2" "$tmp/$1.pool" 2>&1) || { printf '%s\n' "$out" >&2; fail "$1: the example failed"; }
  printf '%s\n' "$out"
  grep -qF '42 -> 4200' <<< "$out" || fail "$1: no \"42 -> 4200\" in the output"
}

echo "== CMake route: find_package(pmindex $version EXACT CONFIG REQUIRED)"
"$cmake" -S "$here" -B "$tmp/cmake-build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DPMINDEX_EXAMPLE_SOURCE="$tmp/example.cc" -DPMINDEX_EXPECTED_VERSION="$version" \
  > "$tmp/cmake-configure.log" ||
  { cat "$tmp/cmake-configure.log" >&2; fail "CMake route: configure failed"; }
"$cmake" --build "$tmp/cmake-build" || fail "CMake route: build failed"
run cmake "$tmp/cmake-build/example"

echo "== pkg-config route: $(basename "$cxx") -std=c++20 example.cc \$(pkg-config --cflags --libs pmindex)"
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[ "$(pkg-config --modversion pmindex)" = "$version" ] || fail "pkg-config: version is not $version"
flags=$(pkg-config --cflags --libs pmindex) || fail "pkg-config --cflags --libs pmindex failed"
echo "pkg-config: $flags"
# shellcheck disable=SC2086  # the flags are words
"$cxx" -std=c++20 -O2 "$tmp/example.cc" -o "$tmp/example-pc" $flags || fail "pkg-config route: build failed"
run pkg-config "$tmp/example-pc"

echo "== install test passed"
