// Pieces the three skip lists of paper 000 (section 4.3, Fig. 9-10) share:
// their options (level count, growth probability), the tower heights, and
// the DRAM skip list that is the whole of skiplist-dram and the upper
// levels of skiplist-divided (docs/layout/skiplist-divided.md).
//
// Defaults: 12 levels and p = 0.25, the skip list of X-Engine (a RocksDB
// descendant: maximum height 12, branching factor 4), which is the
// "original skiplist implementation in X-Engine" the paper compares.
//
// Concurrency (all three kinds): one reader-writer lock per index, as
// absl-btree, lcbtree and cddstree: lookups and scans share it, writers
// hold it alone. Every operation is then linearizable; several writers
// serialize. A node a delete unlinks can thus be freed at once (no reader
// can hold it); the persistent kinds still retire theirs through the
// allocator's epochs, as every tree does.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/olc_btree.h"
#include "index/options.h"
#include "pmindex/status.h"
#include "pmindex/types.h"

namespace pmindex::skiplist {

inline constexpr uint32_t kMaxLevels = 32;

struct Params {
  uint32_t levels = 12;  // levels of a tower at most (1 = a plain sorted list)
  double p = 0.25;       // probability a tower grows one more level
};

inline constexpr std::string_view kOptionsHelp =
    "levels=N (1..32; default 12: the most levels a tower has) p=P (0.01..0.99; default 0.25: "
    "the probability a tower grows one more level; X-Engine's skip list: 12 levels, branching 4)";

inline Result<Params> ParseParams(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"levels", "p"}));
  Result<uint64_t> levels = o.get_uint("levels", 12, 1, kMaxLevels);
  if (!levels.ok()) return levels.status();
  Result<double> p = o.get_double("p", 0.25, 0.01, 0.99);
  if (!p.ok()) return p.status();
  return Params{static_cast<uint32_t>(levels.value()), p.value()};
}

// Tower heights: 1, then one more level with probability p, up to the
// level count. A fixed seed: every run of a workload builds the same shape.
class HeightGen {
 public:
  HeightGen(const Params& p, uint64_t seed)
      : state_(seed | 1),
        levels_(p.levels),
        threshold_(static_cast<uint32_t>(p.p * 4294967296.0)) {}
  uint32_t Next() {
    uint32_t h = 1;
    while (h < levels_ && static_cast<uint32_t>(Rand() >> 32) < threshold_) ++h;
    return h;
  }

 private:
  uint64_t Rand() {  // xorshift64*
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1DULL;
  }
  uint64_t state_;
  uint32_t levels_;
  uint32_t threshold_;
};

// A skip list in DRAM: towers of a key, a 64-bit payload and `height`
// next pointers (levels 0 .. height-1). skiplist-dram keeps the value in
// the payload; skiplist-divided keeps the address of the tower's bottom
// element in PM. Not thread-safe: the owner's lock guards it.
//
// Towers are whole cache lines, line-aligned, from an arena of huge-page
// chunks (dram-btree's NodeArena), and a freed tower goes to a free list
// of its size: a tower of up to 5 levels is one line, so a search step is
// one cache miss, and the towers' placement does not depend on what the
// process allocated and freed before (with operator new, repeated runs in
// one pmbench process got slower as the heap was recycled).
class TowerList {
 public:
  struct Tower {
    Key key;
    uint64_t payload;
    uint64_t height;
    Tower** next() { return reinterpret_cast<Tower**>(this + 1); }
    Tower* const* next() const { return reinterpret_cast<Tower* const*>(this + 1); }
  };

  // levels may be 0 (skiplist-divided with levels=1: no upper level).
  explicit TowerList(uint32_t levels) : levels_(levels), head_(NewTower(0, 0, levels)) {}
  ~TowerList() = default;  // the arena unmaps every tower
  TowerList(const TowerList&) = delete;
  TowerList& operator=(const TowerList&) = delete;

  uint32_t levels() const { return levels_; }
  Tower* head() const { return head_; }
  uint64_t towers() const { return towers_; }
  uint64_t dram_bytes() const { return arena_.bytes_mapped(); }

  // The last tower whose key is below k (head() if none). With preds, also
  // the last such tower on every level (preds[i] for i < levels()). With
  // kCount, adds the towers whose key it read to *visits (stats() only).
  template <bool kCount = false>
  Tower* FloorBelow(Key k, Tower** preds, uint64_t* visits = nullptr) const {
    Tower* x = head_;
    for (uint32_t i = levels_; i-- > 0;) {
      for (Tower* n = x->next()[i]; n != nullptr; n = n->next()[i]) {
        if constexpr (kCount) ++*visits;
        if (n->key >= k) break;
        x = n;
      }
      if (preds != nullptr) preds[i] = x;
    }
    return x;
  }

  // Links a new tower of `height` (1..levels) after preds[0..height).
  Tower* Insert(Tower* const* preds, Key k, uint64_t payload, uint32_t height) {
    Tower* t = NewTower(k, payload, height);
    for (uint32_t i = 0; i < height; ++i) {
      t->next()[i] = preds[i]->next()[i];
      preds[i]->next()[i] = t;
    }
    ++towers_;
    return t;
  }

  // Unlinks t, whose predecessors on its levels are preds[0..t->height),
  // and frees it.
  void Remove(Tower* const* preds, Tower* t) {
    for (uint32_t i = 0; i < t->height; ++i) preds[i]->next()[i] = t->next()[i];
    --towers_;
    Free(t);
  }

  // Builds in ascending key order: Append(k, payload, h) links a tower
  // after every tower appended before.
  class Appender {
   public:
    explicit Appender(TowerList& l) : l_(l) {
      for (uint32_t i = 0; i < l.levels_; ++i) last_[i] = l.head_;
    }
    void Append(Key k, uint64_t payload, uint32_t height) {
      Tower* t = l_.NewTower(k, payload, height);
      for (uint32_t i = 0; i < height; ++i) {
        last_[i]->next()[i] = t;
        last_[i] = t;
      }
      ++l_.towers_;
    }

   private:
    TowerList& l_;
    Tower* last_[kMaxLevels];
  };

  // Frees every tower but the head.
  void Clear() {
    Tower* t = levels_ > 0 ? head_->next()[0] : nullptr;
    while (t != nullptr) {
      Tower* n = t->next()[0];
      Free(t);
      t = n;
    }
    for (uint32_t i = 0; i < levels_; ++i) head_->next()[i] = nullptr;
    towers_ = 0;
  }

  // Every level strictly ascending and a subsequence of the level below,
  // every tower linked on exactly its levels 0 .. height-1, height within
  // 1..levels, and the tower count right. check(t) adds the owner's checks
  // of each tower (in ascending order); its first error is returned.
  template <class CheckFn>
  Status Verify(std::string_view kind, CheckFn check) const {
    uint64_t count = 0, links = 0, heights = 0;
    if (levels_ == 0) return Status::OK();
    for (const Tower* t = head_->next()[0]; t != nullptr; t = t->next()[0]) {
      if (t->height < 1 || t->height > levels_)
        return Status::Corruption(std::string(kind) + ": a tower of height " +
                                  std::to_string(t->height));
      const Tower* n = t->next()[0];
      if (n != nullptr && n->key <= t->key)
        return Status::Corruption(std::string(kind) + ": keys not ascending at key " +
                                  std::to_string(t->key));
      PMINDEX_RETURN_IF_ERROR(check(t));
      ++count;
      ++links;
      heights += t->height;
    }
    for (uint32_t i = 1; i < levels_; ++i) {
      const Tower* below = head_->next()[i - 1];
      for (const Tower* t = head_->next()[i]; t != nullptr; t = t->next()[i]) {
        if (t->height <= i)
          return Status::Corruption(std::string(kind) + ": key " + std::to_string(t->key) +
                                    " linked on level " + std::to_string(i) + " above its height");
        while (below != nullptr && below != t) below = below->next()[i - 1];
        if (below == nullptr)
          return Status::Corruption(std::string(kind) + ": key " + std::to_string(t->key) +
                                    " on level " + std::to_string(i) +
                                    " is not on the level below (or out of order)");
        ++links;
      }
    }
    if (links != heights)
      return Status::Corruption(std::string(kind) + ": " + std::to_string(heights - links) +
                                " tower levels are not linked");
    if (count != towers_)
      return Status::Corruption(std::string(kind) + ": " + std::to_string(count) +
                                " towers linked, " + std::to_string(towers_) + " counted");
    return Status::OK();
  }

  // The highest level any tower reaches (0: none).
  uint32_t used_levels() const {
    uint32_t h = levels_;
    while (h > 0 && head_->next()[h - 1] == nullptr) --h;
    return h;
  }

 private:
  static constexpr uint32_t kClasses = (sizeof(Tower) + sizeof(Tower*) * kMaxLevels + 63) / 64;
  static size_t Bytes(uint32_t height) {
    return (sizeof(Tower) + sizeof(Tower*) * std::max(height, 1u) + 63) / 64 * 64;
  }
  Tower* NewTower(Key k, uint64_t payload, uint32_t height) {
    const size_t c = Bytes(height) / 64 - 1;
    Tower* t = free_[c];
    if (t != nullptr) {
      free_[c] = *reinterpret_cast<Tower**>(t);
    } else {
      t = static_cast<Tower*>(arena_.Allocate(Bytes(height)));
    }
    t->key = k;
    t->payload = payload;
    t->height = height;
    for (uint32_t i = 0; i < height; ++i) t->next()[i] = nullptr;
    return t;
  }
  void Free(Tower* t) {
    const size_t c = Bytes(static_cast<uint32_t>(t->height)) / 64 - 1;
    *reinterpret_cast<Tower**>(t) = free_[c];
    free_[c] = t;
  }

  olc_detail::NodeArena arena_;
  Tower* free_[kClasses] = {};
  uint32_t levels_;
  Tower* head_;
  uint64_t towers_ = 0;
};

// The keys stats() samples searches with: random 64-bit keys (pmbench's
// random key space), the same for every kind and every call.
inline constexpr int kSearchSamples = 1024;
inline Key SampleKey(int i) {
  uint64_t z = (static_cast<uint64_t>(i) + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// bulk_load's input checks, shared by the three kinds (the fill factor has
// no meaning for a skip list: checked for range, then ignored).
inline Status CheckBulkInput(std::string_view kind, std::span<const KV> sorted, double fill) {
  if (!(fill > 0.0 && fill <= 1.0))
    return Status::InvalidArgument(std::string(kind) + ": bulk_load: fill " + std::to_string(fill) +
                                   " is outside (0, 1]");
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].key >= sorted[i].key)
      return Status::InvalidArgument(std::string(kind) +
                                     ": bulk_load: keys not strictly ascending at position " +
                                     std::to_string(i));
  return Status::OK();
}

}  // namespace pmindex::skiplist
