// A check that stays on in release builds: a broken invariant of the
// simulator itself stops the process with the failed condition.
#pragma once

#include <cstdio>
#include <cstdlib>

#define PMCRASH_CHECK(cond)                                                          \
  do {                                                                               \
    if (__builtin_expect(!(cond), 0)) {                                              \
      std::fprintf(stderr, "pmcrash: check failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                           \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)
