// Shared by pmindex's drivers for originals that ship no driver reading
// key files (scripts/peers/drivers/*_driver.cc). Written for pmindex; no
// code of the originals. The command language follows the LB+-Tree
// authors' driver so scripts/peers/compare.py parses every original alike:
//
//   DRIVER [pool FILE MB] load N KEYFILE  lookup M KEYFILE  insert M KEYFILE  del M KEYFILE ...
//
// Key files: raw little-endian uint64 (the first N keys are read, before
// the clock starts). Every phase prints
//   -- <phase> <n> <file>
//   elapsed time:<us> us        (the LB+-Tree driver's line)
//   elapsed ns:<ns>
//   cpu ns:<ns>                 (CPU time of the whole process over the phase,
//                                background threads included: on a shared
//                                CPU the figure to compare with pmbench's
//                                ops/cpu-s)
//   ok <count of successful operations> of <n>
//   lines_flushed <n> [fences <n>]   (counting builds / runs only)
// Each phase is timed alone (clock_gettime(CLOCK_MONOTONIC) around the
// loop of calls), single-threaded, with no cache clearing and no warm-up.
#pragma once

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include <vector>

// A counting build's own totals: a driver compiled with -DPMINDEX_PEER_COUNT
// defines them, and the build script's copy of the original's flush and
// fence helpers adds to them. Weak, so drivers without a counting build
// link without them (their address is then null).
extern unsigned long long pmindex_peer_lines __attribute__((weak));
extern unsigned long long pmindex_peer_fences __attribute__((weak));

namespace peers {

[[noreturn]] inline void Die(const char* what, const char* arg) {
  fprintf(stderr, "error: %s %s\n", what, arg);
  exit(2);
}

inline std::vector<uint64_t> ReadKeys(const char* file, long long n) {
  struct stat st;
  if (stat(file, &st) != 0) Die("cannot stat key file", file);
  if (st.st_size % 8 != 0) Die("key file size is not a multiple of 8:", file);
  if (n < 0 || st.st_size / 8 < n) Die("key file too short:", file);
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  FILE* f = fopen(file, "rb");
  if (f == nullptr) Die("cannot open key file", file);
  if (n > 0 && fread(keys.data(), 8, static_cast<size_t>(n), f) != static_cast<size_t>(n))
    Die("short read of key file", file);
  fclose(f);
  return keys;
}

inline long long NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline long long CpuNs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline void Report(const char* phase, long long n, const char* file, long long ns, long long ok,
                   long long cpu_ns = -1) {
  printf("-- %s %lld %s\n", phase, n, file);
  printf("elapsed time:%lld us\n", ns / 1000);
  printf("elapsed ns:%lld\n", ns);
  if (cpu_ns >= 0) printf("cpu ns:%lld\n", cpu_ns);
  printf("ok %lld of %lld\n", ok, n);
  fflush(stdout);
}

// Totals of shim/pmem_count.c when it is LD_PRELOADed (the counting run),
// else false.
inline bool PmemCounts(unsigned long long* lines, unsigned long long* fences) {
  using Fn = void (*)(unsigned long long*, unsigned long long*);
  static Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "pmindex_peer_pmem_counts"));
  if (fn == nullptr) return false;
  fn(lines, fences);
  return true;
}

// Lines and fences counted so far by whatever counts in this run: the
// counting build's own counters and the libpmem shim when it is
// LD_PRELOADed, summed (an original may flush its nodes itself and let
// libpmemobj flush its allocator's and transactions' metadata). False when
// nothing counts.
inline bool AllCounts(unsigned long long* lines, unsigned long long* fences) {
  bool any = PmemCounts(lines, fences);
  if (!any) *lines = *fences = 0;
  if (&pmindex_peer_lines != nullptr && &pmindex_peer_fences != nullptr) {
    *lines += __atomic_load_n(&pmindex_peer_lines, __ATOMIC_RELAXED);
    *fences += __atomic_load_n(&pmindex_peer_fences, __ATOMIC_RELAXED);
    any = true;
  }
  return any;
}

}  // namespace peers
