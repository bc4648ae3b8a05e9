// Epoch-based reclamation (docs/allocator.md, "Epochs").
//
// Readers bracket every access to shared nodes with Enter()/Exit() (or a
// Guard). A writer that unlinks a node calls Retire(item); the item is
// handed to the reclaimer only when no thread can still hold a reference.
//
// Protocol:
// - A global epoch E (starts at 1, only grows).
// - Each thread announces (e << 1) | 1 while inside a critical section and
//   0 outside. Enter loads E, announces it, and re-loads E until the two
//   agree, so the announced epoch was current at a point after the
//   announcement became visible. Where the kernel offers private
//   expedited membarrier, the announcement is a plain store and
//   TryAdvance's membarrier is the store-load fence between it and the
//   re-load (an asymmetric fence: Enter has no locked instruction, which
//   would wait for the write-back of the thread's earlier flushes);
//   otherwise the store is seq_cst. Exit clears with a release store.
// - E advances from e to e + 1 only when every thread inside a critical
//   section has announced e. A thread therefore stays within one epoch of E.
// - Retire tags the item with E as read after the item was unlinked; the
//   item is reclaimed once E >= tag + 2: every thread that was inside a
//   critical section when the item was unlinked has left it by then.
// - Retire outside a critical section enters one for its duration, so the
//   unlink happens-before any reader that later observes the advance.
//
// Limbo lists are per thread (each with its own, normally uncontended,
// mutex). Reclaim() (also run every kReclaimEvery retires) tries to advance
// E twice and hands every eligible item of every thread, and the orphans of
// exited threads, to the reclaimer: with no thread inside a critical
// section, one Reclaim() reclaims everything retired so far. A thread's
// pending items become orphans when it exits. Items still pending at
// destruction are dropped, not reclaimed. The reclaimer runs on the thread
// that calls Reclaim (or Retire), outside every lock of the domain.
//
// Thread safety: everything is thread-safe; Guards nest.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "alloc/thread_slots.h"
#include "sync/mutex.h"

namespace pmindex::alloc {

class EpochDomain final : public ThreadSlotOwner {
 public:
  using Reclaimer = std::function<void(uint64_t item)>;
  static constexpr uint32_t kReclaimEvery = 64;

  explicit EpochDomain(Reclaimer reclaimer);
  ~EpochDomain() override;

  void Enter();
  void Exit();
  // Returns true iff the calling thread is inside a critical section.
  bool InCriticalSection();

  void Retire(uint64_t item);
  // Advances the epoch if possible and reclaims what is safe. Returns the
  // number of items handed to the reclaimer.
  size_t Reclaim();

  uint64_t epoch() const { return global_.load(std::memory_order_seq_cst); }
  size_t pending() const { return pending_.load(std::memory_order_relaxed); }

  class Guard {
   public:
    explicit Guard(EpochDomain& d) : d_(d) { d_.Enter(); }
    ~Guard() { d_.Exit(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    EpochDomain& d_;
  };

 private:
  struct alignas(64) Record {
    std::atomic<uint64_t> announce{0};  // (epoch << 1) | 1 inside, 0 outside
    uint32_t depth = 0;                 // owner thread only
    uint32_t retires = 0;               // owner thread only
    sync::Mutex mu;
    // (tag, item), tags ascending.
    std::vector<std::pair<uint64_t, uint64_t>> limbo PMINDEX_GUARDED_BY(mu);
  };

  Record& Mine() { return *static_cast<Record*>(Slot()); }
  void* CreateSlot() override;
  void ThreadExited(void* slot) override;
  bool TryAdvance();

  Reclaimer reclaimer_;
  const bool asymmetric_;  // Enter's store-load fence is TryAdvance's membarrier
  std::atomic<uint64_t> global_{1};
  std::atomic<size_t> pending_{0};
  sync::Mutex mu_;  // taken before a Record::mu
  std::vector<std::unique_ptr<Record>> records_ PMINDEX_GUARDED_BY(mu_);
  std::vector<std::pair<uint64_t, uint64_t>> orphans_ PMINDEX_GUARDED_BY(mu_);
};

}  // namespace pmindex::alloc
