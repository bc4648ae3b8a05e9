#!/usr/bin/env bash
# Builds the sfu-dis FPTree (public repository sfu-dis/FPTree) outside the
# pmindex tree, with pmindex's driver, for scripts/peers/compare.py.
#
#   scripts/peers/fptree.sh CHECKOUT [BUILD_DIR]
#
# BUILD_DIR defaults to ${PMINDEX_PEERS_BUILD:-/tmp/pmindex-peers}/fptree.
# Produces BUILD_DIR/fptree: their fptree.cpp, unmodified, compiled with
# the flags of their CMakeLists.txt's Release build (-O3 -DNDEBUG
# -std=c++17 -mavx512f -mavx512vl -mavx512bw -mavx512dq -mavx512cd -mrtm,
# -DPMEM for the libpmemobj backend, linked with -lpmemobj -lpmem
# -ljemalloc -ltbb -pthread), TEST_MODE off (64-slot leaves, 128-key
# inner nodes, as their README says for benchmarks), plus
# scripts/peers/drivers/fptree_driver.cc (pmindex's: FPTree ships only a
# PiBench wrapper, whose CMake downloads PiBench). Differences from their
# CMake, none in their files:
#   - -DBUILD_INSPECTOR=1: their fptree.cpp has an interactive main()
#     under "#if BUILD_INSPECTOR == 0"; this is their own switch for
#     linking another main (their inspector), used here for our driver.
#   - their CMake is not used (it FetchContent-downloads PiBench).
#   - no custom TBB: their README's optional step (a oneTBB built with a
#     higher RTM retry count) only matters with TSX; without TSX
#     tbb::speculative_spin_rw_mutex is a plain spin rw-lock (one global
#     lock, uncontended single-threaded).
# Also BUILD_DIR/libpmemcount.so (shim/pmem_count.c, ours), LD_PRELOADed
# in an untimed counting run for FPTree's lines and fences per operation.
# At run time libpmem must treat /dev/shm as PM so that pmemobj_persist is
# clwb+sfence and not msync: PMEM_IS_PMEM_FORCE=1 (compare.py sets it).
# Needs libpmemobj-dev, libtbb-dev, libjemalloc-dev, libboost-dev
# (scripts/peers/deps.sh).
set -euo pipefail
. "$(dirname "$0")/common.sh"
peers_setup fptree "${1:-}" "${2:-}" fptree.cpp

flags=(-O3 -DNDEBUG -std=c++17 -mavx512f -mavx512vl -mavx512bw -mavx512dq -mavx512cd -mrtm -pthread
       -DPMEM -DBUILD_INSPECTOR=1 -w)
run_logged "$CXX" -o "$build/fptree" "${flags[@]}" -I"$checkout" -I"$peers_dir/drivers" \
  "$checkout/fptree.cpp" "$peers_dir/drivers/fptree_driver.cc" -lpmemobj -lpmem -ljemalloc -ltbb -pthread -ldl
# Counting: an LD_PRELOAD library (ours) that counts the lines and fences
# libpmem is asked for (FPTree persists only through PMDK); compare.py runs
# the same binary once with it, untimed.
run_logged "${CC:-gcc}" -O2 -shared -fPIC -o "$build/libpmemcount.so" "$peers_dir/shim/pmem_count.c" -ldl
echo "fptree: built $build/fptree and $build/libpmemcount.so (log: $log)"
