// The store's DRAM concurrency state (docs/layout/kv.md "Concurrency"):
// the commit clock, the table of registered snapshots, and the striped
// write latches. Nothing here is persistent; recovery restarts the clock
// above every timestamp the pool can hold (root slot 5).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "sync/mutex.h"
#include "sync/thread_annotations.h"

namespace pmindex::kv {

// Commit timestamps. Reserve() hands out the next one; Publish(ts) makes
// it visible, in timestamp order: visible() is the largest timestamp t such
// that every change committed at or below t is linked (and durable), so a
// reader at visible() never sees half of a commit, and never blocks.
// A committer waits in Publish only for the committers of smaller
// timestamps, which hold every latch they need already (a timestamp is
// reserved only once a committer holds its latches) and wait for nothing
// else, so the wait ends. Every reserved timestamp must be published, also
// when its change failed (Ticket does it).
class CommitClock {
 public:
  // The first timestamp Reserve() hands out; everything below is visible.
  void Reset(uint64_t next) {
    next_.store(next, std::memory_order_seq_cst);
    visible_.store(next - 1, std::memory_order_seq_cst);
  }
  uint64_t Reserve() { return next_.fetch_add(1, std::memory_order_seq_cst); }
  void Publish(uint64_t ts) {
    while (visible_.load(std::memory_order_seq_cst) + 1 != ts) std::this_thread::yield();
    visible_.store(ts, std::memory_order_seq_cst);
  }
  uint64_t visible() const { return visible_.load(std::memory_order_seq_cst); }
  uint64_t next() const { return next_.load(std::memory_order_seq_cst); }

 private:
  std::atomic<uint64_t> next_{1};
  std::atomic<uint64_t> visible_{0};
};

// Snapshots that readers hold across many reads (transactions, Range,
// Count): the writers' reclamation keeps, for every key, the newest version
// at or below the oldest registered snapshot and everything newer (Bound).
//
// Protocol (every access sequentially consistent): a reader counts itself
// in `active_`, claims a free slot with the visible timestamp s0 it just
// loaded, then loads the visible timestamp again and reads at that one,
// s >= s0. A writer loads the visible timestamp v first, then `active_`
// and the slots: if it missed the reader's count or slot, the reader's
// second load came after its own load of v, so s >= v >= Bound; if it saw
// the slot, Bound <= s0 <= s. Either way nothing the reader can still read
// is reclaimed.
class SnapshotTable {
 public:
  SnapshotTable() = default;
  SnapshotTable(const SnapshotTable&) = delete;
  SnapshotTable& operator=(const SnapshotTable&) = delete;
  ~SnapshotTable() {
    for (Chunk* c = head_.next.load(); c != nullptr;) {
      Chunk* n = c->next.load();
      delete c;
      c = n;
    }
  }

  // Registers a reader; *ts is its snapshot. Returns its slot for Release.
  std::atomic<uint64_t>* Acquire(const CommitClock& clock, uint64_t* ts) {
    active_.fetch_add(1, std::memory_order_seq_cst);
    const uint64_t s0 = clock.visible();
    std::atomic<uint64_t>* slot = Claim(s0 + 1);  // 0 marks a free slot
    *ts = clock.visible();
    return slot;
  }
  void Release(std::atomic<uint64_t>* slot) {
    slot->store(0, std::memory_order_seq_cst);
    active_.fetch_sub(1, std::memory_order_seq_cst);
  }
  // The oldest snapshot still registered, or `visible` (loaded by the
  // caller before this call) if it is older than none.
  uint64_t Bound(uint64_t visible) const {
    if (active_.load(std::memory_order_seq_cst) == 0) return visible;
    uint64_t b = visible;
    for (const Chunk* c = &head_; c != nullptr; c = c->next.load(std::memory_order_seq_cst)) {
      for (const auto& s : c->slots) {
        const uint64_t x = s.load(std::memory_order_seq_cst);
        if (x != 0) b = std::min(b, x - 1);
      }
    }
    return b;
  }
  uint64_t active() const { return active_.load(std::memory_order_relaxed); }

 private:
  struct Chunk {
    std::array<std::atomic<uint64_t>, 64> slots{};
    std::atomic<Chunk*> next{nullptr};
  };

  std::atomic<uint64_t>* Claim(uint64_t value) {
    for (Chunk* c = &head_;;) {
      for (auto& s : c->slots) {
        uint64_t zero = 0;
        if (s.load(std::memory_order_relaxed) == 0 &&
            s.compare_exchange_strong(zero, value, std::memory_order_seq_cst))
          return &s;
      }
      Chunk* n = c->next.load(std::memory_order_seq_cst);
      if (n == nullptr) {
        sync::MutexLock g(grow_mu_);
        n = c->next.load(std::memory_order_seq_cst);
        if (n == nullptr) {
          n = new Chunk();
          c->next.store(n, std::memory_order_seq_cst);
        }
      }
      c = n;
    }
  }

  Chunk head_;
  std::atomic<uint64_t> active_{0};
  sync::Mutex grow_mu_;
};

// Write latches, striped by index key (the 8-byte prefix): one latch
// covers a prefix's record or bucket, every record in it and their chains,
// so writers of one prefix are serialized and readers take none. Several
// latches are always taken in ascending stripe order (no deadlock). A latch
// is a test-and-set word (acquire/release), not a std::mutex: Verify holds
// all 1024 at once, more than a thread may hold mutexes under TSan.
//
// To Clang's thread-safety analysis the stripes are one capability (the
// Latches object): it checks that a function marked
// PMINDEX_REQUIRES(latches_) runs with some latch held, not that it is the
// latch of the prefix it touches (a stripe is chosen at run time). Taking
// several stripes is one acquisition to it, so the functions that take or
// drop several are not checked inside.
class PMINDEX_CAPABILITY("latch stripes") Latches {
 public:
  static constexpr size_t kStripes = 1024;
  static size_t StripeOf(uint64_t prefix) {
    const uint64_t x = prefix * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(x >> 54);  // the top 10 bits
  }
  void Lock(size_t stripe) PMINDEX_ACQUIRE() {
    std::atomic<bool>& h = stripe_[stripe].held;
    while (h.exchange(true, std::memory_order_acquire)) {
      while (h.load(std::memory_order_relaxed)) std::this_thread::yield();
    }
  }
  void Unlock(size_t stripe) PMINDEX_RELEASE() {
    stripe_[stripe].held.store(false, std::memory_order_release);
  }
  // Locks the stripes of `prefixes` (any order, duplicates allowed) in
  // ascending order; returns them for Unlock. Not analysed: several
  // stripes, one acquisition (above).
  std::vector<size_t> Lock(const std::vector<uint64_t>& prefixes)
      PMINDEX_ACQUIRE() PMINDEX_NO_THREAD_SAFETY_ANALYSIS {
    std::vector<size_t> s;
    s.reserve(prefixes.size());
    for (uint64_t p : prefixes) s.push_back(StripeOf(p));
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    for (size_t i : s) Lock(i);
    return s;
  }
  // Not analysed: several stripes, one release (above).
  void Unlock(const std::vector<size_t>& stripes)
      PMINDEX_RELEASE() PMINDEX_NO_THREAD_SAFETY_ANALYSIS {
    for (size_t i = stripes.size(); i-- > 0;) Unlock(stripes[i]);
  }
  // Every stripe (Verify: no writer runs while they are held). Not
  // analysed: several stripes, one acquisition (above).
  std::vector<size_t> LockAll() PMINDEX_ACQUIRE() PMINDEX_NO_THREAD_SAFETY_ANALYSIS {
    std::vector<size_t> s(kStripes);
    for (size_t i = 0; i < kStripes; ++i) {
      s[i] = i;
      Lock(i);
    }
    return s;
  }

 private:
  struct alignas(64) Stripe {
    std::atomic<bool> held{false};
  };
  std::array<Stripe, kStripes> stripe_;
};

// Holds one prefix's latch for a scope.
class PMINDEX_SCOPED_CAPABILITY LatchGuard {
 public:
  LatchGuard(Latches& l, uint64_t prefix) PMINDEX_ACQUIRE(l)
      : l_(l), stripe_(Latches::StripeOf(prefix)) {
    l_.Lock(stripe_);
  }
  ~LatchGuard() PMINDEX_RELEASE() { l_.Unlock(stripe_); }
  LatchGuard(const LatchGuard&) = delete;
  LatchGuard& operator=(const LatchGuard&) = delete;

 private:
  Latches& l_;
  size_t stripe_;
};

// Holds the latches of several prefixes (or, kAll, every latch) for a
// scope; Unlock() drops them before its end.
class PMINDEX_SCOPED_CAPABILITY LatchSetGuard {
 public:
  enum All { kAll };
  LatchSetGuard(Latches& l, const std::vector<uint64_t>& prefixes) PMINDEX_ACQUIRE(l)
      : l_(l), stripes_(l.Lock(prefixes)) {}
  LatchSetGuard(Latches& l, All) PMINDEX_ACQUIRE(l) : l_(l), stripes_(l.LockAll()) {}
  // Not analysed: whether it still holds them is held_, a run-time flag.
  ~LatchSetGuard() PMINDEX_RELEASE() PMINDEX_NO_THREAD_SAFETY_ANALYSIS {
    if (held_) l_.Unlock(stripes_);
  }
  void Unlock() PMINDEX_RELEASE() {
    l_.Unlock(stripes_);
    held_ = false;
  }
  LatchSetGuard(const LatchSetGuard&) = delete;
  LatchSetGuard& operator=(const LatchSetGuard&) = delete;

 private:
  Latches& l_;
  std::vector<size_t> stripes_;
  bool held_ = true;
};
static_assert(Latches::kStripes == 1024, "StripeOf takes the top 10 bits");

}  // namespace pmindex::kv
