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
# compare.py sets it). No counting build: PACTree flushes through its own
# inline clwb helpers in several headers.
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
mkdir -p "$build/obj/pdlart" "$build/obj/pactree"
for s in "$copy"/lib/PDL-ART/*.cpp; do
  run_logged "$CXX" -c -o "$build/obj/pdlart/$(basename "$s" .cpp).o" "${flags[@]}" -I"$copy/include" \
    -I"$copy/lib/PDL-ART" "$s"
done
for s in "$copy"/src/*.cpp; do
  [ "$(basename "$s")" = main.cpp ] && continue
  run_logged "$CXX" -c -o "$build/obj/pactree/$(basename "$s" .cpp).o" "${flags[@]}" -I"$copy/include" \
    -I"$copy/src" -I"$copy/lib/PDL-ART" "$s"
done
rm -f "$build/libpdlart.a" "$build/libpactree.a"
run_logged ar rcs "$build/libpdlart.a" "$build"/obj/pdlart/*.o
run_logged ar rcs "$build/libpactree.a" "$build"/obj/pactree/*.o
run_logged "$CXX" -o "$build/pactree" "${flags[@]}" -I"$copy/include" -I"$copy/src" \
  -I"$copy/lib/PDL-ART" -I"$peers_dir/drivers" "$peers_dir/drivers/pactree_driver.cc" \
  "$build/libpactree.a" "$build/libpdlart.a" -lpmemobj -lpmem -lnuma -ltbb
echo "pactree: built $build/pactree (log: $log)"
