// Software prefetch of cache lines, as an instruction the compiler always
// emits. GCC 12 drops __builtin_prefetch from code it inlined through a
// chain of always_inline functions (seen on the lbtree lookup path, issue
// 14), so a prefetch the design depends on is written as inline asm. It
// reads nothing and orders nothing: loads and stores move freely around it.
#pragma once

#include <cstddef>

namespace pmindex {

inline void PrefetchLine(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Prefetch for writing: the line is fetched in a state that lets a store
// complete without another request.
inline void PrefetchLineForWrite(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

// One prefetch per 64-byte line of [p, p + bytes), p's line first.
inline void PrefetchLines(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += 64) PrefetchLine(c + off);
}

inline void PrefetchLinesForWrite(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += 64) PrefetchLineForWrite(c + off);
}

}  // namespace pmindex
