#!/usr/bin/env bash
# Builds DICL FAST_FAIR's single-threaded tree (public repository
# DICL/FAST_FAIR, single/src/btree.h) outside the pmindex tree, with
# pmindex's driver, for scripts/peers/compare.py.
#
#   scripts/peers/fastfair.sh CHECKOUT [BUILD_DIR]
#
# BUILD_DIR defaults to ${PMINDEX_PEERS_BUILD:-/tmp/pmindex-peers}/fastfair.
# Produces there:
#   fastfair        their single/src/btree.h with scripts/peers/drivers/
#                   fastfair_driver.cc (their test.cpp reads text keys and
#                   times inserts and searches of the same keys only), at
#                   their Makefile's flags (-O3 -std=c++11, -lrt -lm), and
#                   one edit, on a copy (BUILD_DIR/src/btree.h; the checkout
#                   is untouched):
#                     clflush -> clwb: their persist helper clflush() issues
#                     "clflush" per line between two mfences; the clwb
#                     variant (the instruction PM code uses today, and the
#                     one pmindex and the other originals use here) replaces
#                     that one instruction (sed on 'asm volatile("clflush %0"').
#                     Their mfences and per-line rdtsc (for their emulated
#                     write latency, 0 here) stay.
#                   PAGESIZE: their node size, 512 bytes as shipped;
#                   PMINDEX_PEERS_FASTFAIR_PAGESIZE=N builds it with N (paper
#                   002's 4 KiB nodes: 4096; give such a build its own
#                   BUILD_DIR).
#   fastfair-count  the same plus their own line counter: the line
#                   "//++clflush_cnt;" in clflush() uncommented (prints
#                   "lines_flushed N" per phase). Only for counting; not timed.
# The tree's nodes are `new page` in DRAM (their single/ variant maps no PM
# file); see docs/benchmarking.md.
set -euo pipefail
. "$(dirname "$0")/common.sh"
peers_setup fastfair "${1:-}" "${2:-}" single/src/btree.h

mkdir -p "$build/src" "$build/src-count"
cp "$checkout/single/src/btree.h" "$build/src/btree.h"
sed_checked "$build/src/btree.h" 's/asm volatile("clflush %0"/asm volatile("clwb %0"/' 'asm volatile("clwb %0"'
page=${PMINDEX_PEERS_FASTFAIR_PAGESIZE:-512}
if [ "$page" != 512 ]; then
  sed_checked "$build/src/btree.h" "s/^#define PAGESIZE 512\$/#define PAGESIZE $page/" "^#define PAGESIZE $page\$"
fi
cp "$build/src/btree.h" "$build/src-count/btree.h"
sed_checked "$build/src-count/btree.h" 's|//++clflush_cnt;|++clflush_cnt;|' '^ *++clflush_cnt;'

flags=(-O3 -std=c++11 -w)
run_logged "$CXX" -o "$build/fastfair" "${flags[@]}" -include "$build/src/btree.h" -I"$peers_dir/drivers" \
  "$peers_dir/drivers/fastfair_driver.cc" -lrt -lm
run_logged "$CXX" -o "$build/fastfair-count" "${flags[@]}" -include "$build/src-count/btree.h" \
  -I"$peers_dir/drivers" "$peers_dir/drivers/fastfair_driver.cc" -lrt -lm
echo "fastfair: built $build/fastfair and $build/fastfair-count (log: $log)"
