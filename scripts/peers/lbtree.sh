#!/usr/bin/env bash
# Builds the LB+-Tree authors' code (public repository schencoding/lbtree)
# outside the pmindex tree, for scripts/peers/compare.py.
#
#   scripts/peers/lbtree.sh CHECKOUT [BUILD_DIR]
#
# BUILD_DIR defaults to ${PMINDEX_PEERS_BUILD:-/tmp/pmindex-peers}/lbtree.
# Produces there:
#   lbtree        their driver (common/tree.cc) and tree, built as their
#                 Makefile does (g++ -O3 -std=c++11 -pthread -mrtm -msse4.1
#                 -mavx2, -lpmem), plus one local change, made without
#                 editing their files:
#                   -include shim/rtm_spinlock.h: their concurrency control
#                   is Intel RTM; on a CPU without TSX _xbegin() never
#                   starts a transaction and every operation retries
#                   forever. The shim turns _xbegin/_xend/_xabort into a
#                   global lock, here in its single-thread mode
#                   (-DPMINDEX_PEER_RTM_SINGLE: taken with a plain store at
#                   _xbegin, released with a locked exchange at _xend, the
#                   ordering of an RTM commit). compare.py runs one thread.
#                   -include shim/phase_cpu_timer.h: their per-phase timer
#                   macro (common/performance.h) with the same wall-clock
#                   line plus "cpu ns:" (the process's CPU time over the
#                   phase), so that runs on a shared CPU compare CPU time.
#   lbtree-spin   the same with the shim's default mode, a spinlock taken
#                 by an atomic exchange at _xbegin: correct with several
#                 threads, but every region then waits before its first
#                 load for the write-backs the previous operation fenced
#                 (8% of a fill-1.0 insert, 23% of a delete here;
#                 docs/benchmarking.md). The timed comparisons up to
#                 2026-11-26 used this mode.
#   lbtree-count  the same with their own NVMFLUSH_STAT mode (counts clwb
#                 and sfence instead of issuing them, printed after insert
#                 and del as "num_clwb=..., num_sfence=..."). Their
#                 common/nvm-common.h hard-codes "#define NVMFLUSH_REAL";
#                 the script copies common/ into BUILD_DIR/count-common and
#                 changes that one line there (the checkout is untouched).
#                 Only for counting: it does not flush, so it is never timed.
# Needs libpmem-dev (scripts/peers/deps.sh).
set -euo pipefail
. "$(dirname "$0")/common.sh"
peers_setup lbtree "${1:-}" "${2:-}" lbtree-src/lbtree.cc

flags=(-O3 -std=c++11 -pthread -mrtm -msse4.1 -mavx2 -w)
shim=(-include "$peers_dir/shim/rtm_spinlock.h" -include "$peers_dir/shim/phase_cpu_timer.h")
srcs=(tree.cc mempool.cc nvm-common.cc)

run_logged "$CXX" -o "$build/lbtree" "${flags[@]}" -DPMINDEX_PEER_RTM_SINGLE "${shim[@]}" -I"$checkout/common" \
  "$checkout/lbtree-src/lbtree.cc" "${srcs[@]/#/$checkout/common/}" -lpmem
run_logged "$CXX" -o "$build/lbtree-spin" "${flags[@]}" "${shim[@]}" -I"$checkout/common" \
  "$checkout/lbtree-src/lbtree.cc" "${srcs[@]/#/$checkout/common/}" -lpmem

rm -rf "$build/count-common"
cp -r "$checkout/common" "$build/count-common"
sed_checked "$build/count-common/nvm-common.h" 's/^#define NVMFLUSH_REAL[[:space:]]*$/#define NVMFLUSH_STAT/' \
  '^#define NVMFLUSH_STAT$'
run_logged "$CXX" -o "$build/lbtree-count" "${flags[@]}" "${shim[@]}" -I"$build/count-common" \
  "$checkout/lbtree-src/lbtree.cc" "${srcs[@]/#/$build/count-common/}" -lpmem

echo "lbtree: built $build/lbtree, $build/lbtree-spin and $build/lbtree-count (log: $log)"
