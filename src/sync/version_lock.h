// VersionLock: an optimistic version lock for optimistic lock coupling (OLC).
//
// One 64-bit word:
//   bit 0      obsolete  the node was unlinked; readers must restart
//   bit 1      locked    a writer holds the node
//   bits 2..63 version   incremented by every write-unlock
// Locking adds 2 (sets the lock bit); unlocking adds 2 again (clears it and
// carries into the version), so any write critical section changes the word.
//
// Readers:   v = ReadLockOrRestart(restart); read fields (relaxed atomics);
//            ReadUnlockOrRestart(v, restart)  -- the reads are valid iff no
//            restart was requested.
// Writers:   UpgradeToWriteLockOrRestart(v, restart) turns a read version into
//            the write lock iff the node has not changed since v was read, so
//            every decision taken from optimistic reads stays valid.
// Every *OrRestart call only ever SETS `restart`; callers loop explicitly.
//
// Memory order (seqlock argument): field reads under optimistic validation
// race with writers by design, so node fields are accessed with relaxed
// atomics (OlcLoad/OlcStore below) and the validating re-read of the word is
// preceded by an acquire fence; the writer issues a release fence right after
// taking the lock, so a reader that saw any store of the critical section
// also sees the lock bit or a newer version. Under ThreadSanitizer (which
// does not model fences) the fences become acquire/release operations on the
// word itself; all field accesses are atomic, so TSan needs no suppressions.
//
// Not annotated for Clang's thread-safety analysis (thread_annotations.h):
// an optimistic reader holds nothing and learns only afterwards whether its
// reads were valid, and a writer takes a node's lock by upgrading a version
// it read, often in another function than the one that unlocks it. So the
// "REQUIRES: ... write-locked" comments of the trees that use it (the
// PM-leaf engine's leaves, common/olc_btree.h) stay comments; the blocking
// locks are the annotated ones (sync/mutex.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define PMINDEX_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PMINDEX_TSAN 1
#endif
#endif

namespace pmindex::sync {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Relaxed atomic access to a plain field that optimistic readers may read
// while a writer changes it. Compiles to plain loads and stores on x86.
template <class T>
inline T OlcLoad(const T& field) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}
template <class T>
inline void OlcStore(T& field, T value) {
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}
// Publication of a pointer to a freshly initialized object: release store,
// acquire load (so the object's initialization happens-before its use).
template <class T>
inline T* OlcLoadPtr(T* const& field) {
  return std::atomic_ref<T*>(const_cast<T*&>(field)).load(std::memory_order_acquire);
}
template <class T>
inline void OlcPublishPtr(T*& field, T* value) {
  std::atomic_ref<T*>(field).store(value, std::memory_order_release);
}

class VersionLock {
 public:
  static constexpr uint64_t kObsoleteBit = 1;
  static constexpr uint64_t kLockedBit = 2;

  VersionLock() = default;
  VersionLock(const VersionLock&) = delete;
  VersionLock& operator=(const VersionLock&) = delete;

  static bool IsLocked(uint64_t v) { return (v & kLockedBit) != 0; }
  static bool IsObsolete(uint64_t v) { return (v & kObsoleteBit) != 0; }

  // The raw word (acquire). For diagnostics and verify().
  uint64_t Load() const { return word_.load(std::memory_order_acquire); }
  bool IsLocked() const { return IsLocked(Load()); }
  bool IsObsolete() const { return IsObsolete(Load()); }

  // Waits until no writer holds the node and returns its version. Requests
  // a restart if the node is obsolete.
  uint64_t ReadLockOrRestart(bool& restart) const {
    uint64_t v = AwaitUnlocked();
    if (IsObsolete(v)) restart = true;
    return v;
  }

  // Requests a restart iff the node changed (or was locked) since `v`.
  void CheckOrRestart(uint64_t v, bool& restart) const { ReadUnlockOrRestart(v, restart); }
  void ReadUnlockOrRestart(uint64_t v, bool& restart) const {
#if defined(PMINDEX_TSAN)
    if (word_.load(std::memory_order_acquire) != v) restart = true;
#else
    std::atomic_thread_fence(std::memory_order_acquire);
    if (word_.load(std::memory_order_relaxed) != v) restart = true;
#endif
  }

  // Takes the write lock iff the word still equals `v`; on success `v`
  // becomes the locked word. Otherwise requests a restart.
  void UpgradeToWriteLockOrRestart(uint64_t& v, bool& restart) {
    uint64_t expected = v;
    if (IsLocked(v) || IsObsolete(v) ||
        !word_.compare_exchange_strong(expected, v + kLockedBit, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
      restart = true;
      return;
    }
    v += kLockedBit;
    PublishFence();
  }

  // Waits for and takes the write lock; requests a restart if obsolete.
  void WriteLockOrRestart(bool& restart) {
    for (;;) {
      uint64_t v = ReadLockOrRestart(restart);
      if (restart) return;
      bool again = false;
      UpgradeToWriteLockOrRestart(v, again);
      if (!again) return;
    }
  }

  // Waits for and takes the write lock, obsolete or not.
  void WriteLock() {
    for (;;) {
      uint64_t v = AwaitUnlocked();
      if (word_.compare_exchange_weak(v, v + kLockedBit, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
        PublishFence();
        return;
      }
    }
  }

  // REQUIRES: this thread holds the write lock. A plain release store: no
  // other thread writes a locked word (they only CAS unlocked values), so
  // no atomic read-modify-write (a full barrier on x86) is needed.
  void WriteUnlock() {
    word_.store(word_.load(std::memory_order_relaxed) + kLockedBit, std::memory_order_release);
  }
  // Unlocks and marks the node obsolete (it was unlinked).
  void WriteUnlockObsolete() {
    word_.store(word_.load(std::memory_order_relaxed) + (kLockedBit | kObsoleteBit),
                std::memory_order_release);
  }

 private:
  void PublishFence() {
#if !defined(PMINDEX_TSAN)
    // Orders the critical section's relaxed stores after the lock bit.
    std::atomic_thread_fence(std::memory_order_release);
#endif
  }

  uint64_t AwaitUnlocked() const {
    uint64_t v = word_.load(std::memory_order_acquire);
    for (unsigned spins = 0; IsLocked(v); ++spins) {
      // On an oversubscribed machine the holder may be descheduled: yield
      // instead of burning the rest of the time slice.
      if (spins < 64) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
      v = word_.load(std::memory_order_acquire);
    }
    return v;
  }

  std::atomic<uint64_t> word_{0};
};

}  // namespace pmindex::sync
