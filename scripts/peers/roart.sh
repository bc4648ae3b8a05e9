#!/usr/bin/env bash
# Builds ROART (public repository madsys-dev/ROART: ART/ the tree,
# nvm_mgr/ its DCMM allocator) outside the pmindex tree, with pmindex's
# driver, for scripts/peers/compare.py.
#
#   scripts/peers/roart.sh CHECKOUT [BUILD_DIR]
#
# BUILD_DIR defaults to ${PMINDEX_PEERS_BUILD:-/tmp/pmindex-peers}/roart.
# Produces there:
#   roart   their ART/*.cpp and nvm_mgr/*.cpp with
#           scripts/peers/drivers/roart_driver.cc, at the definitions of
#           their CMakeLists.txt (CLWB, VARIABLE_LENGTH, USE_PMDK, ACMA,
#           FF_GC, RECLAIM_MEMORY, KEY_INLINE, INSTANT_RESTART, LEAF_ARRAY,
#           FIND_FIRST, TRANSACTIONAL) and the flags its Release build ends
#           with (-O3 -DNDEBUG -march=native -mavx -mavx2; their CMake puts
#           -O0 -g first, which -O3 overrides), linked with pthread, atomic,
#           pmemobj, tbb and numa. Local differences, none in their files:
#             - their CMake is not used: it also builds their benchmark,
#               fast_fair and skiplist comparisons and tests (gtest, boost),
#               which the driver does not need; the two folders are
#               compiled directly.
#             - benchmark/ (headers the tree includes) is copied to
#               BUILD_DIR/src/benchmark, and the copy of config.h has its
#               `inline const char *nvm_dir = "/mnt/pmem0/jzc/";` becomes
#               `extern const char *nvm_dir;`, defined by the driver (its
#               `pool PREFIX` command), so the PM file goes where
#               compare.py says (--pm-dir).
#             - -std=c++17 (their config.h's inline variable needs it;
#               their CMake says c++14, where GCC accepts it with a warning).
#             - -funsigned-char: Leaf::getFingerPrint (ART/N.cpp) sums the
#               key's bytes as char, Key::getFingerPrint (ART/Key.h) as
#               uint8_t, so on x86 (signed char) a key with a byte of 0x80
#               or more gets two different fingerprints and is never found
#               again (with random 8-byte keys nearly every key: 2353 of
#               100000 lookups succeeded). Unsigned char makes the two
#               sums agree (and their std::map<char, ...> of a leaf array
#               split order bytes as the tree does); no file is edited.
#   roart-count, libpmemcount.so   for the untimed counting run (below).
# Needs libpmemobj-dev, libtbb-dev and libnuma-dev (scripts/peers/deps.sh).
set -euo pipefail
. "$(dirname "$0")/common.sh"
peers_setup roart "${1:-}" "${2:-}" ART/LeafArray.cpp

rm -rf "$build/src"
mkdir -p "$build/src"
cp -r "$checkout/benchmark" "$build/src/benchmark"
sed_checked "$build/src/benchmark/config.h" 's|^inline const char \*nvm_dir = .*;|extern const char *nvm_dir;|' \
  '^extern const char \*nvm_dir;'

defs=(-DCLWB -DVARIABLE_LENGTH -DUSE_PMDK -DACMA -DFF_GC -DRECLAIM_MEMORY -DKEY_INLINE
      -DINSTANT_RESTART -DLEAF_ARRAY -DFIND_FIRST -DTRANSACTIONAL)
flags=(-std=c++17 -O3 -DNDEBUG -march=native -mavx -mavx2 -funsigned-char -w -pthread)
srcs=("$checkout"/ART/*.cpp "$checkout"/nvm_mgr/*.cpp)
run_logged "$CXX" -o "$build/roart" "${flags[@]}" "${defs[@]}" -I"$checkout/ART" \
  -I"$checkout/nvm_mgr" -I"$build/src/benchmark" -I"$peers_dir/drivers" \
  "$peers_dir/drivers/roart_driver.cc" "${srcs[@]}" -latomic -lpmemobj -ltbb -lnuma

# Counting: roart-count is the same from a copy of nvm_mgr/ (BUILD_DIR/count-src;
# the checkout is untouched) whose util.h counts instead of writing back: its
# asm_clwb becomes ++pmindex_peer_lines (every write-back of ART/ and nvm_mgr/
# goes through it, flush_data included) and asm_mfence/asm_sfence also add
# ++pmindex_peer_fences. libpmemcount.so (shim/pmem_count.c, ours) counts what
# libpmemobj writes back for its allocator and transactions; compare.py runs
# roart-count once with it preloaded, untimed, and the driver prints the sum.
rm -rf "$build/count-src"
mkdir -p "$build/count-src"
cp -r "$checkout/nvm_mgr" "$build/count-src/"
f="$build/count-src/nvm_mgr/util.h"
sed_checked "$f" 's/asm volatile(".byte 0x66; xsaveopt %0" : "+m"(\*(volatile char \*)addr));/++pmindex_peer_lines;/' \
  '^ *++pmindex_peer_lines;'
sed_checked "$f" 's/__asm__ __volatile__("\([ms]fence\)");/++pmindex_peer_fences; __asm__ __volatile__("\1");/' \
  '++pmindex_peer_fences; __asm__ __volatile__("sfence");'
sed_checked "$f" '/^#define UTIL_H/a extern unsigned long long pmindex_peer_lines, pmindex_peer_fences;' \
  '^extern unsigned long long pmindex_peer_lines'
if grep -q "xsaveopt" "$f"; then die "a write-back is left uncounted in $f (has the original changed?)"; fi
run_logged "$CXX" -o "$build/roart-count" "${flags[@]}" "${defs[@]}" -DPMINDEX_PEER_COUNT \
  -I"$checkout/ART" -I"$build/count-src/nvm_mgr" -I"$build/src/benchmark" -I"$peers_dir/drivers" \
  "$peers_dir/drivers/roart_driver.cc" "$checkout"/ART/*.cpp "$build"/count-src/nvm_mgr/*.cpp \
  -latomic -lpmemobj -ltbb -lnuma
run_logged "${CC:-gcc}" -O2 -shared -fPIC -o "$build/libpmemcount.so" "$peers_dir/shim/pmem_count.c" -ldl
echo "roart: built $build/roart, $build/roart-count and $build/libpmemcount.so (log: $log)"
