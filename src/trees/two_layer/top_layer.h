// TLBtree's read-optimized top layer (paper 003, section III.B
// "Read-Optimized Upper Layer"), kept in DRAM (docs/layout/tlbtree.md says
// why): a static, pointer-free k-ary search tree over the pairs (low key of
// a subindex, its root), built from the chain of subindex roots.
//
//   - Leaves: kLeafSlots entries each, built with kLeafFill of them used so
//     that new subindexes (root splits) can be added in place. A leaf's
//     first key never changes (a new subindex's key lies above the entry it
//     split from), so the inner levels stay valid.
//   - Inner levels: full nodes of kFan - 1 separators (the first keys of
//     their children but the first), one contiguous array per level; the
//     child is found by arithmetic, no pointers.
//
// It is a cache: any entry (key, root) is a correct place to start a
// search for a key >= key, because a subindex only ever gives away the
// top of its range. A missing entry only makes the walk along the chain of
// roots longer.
//
// Concurrency: the layer is immutable but for leaf inserts, which run
// under the owner's mutex and are published by a per-leaf seqlock; readers
// take no lock. A replaced layer is freed through the owner's epochs.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmindex/types.h"
#include "sync/version_lock.h"

namespace pmindex::tlbtree {

class TopLayer {
 public:
  static constexpr uint32_t kLeafSlots = 15;  // 8 + 15 * 16 = 248 bytes: one 256-byte node
  // Built half full, as the authors' TLBtree builds its top leaves (8 of
  // 16): 7 slots per leaf absorb new subindexes (root splits) in place
  // before one is left out and lookups start walking the chain of roots.
  static constexpr uint32_t kLeafFill = 8;
  static constexpr uint32_t kFan = 16;        // children per inner node

  // chain: (low key, root raw) in chain order; chain[0].first is 0.
  explicit TopLayer(const std::vector<std::pair<Key, uint64_t>>& chain) {
    const size_t n = std::max<size_t>(chain.size(), 1);
    nleaves_ = static_cast<uint32_t>((n + kLeafFill - 1) / kLeafFill);
    leaves_.reset(AllocLeaves(nleaves_, &leaf_bytes_));
    std::vector<Key> first(nleaves_, 0);
    for (size_t i = 0; i < chain.size(); ++i) {
      Leaf& l = leaves_[i / kLeafFill];
      const uint32_t at = static_cast<uint32_t>(i % kLeafFill);
      l.key[at].store(chain[i].first, std::memory_order_relaxed);
      l.ptr[at].store(chain[i].second, std::memory_order_relaxed);
      l.n.store(at + 1, std::memory_order_relaxed);
      if (at == 0) first[i / kLeafFill] = chain[i].first;
    }
    // Inner levels, bottom up; stored top down.
    std::vector<Key> units = first;
    std::vector<Level> up;
    while (units.size() > 1) {
      Level lv;
      lv.units = static_cast<uint32_t>(units.size());
      const size_t groups = (units.size() + kFan - 1) / kFan;
      lv.keys.assign(groups * (kFan - 1), ~uint64_t{0});
      std::vector<Key> next(groups);
      for (size_t g = 0; g < groups; ++g) {
        next[g] = units[g * kFan];
        for (uint32_t j = 1; j < kFan && g * kFan + j < units.size(); ++j)
          lv.keys[g * (kFan - 1) + j - 1] = units[g * kFan + j];
      }
      up.push_back(std::move(lv));
      units.swap(next);
    }
    inner_.assign(up.rbegin(), up.rend());
  }

  // The root of the last entry whose key is <= k (lock-free); *low, if
  // given, gets that entry's key (the subindex's low key; 0: the first).
  uint64_t Find(Key k, Key* low = nullptr) const {
    const Leaf& l = leaves_[LeafFor(k)];
    // The search reads the version and keys (lines 0-1), then a pointer
    // (lines 2-3): asked for at once, not as up to three serial misses.
    const char* lp = reinterpret_cast<const char*>(&l);
    __builtin_prefetch(lp);
    __builtin_prefetch(lp + 64);
    __builtin_prefetch(lp + 128);
    __builtin_prefetch(lp + 192);
    for (unsigned spins = 0;; ++spins) {
      const uint64_t v = l.ver.load(std::memory_order_acquire);
      if (v & 1) {
        if (spins < 64) sync::CpuRelax(); else std::this_thread::yield();
        continue;
      }
      const uint32_t n = std::min(l.n.load(std::memory_order_relaxed), kLeafSlots);
      uint64_t root = l.ptr[0].load(std::memory_order_relaxed);
      uint32_t at = 0;
      for (uint32_t i = 1; i < n; ++i) {
        if (l.key[i].load(std::memory_order_relaxed) > k) break;
        root = l.ptr[i].load(std::memory_order_relaxed);
        at = i;
      }
      if (low != nullptr) *low = l.key[at].load(std::memory_order_relaxed);
#if defined(PMINDEX_TSAN)  // TSan does not model fences (sync/version_lock.h)
      if (l.ver.load(std::memory_order_acquire) == v) return root;
#else
      std::atomic_thread_fence(std::memory_order_acquire);
      if (l.ver.load(std::memory_order_relaxed) == v) return root;
#endif
    }
  }

  // Adds (k, root) to its leaf. Under the owner's mutex. kAdded, kPresent
  // (an entry with key k exists: a rebuild already saw the subindex) or
  // kFull (the leaf has no free slot: the entry is left out).
  enum class Add { kAdded, kPresent, kFull };
  Add Insert(Key k, uint64_t root) {
    Leaf& l = leaves_[LeafFor(k)];
    const uint32_t n = l.n.load(std::memory_order_relaxed);
    uint32_t pos = 0;
    while (pos < n && l.key[pos].load(std::memory_order_relaxed) < k) ++pos;
    if (pos < n && l.key[pos].load(std::memory_order_relaxed) == k) return Add::kPresent;
    if (n == kLeafSlots) return Add::kFull;
    const uint64_t v = l.ver.load(std::memory_order_relaxed);
    l.ver.store(v + 1, std::memory_order_relaxed);
#if !defined(PMINDEX_TSAN)
    std::atomic_thread_fence(std::memory_order_release);
#endif
    for (uint32_t i = n; i > pos; --i) {
      l.key[i].store(l.key[i - 1].load(std::memory_order_relaxed), std::memory_order_relaxed);
      l.ptr[i].store(l.ptr[i - 1].load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    l.key[pos].store(k, std::memory_order_relaxed);
    l.ptr[pos].store(root, std::memory_order_relaxed);
    l.n.store(n + 1, std::memory_order_relaxed);
    l.ver.store(v + 2, std::memory_order_release);
    return Add::kAdded;
  }

  // Points the entry (k, from) at `to` (NOBtree moved that subindex root
  // to another NUMA node). Under the owner's mutex. One 8-byte store: a
  // reader gets either root, and the old one stays readable until its
  // epoch ends.
  void Replace(Key k, uint64_t from, uint64_t to) {
    Leaf& l = leaves_[LeafFor(k)];
    for (uint32_t i = 0, n = std::min(l.n.load(std::memory_order_relaxed), kLeafSlots); i < n; ++i) {
      if (l.key[i].load(std::memory_order_relaxed) == k && l.ptr[i].load(std::memory_order_relaxed) == from) {
        l.ptr[i].store(to, std::memory_order_release);
        return;
      }
    }
  }

  // Every entry in order (no writer running).
  void ForEach(const std::function<void(uint32_t leaf, Key, uint64_t)>& fn) const {
    for (uint32_t i = 0; i < nleaves_; ++i) {
      const Leaf& l = leaves_[i];
      for (uint32_t j = 0, n = l.n.load(std::memory_order_relaxed); j < n && j < kLeafSlots; ++j)
        fn(i, l.key[j].load(std::memory_order_relaxed), l.ptr[j].load(std::memory_order_relaxed));
    }
  }
  // Which leaf the inner levels choose for k (verify checks entries against it).
  uint32_t LeafFor(Key k) const {
    uint64_t idx = 0;
    for (const Level& lv : inner_) {
      const Key* keys = &lv.keys[idx * (kFan - 1)];
      uint32_t c = 0;
      while (c < kFan - 1 && keys[c] <= k) ++c;
      idx = std::min<uint64_t>(idx * kFan + c, lv.units - 1);
    }
    return static_cast<uint32_t>(idx);
  }
  uint32_t leaves() const { return nleaves_; }
  uint32_t levels() const { return static_cast<uint32_t>(inner_.size()) + 1; }
  uint64_t bytes() const {
    uint64_t b = sizeof(*this) + leaf_bytes_;
    for (const Level& lv : inner_) b += lv.keys.size() * sizeof(Key);
    return b;
  }

 private:
  struct alignas(64) Leaf {
    std::atomic<uint32_t> ver{0};  // seqlock: odd while an insert shifts entries
    std::atomic<uint32_t> n{0};
    std::atomic<uint64_t> key[kLeafSlots] = {};
    std::atomic<uint64_t> ptr[kLeafSlots] = {};
  };
  static_assert(sizeof(Leaf) == 256);
  struct Level {
    uint32_t units = 0;     // children on the level below (leaves or nodes)
    std::vector<Key> keys;  // (kFan - 1) separators per node, padded with ~0
  };
  struct FreeLeaves {
    void operator()(Leaf* p) const { std::free(p); }  // Leaf is trivially destructible
  };
  static_assert(std::is_trivially_destructible_v<Leaf>);
  // Leaves of kHugeFrom bytes or more take whole 2 MiB units, 2 MiB-aligned,
  // offered to the kernel for transparent huge pages (best effort: with
  // THP off or no huge page free they stay on 4 KiB pages). A lookup reads
  // one leaf at random, so with 4 KiB pages most lookups of a large tree
  // miss the TLB there (a 10M-key tlbtree has 4 MiB of leaves); the
  // rounding at most doubles the leaves' memory.
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kHugeFrom = size_t{1} << 20;
  static Leaf* AllocLeaves(uint32_t n, size_t* bytes) {
    size_t b = size_t{n} * sizeof(Leaf);
    const bool huge = b >= kHugeFrom;
    if (huge) b = (b + kHugePage - 1) / kHugePage * kHugePage;
    void* m = std::aligned_alloc(huge ? kHugePage : alignof(Leaf), b);
    if (m == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    if (huge) (void)madvise(m, b, MADV_HUGEPAGE);  // advice only: an error changes nothing
#endif
    Leaf* leaves = static_cast<Leaf*>(m);
    for (uint32_t i = 0; i < n; ++i) new (&leaves[i]) Leaf();
    *bytes = b;
    return leaves;
  }
  uint32_t nleaves_ = 0;
  size_t leaf_bytes_ = 0;
  std::unique_ptr<Leaf[], FreeLeaves> leaves_;
  std::vector<Level> inner_;  // top level first
};

}  // namespace pmindex::tlbtree
