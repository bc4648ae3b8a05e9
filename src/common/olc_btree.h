// OlcBTree: a concurrent DRAM B+-tree map uint64 -> uint64 with optimistic
// lock coupling (Leis et al., "The ART of practical synchronization").
//
// Used as the dram-btree index and as the DRAM inner layer of the trees
// whose leaves live in PM (pm_leaf_tree.h): there the tree's own leaves are
// the LAST INNER LEVEL of the persistent tree (key = a PM leaf's low fence,
// value = the PM leaf's address), read through the Cursor API below so that
// a PM leaf is reached with no DRAM indirection of its own.
//
// Contract
// - Nothing is persistent. All operations are thread-safe and linearizable
//   (a multi-leaf scan is linearizable per leaf, not as a whole), except
//   clear() and bulk_load(), which REQUIRE that no other operation runs,
//   and verify(), which REQUIRES that no writer runs.
// - Every uint64_t is a valid key, 0 and UINT64_MAX included.
// - Locks: one VersionLock per node (src/sync/version_lock.h). Readers take
//   no lock: they read a node's version, read the node with relaxed atomic
//   loads, and validate the version afterwards (restarting from the root on
//   any change). Writers descend the same way and upgrade, top-down, only
//   the nodes they change: the leaf, plus its parent when the leaf splits.
//   Full inner nodes are split eagerly on the way down (insert/upsert), so
//   a split never has to lock more than two levels.
// - Deletes never merge or free nodes; a leaf may become empty and stays
//   linked. Nodes are freed only by clear() and the destructor, so an
//   optimistic reader never touches freed memory and no epoch scheme is
//   needed. Every child pointer and every value slot a reader can load
//   holds either 0 or a value some writer stored, never a torn word.
// - Separators: an inner node with n keys has n+1 children; child i holds
//   the keys in [key[i-1], key[i]) (unbounded at the ends). A separator is
//   the low fence of the subtree on its right, and a leaf created by a
//   split starts with its low fence, so in a tree whose keys are never
//   removed every leaf but the leftmost holds its own low fence.
//
// Speed (docs/RESULTS.md): a node is a 16-byte header followed by its arrays, in
// whole cache lines, its unused key slots padded so that a search is a
// fixed sequence of probes (PaddedBound; see BoundSteps for why each probe
// branches); at the two lowest levels a descent prefetches every line of
// the next node as soon as its address is known, so each of those levels
// costs about one memory latency (the levels above stay cached).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "index/index.h"
#include "pmindex/status.h"
#include "sync/mutex.h"
#include "sync/version_lock.h"
#include "util/check.h"
#include "util/prefetch.h"

namespace pmindex {

namespace olc_detail {
// Bump allocator for the nodes of one tree. Memory comes in chunks that
// grow to 2 MiB; 2 MiB chunks are 2 MiB aligned and advised as huge pages,
// because a lookup in a large tree is dominated by TLB misses. Nothing is
// freed individually: Release() drops every chunk at once (the tree frees
// nodes only in clear() and its destructor). Thread-safe.
class NodeArena {
 public:
  NodeArena() = default;
  ~NodeArena() { Release(); }
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // 64-byte aligned, zero-filled, never null (aborts when out of memory).
  void* Allocate(size_t bytes) PMINDEX_EXCLUDES(mu_);
  // REQUIRES: no thread uses memory from this arena any more.
  void Release() PMINDEX_EXCLUDES(mu_);
  // Bytes of chunks mapped.
  uint64_t bytes_mapped() const { return mapped_.load(std::memory_order_relaxed); }

 private:
  struct Chunk {
    char* base;
    size_t size;
  };
  void NewChunk(size_t min_bytes) PMINDEX_REQUIRES(mu_);

  sync::Mutex mu_;
  std::vector<Chunk> chunks_ PMINDEX_GUARDED_BY(mu_);
  char* cur_ PMINDEX_GUARDED_BY(mu_) = nullptr;
  size_t left_ PMINDEX_GUARDED_BY(mu_) = 0;
  size_t next_size_ PMINDEX_GUARDED_BY(mu_) = 64 << 10;
  std::atomic<uint64_t> mapped_{0};
};

// A counter split over cache lines, so that writers on different cores do
// not all bounce one line on every insert and remove. Reads sum the slots
// (relaxed: a racing read sees some recent value).
//
// A thread that owns a slot (the first kSlots live threads each own one;
// an exiting thread gives its slot back) adds with a plain load and store,
// not a locked read-modify-write: a locked instruction waits until every
// earlier store and cache-line write-back has completed, which after a
// persist fence costs hundreds of ns (docs/RESULTS.md). Threads
// beyond kSlots share slots and add atomically.
class StripedCounter {
 public:
  void Add(int64_t d) {
    const ThreadSlot& t = ThisThreadSlot();
    std::atomic<int64_t>& v = slots_[t.index].v;
    if (t.owned) {
      v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    } else {
      v.fetch_add(d, std::memory_order_relaxed);
    }
  }
  uint64_t Sum() const {
    int64_t sum = 0;
    for (const Slot& s : slots_) sum += s.v.load(std::memory_order_relaxed);
    return sum < 0 ? 0 : static_cast<uint64_t>(sum);
  }
  // REQUIRES: no concurrent Add.
  void Set(uint64_t v) {
    for (Slot& s : slots_) s.v.store(0, std::memory_order_relaxed);
    slots_[0].v.store(static_cast<int64_t>(v), std::memory_order_relaxed);
  }

 private:
  static constexpr unsigned kSlots = 16;
  struct alignas(64) Slot {
    std::atomic<int64_t> v{0};
  };
  // The calling thread's slot in every StripedCounter. Ownership is claimed
  // in a process-wide mask (acquire) and released at thread exit (release),
  // so a slot's next owner sees the previous owner's last store.
  struct ThreadSlot {
    unsigned index = 0;
    bool owned = false;
    ThreadSlot() {
      static std::atomic<unsigned> spread{0};
      uint32_t m = OwnedMask().load(std::memory_order_relaxed);
      while (m != kAllOwned) {
        const unsigned i = static_cast<unsigned>(__builtin_ctz(~m));
        if (OwnedMask().compare_exchange_weak(m, m | (1u << i), std::memory_order_acquire,
                                              std::memory_order_relaxed)) {
          index = i;
          owned = true;
          return;
        }
      }
      index = spread.fetch_add(1, std::memory_order_relaxed) % kSlots;
    }
    ~ThreadSlot() {
      if (owned) OwnedMask().fetch_and(~(1u << index), std::memory_order_release);
    }
    ThreadSlot(const ThreadSlot&) = delete;
    ThreadSlot& operator=(const ThreadSlot&) = delete;
  };
  static constexpr uint32_t kAllOwned = (uint64_t{1} << kSlots) - 1;
  static std::atomic<uint32_t>& OwnedMask() {
    static std::atomic<uint32_t> mask{0};
    return mask;
  }
  static const ThreadSlot& ThisThreadSlot() {
    thread_local ThreadSlot slot;
    return slot;
  }
  Slot slots_[kSlots];
};

// Key slots a node does not use hold kPadKey. Writers keep that true (a
// new node starts padded; a remove or a split pads the slots it vacates),
// so that a node's key array is sorted over its whole capacity and a search
// can run over the capacity: a fixed sequence of probes at constant offsets
// with no loop, no count in the address arithmetic and no early exit. The
// result is clamped to the count, which only matters for k == UINT64_MAX (a
// valid key: padding compares equal to it) and for torn views.
inline constexpr uint64_t kPadKey = UINT64_MAX;

// Binary search over a node's key array read with relaxed loads (an
// optimistic reader may see a torn array; the result is then some position
// in [0, cnt], validated by the caller's version check). Each step is a
// conditional jump, not a conditional move. That is deliberate: a
// branch-free step makes every probe wait for the previous probe's line,
// while a predicted branch lets the next probe's load start before the line
// arrives. Measured on 10M keys, the branch-free form made lbtree lookups
// 35% slower (docs/RESULTS.md).
template <uint32_t kN, bool kUpper>
inline const uint64_t* BoundSteps(const uint64_t* base, uint64_t k) {
  if constexpr (kN <= 1) {
    return base;
  } else {
    constexpr uint32_t kHalf = kN / 2;
    const uint64_t probe = sync::OlcLoad(base[kHalf - 1]);
    if (kUpper ? probe <= k : probe < k) {
      base += kHalf;
      // An empty asm the compiler may not move: it keeps the step a jump
      // (GCC turns a plain `if` here into a conditional move).
      asm volatile("" : "+r"(base));
    }
    return BoundSteps<kN - kHalf, kUpper>(base, k);
  }
}
// kUpper = false: the first position whose key is >= k; true: the first
// whose key is > k (the number of keys <= k). cnt if none. keys has kCap
// slots, padded past cnt.
template <uint32_t kCap, bool kUpper>
inline uint32_t PaddedBound(const uint64_t* keys, uint32_t cnt, uint64_t k) {
  const uint64_t* base = BoundSteps<kCap, kUpper>(keys, k);
  const uint64_t last = sync::OlcLoad(*base);
  const uint32_t pos = static_cast<uint32_t>(base - keys) + ((kUpper ? last <= k : last < k) ? 1u : 0u);
  return pos < cnt ? pos : cnt;
}

}  // namespace olc_detail

// kInner: separator keys per inner node; kLeaf: entries per leaf. The
// sizes that fill whole cache lines (16-byte header + arrays) are 14 (256
// B nodes), 30 (512 B) and 62 (1 KiB); other sizes leave a partial line.
template <int kInner = 30, int kLeaf = 30>
class OlcBTree {
  static_assert(kInner >= 3 && kInner <= 4096, "inner nodes hold 3..4096 keys");
  static_assert(kLeaf >= 2 && kLeaf <= 4096, "leaves hold 2..4096 entries");

  struct NodeHeader;

 public:
  static constexpr int kInnerKeys = kInner;  // separator keys per inner node
  static constexpr int kLeafKeys = kLeaf;    // entries per leaf

  OlcBTree() { Reset(); }
  ~OlcBTree() = default;  // the arena frees every node
  OlcBTree(const OlcBTree&) = delete;
  OlcBTree& operator=(const OlcBTree&) = delete;

  // Returns true iff k was absent (and is now mapped to v).
  bool insert(uint64_t k, uint64_t v) { return Write(k, v, Mode::kInsert); }
  // Returns true iff k was present (and now maps to v).
  bool update(uint64_t k, uint64_t v) { return Write(k, v, Mode::kUpdate); }
  void upsert(uint64_t k, uint64_t v) { Write(k, v, Mode::kUpsert); }

  // Returns true iff k was present (and is now removed).
  bool remove(uint64_t k) {
    for (;;) {
      bool restart = false;
      uint64_t v = 0;
      Leaf* l = FindLeaf(k, v, restart, nullptr);
      if (restart) continue;
      uint32_t cnt = Count(l);
      uint32_t pos = LeafLower(l, cnt, k);
      if (pos == cnt || sync::OlcLoad(l->keys[pos]) != k) {
        l->h.lock.ReadUnlockOrRestart(v, restart);
        if (restart) continue;
        return false;
      }
      l->h.lock.UpgradeToWriteLockOrRestart(v, restart);
      if (restart) continue;
      for (uint32_t i = pos; i + 1 < cnt; ++i) {
        sync::OlcStore(l->keys[i], l->keys[i + 1]);
        sync::OlcStore(l->values[i], l->values[i + 1]);
      }
      PadKeys(l->keys, cnt - 1, cnt);
      sync::OlcStore(l->h.count, cnt - 1);
      l->h.lock.WriteUnlock();
      size_.Add(-1);
      return true;
    }
  }

  std::optional<uint64_t> lookup(uint64_t k) const {
    for (;;) {
      bool restart = false;
      uint64_t v = 0;
      const Leaf* l = FindLeaf(k, v, restart, nullptr);
      if (restart) continue;
      uint32_t cnt = Count(l);
      uint32_t pos = LeafLower(l, cnt, k);
      bool found = pos < cnt && sync::OlcLoad(l->keys[pos]) == k;
      uint64_t value = found ? sync::OlcLoad(l->values[pos]) : 0;
      l->h.lock.ReadUnlockOrRestart(v, restart);
      if (restart) continue;
      if (!found) return std::nullopt;
      return value;
    }
  }

  // Greatest key <= k with its value, or nullopt if every key > k.
  std::optional<std::pair<uint64_t, uint64_t>> floor(uint64_t k) const {
    Cursor c;
    for (;;) {
      SeekResult r = Seek(k, &c);
      if (r == SeekResult::kRetry) continue;
      if (r == SeekResult::kNone) return std::nullopt;
      if (!Valid(c)) continue;
      return std::make_pair(c.key, c.value);
    }
  }

  // Smallest key > k with its value (moving right along the leaf list).
  std::optional<std::pair<uint64_t, uint64_t>> next(uint64_t k) const {
    if (k == UINT64_MAX) return std::nullopt;
    KV kv;
    if (scan(k + 1, 1, &kv) == 0) return std::nullopt;
    return std::make_pair(kv.key, kv.value);
  }

  // Copies up to n pairs with key >= from, ascending, into out. Each leaf is
  // read consistently; the scan moves right along the leaf links.
  size_t scan(uint64_t from, size_t n, KV* out) const {
    size_t got = 0;
    while (got < n) {
      bool restart = false;
      uint64_t v = 0;
      const Leaf* l = FindLeaf(from, v, restart, nullptr);
      if (restart) continue;
      for (;;) {
        uint32_t cnt = Count(l);
        uint32_t pos = LeafLower(l, cnt, from);
        size_t take = std::min<size_t>(cnt - pos, n - got);
        for (size_t i = 0; i < take; ++i) {
          out[got + i].key = sync::OlcLoad(l->keys[pos + i]);
          out[got + i].value = sync::OlcLoad(l->values[pos + i]);
        }
        const Leaf* nx = sync::OlcLoadPtr(l->next);
        l->h.lock.ReadUnlockOrRestart(v, restart);
        if (restart) break;  // re-descend from `from`
        got += take;
        if (got == n) return got;
        if (take > 0) {
          uint64_t last = out[got - 1].key;
          if (last == UINT64_MAX) return got;
          from = last + 1;
        }
        if (nx == nullptr) return got;
        l = nx;
        PrefetchLines(l, sizeof(Leaf));
        v = l->h.lock.ReadLockOrRestart(restart);
        if (restart) break;
      }
    }
    return got;
  }

  // ------------------------------------------------------------- cursor
  // An optimistic position at one entry of a leaf, for callers that read
  // memory the value points to before validating (the PM leaf layer):
  //   Cursor c;
  //   if (Seek(k, &c) != SeekResult::kFound) ...;   // kRetry: call again
  //   ... read what c.value names (c.value != 0 is guaranteed) ...
  //   if (!Valid(c)) retry;                          // else the reads hold
  // Every field of a cursor is a guess until Valid(c) returns true; then
  // the leaf was unchanged from the descent to that call, so the entry was
  // the floor of k and [c.key, c.high) (c.high unbounded iff !c.has_high)
  // was its key range in the leaf's view (the next key, or the leaf's
  // upper fence from the descent).
  struct Cursor {
    const void* node = nullptr;  // the leaf (opaque)
    uint64_t version = 0;
    uint32_t pos = 0;  // the entry's index in the leaf
    uint32_t cnt = 0;  // the leaf's entry count at the descent
    uint64_t key = 0, value = 0;
    uint64_t high = 0;
    bool has_high = false;
    uint64_t fence_high = 0;  // the leaf's upper fence from the descent
    bool has_fence_high = false;
  };
  enum class SeekResult { kFound, kNone, kRetry };

  // Positions c at the floor entry of k (the greatest key <= k). kNone:
  // every key is > k (validated). kRetry: a concurrent change was seen.
  SeekResult Seek(uint64_t k, Cursor* c) const {
    for (;;) {
      bool restart = false;
      uint64_t v = 0;
      Fences f;
      const Leaf* l = FindLeaf(k, v, restart, &f);
      if (restart) return SeekResult::kRetry;
      const uint32_t cnt = Count(l);
      const uint32_t pos = LeafUpper(l, cnt, k);  // first key > k
      if (pos == 0) {
        // Every key of this leaf is > k (or it is empty): the floor is the
        // greatest key below the leaf's low fence.
        l->h.lock.ReadUnlockOrRestart(v, restart);
        if (restart) return SeekResult::kRetry;
        if (!f.has_low || f.low == 0) return SeekResult::kNone;
        k = f.low - 1;
        continue;
      }
      c->node = l;
      c->version = v;
      c->pos = pos - 1;
      c->cnt = cnt;
      c->key = sync::OlcLoad(l->keys[pos - 1]);
      c->value = sync::OlcLoad(l->values[pos - 1]);
      c->fence_high = f.high;
      c->has_fence_high = f.has_high;
      SetHigh(l, c);
      if (c->value == 0) {
        // A slot a writer has not filled yet: only a torn view shows it,
        // unless 0 was stored as a value (then validation succeeds).
        if (!Valid(*c)) return SeekResult::kRetry;
      }
      return SeekResult::kFound;
    }
  }
  // Seek for point operations: sets only c->node, c->version and c->value
  // (no key range, so NextInLeaf must not follow), with fewer loads and
  // stores on the hot path than Seek. Always inlined, and *c never passed
  // on, so that the caller's cursor can live in registers: every store of
  // an operation that follows a persist fence waits in the store queue
  // until the fence's write-backs complete, and once the queue is full the
  // next operation stalls (docs/RESULTS.md).
  [[gnu::always_inline]] SeekResult SeekPoint(uint64_t k, Cursor* c) const {
    bool restart = false;
    uint64_t v = 0;
    const Leaf* l = FindLeaf(k, v, restart, nullptr);
    if (restart) return SeekResult::kRetry;
    const uint32_t pos = LeafUpper(l, Count(l), k);
    // pos == 0: the floor is in a leaf to the left (never in routing use,
    // where every leaf holds its low fence); the full Seek handles it.
    if (pos == 0) {
      Cursor full;
      const SeekResult r = SeekOutOfLine(k, &full);
      c->node = full.node;
      c->version = full.version;
      c->value = full.value;
      return r;
    }
    c->node = l;
    c->version = v;
    c->value = sync::OlcLoad(l->values[pos - 1]);
    if (c->value == 0 && !Valid(*c)) return SeekResult::kRetry;
    return SeekResult::kFound;
  }
  [[gnu::noinline]] SeekResult SeekOutOfLine(uint64_t k, Cursor* c) const { return Seek(k, c); }
  // True iff the cursor's leaf is unchanged since the Seek that made it.
  bool Valid(const Cursor& c) const {
    bool restart = false;
    AsLeaf(c)->h.lock.ReadUnlockOrRestart(c.version, restart);
    return !restart;
  }
  // Moves c to the next entry of the same leaf. False at the leaf's end
  // (the caller seeks again at c.high). A guess until Valid(c).
  bool NextInLeaf(Cursor* c) const {
    if (c->pos + 1 >= c->cnt) return false;
    const Leaf* l = AsLeaf(*c);
    ++c->pos;
    c->key = sync::OlcLoad(l->keys[c->pos]);
    c->value = sync::OlcLoad(l->values[c->pos]);
    SetHigh(l, c);
    return c->value != 0 || Valid(*c);
  }
  // Write-locks the cursor's leaf iff it is unchanged since the Seek;
  // readers of the leaf then restart until UnlockLeaf. No other change of
  // the tree is made: it only tells optimistic readers that something the
  // leaf's entries point to is about to change (pm_leaf_tree.h).
  bool LockLeaf(Cursor& c) const {
    bool restart = false;
    const_cast<Leaf*>(AsLeaf(c))->h.lock.UpgradeToWriteLockOrRestart(c.version, restart);
    return !restart;
  }
  // Unlocks the leaf LockLeaf locked; c.version becomes the leaf's new
  // version, so that InsertNextTo can tell whether anyone changed it since.
  void UnlockLeaf(Cursor& c) const {
    const_cast<Leaf*>(AsLeaf(c))->h.lock.WriteUnlock();
    c.version += sync::VersionLock::kLockedBit;
  }
  // Inserts (k, v) into the cursor's leaf without a descent, iff the leaf
  // is unchanged since c.version, has room, and k is above the cursor's
  // entry and absent. For a caller that knows k belongs next to the entry
  // the cursor names (PmLeafTree's leaf split: the new PM leaf's low fence
  // lies inside the range of the entry's PM leaf). The unchanged version
  // is what makes that knowledge still true. False: nothing was changed;
  // use insert().
  bool InsertNextTo(const Cursor& c, uint64_t k, uint64_t v) {
    Leaf* l = const_cast<Leaf*>(AsLeaf(c));
    uint64_t ver = c.version;
    bool restart = false;
    l->h.lock.UpgradeToWriteLockOrRestart(ver, restart);
    if (restart) return false;
    const uint32_t cnt = l->h.count;
    const uint32_t pos = LeafUpper(l, cnt, k);  // first key > k
    if (cnt == static_cast<uint32_t>(kLeaf) || pos == 0 || l->keys[pos - 1] == k ||
        l->values[pos - 1] != c.value) {
      l->h.lock.WriteUnlock();
      return false;
    }
    InsertAt(l, cnt, pos, k, v);
    l->h.lock.WriteUnlock();
    size_.Add(1);
    return true;
  }

  // Builds the tree from strictly ascending pairs, filling leaves and inner
  // nodes to `fill` of their capacity. REQUIRES: size() == 0, no concurrent
  // operation, keys strictly ascending, 0 < fill <= 1 (checked; a violation
  // aborts — the Index wrapper validates and returns a Status first).
  void bulk_load(std::span<const KV> sorted, double fill) {
    PMINDEX_CHECK(size() == 0, "OlcBTree: bulk_load on a non-empty tree");
    PMINDEX_CHECK(fill > 0.0 && fill <= 1.0, "OlcBTree: bulk_load fill %g outside (0, 1]", fill);
    for (size_t i = 1; i < sorted.size(); ++i) {
      PMINDEX_CHECK(sorted[i - 1].key < sorted[i].key,
                    "OlcBTree: bulk_load keys not strictly ascending at %zu", i);
    }
    if (sorted.empty()) return;
    arena_.Release();
    const size_t n = sorted.size();

    size_t per_leaf = std::clamp<size_t>(std::llround(kLeaf * fill), 1, kLeaf);
    size_t nleaves = (n + per_leaf - 1) / per_leaf;
    std::vector<NodeHeader*> level;
    std::vector<uint64_t> lows;
    level.reserve(nleaves);
    lows.reserve(nleaves);
    Leaf* prev = nullptr;
    for (size_t i = 0; i < nleaves; ++i) {
      // Even distribution: every leaf gets floor or ceil of n / nleaves.
      size_t b = i * n / nleaves, e = (i + 1) * n / nleaves;
      Leaf* l = NewLeaf();
      for (size_t j = b; j < e; ++j) {
        l->keys[j - b] = sorted[j].key;
        l->values[j - b] = sorted[j].value;
      }
      l->h.count = static_cast<uint32_t>(e - b);
      if (prev != nullptr) prev->next = l;
      prev = l;
      level.push_back(&l->h);
      lows.push_back(sorted[b].key);
    }
    uint64_t inner_count = 0;
    uint32_t height = 1;
    size_t per_inner = std::clamp<size_t>(std::llround((kInner + 1) * fill), 2, kInner + 1);
    while (level.size() > 1) {
      size_t m = level.size();
      size_t groups = (m + per_inner - 1) / per_inner;
      std::vector<NodeHeader*> up;
      std::vector<uint64_t> up_lows;
      up.reserve(groups);
      up_lows.reserve(groups);
      for (size_t g = 0; g < groups; ++g) {
        size_t b = g * m / groups, e = (g + 1) * m / groups;
        Inner* in = NewInner(static_cast<uint8_t>(height));
        for (size_t j = b; j < e; ++j) {
          in->children[j - b] = level[j];
          if (j > b) in->keys[j - b - 1] = lows[j];
        }
        in->h.count = static_cast<uint32_t>(e - b - 1);
        up.push_back(&in->h);
        up_lows.push_back(lows[b]);
      }
      inner_count += groups;
      ++height;
      level.swap(up);
      lows.swap(up_lows);
    }
    leaves_.store(nleaves, std::memory_order_relaxed);
    inner_nodes_.store(inner_count, std::memory_order_relaxed);
    height_.store(height, std::memory_order_relaxed);
    size_.Set(n);
    root_.store(level[0], std::memory_order_release);
  }

  // Frees every node and leaves an empty tree. REQUIRES: no concurrent
  // operation (optimistic readers could still be inside the nodes).
  void clear() {
    arena_.Release();
    Reset();
  }

  // Calls fn(key, value) for every entry in key order. REQUIRES: no writer
  // runs.
  template <class Fn>
  void ForEach(Fn&& fn) const {
    const NodeHeader* n = root_.load(std::memory_order_acquire);
    while (!n->is_leaf) n = AsInner(n)->children[0];
    for (const Leaf* l = AsLeaf(n); l != nullptr; l = l->next) {
      for (uint32_t i = 0; i < l->h.count; ++i) fn(l->keys[i], l->values[i]);
    }
  }

  // Walks the whole tree: key order inside nodes, keys inside the fences
  // inherited from the parents, all leaves at one depth, the leaf chain in
  // key order, node/entry counters, no lock held. REQUIRES: no writer runs.
  Status verify() const {
    VerifyState st;
    const NodeHeader* root = root_.load(std::memory_order_acquire);
    Status s = VerifyNode(root, 1, 0, false, 0, false, st);
    if (!s.ok()) return s;
    for (size_t i = 0; i < st.leaves.size(); ++i) {
      const Leaf* want = i + 1 < st.leaves.size() ? st.leaves[i + 1] : nullptr;
      if (sync::OlcLoadPtr(st.leaves[i]->next) != want) {
        return Status::Corruption("leaf " + std::to_string(i) +
                                  ": next link does not point to the following leaf");
      }
    }
    if (st.entries != size()) {
      return Status::Corruption("tree holds " + std::to_string(st.entries) +
                                " entries but size() is " + std::to_string(size()));
    }
    if (st.leaves.size() != leaves() || st.inner != inner_nodes()) {
      return Status::Corruption("node counters (" + std::to_string(inner_nodes()) + " inner, " +
                                std::to_string(leaves()) + " leaves) differ from the tree (" +
                                std::to_string(st.inner) + ", " +
                                std::to_string(st.leaves.size()) + ")");
    }
    if (st.leaf_depth != height()) {
      return Status::Corruption("leaves at depth " + std::to_string(st.leaf_depth) +
                                " but height() is " + std::to_string(height()));
    }
    return Status::OK();
  }

  size_t size() const { return size_.Sum(); }
  // Levels including the leaves (1 for a tree that is a single leaf).
  uint32_t height() const { return height_.load(std::memory_order_relaxed); }
  uint64_t inner_nodes() const { return inner_nodes_.load(std::memory_order_relaxed); }
  uint64_t leaves() const { return leaves_.load(std::memory_order_relaxed); }
  uint64_t dram_bytes() const {
    return inner_nodes() * sizeof(Inner) + leaves() * sizeof(Leaf) + sizeof(*this);
  }
  static constexpr size_t kInnerBytes() { return sizeof(Inner); }
  static constexpr size_t kLeafBytes() { return sizeof(Leaf); }

 private:
  // Node header, first 16 bytes of every node:
  //   [0, 8)    VersionLock  lock bit, obsolete bit, version
  //   [8, 12)   count        keys in use (inner: children = count + 1)
  //   [12]      is_leaf      fixed at construction
  //   [13]      level        height above the leaves (0: a leaf), fixed
  struct NodeHeader {
    sync::VersionLock lock;
    uint32_t count = 0;
    bool is_leaf = false;
    uint8_t level = 0;
  };
  static_assert(sizeof(NodeHeader) == 16);

  // Inner node: header, keys[kInner], children[kInner + 1]; with kInner =
  // 30 exactly 8 lines: [0,16) header, [16,256) keys, [256,504) children.
  // Key slots past the count hold olc_detail::kPadKey (in leaves too).
  struct alignas(64) Inner {
    explicit Inner(uint8_t level) {
      h.is_leaf = false;
      h.level = level;
      std::fill(std::begin(keys), std::end(keys), olc_detail::kPadKey);
    }
    NodeHeader h;
    uint64_t keys[kInner];  // padded by the constructor
    NodeHeader* children[kInner + 1] = {};
  };
  // Leaf: header, next (right sibling), keys[kLeaf] (sorted), values[kLeaf].
  // Keys and values are separate arrays so that a search touches only keys.
  struct alignas(64) Leaf {
    Leaf() {
      h.is_leaf = true;
      std::fill(std::begin(keys), std::end(keys), olc_detail::kPadKey);
    }
    NodeHeader h;
    Leaf* next = nullptr;
    uint64_t keys[kLeaf];  // padded by the constructor
    uint64_t values[kLeaf] = {};
  };
  static_assert(offsetof(Inner, h) == 0 && offsetof(Leaf, h) == 0);
  static_assert(offsetof(Inner, keys) == 16 && offsetof(Leaf, keys) == 24);
  static_assert(alignof(Inner) == 64 && alignof(Leaf) == 64);

  static const Inner* AsInner(const NodeHeader* n) { return reinterpret_cast<const Inner*>(n); }
  static Inner* AsInner(NodeHeader* n) { return reinterpret_cast<Inner*>(n); }
  static const Leaf* AsLeaf(const NodeHeader* n) { return reinterpret_cast<const Leaf*>(n); }
  static Leaf* AsLeaf(NodeHeader* n) { return reinterpret_cast<Leaf*>(n); }
  static const Leaf* AsLeaf(const Cursor& c) { return static_cast<const Leaf*>(c.node); }

  enum class Mode { kInsert, kUpsert, kUpdate };

  struct Fences {
    uint64_t low = 0, high = 0;
    bool has_low = false, has_high = false;
  };

  // Searches in a node (olc_detail::PaddedBound): cnt is the node's count.
  static uint32_t LeafLower(const Leaf* l, uint32_t cnt, uint64_t k) {
    return olc_detail::PaddedBound<kLeaf, false>(l->keys, cnt, k);
  }
  static uint32_t LeafUpper(const Leaf* l, uint32_t cnt, uint64_t k) {
    return olc_detail::PaddedBound<kLeaf, true>(l->keys, cnt, k);
  }
  static uint32_t InnerUpper(const Inner* in, uint32_t cnt, uint64_t k) {
    return olc_detail::PaddedBound<kInner, true>(in->keys, cnt, k);
  }
  // Inserts (k, v) at pos of a write-locked leaf holding cnt < kLeaf
  // entries, shifting the entries from pos one slot right.
  static void InsertAt(Leaf* l, uint32_t cnt, uint32_t pos, uint64_t k, uint64_t v) {
    for (uint32_t i = cnt; i > pos; --i) {
      sync::OlcStore(l->keys[i], l->keys[i - 1]);
      sync::OlcStore(l->values[i], l->values[i - 1]);
    }
    sync::OlcStore(l->keys[pos], k);
    sync::OlcStore(l->values[pos], v);
    sync::OlcStore(l->h.count, cnt + 1);
  }
  // Stores the padding into the key slots [from, to) of a locked node.
  static void PadKeys(uint64_t* keys, uint32_t from, uint32_t to) {
    for (uint32_t i = from; i < to; ++i) sync::OlcStore(keys[i], olc_detail::kPadKey);
  }

  static uint32_t Count(const Inner* n) { return Clamp(sync::OlcLoad(n->h.count), kInner); }
  static uint32_t Count(const Leaf* n) { return Clamp(sync::OlcLoad(n->h.count), kLeaf); }
  // A torn view cannot exceed capacity (writers only store valid counts),
  // but clamp so that no optimistic read can leave the node.
  static uint32_t Clamp(uint32_t c, int cap) { return c < static_cast<uint32_t>(cap) ? c : cap; }

  static void SetHigh(const Leaf* l, Cursor* c) {
    if (c->pos + 1 < c->cnt) {
      c->high = sync::OlcLoad(l->keys[c->pos + 1]);
      c->has_high = true;
    } else {
      c->high = c->fence_high;
      c->has_high = c->has_fence_high;
    }
  }

  // Every line of a node reached during a descent, started at once so that
  // the search does not wait for one cache miss per probe. Only the two
  // lowest levels: each level above holds at most 1/kInner of the nodes of
  // the level below, so those stay in the cache and prefetching them only
  // adds instructions to every descent.
  static void PrefetchChild(const Inner* parent, const NodeHeader* child) {
    constexpr size_t kBytes = sizeof(Inner) > sizeof(Leaf) ? sizeof(Inner) : sizeof(Leaf);
    if (parent->h.level <= 2) PrefetchLines(child, kBytes);
  }

  // Optimistic descent to the leaf covering k. On return with restart ==
  // false, `v` is the leaf's read version (validated against its parent) and
  // *f, if given, holds the leaf's fences.
  [[gnu::always_inline]] Leaf* FindLeaf(uint64_t k, uint64_t& v, bool& restart,
                                        Fences* f) const {
    NodeHeader* node = root_.load(std::memory_order_acquire);
    v = node->lock.ReadLockOrRestart(restart);
    // A root split publishes the new root before unlocking the old one.
    if (restart || node != root_.load(std::memory_order_acquire)) {
      restart = true;
      return nullptr;
    }
    while (!node->is_leaf) {
      const Inner* in = AsInner(node);
      uint32_t cnt = Count(in);
      uint32_t pos = InnerUpper(in, cnt, k);
      if (f != nullptr) {
        if (pos > 0) {
          f->low = sync::OlcLoad(in->keys[pos - 1]);
          f->has_low = true;
        }
        if (pos < cnt) {
          f->high = sync::OlcLoad(in->keys[pos]);
          f->has_high = true;
        }
      }
      NodeHeader* child = sync::OlcLoadPtr(in->children[pos]);
      if (child == nullptr) {
        restart = true;
        return nullptr;
      }
      PrefetchChild(in, child);
      uint64_t cv = child->lock.ReadLockOrRestart(restart);
      if (restart) return nullptr;
      // Validating the parent after reading the child's version proves that
      // the child was the right one when its version was taken.
      in->h.lock.ReadUnlockOrRestart(v, restart);
      if (restart) return nullptr;
      node = child;
      v = cv;
    }
    return AsLeaf(node);
  }

  bool Write(uint64_t k, uint64_t val, Mode mode) {
    for (;;) {
      bool restart = false;
      NodeHeader* node = root_.load(std::memory_order_acquire);
      uint64_t v = node->lock.ReadLockOrRestart(restart);
      if (restart || node != root_.load(std::memory_order_acquire)) continue;
      Inner* parent = nullptr;
      uint64_t pv = 0;
      bool rightmost = true;  // every step so far took the last child
      while (!node->is_leaf) {
        Inner* in = AsInner(node);
        uint32_t cnt = Count(in);
        if (cnt == kInner && mode != Mode::kUpdate) {
          if (LockForSplit(parent, pv, &in->h, v)) {
            SplitInner(in, parent);
            Unlock(parent, &in->h);
          }
          restart = true;
          break;
        }
        uint32_t pos = InnerUpper(in, cnt, k);
        rightmost = rightmost && pos == cnt;
        NodeHeader* child = sync::OlcLoadPtr(in->children[pos]);
        if (child == nullptr) {
          restart = true;
          break;
        }
        PrefetchChild(in, child);
        uint64_t cv = child->lock.ReadLockOrRestart(restart);
        if (restart) break;
        in->h.lock.ReadUnlockOrRestart(v, restart);
        if (restart) break;
        parent = in;
        pv = v;
        node = child;
        v = cv;
      }
      if (restart) continue;

      Leaf* l = AsLeaf(node);
      uint32_t cnt = Count(l);
      uint32_t pos = LeafLower(l, cnt, k);
      bool found = pos < cnt && sync::OlcLoad(l->keys[pos]) == k;
      if (found ? mode == Mode::kInsert : mode == Mode::kUpdate) {
        l->h.lock.ReadUnlockOrRestart(v, restart);
        if (restart) continue;
        return false;
      }
      if (!found && cnt == kLeaf) {
        if (LockForSplit(parent, pv, &l->h, v)) {
          // Ascending inserts at the right end: leave the left leaf full.
          bool append = rightmost && pos == cnt;
          SplitLeaf(l, parent, append ? k : 0, append);
          Unlock(parent, &l->h);
        }
        continue;
      }
      // The upgrade succeeds only if the leaf is unchanged since `v`, which
      // validates cnt, pos and found.
      l->h.lock.UpgradeToWriteLockOrRestart(v, restart);
      if (restart) continue;
      if (found) {
        sync::OlcStore(l->values[pos], val);
      } else {
        InsertAt(l, cnt, pos, k, val);
      }
      l->h.lock.WriteUnlock();
      if (!found) size_.Add(1);
      return mode == Mode::kUpdate ? found : !found;
    }
  }

  // Write-locks parent (if any) and node iff both are unchanged since their
  // versions were read; a node without parent must still be the root.
  bool LockForSplit(Inner* parent, uint64_t pv, NodeHeader* node, uint64_t v) {
    bool restart = false;
    if (parent != nullptr) {
      parent->h.lock.UpgradeToWriteLockOrRestart(pv, restart);
      if (restart) return false;
    }
    node->lock.UpgradeToWriteLockOrRestart(v, restart);
    if (restart) {
      if (parent != nullptr) parent->h.lock.WriteUnlock();
      return false;
    }
    if (parent == nullptr && node != root_.load(std::memory_order_acquire)) {
      node->lock.WriteUnlock();
      return false;
    }
    return true;
  }
  static void Unlock(Inner* parent, NodeHeader* node) {
    node->lock.WriteUnlock();
    if (parent != nullptr) parent->h.lock.WriteUnlock();
  }

  // REQUIRES: l and parent (if any) write-locked, l full, parent not full.
  // append: move nothing; the new right leaf starts at `append_key`.
  void SplitLeaf(Leaf* l, Inner* parent, uint64_t append_key, bool append) {
    uint32_t cnt = l->h.count;
    uint32_t keep = append ? cnt : (cnt + 1) / 2;
    Leaf* r = NewLeaf();
    for (uint32_t i = keep; i < cnt; ++i) {
      r->keys[i - keep] = l->keys[i];
      r->values[i - keep] = l->values[i];
    }
    r->h.count = cnt - keep;
    r->next = l->next;
    uint64_t sep = append ? append_key : r->keys[0];
    PadKeys(l->keys, keep, cnt);
    sync::OlcStore(l->h.count, keep);
    sync::OlcPublishPtr(l->next, r);
    leaves_.fetch_add(1, std::memory_order_relaxed);
    Link(&l->h, parent, sep, &r->h);
  }

  // REQUIRES: in and parent (if any) write-locked, in full, parent not full.
  void SplitInner(Inner* in, Inner* parent) {
    uint32_t cnt = in->h.count;
    uint32_t mid = cnt / 2;
    uint64_t sep = in->keys[mid];
    Inner* r = NewInner(in->h.level);
    for (uint32_t i = mid + 1; i < cnt; ++i) r->keys[i - mid - 1] = in->keys[i];
    for (uint32_t i = mid + 1; i <= cnt; ++i) r->children[i - mid - 1] = in->children[i];
    r->h.count = cnt - mid - 1;
    PadKeys(in->keys, mid, cnt);
    sync::OlcStore(in->h.count, mid);
    inner_nodes_.fetch_add(1, std::memory_order_relaxed);
    Link(&in->h, parent, sep, &r->h);
  }

  // Makes `right` (fully initialized) reachable: a new separator in parent,
  // or a new root above left and right.
  void Link(NodeHeader* left, Inner* parent, uint64_t sep, NodeHeader* right) {
    if (parent == nullptr) {
      Inner* root = NewInner(static_cast<uint8_t>(left->level + 1));
      root->keys[0] = sep;
      root->children[0] = left;
      root->children[1] = right;
      root->h.count = 1;
      inner_nodes_.fetch_add(1, std::memory_order_relaxed);
      height_.fetch_add(1, std::memory_order_relaxed);
      root_.store(&root->h, std::memory_order_release);
      return;
    }
    uint32_t cnt = parent->h.count;
    PMINDEX_CHECK(cnt < static_cast<uint32_t>(kInner), "OlcBTree: split into a full parent");
    uint32_t pos = InnerUpper(parent, cnt, sep);
    for (uint32_t i = cnt; i > pos; --i) {
      sync::OlcStore(parent->keys[i], parent->keys[i - 1]);
      sync::OlcPublishPtr(parent->children[i + 1], parent->children[i]);
    }
    sync::OlcStore(parent->keys[pos], sep);
    sync::OlcPublishPtr(parent->children[pos + 1], right);
    sync::OlcStore(parent->h.count, cnt + 1);
  }

  void Reset() {
    size_.Set(0);
    inner_nodes_.store(0, std::memory_order_relaxed);
    leaves_.store(1, std::memory_order_relaxed);
    height_.store(1, std::memory_order_relaxed);
    root_.store(&NewLeaf()->h, std::memory_order_release);
  }

  Leaf* NewLeaf() { return new (arena_.Allocate(sizeof(Leaf))) Leaf(); }
  Inner* NewInner(uint8_t level) { return new (arena_.Allocate(sizeof(Inner))) Inner(level); }

  struct VerifyState {
    std::vector<const Leaf*> leaves;
    uint64_t inner = 0;
    uint64_t entries = 0;
    uint32_t leaf_depth = 0;
  };

  static std::string Range(uint64_t lo, bool has_lo, uint64_t hi, bool has_hi) {
    std::string r(1, '[');
    r += has_lo ? std::to_string(lo) : std::string("-inf");
    r += ", ";
    r += has_hi ? std::to_string(hi) : std::string("+inf");
    r += ')';
    return r;
  }

  Status VerifyNode(const NodeHeader* n, uint32_t depth, uint64_t lo, bool has_lo, uint64_t hi,
                    bool has_hi, VerifyState& st) const {
    if (n->lock.IsLocked() || n->lock.IsObsolete()) {
      return Status::Corruption("node at depth " + std::to_string(depth) +
                                " is locked or obsolete");
    }
    uint32_t cnt = sync::OlcLoad(n->count);
    uint32_t cap = n->is_leaf ? kLeaf : kInner;
    if (cnt > cap) {
      return Status::Corruption("node at depth " + std::to_string(depth) + " holds " +
                                std::to_string(cnt) + " keys, capacity " + std::to_string(cap));
    }
    const uint64_t* keys = n->is_leaf ? AsLeaf(n)->keys : AsInner(n)->keys;
    for (uint32_t i = 0; i < cnt; ++i) {
      uint64_t key = sync::OlcLoad(keys[i]);
      if ((has_lo && key < lo) || (has_hi && key >= hi)) {
        return Status::Corruption("key " + std::to_string(key) + " at depth " +
                                  std::to_string(depth) + " outside its fences " +
                                  Range(lo, has_lo, hi, has_hi));
      }
      if (i > 0 && sync::OlcLoad(keys[i - 1]) >= key) {
        return Status::Corruption("keys out of order at depth " + std::to_string(depth) + ": " +
                                  std::to_string(sync::OlcLoad(keys[i - 1])) + " before " +
                                  std::to_string(key));
      }
    }
    for (uint32_t i = cnt; i < cap; ++i) {
      if (sync::OlcLoad(keys[i]) != olc_detail::kPadKey) {
        return Status::Corruption("unused key slot " + std::to_string(i) + " at depth " +
                                  std::to_string(depth) + " is not padded (the searches run "
                                  "over the whole node)");
      }
    }
    if (n->is_leaf) {
      if (st.leaf_depth == 0) st.leaf_depth = depth;
      if (st.leaf_depth != depth) {
        return Status::Corruption("leaves at depths " + std::to_string(st.leaf_depth) + " and " +
                                  std::to_string(depth));
      }
      st.leaves.push_back(AsLeaf(n));
      st.entries += cnt;
      return Status::OK();
    }
    const Inner* in = AsInner(n);
    ++st.inner;
    for (uint32_t i = 0; i <= cnt; ++i) {
      const NodeHeader* c = sync::OlcLoadPtr(in->children[i]);
      if (c == nullptr) {
        return Status::Corruption("null child " + std::to_string(i) + " at depth " +
                                  std::to_string(depth));
      }
      uint64_t clo = i > 0 ? sync::OlcLoad(in->keys[i - 1]) : lo;
      bool chas_lo = i > 0 || has_lo;
      uint64_t chi = i < cnt ? sync::OlcLoad(in->keys[i]) : hi;
      bool chas_hi = i < cnt || has_hi;
      Status s = VerifyNode(c, depth + 1, clo, chas_lo, chi, chas_hi, st);
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  olc_detail::NodeArena arena_;  // declared first: destroyed last
  std::atomic<NodeHeader*> root_{nullptr};
  olc_detail::StripedCounter size_;
  std::atomic<uint64_t> inner_nodes_{0};
  std::atomic<uint64_t> leaves_{0};
  std::atomic<uint32_t> height_{1};
};

}  // namespace pmindex
