// NOBtree's access statistics (paper 003, section III.D "Identifying the
// Node to Be Migrated"): a DRAM hash table of 32768 slots, keyed by a node's address,
// counting sampled accesses per NUMA node. A leaf whose sampled accesses
// reach `hot` is judged once: if one node made more than half of them and
// the leaf lives elsewhere, that node is where it should move; either way
// its counts start again (the monitoring window).
//
// The table is lossy on purpose, like the paper's: a slot holds one leaf,
// a leaf hashing onto a slot held by another takes it over with fresh
// counts, and concurrent samples may lose an increment. Nothing here is
// persistent and nothing here is ever wrong for the tree, only late.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace pmindex::tlbtree {

class AccessStats {
 public:
  static constexpr uint32_t kSlots = 1u << 15;  // power of two (2 MiB)
  static constexpr uint32_t kNodes = 8;     // nodes counted; accesses from others are not

  AccessStats() : slots_(std::make_unique<Slot[]>(kSlots)) {}
  static constexpr uint64_t bytes() { return uint64_t{kSlots} * sizeof(Slot); }

  // Counts one sampled access of `leaf` (living on node `home`) from node
  // `from`. Returns the node it should move to, or -1.
  int Record(uint64_t leaf, int from, int home, uint32_t hot) {
    if (from < 0 || from >= static_cast<int>(kNodes)) return -1;
    Slot& s = slots_[Hash(leaf) & (kSlots - 1)];
    if (s.leaf.load(std::memory_order_relaxed) != leaf) {
      s.leaf.store(leaf, std::memory_order_relaxed);
      for (auto& h : s.hits) h.store(0, std::memory_order_relaxed);
    }
    s.hits[from].fetch_add(1, std::memory_order_relaxed);
    uint32_t total = 0, best = 0;
    int best_node = -1;
    for (uint32_t n = 0; n < kNodes; ++n) {
      const uint32_t h = s.hits[n].load(std::memory_order_relaxed);
      total += h;
      if (h > best) {
        best = h;
        best_node = static_cast<int>(n);
      }
    }
    if (total < hot) return -1;
    for (auto& h : s.hits) h.store(0, std::memory_order_relaxed);  // a new window
    return (best_node != home && 2 * best > total) ? best_node : -1;
  }

 private:
  static uint64_t Hash(uint64_t x) {  // leaves are 256-byte aligned: mix the high bits down
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 32);
  }
  struct alignas(64) Slot {
    std::atomic<uint64_t> leaf{0};
    std::atomic<uint32_t> hits[kNodes] = {};
  };
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace pmindex::tlbtree
