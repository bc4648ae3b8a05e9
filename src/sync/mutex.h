// Annotated blocking locks: std::mutex and std::shared_mutex as capabilities
// of Clang's thread-safety analysis (src/sync/thread_annotations.h), with
// RAII guards the analysis understands. libstdc++'s own types carry no
// annotations, so a member guarded by a std::mutex cannot be checked; code
// whose lock protects named members uses these instead.
//
// Every type also has the standard lower-case members (lock, unlock, ...),
// so std::condition_variable_any, std::scoped_lock and the like accept it.
// A guard's Native() is the std::unique_lock that std::condition_variable's
// wait takes: the wait drops and retakes the lock inside one call, so the
// lock is held, as far as the analysis is concerned, before and after it.
// A wait's predicate is a separate function to the analysis: write the wait
// as a loop (while (!ready) cv.wait(lock.Native());) so the condition is
// read where the lock is known to be held.
//
// Not capabilities: the trees' optimistic version locks (version_lock.h),
// whose readers hold nothing, and spin words embedded in PM nodes, which
// lock-free readers read without them.
#pragma once

#include <mutex>
#include <shared_mutex>

#include "sync/thread_annotations.h"

namespace pmindex::sync {

class PMINDEX_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() PMINDEX_ACQUIRE() { mu_.lock(); }
  void Unlock() PMINDEX_RELEASE() { mu_.unlock(); }
  bool TryLock() PMINDEX_TRY_ACQUIRE(true) { return mu_.try_lock(); }

  void lock() PMINDEX_ACQUIRE() { mu_.lock(); }
  void unlock() PMINDEX_RELEASE() { mu_.unlock(); }
  bool try_lock() PMINDEX_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock() and Lock() drop and retake it early.
class PMINDEX_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) PMINDEX_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() PMINDEX_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() PMINDEX_RELEASE() { lock_.unlock(); }
  void Lock() PMINDEX_ACQUIRE() { lock_.lock(); }

  // For std::condition_variable::wait and its timed forms only.
  std::unique_lock<std::mutex>& Native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

class PMINDEX_CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() PMINDEX_ACQUIRE() { mu_.lock(); }
  void Unlock() PMINDEX_RELEASE() { mu_.unlock(); }
  void LockShared() PMINDEX_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() PMINDEX_RELEASE_SHARED() { mu_.unlock_shared(); }

  void lock() PMINDEX_ACQUIRE() { mu_.lock(); }
  void unlock() PMINDEX_RELEASE() { mu_.unlock(); }
  bool try_lock() PMINDEX_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void lock_shared() PMINDEX_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() PMINDEX_RELEASE_SHARED() { mu_.unlock_shared(); }
  bool try_lock_shared() PMINDEX_TRY_ACQUIRE(true) { return mu_.try_lock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for its scope.
class PMINDEX_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) PMINDEX_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~WriterLock() PMINDEX_RELEASE() { mu_.Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared for its scope.
class PMINDEX_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) PMINDEX_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.LockShared(); }
  ~ReaderLock() PMINDEX_RELEASE() { mu_.UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace pmindex::sync
