#!/usr/bin/env bash
# The install test (ctest: install_package). Installs a build into a fresh
# prefix, then builds the first ```c++ block after "## Using the library" in
# README.md, exactly as written, against it twice:
#   1. CMake:      find_package(pmindex CONFIG) (tests/install/CMakeLists.txt);
#   2. pkg-config: $CXX -std=c++20 example.cc $(pkg-config --cflags --libs pmindex);
# and runs each with a fresh pool path: it must exit 0 and print "42 -> 4200"
# (the example creates and reopens an lbtree, so a link that dropped the
# index kinds fails). The pkg-config flags must be a plain -lpmindex.
# The first ```c++ block after "## Key-value store" (the KvStore example) is
# built and run the same two ways and must print "acct:bob = 80".
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

# The examples, byte for byte: the first c++ block after a README heading.
extract() {  # heading, output file
  awk -v h="## $1" '$0 == h { s = 1; next }
       s == 1 && /^## / { exit }
       s == 1 && /^```c\+\+[[:space:]]*$/ { s = 2; next }
       s == 2 && /^```[[:space:]]*$/ { exit }
       s == 2 { print }' "$readme" > "$2"
  grep -q 'int main' "$2" || fail "no c++ block with main() after \"## $1\" in README.md"
}
extract "Using the library" "$tmp/example.cc"
extract "Key-value store" "$tmp/kv_example.cc"

echo "== cmake --install $build --prefix $tmp/prefix"
"$cmake" --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" ||
  { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
# Only the user API is installed: include/pmindex/*.h, version.h included.
for h in db.h kv.h status.h types.h version.h; do
  [ -f "$tmp/prefix/include/pmindex/$h" ] || fail "include/pmindex/$h not installed"
done
stray=$(cd "$tmp/prefix/include" && find . -type f ! -path './pmindex/*.h')
[ -z "$stray" ] || fail "installed headers outside include/pmindex/*.h: $stray"
pc=$(find "$tmp/prefix" -name pmindex.pc)
[ -n "$pc" ] || fail "pmindex.pc not installed"

run() {  # name, binary[, expected line]
  local out want=${3:-42 -> 4200}
  out=$("$2" "$tmp/$1.pool" 2>&1) || { printf '%s\n' "$out" >&2; fail "$1: the example failed"; }
  printf '%s\n' "$out"
  grep -qF "$want" <<< "$out" || fail "$1: no \"$want\" in the output"
}

echo "== CMake route: find_package(pmindex $version EXACT CONFIG REQUIRED)"
cmake_route() {  # build dir, source
  "$cmake" -S "$here" -B "$1" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DPMINDEX_EXAMPLE_SOURCE="$2" -DPMINDEX_EXPECTED_VERSION="$version" \
    > "$1.configure.log" ||
    { cat "$1.configure.log" >&2; fail "CMake route: configure failed"; }
  "$cmake" --build "$1" || fail "CMake route: build failed"
}
cmake_route "$tmp/cmake-build" "$tmp/example.cc"
run cmake "$tmp/cmake-build/example"
cmake_route "$tmp/cmake-build-kv" "$tmp/kv_example.cc"
run cmake-kv "$tmp/cmake-build-kv/example" "acct:bob = 80"

echo "== pkg-config route: $(basename "$cxx") -std=c++20 example.cc \$(pkg-config --cflags --libs pmindex)"
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[ "$(pkg-config --modversion pmindex)" = "$version" ] || fail "pkg-config: version is not $version"
flags=$(pkg-config --cflags --libs pmindex) || fail "pkg-config --cflags --libs pmindex failed"
echo "pkg-config: $flags"
# A plain -lpmindex: no whole-archive flags; the example's lbtree must still
# be there (the library registers its kinds without them).
grep -qw -- "-lpmindex" <<< "$flags" || fail "pkg-config: no -lpmindex in \"$flags\""
if grep -q -- "whole-archive" <<< "$flags"; then fail "pkg-config: the link is not plain: $flags"; fi
# shellcheck disable=SC2086  # the flags are words
"$cxx" -std=c++20 -O2 "$tmp/example.cc" -o "$tmp/example-pc" $flags || fail "pkg-config route: build failed"
run pkg-config "$tmp/example-pc"
# shellcheck disable=SC2086
"$cxx" -std=c++20 -O2 "$tmp/kv_example.cc" -o "$tmp/kv-example-pc" $flags || fail "pkg-config route: kv build failed"
run pkg-config-kv "$tmp/kv-example-pc" "acct:bob = 80"

echo "== install test passed"
