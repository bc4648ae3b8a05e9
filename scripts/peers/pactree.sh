#!/usr/bin/env bash
# Builds cosmoss-jigu/pactree (PACTree, SOSP 2021) outside the pmindex
# tree, with pmindex's driver, for scripts/peers/compare.py.
#
#   scripts/peers/pactree.sh CHECKOUT [BUILD_DIR]
#
# BUILD_DIR defaults to ${PMINDEX_PEERS_BUILD:-/tmp/pmindex-peers}/pactree.
# Produces there:
#   pactree   their src/*.cpp (but main.cpp) and lib/PDL-ART/*.cpp with
#             scripts/peers/drivers/pactree_driver.cc, at the flags of their
#             CMakeLists.txt (-O3 -march=native -mavx512bw -pthread, C++14;
#             -DNO_CLWB only where /proc/cpuinfo lacks clwb, as their CMake
#             decides), linked with libpmemobj, libpmem, libnuma and libtbb. Local
#             differences, all in a copy (BUILD_DIR/src-copy; the checkout
#             is untouched):
#               - include/numa-config.h is generated for this machine by
#                 their own tools/cpu-topology.py (their
#                 tools/get-numa-config.sh does the same);
#               - the six pool paths of src/pactree.cpp's initPT
#                 ("/mnt/pmem0/dl" ... "/mnt/pmem1/log") become calls of
#                 the driver's pmindex_peer_path("0dl") ..., so that each
#                 run's pools go into the directory the driver is given;
#               - their CMake is not used: the sources are compiled into
#                 the two static archives their CMake makes (pdlart,
#                 pactree) by plain compiler calls, as for the other
#                 originals.
# Needs libpmemobj-dev, libpmem-dev, libnuma-dev and libtbb-dev (scripts/peers/deps.sh).
# At run time libpmemobj must treat /dev/shm as PM (PMEM_IS_PMEM_FORCE=1;
# compare.py sets it).
#   pactree-count, libpmemcount.so   for the untimed counting run: the same
#             from a second copy (BUILD_DIR/count-src) whose include/arch.h
#             counts instead of writing back: clwb() (every write-back of
#             src/ and lib/PDL-ART/ goes through it) becomes
#             ++pmindex_peer_lines, and smp_mb()/smp_wmb() (their persist
#             barriers, and a few orderings of their version locks) also add
#             ++pmindex_peer_fences; libpmemcount.so (shim/pmem_count.c,
#             ours) counts what libpmemobj writes back, and the driver
#             prints the sum. Their clwb() writes back its own argument's
#             stack slot ("+m"(p), not *p), so the timed build does not
#             write back the nodes it means to: counted here as the line it
#             meant (docs/benchmarking.md).
set -euo pipefail
. "$(dirname "$0")/common.sh"
peers_setup pactree "${1:-}" "${2:-}" src/pactreeImpl.h

copy="$build/src-copy"
rm -rf "$copy"
mkdir -p "$copy"
cp -r "$checkout/include" "$checkout/src" "$checkout/lib" "$checkout/tools" "$copy/"
run_logged sh -c "python3 '$copy/tools/cpu-topology.py' > '$copy/include/numa-config.h'"
f="$copy/src/pactree.cpp"
sed_checked "$f" 's|"/mnt/pmem\([01]\)/\([a-z]*\)"|pmindex_peer_path("\1\2")|' 'pmindex_peer_path("0dl")'
sed_checked "$f" '/^#include "pactreeImpl.h"/a const char* pmindex_peer_path(const char* name);' \
  '^const char\* pmindex_peer_path'
if grep -q "/mnt/pmem" "$f"; then die "a /mnt/pmem path is left in $f (has the original changed?)"; fi

flags=(-O3 -march=native -mavx512bw -std=c++14 -pthread -w)
grep -q clwb /proc/cpuinfo || flags+=(-DNO_CLWB)
# Two static archives, as their CMake builds them (lib/PDL-ART: pdlart,
# src: pactree): lib/PDL-ART/Tree.cpp includes N.cpp and Epoche.cpp, whose
# inline definitions only Tree.cpp's object provides, so N.cpp's and
# Epoche.cpp's own objects must stay unlinked unless needed, as an archive
# leaves them.
# link_driver SRC_COPY NAME [FLAGS...]: BUILD_DIR/NAME from the sources of
# SRC_COPY, through its own two archives under BUILD_DIR/obj-NAME.
link_driver() {
  local src=$1 name=$2
  shift 2
  local obj="$build/obj-$name"
  rm -rf "$obj"
  mkdir -p "$obj/pdlart" "$obj/pactree"
  for s in "$src"/lib/PDL-ART/*.cpp; do
    run_logged "$CXX" -c -o "$obj/pdlart/$(basename "$s" .cpp).o" "${flags[@]}" "$@" -I"$src/include" \
      -I"$src/lib/PDL-ART" "$s"
  done
  for s in "$src"/src/*.cpp; do
    [ "$(basename "$s")" = main.cpp ] && continue
    run_logged "$CXX" -c -o "$obj/pactree/$(basename "$s" .cpp).o" "${flags[@]}" "$@" -I"$src/include" \
      -I"$src/src" -I"$src/lib/PDL-ART" "$s"
  done
  run_logged ar rcs "$obj/libpdlart.a" "$obj"/pdlart/*.o
  run_logged ar rcs "$obj/libpactree.a" "$obj"/pactree/*.o
  run_logged "$CXX" -o "$build/$name" "${flags[@]}" "$@" -I"$src/include" -I"$src/src" \
    -I"$src/lib/PDL-ART" -I"$peers_dir/drivers" "$peers_dir/drivers/pactree_driver.cc" \
    "$obj/libpactree.a" "$obj/libpdlart.a" -lpmemobj -lpmem -lnuma -ltbb
}
link_driver "$copy" pactree

count="$build/count-src"
rm -rf "$count"
cp -r "$copy" "$count"
f="$count/include/arch.h"
sed_checked "$f" 's/asm volatile(".byte 0x66; xsaveopt %0" : "+m" (p));/++pmindex_peer_lines; (void)p;/' \
  '^ *++pmindex_peer_lines; (void)p;$'
sed_checked "$f" 's/asm volatile("clflush (%0)" ::"r"(p));/++pmindex_peer_lines; (void)p;/' \
  '^ *++pmindex_peer_lines; (void)p;$'
sed_checked "$f" 's/__asm__ __volatile__("\([ms]fence\)" ::: "memory");/++pmindex_peer_fences; __asm__ __volatile__("\1" ::: "memory");/' \
  '++pmindex_peer_fences; __asm__ __volatile__("sfence"'
sed_checked "$f" '/^#define _RLU_ARCH_H/a extern unsigned long long pmindex_peer_lines, pmindex_peer_fences;' \
  '^extern unsigned long long pmindex_peer_lines'
if grep -q "xsaveopt\|clflush (" "$f"; then die "a write-back is left uncounted in $f (has the original changed?)"; fi
link_driver "$count" pactree-count -DPMINDEX_PEER_COUNT
run_logged "${CC:-gcc}" -O2 -shared -fPIC -o "$build/libpmemcount.so" "$peers_dir/shim/pmem_count.c" -ldl
echo "pactree: built $build/pactree, $build/pactree-count and $build/libpmemcount.so (log: $log)"
