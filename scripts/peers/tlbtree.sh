#!/usr/bin/env bash
# Builds ypluo/TLBtree's single-threaded variant (public repository
# ypluo/TLBtree, Single/) outside the pmindex tree, with pmindex's driver,
# for scripts/peers/compare.py.
#
#   scripts/peers/tlbtree.sh CHECKOUT [BUILD_DIR]
#
# BUILD_DIR defaults to ${PMINDEX_PEERS_BUILD:-/tmp/pmindex-peers}/tlbtree.
# Produces there:
#   tlbtree        their Single/src/tlbtree_impl.cc and wotree256.cc and
#                  their wrapper Single/include/tlbtree.h (TLBtreeImpl<2,2>
#                  with its background rebuild thread), unmodified, with
#                  scripts/peers/drivers/tlbtree_driver.cc (theirs generate
#                  keys; ours reads the key files), at the flags of their
#                  CMakeLists.txt (-O3 -mclwb, libpmemobj, -pthread) plus
#                  -DCLWB (their flush.h issues clflush unless CLWB is
#                  defined; clwb is what pmindex and the other originals
#                  use here). Local differences, none in their files:
#                    - their CMake is not used: Single/src/CMakeLists.txt is
#                      empty, so it builds no library to link; the two .cc
#                      files are compiled directly.
#                    - -include typeinfo: their common.h uses typeid without
#                      including <typeinfo>, which GCC 12 rejects.
#   tlbtree-count  the same from a copy of Single/ (BUILD_DIR/count-src; the
#                  checkout is untouched) whose flush.h counts instead of
#                  flushing: the _mm_clwb of flush() becomes a counter
#                  increment, and so does the sfence of mfence(). Prints
#                  "lines_flushed N fences N" per phase (their files have
#                  CRLF line ends; the edits keep them). Only for counting;
#                  not timed.
# Needs libpmemobj-dev (scripts/peers/deps.sh). At run time libpmemobj must
# treat /dev/shm as PM (PMEM_IS_PMEM_FORCE=1; compare.py sets it).
set -euo pipefail
. "$(dirname "$0")/common.sh"
peers_setup tlbtree "${1:-}" "${2:-}" Single/src/wotree256.h

flags=(-O3 -mclwb -DCLWB -include typeinfo -pthread -w)
srcs=(tlbtree_impl.cc wotree256.cc)
run_logged "$CXX" -o "$build/tlbtree" "${flags[@]}" -I"$checkout/Single/include" -I"$checkout/Single/src" \
  -I"$peers_dir/drivers" "$peers_dir/drivers/tlbtree_driver.cc" "${srcs[@]/#/$checkout/Single/src/}" -lpmemobj

rm -rf "$build/count-src"
mkdir -p "$build/count-src"
cp -r "$checkout/Single/include" "$checkout/Single/src" "$build/count-src/"
f="$build/count-src/src/flush.h"
sed_checked "$f" 's/^\([[:space:]]*\)_mm_clwb(ptr);/\1++pmindex_peer_lines;/' '++pmindex_peer_lines;'
sed_checked "$f" 's/asm volatile("sfence" ::: "memory");/asm volatile("" ::: "memory"); ++pmindex_peer_fences;/' \
  '++pmindex_peer_fences;'
sed_checked "$f" '/^#include "common.h"/a extern unsigned long long pmindex_peer_lines, pmindex_peer_fences;' \
  '^extern unsigned long long pmindex_peer_lines'
run_logged "$CXX" -o "$build/tlbtree-count" "${flags[@]}" -DPMINDEX_PEER_COUNT -I"$build/count-src/include" \
  -I"$build/count-src/src" -I"$peers_dir/drivers" "$peers_dir/drivers/tlbtree_driver.cc" \
  "${srcs[@]/#/$build/count-src/src/}" -lpmemobj
echo "tlbtree: built $build/tlbtree and $build/tlbtree-count (log: $log)"
