// OlcBTree: a concurrent DRAM B+-tree map uint64 -> uint64 with optimistic
// lock coupling (Leis et al., "The ART of practical synchronization").
//
// Used as the dram-btree index and as the DRAM inner layer of the trees
// whose inner nodes live in DRAM (routing: key = a leaf's low fence key,
// value = the leaf's address; floor(k) finds the leaf covering k).
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
//   needed.
// - Separators: an inner node with n keys has n+1 children; child i holds
//   the keys in [key[i-1], key[i]) (unbounded at the ends). A separator is
//   the low fence of the subtree on its right.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "pmindex/index.h"
#include "pmindex/status.h"
#include "sync/version_lock.h"

namespace pmindex {

namespace olc_detail {
// A broken invariant or a violated REQUIRES: stop, in every build type.
[[noreturn]] inline void Die(const char* what) {
  std::fprintf(stderr, "pmindex: OlcBTree: %s\n", what);
  std::abort();
}

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
  void* Allocate(size_t bytes);
  // REQUIRES: no thread uses memory from this arena any more.
  void Release();
  // Bytes of chunks mapped.
  uint64_t bytes_mapped() const { return mapped_.load(std::memory_order_relaxed); }

 private:
  struct Chunk {
    char* base;
    size_t size;
  };
  void NewChunk(size_t min_bytes);

  std::mutex mu_;
  std::vector<Chunk> chunks_;
  char* cur_ = nullptr;
  size_t left_ = 0;
  size_t next_size_ = 64 << 10;
  std::atomic<uint64_t> mapped_{0};
};

// A counter split over cache lines, so that writers on different cores do
// not all bounce one line on every insert and remove. Reads sum the slots
// (relaxed: a racing read sees some recent value).
class StripedCounter {
 public:
  void Add(int64_t d) { slots_[ThisThreadSlot()].v.fetch_add(d, std::memory_order_relaxed); }
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
  static unsigned ThisThreadSlot() {
    static std::atomic<unsigned> next{0};
    thread_local unsigned slot = next.fetch_add(1, std::memory_order_relaxed) % kSlots;
    return slot;
  }
  Slot slots_[kSlots];
};
}  // namespace olc_detail

template <int kInner = 32, int kLeaf = 32>
class OlcBTree {
  static_assert(kInner >= 3 && kInner <= 4096, "inner nodes hold 3..4096 keys");
  static_assert(kLeaf >= 2 && kLeaf <= 4096, "leaves hold 2..4096 entries");

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
      uint32_t pos = LowerBound(l->keys, cnt, k);
      if (pos == cnt || sync::OlcLoad(l->keys[pos]) != k) {
        l->lock.ReadUnlockOrRestart(v, restart);
        if (restart) continue;
        return false;
      }
      l->lock.UpgradeToWriteLockOrRestart(v, restart);
      if (restart) continue;
      for (uint32_t i = pos; i + 1 < cnt; ++i) {
        sync::OlcStore(l->keys[i], l->keys[i + 1]);
        sync::OlcStore(l->values[i], l->values[i + 1]);
      }
      sync::OlcStore(l->count, cnt - 1);
      l->lock.WriteUnlock();
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
      uint32_t pos = LowerBound(l->keys, cnt, k);
      bool found = pos < cnt && sync::OlcLoad(l->keys[pos]) == k;
      uint64_t value = found ? sync::OlcLoad(l->values[pos]) : 0;
      l->lock.ReadUnlockOrRestart(v, restart);
      if (restart) continue;
      if (!found) return std::nullopt;
      return value;
    }
  }

  // Greatest key <= k with its value, or nullopt if every key > k.
  std::optional<std::pair<uint64_t, uint64_t>> floor(uint64_t k) const {
    for (;;) {
      bool restart = false;
      uint64_t v = 0;
      Fences f;
      const Leaf* l = FindLeaf(k, v, restart, &f);
      if (restart) continue;
      uint32_t cnt = Count(l);
      uint32_t pos = LowerBound(l->keys, cnt, k);
      if (pos < cnt && sync::OlcLoad(l->keys[pos]) == k) ++pos;  // pos = first key > k
      std::pair<uint64_t, uint64_t> kv{0, 0};
      if (pos > 0) kv = {sync::OlcLoad(l->keys[pos - 1]), sync::OlcLoad(l->values[pos - 1])};
      l->lock.ReadUnlockOrRestart(v, restart);
      if (restart) continue;
      if (pos > 0) return kv;
      // Every key of this leaf is > k (or it is empty): the floor is the
      // greatest key below the leaf's low fence.
      if (!f.has_low || f.low == 0) return std::nullopt;
      k = f.low - 1;
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
        uint32_t pos = LowerBound(l->keys, cnt, from);
        size_t take = std::min<size_t>(cnt - pos, n - got);
        for (size_t i = 0; i < take; ++i) {
          out[got + i].key = sync::OlcLoad(l->keys[pos + i]);
          out[got + i].value = sync::OlcLoad(l->values[pos + i]);
        }
        const Leaf* nx = sync::OlcLoadPtr(l->next);
        l->lock.ReadUnlockOrRestart(v, restart);
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
        v = l->lock.ReadLockOrRestart(restart);
        if (restart) break;
      }
    }
    return got;
  }

  // Builds the tree from strictly ascending pairs, filling leaves and inner
  // nodes to `fill` of their capacity. REQUIRES: size() == 0, no concurrent
  // operation, keys strictly ascending, 0 < fill <= 1 (checked; a violation
  // aborts — the Index wrapper validates and returns a Status first).
  void bulk_load(std::span<const KV> sorted, double fill) {
    if (size() != 0) olc_detail::Die("bulk_load on a non-empty tree");
    if (!(fill > 0.0 && fill <= 1.0)) olc_detail::Die("bulk_load fill outside (0, 1]");
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i - 1].key >= sorted[i].key) olc_detail::Die("bulk_load keys not strictly ascending");
    }
    if (sorted.empty()) return;
    arena_.Release();
    const size_t n = sorted.size();

    size_t per_leaf = std::clamp<size_t>(std::llround(kLeaf * fill), 1, kLeaf);
    size_t nleaves = (n + per_leaf - 1) / per_leaf;
    std::vector<Node*> level;
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
      l->count = static_cast<uint32_t>(e - b);
      if (prev != nullptr) prev->next = l;
      prev = l;
      level.push_back(l);
      lows.push_back(sorted[b].key);
    }
    uint64_t inner_count = 0;
    uint32_t height = 1;
    size_t per_inner = std::clamp<size_t>(std::llround((kInner + 1) * fill), 2, kInner + 1);
    while (level.size() > 1) {
      size_t m = level.size();
      size_t groups = (m + per_inner - 1) / per_inner;
      std::vector<Node*> up;
      std::vector<uint64_t> up_lows;
      up.reserve(groups);
      up_lows.reserve(groups);
      for (size_t g = 0; g < groups; ++g) {
        size_t b = g * m / groups, e = (g + 1) * m / groups;
        Inner* in = NewInner();
        for (size_t j = b; j < e; ++j) {
          in->children[j - b] = level[j];
          if (j > b) in->keys[j - b - 1] = lows[j];
        }
        in->count = static_cast<uint32_t>(e - b - 1);
        up.push_back(in);
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

  // Walks the whole tree: key order inside nodes, keys inside the fences
  // inherited from the parents, all leaves at one depth, the leaf chain in
  // key order, node/entry counters, no lock held. REQUIRES: no writer runs.
  Status verify() const {
    VerifyState st;
    const Node* root = root_.load(std::memory_order_acquire);
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

 private:
  // Node header (every node):
  //   [0, 8)    VersionLock  lock bit, obsolete bit, version
  //   [8, 12)   count        keys in use (inner: children = count + 1)
  //   [12]      is_leaf      fixed at construction
  struct alignas(64) Node {
    explicit Node(bool leaf) : is_leaf(leaf) {}
    sync::VersionLock lock;
    uint32_t count = 0;
    const bool is_leaf;
  };
  // Inner node: header, keys[kInner], children[kInner + 1].
  struct Inner : Node {
    Inner() : Node(false) {}
    uint64_t keys[kInner] = {};
    Node* children[kInner + 1] = {};
  };
  // Leaf: header, next (right sibling), keys[kLeaf] (sorted), values[kLeaf].
  // Keys and values are separate arrays so that a search touches only keys.
  struct Leaf : Node {
    Leaf() : Node(true) {}
    Leaf* next = nullptr;
    uint64_t keys[kLeaf] = {};
    uint64_t values[kLeaf] = {};
  };
  static_assert(offsetof(Node, count) == 8);
  static_assert(sizeof(Node) == 64 && alignof(Node) == 64);

  enum class Mode { kInsert, kUpsert, kUpdate };

  struct Fences {
    uint64_t low = 0, high = 0;
    bool has_low = false, has_high = false;
  };

  static uint32_t Count(const Node* n) {
    uint32_t c = sync::OlcLoad(n->count);
    // A torn view cannot exceed capacity (writers only store valid counts),
    // but clamp so that no optimistic read can leave the node.
    uint32_t cap = n->is_leaf ? kLeaf : kInner;
    return c < cap ? c : cap;
  }

  // Starts loading the header and the key array of a node reached during a
  // descent, so that the binary search does not wait for one cache miss
  // per probe. A hint only: the node may be any node, never freed.
  static void PrefetchNode(const Node* n) {
    // Header, leaf next pointer, and the larger of the two key arrays.
    constexpr size_t kBytes = sizeof(Node) + 8 + 8 * (kInner > kLeaf ? kInner : kLeaf);
    const char* p = reinterpret_cast<const char*>(n);
    for (size_t off = 0; off < kBytes; off += 64) __builtin_prefetch(p + off);
  }

  // First position in keys[0, cnt) whose key is >= k.
  static uint32_t LowerBound(const uint64_t* keys, uint32_t cnt, uint64_t k) {
    uint32_t pos = 0, len = cnt;
    while (len > 0) {
      uint32_t half = len / 2;
      if (sync::OlcLoad(keys[pos + half]) < k) {
        pos += half + 1;
        len -= half + 1;
      } else {
        len = half;
      }
    }
    return pos;
  }
  // Child covering k: the number of separators <= k.
  static uint32_t ChildIndex(const Inner* in, uint32_t cnt, uint64_t k) {
    uint32_t pos = 0, len = cnt;
    while (len > 0) {
      uint32_t half = len / 2;
      if (sync::OlcLoad(in->keys[pos + half]) <= k) {
        pos += half + 1;
        len -= half + 1;
      } else {
        len = half;
      }
    }
    return pos;
  }

  // Optimistic descent to the leaf covering k. On return with restart ==
  // false, `v` is the leaf's read version (validated against its parent) and
  // *f, if given, holds the leaf's fences.
  Leaf* FindLeaf(uint64_t k, uint64_t& v, bool& restart, Fences* f) const {
    Node* node = root_.load(std::memory_order_acquire);
    v = node->lock.ReadLockOrRestart(restart);
    // A root split publishes the new root before unlocking the old one.
    if (restart || node != root_.load(std::memory_order_acquire)) {
      restart = true;
      return nullptr;
    }
    while (!node->is_leaf) {
      const Inner* in = static_cast<const Inner*>(node);
      uint32_t cnt = Count(in);
      uint32_t pos = ChildIndex(in, cnt, k);
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
      Node* child = sync::OlcLoadPtr(in->children[pos]);
      if (child == nullptr) {
        restart = true;
        return nullptr;
      }
      PrefetchNode(child);
      uint64_t cv = child->lock.ReadLockOrRestart(restart);
      if (restart) return nullptr;
      // Validating the parent after reading the child's version proves that
      // the child was the right one when its version was taken.
      in->lock.ReadUnlockOrRestart(v, restart);
      if (restart) return nullptr;
      node = child;
      v = cv;
    }
    return static_cast<Leaf*>(node);
  }

  bool Write(uint64_t k, uint64_t val, Mode mode) {
    for (;;) {
      bool restart = false;
      Node* node = root_.load(std::memory_order_acquire);
      uint64_t v = node->lock.ReadLockOrRestart(restart);
      if (restart || node != root_.load(std::memory_order_acquire)) continue;
      Inner* parent = nullptr;
      uint64_t pv = 0;
      bool rightmost = true;  // every step so far took the last child
      while (!node->is_leaf) {
        Inner* in = static_cast<Inner*>(node);
        uint32_t cnt = Count(in);
        if (cnt == kInner && mode != Mode::kUpdate) {
          if (LockForSplit(parent, pv, in, v)) {
            SplitInner(in, parent);
            Unlock(parent, in);
          }
          restart = true;
          break;
        }
        uint32_t pos = ChildIndex(in, cnt, k);
        rightmost = rightmost && pos == cnt;
        Node* child = sync::OlcLoadPtr(in->children[pos]);
        if (child == nullptr) {
          restart = true;
          break;
        }
        PrefetchNode(child);
        uint64_t cv = child->lock.ReadLockOrRestart(restart);
        if (restart) break;
        in->lock.ReadUnlockOrRestart(v, restart);
        if (restart) break;
        parent = in;
        pv = v;
        node = child;
        v = cv;
      }
      if (restart) continue;

      Leaf* l = static_cast<Leaf*>(node);
      uint32_t cnt = Count(l);
      uint32_t pos = LowerBound(l->keys, cnt, k);
      bool found = pos < cnt && sync::OlcLoad(l->keys[pos]) == k;
      if (found ? mode == Mode::kInsert : mode == Mode::kUpdate) {
        l->lock.ReadUnlockOrRestart(v, restart);
        if (restart) continue;
        return false;
      }
      if (!found && cnt == kLeaf) {
        if (LockForSplit(parent, pv, l, v)) {
          // Ascending inserts at the right end: leave the left leaf full.
          bool append = rightmost && pos == cnt;
          SplitLeaf(l, parent, append ? k : 0, append);
          Unlock(parent, l);
        }
        continue;
      }
      // The upgrade succeeds only if the leaf is unchanged since `v`, which
      // validates cnt, pos and found.
      l->lock.UpgradeToWriteLockOrRestart(v, restart);
      if (restart) continue;
      if (found) {
        sync::OlcStore(l->values[pos], val);
      } else {
        for (uint32_t i = cnt; i > pos; --i) {
          sync::OlcStore(l->keys[i], l->keys[i - 1]);
          sync::OlcStore(l->values[i], l->values[i - 1]);
        }
        sync::OlcStore(l->keys[pos], k);
        sync::OlcStore(l->values[pos], val);
        sync::OlcStore(l->count, cnt + 1);
      }
      l->lock.WriteUnlock();
      if (!found) size_.Add(1);
      return mode == Mode::kUpdate ? found : !found;
    }
  }

  // Write-locks parent (if any) and node iff both are unchanged since their
  // versions were read; a node without parent must still be the root.
  bool LockForSplit(Inner* parent, uint64_t pv, Node* node, uint64_t v) {
    bool restart = false;
    if (parent != nullptr) {
      parent->lock.UpgradeToWriteLockOrRestart(pv, restart);
      if (restart) return false;
    }
    node->lock.UpgradeToWriteLockOrRestart(v, restart);
    if (restart) {
      if (parent != nullptr) parent->lock.WriteUnlock();
      return false;
    }
    if (parent == nullptr && node != root_.load(std::memory_order_acquire)) {
      node->lock.WriteUnlock();
      return false;
    }
    return true;
  }
  static void Unlock(Inner* parent, Node* node) {
    node->lock.WriteUnlock();
    if (parent != nullptr) parent->lock.WriteUnlock();
  }

  // REQUIRES: l and parent (if any) write-locked, l full, parent not full.
  // append: move nothing; the new right leaf starts at `append_key`.
  void SplitLeaf(Leaf* l, Inner* parent, uint64_t append_key, bool append) {
    uint32_t cnt = l->count;
    uint32_t keep = append ? cnt : (cnt + 1) / 2;
    Leaf* r = NewLeaf();
    for (uint32_t i = keep; i < cnt; ++i) {
      r->keys[i - keep] = l->keys[i];
      r->values[i - keep] = l->values[i];
    }
    r->count = cnt - keep;
    r->next = l->next;
    uint64_t sep = append ? append_key : r->keys[0];
    sync::OlcStore(l->count, keep);
    sync::OlcPublishPtr(l->next, r);
    leaves_.fetch_add(1, std::memory_order_relaxed);
    Link(l, parent, sep, r);
  }

  // REQUIRES: in and parent (if any) write-locked, in full, parent not full.
  void SplitInner(Inner* in, Inner* parent) {
    uint32_t cnt = in->count;
    uint32_t mid = cnt / 2;
    uint64_t sep = in->keys[mid];
    Inner* r = NewInner();
    for (uint32_t i = mid + 1; i < cnt; ++i) r->keys[i - mid - 1] = in->keys[i];
    for (uint32_t i = mid + 1; i <= cnt; ++i) r->children[i - mid - 1] = in->children[i];
    r->count = cnt - mid - 1;
    sync::OlcStore(in->count, mid);
    inner_nodes_.fetch_add(1, std::memory_order_relaxed);
    Link(in, parent, sep, r);
  }

  // Makes `right` (fully initialized) reachable: a new separator in parent,
  // or a new root above left and right.
  void Link(Node* left, Inner* parent, uint64_t sep, Node* right) {
    if (parent == nullptr) {
      Inner* root = NewInner();
      root->keys[0] = sep;
      root->children[0] = left;
      root->children[1] = right;
      root->count = 1;
      inner_nodes_.fetch_add(1, std::memory_order_relaxed);
      height_.fetch_add(1, std::memory_order_relaxed);
      root_.store(root, std::memory_order_release);
      return;
    }
    uint32_t cnt = parent->count;
    if (cnt >= static_cast<uint32_t>(kInner)) olc_detail::Die("split into a full parent");
    uint32_t pos = ChildIndex(parent, cnt, sep);
    for (uint32_t i = cnt; i > pos; --i) {
      sync::OlcStore(parent->keys[i], parent->keys[i - 1]);
      sync::OlcPublishPtr(parent->children[i + 1], parent->children[i]);
    }
    sync::OlcStore(parent->keys[pos], sep);
    sync::OlcPublishPtr(parent->children[pos + 1], right);
    sync::OlcStore(parent->count, cnt + 1);
  }

  void Reset() {
    size_.Set(0);
    inner_nodes_.store(0, std::memory_order_relaxed);
    leaves_.store(1, std::memory_order_relaxed);
    height_.store(1, std::memory_order_relaxed);
    root_.store(NewLeaf(), std::memory_order_release);
  }

  Leaf* NewLeaf() { return new (arena_.Allocate(sizeof(Leaf))) Leaf(); }
  Inner* NewInner() { return new (arena_.Allocate(sizeof(Inner))) Inner(); }

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

  Status VerifyNode(const Node* n, uint32_t depth, uint64_t lo, bool has_lo, uint64_t hi,
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
    const uint64_t* keys = n->is_leaf ? static_cast<const Leaf*>(n)->keys
                                      : static_cast<const Inner*>(n)->keys;
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
    if (n->is_leaf) {
      if (st.leaf_depth == 0) st.leaf_depth = depth;
      if (st.leaf_depth != depth) {
        return Status::Corruption("leaves at depths " + std::to_string(st.leaf_depth) + " and " +
                                  std::to_string(depth));
      }
      st.leaves.push_back(static_cast<const Leaf*>(n));
      st.entries += cnt;
      return Status::OK();
    }
    const Inner* in = static_cast<const Inner*>(n);
    ++st.inner;
    for (uint32_t i = 0; i <= cnt; ++i) {
      const Node* c = sync::OlcLoadPtr(in->children[i]);
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
  std::atomic<Node*> root_{nullptr};
  olc_detail::StripedCounter size_;
  std::atomic<uint64_t> inner_nodes_{0};
  std::atomic<uint64_t> leaves_{0};
  std::atomic<uint32_t> height_{1};
};

}  // namespace pmindex
