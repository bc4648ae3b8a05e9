#include "reader_probe.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>

namespace pmindex::crash {
namespace {

// Set on the probe's thread only: the phase word its waits report to.
thread_local std::atomic<int>* t_probe_phase = nullptr;

// The probe's read is about to wait for another thread (the stopped
// writer): its result, whenever it comes, is not a read of this instant.
void NoteWait() {
  std::atomic<int>* p = t_probe_phase;
  if (p == nullptr) return;
  int reading = 1;
  p->compare_exchange_strong(reading, 3);
}

}  // namespace

ReaderProbe::ReaderProbe() : thread_([this] { Loop(); }) {}

ReaderProbe::~ReaderProbe() {
  Drain();
  stop_.store(true);
  job_.fetch_add(1);
  job_.notify_one();
  thread_.join();
}

void ReaderProbe::Loop() {
  t_probe_phase = &phase_;
  uint64_t seen = 0;
  for (;;) {
    job_.wait(seen);
    seen = job_.load();
    if (stop_.load()) return;
    const bool saw = read_();
    saw_ = saw;
    int reading = 1;
    // Returned inside the window: the writer reads saw_ after seeing 2.
    if (!phase_.compare_exchange_strong(reading, 2, std::memory_order_acq_rel)) {
      phase_.store(0, std::memory_order_release);  // waited, or read late: dropped
    }
  }
}

ReaderProbe::Outcome ReaderProbe::Run(std::function<bool()> read, bool* saw) {
  if (phase_.load(std::memory_order_acquire) != 0) return Outcome::kBusy;
  read_ = std::move(read);
  phase_.store(1, std::memory_order_release);
  job_.fetch_add(1, std::memory_order_release);
  job_.notify_one();
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned spins = 0;; ++spins) {
    const int p = phase_.load(std::memory_order_acquire);
    if (p == 2) {
      *saw = saw_;
      phase_.store(0, std::memory_order_release);
      return Outcome::kReturned;
    }
    if (p == 3) {
      int waiting = 3;
      phase_.compare_exchange_strong(waiting, 4);  // fails only if it already finished
      return Outcome::kBlocked;
    }
    if (p == 0) return Outcome::kBlocked;  // it waited and has finished since
    if (spins < 256) {
      std::this_thread::yield();
      continue;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
        kSafetySeconds) {
      int reading = 1;
      if (phase_.compare_exchange_strong(reading, 4)) {
        ++safety_timeouts_;
        return Outcome::kBlocked;
      }
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void ReaderProbe::Drain() {
  for (unsigned spins = 0; phase_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 256) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

}  // namespace pmindex::crash

// The waits a reader of the library can make, interposed in the binaries
// that link pmcrash_lib: each reports a wait of the probe's thread, then
// does what the C library does. The C library's own functions are found
// with dlsym once, at load; a lock taken before that (or by dlsym itself)
// waits by retrying its try-lock.
extern "C" int __sched_yield() noexcept;

namespace {

using MutexLockFn = int (*)(pthread_mutex_t*);
using RdLockFn = int (*)(pthread_rwlock_t*);
MutexLockFn real_mutex_lock = nullptr;
RdLockFn real_rdlock = nullptr;
[[maybe_unused]] const bool resolved = [] {
  real_mutex_lock = reinterpret_cast<MutexLockFn>(dlsym(RTLD_NEXT, "pthread_mutex_lock"));
  real_rdlock = reinterpret_cast<RdLockFn>(dlsym(RTLD_NEXT, "pthread_rwlock_rdlock"));
  return true;
}();

}  // namespace

extern "C" int sched_yield() noexcept {
  pmindex::crash::NoteWait();
  return __sched_yield();
}

extern "C" int pthread_mutex_lock(pthread_mutex_t* m) noexcept {
  const int r = pthread_mutex_trylock(m);
  if (r != EBUSY) return r;
  pmindex::crash::NoteWait();
  if (real_mutex_lock != nullptr) return real_mutex_lock(m);
  int t;
  while ((t = pthread_mutex_trylock(m)) == EBUSY) __sched_yield();
  return t;
}

extern "C" int pthread_rwlock_rdlock(pthread_rwlock_t* l) noexcept {
  const int r = pthread_rwlock_tryrdlock(l);
  if (r != EBUSY) return r;
  pmindex::crash::NoteWait();
  if (real_rdlock != nullptr) return real_rdlock(l);
  int t;
  while ((t = pthread_rwlock_tryrdlock(l)) == EBUSY) __sched_yield();
  return t;
}
