/* rtm_spinlock.h: Intel RTM (TSX) replaced by one global spinlock, for
 * originals that use _xbegin/_xend/_xabort for concurrency control (the
 * LB+-Tree authors' code) on a CPU without TSX, where _xbegin() never
 * returns _XBEGIN_STARTED and such code retries forever.
 *
 * pmindex's scripts/peers/ force-include this header (g++ -include) in
 * front of the original's sources; their files are not edited. It includes
 * <immintrin.h> first (so the real intrinsics and _XBEGIN_STARTED are
 * declared once and its include guard keeps them from coming back), then
 * redefines the three intrinsics as macros:
 *   _xbegin()   takes the lock, returns _XBEGIN_STARTED (the region "starts")
 *   _xend()     releases the lock (the region "commits")
 *   _xabort(c)  releases the lock and returns: with RTM an abort never
 *               returns (control reappears at _xbegin with a failure
 *               status); the code this is for always jumps back to its
 *               retry label right after _xabort, which then takes the lock
 *               again, so releasing here is all that is needed.
 * Single-threaded, the lock is never contended: each region costs one
 * atomic exchange and one release store (with RTM: xbegin + xend).
 * With -DPMINDEX_PEER_RTM_SINGLE (one thread only) the exchange moves to
 * _xend, where an RTM commit orders as a locked instruction does, and
 * _xbegin is a plain store (see pmindex_peer_xend).
 * Written for pmindex; contains no code of the originals. */
#ifndef PMINDEX_PEERS_RTM_SPINLOCK_H
#define PMINDEX_PEERS_RTM_SPINLOCK_H

#include <immintrin.h>

#ifndef _XBEGIN_STARTED
#define _XBEGIN_STARTED (~0u)
#endif

/* One lock for the whole program: an inline function's static local is
 * a single object across translation units (C++). */
inline volatile int* pmindex_peer_rtm_lock_word(void) {
  static volatile int word = 0;
  return &word;
}

static inline unsigned pmindex_peer_xbegin(void) {
  volatile int* w = pmindex_peer_rtm_lock_word();
#ifdef PMINDEX_PEER_RTM_SINGLE
  /* Single-threaded runs only (see pmindex_peer_xend). */
  *w = 1;
  return _XBEGIN_STARTED;
#endif
  for (;;) {
    if (__atomic_exchange_n(w, 1, __ATOMIC_ACQUIRE) == 0) return _XBEGIN_STARTED;
    while (__atomic_load_n(w, __ATOMIC_RELAXED) != 0) _mm_pause();
  }
}

static inline void pmindex_peer_xend(void) {
#ifdef PMINDEX_PEER_RTM_SINGLE
  /* PMINDEX_PEER_RTM_SINGLE: the region's begin is a plain store and its
   * commit a locked exchange. An x86 locked instruction waits for every
   * earlier store to leave the store queue, and a store ordered after an
   * sfence leaves it only once the write-backs before the sfence are
   * done; XBEGIN does not wait, while a committing XEND orders like a
   * locked instruction. Taking the lock with the exchange at _xbegin (the
   * default mode) makes the original's next operation wait for the
   * previous one's write-backs before its descent instead of after it:
   * 8% of its inserts and 23% of its deletes here (docs/benchmarking.md).
   * Correct only while one thread runs. */
  (void)__atomic_exchange_n(pmindex_peer_rtm_lock_word(), 0, __ATOMIC_RELEASE);
  return;
#endif
  __atomic_store_n(pmindex_peer_rtm_lock_word(), 0, __ATOMIC_RELEASE);
}

#define _xbegin() pmindex_peer_xbegin()
#define _xend() pmindex_peer_xend()
#define _xabort(code) pmindex_peer_xend()

#endif /* PMINDEX_PEERS_RTM_SPINLOCK_H */
