/* pmem_count.c: an LD_PRELOAD library that counts the cache lines libpmem
 * is asked to flush and the fences (drains) it is asked for, then calls
 * the real libpmem. For originals that persist through PMDK (sfu-dis
 * FPTree: pmemobj_persist and libpmemobj's allocator and logs all end in
 * libpmem's exported functions), so that their lines and fences per
 * operation can be reported beside pmindex's counters. Counting run only
 * (the counters are two relaxed atomic adds, but the timed runs never load
 * this). Written for pmindex; no PMDK code.
 *
 * Counted, per call:
 *   pmem_flush(a, n), pmem_deep_flush(a, n)   lines of [a, a+n)
 *   pmem_drain()                               1 fence
 *   pmem_persist(a, n)                         lines of [a, a+n) + 1 fence
 *   pmem_memcpy/memmove/memset(d, ..., n, flags)
 *                                              lines of [d, d+n) unless
 *                                              PMEM_F_MEM_NOFLUSH; 1 fence
 *                                              unless PMEM_F_MEM_NODRAIN
 *   pmem_memcpy_persist/memmove_persist/memset_persist   lines + 1 fence
 *   pmem_memcpy_nodrain/memmove_nodrain/memset_nodrain   lines
 * (Non-temporal stores that PMDK uses for large copies are counted as
 * flushed lines: each is a line written back to PM.)
 * A driver reads the totals with dlsym(RTLD_DEFAULT, "pmindex_peer_pmem_counts"). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#define F_NODRAIN (1u << 0)  /* PMEM_F_MEM_NODRAIN */
#define F_NOFLUSH (1u << 5)  /* PMEM_F_MEM_NOFLUSH */

static unsigned long long lines_total, fences_total;
/* Calls made by libpmem itself inside a counted call (pmem_persist may call
 * the exported pmem_flush and pmem_drain) are not counted again. */
static __thread int depth;

void pmindex_peer_pmem_counts(unsigned long long* lines, unsigned long long* fences) {
  *lines = __atomic_load_n(&lines_total, __ATOMIC_RELAXED);
  *fences = __atomic_load_n(&fences_total, __ATOMIC_RELAXED);
}

static void add_lines(const void* addr, size_t len) {
  if (len == 0 || depth > 1) return;
  uintptr_t a = (uintptr_t)addr & ~(uintptr_t)63;
  uintptr_t e = ((uintptr_t)addr + len + 63) & ~(uintptr_t)63;
  __atomic_add_fetch(&lines_total, (e - a) / 64, __ATOMIC_RELAXED);
}
static void add_fence(void) {
  if (depth <= 1) __atomic_add_fetch(&fences_total, 1, __ATOMIC_RELAXED);
}

#define REAL(name)                     \
  static __typeof__(name)* real = 0; \
  if (!real) real = (__typeof__(name)*)dlsym(RTLD_NEXT, #name)

void pmem_flush(const void* a, size_t n) {
  REAL(pmem_flush);
  ++depth;
  add_lines(a, n);
  real(a, n);
  --depth;
}
void pmem_deep_flush(const void* a, size_t n) {
  REAL(pmem_deep_flush);
  ++depth;
  add_lines(a, n);
  real(a, n);
  --depth;
}
void pmem_drain(void) {
  REAL(pmem_drain);
  ++depth;
  add_fence();
  real();
  --depth;
}
void pmem_persist(const void* a, size_t n) {
  REAL(pmem_persist);
  ++depth;
  add_lines(a, n);
  add_fence();
  real(a, n);
  --depth;
}

static void count_flags(const void* d, size_t n, unsigned flags) {
  if (!(flags & F_NOFLUSH)) add_lines(d, n);
  if (!(flags & F_NODRAIN)) add_fence();
}
void* pmem_memcpy(void* d, const void* s, size_t n, unsigned flags) {
  REAL(pmem_memcpy);
  ++depth;
  count_flags(d, n, flags);
  void* r = real(d, s, n, flags);
  --depth;
  return r;
}
void* pmem_memmove(void* d, const void* s, size_t n, unsigned flags) {
  REAL(pmem_memmove);
  ++depth;
  count_flags(d, n, flags);
  void* r = real(d, s, n, flags);
  --depth;
  return r;
}
void* pmem_memset(void* d, int c, size_t n, unsigned flags) {
  REAL(pmem_memset);
  ++depth;
  count_flags(d, n, flags);
  void* r = real(d, c, n, flags);
  --depth;
  return r;
}
void* pmem_memcpy_persist(void* d, const void* s, size_t n) {
  REAL(pmem_memcpy_persist);
  ++depth;
  count_flags(d, n, 0);
  void* r = real(d, s, n);
  --depth;
  return r;
}
void* pmem_memmove_persist(void* d, const void* s, size_t n) {
  REAL(pmem_memmove_persist);
  ++depth;
  count_flags(d, n, 0);
  void* r = real(d, s, n);
  --depth;
  return r;
}
void* pmem_memset_persist(void* d, int c, size_t n) {
  REAL(pmem_memset_persist);
  ++depth;
  count_flags(d, n, 0);
  void* r = real(d, c, n);
  --depth;
  return r;
}
void* pmem_memcpy_nodrain(void* d, const void* s, size_t n) {
  REAL(pmem_memcpy_nodrain);
  ++depth;
  count_flags(d, n, F_NODRAIN);
  void* r = real(d, s, n);
  --depth;
  return r;
}
void* pmem_memmove_nodrain(void* d, const void* s, size_t n) {
  REAL(pmem_memmove_nodrain);
  ++depth;
  count_flags(d, n, F_NODRAIN);
  void* r = real(d, s, n);
  --depth;
  return r;
}
void* pmem_memset_nodrain(void* d, int c, size_t n) {
  REAL(pmem_memset_nodrain);
  ++depth;
  count_flags(d, n, F_NODRAIN);
  void* r = real(d, c, n);
  --depth;
  return r;
}
