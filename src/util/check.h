// PMINDEX_CHECK: the one check for broken invariants of the program.
//
//   PMINDEX_CHECK(slot < kRootSlots, "root slot %u out of range", slot);
//
// If the condition is false, prints "pmindex: check failed at FILE:LINE:
// CONDITION: MESSAGE" to stderr and aborts, in every build type (it does
// not depend on NDEBUG). The message is a printf format with its arguments.
//
// The rule (docs/architecture.md section 2): bytes read from PM or a file
// are input and get a Status (Corruption), never a check; a check is for
// what the program itself guarantees (a lock held, a count in range, a
// REQUIRES that a caller in this code base violated). It stays on in
// release builds because continuing past a broken invariant could write
// garbage into a persistent pool.
//
// Depends on nothing but the C library, so every layer may use it.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace pmindex::check_detail {

[[noreturn]] [[gnu::cold]] [[gnu::noinline]] [[gnu::format(printf, 4, 5)]] inline void Fail(
    const char* file, int line, const char* cond, const char* fmt, ...) {
  std::fprintf(stderr, "pmindex: check failed at %s:%d: %s: ", file, line, cond);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace pmindex::check_detail

// cond is evaluated exactly once; the message arguments only on failure.
#define PMINDEX_CHECK(cond, ...)                                                       \
  do {                                                                                 \
    if (__builtin_expect(!(cond), 0)) {                                                \
      ::pmindex::check_detail::Fail(__FILE__, __LINE__, #cond, __VA_ARGS__);           \
    }                                                                                  \
  } while (0)
