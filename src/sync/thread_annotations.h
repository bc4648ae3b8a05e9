// Lock-requirement annotations checked by Clang's thread-safety analysis
// (-Wthread-safety; scripts/check-thread-safety.sh runs it over src/ and
// server/ in the test command). Under Clang each macro is the attribute of
// the same meaning; under any other compiler it is empty, so the annotations
// cost nothing and change no code.
//
// Vocabulary (a "capability" is a lock the analysis tracks):
//   PMINDEX_CAPABILITY(name)     on a lock type: its objects are capabilities
//   PMINDEX_SCOPED_CAPABILITY    on an RAII guard: holds what its constructor
//                                acquired until its destructor
//   PMINDEX_GUARDED_BY(mu)       on a member: read or written only with mu held
//   PMINDEX_PT_GUARDED_BY(mu)    on a pointer member: the pointee needs mu
//   PMINDEX_REQUIRES(mu...)      on a function: the caller holds mu exclusively
//   PMINDEX_REQUIRES_SHARED(mu)  ... holds mu at least shared
//   PMINDEX_EXCLUDES(mu...)      ... does not hold mu (the function takes it)
//   PMINDEX_ACQUIRE / _RELEASE / _ACQUIRE_SHARED / _RELEASE_SHARED
//                                the function takes / drops the lock (no
//                                argument: `this`, for a lock type's members)
//   PMINDEX_TRY_ACQUIRE(ok, mu)  takes mu iff it returns ok
//   PMINDEX_ASSERT_CAPABILITY(mu) checks at run time that mu is held
//   PMINDEX_RETURN_CAPABILITY(mu) the function returns (a reference to) mu
//   PMINDEX_NO_THREAD_SAFETY_ANALYSIS
//                                the body is not checked; every use carries a
//                                one-line reason (e.g. a lock handed through
//                                a callback, which the analysis cannot follow)
//
// The analysis is intraprocedural and knows only annotated locks. The
// project's annotated locks are in src/sync/mutex.h. The trees' optimistic
// version locks (src/sync/version_lock.h) are not capabilities: a reader
// holds nothing and validates afterwards, so there is nothing to check.
#pragma once

#if defined(__clang__)
#define PMINDEX_THREAD_ATTRIBUTE_(x) __attribute__((x))
#else
#define PMINDEX_THREAD_ATTRIBUTE_(x)
#endif

#define PMINDEX_CAPABILITY(name) PMINDEX_THREAD_ATTRIBUTE_(capability(name))
#define PMINDEX_SCOPED_CAPABILITY PMINDEX_THREAD_ATTRIBUTE_(scoped_lockable)
#define PMINDEX_GUARDED_BY(mu) PMINDEX_THREAD_ATTRIBUTE_(guarded_by(mu))
#define PMINDEX_PT_GUARDED_BY(mu) PMINDEX_THREAD_ATTRIBUTE_(pt_guarded_by(mu))
#define PMINDEX_REQUIRES(...) PMINDEX_THREAD_ATTRIBUTE_(requires_capability(__VA_ARGS__))
#define PMINDEX_REQUIRES_SHARED(...) \
  PMINDEX_THREAD_ATTRIBUTE_(requires_shared_capability(__VA_ARGS__))
#define PMINDEX_EXCLUDES(...) PMINDEX_THREAD_ATTRIBUTE_(locks_excluded(__VA_ARGS__))
#define PMINDEX_ACQUIRE(...) PMINDEX_THREAD_ATTRIBUTE_(acquire_capability(__VA_ARGS__))
#define PMINDEX_RELEASE(...) PMINDEX_THREAD_ATTRIBUTE_(release_capability(__VA_ARGS__))
#define PMINDEX_ACQUIRE_SHARED(...) \
  PMINDEX_THREAD_ATTRIBUTE_(acquire_shared_capability(__VA_ARGS__))
#define PMINDEX_RELEASE_SHARED(...) \
  PMINDEX_THREAD_ATTRIBUTE_(release_shared_capability(__VA_ARGS__))
#define PMINDEX_TRY_ACQUIRE(...) PMINDEX_THREAD_ATTRIBUTE_(try_acquire_capability(__VA_ARGS__))
#define PMINDEX_ASSERT_CAPABILITY(mu) PMINDEX_THREAD_ATTRIBUTE_(assert_capability(mu))
#define PMINDEX_RETURN_CAPABILITY(mu) PMINDEX_THREAD_ATTRIBUTE_(lock_returned(mu))
#define PMINDEX_NO_THREAD_SAFETY_ANALYSIS PMINDEX_THREAD_ATTRIBUTE_(no_thread_safety_analysis)
