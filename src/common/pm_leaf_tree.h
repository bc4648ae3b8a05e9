// PmLeafTree: the machinery shared by the trees whose leaves live in PM and
// whose inner nodes live in DRAM (lbtree, fptree, wbtree), so that a
// measured difference between them comes from the leaf design only.
//
// Contract
// - Persistent: a singly linked list of PM leaves in key order (each leaf's
//   keys are all greater than every key of the leaves before it), its head
//   in root slot 0; a hint block (root slot 1) of up to kMaxHints leaf
//   addresses at roughly equal distances along the list, used to rebuild
//   in parallel; an optional tree-specific block (root slot 2, e.g. split
//   logs). Nothing else is persistent.
// - DRAM: one LeafRef per leaf (version lock, PM address, high fence, next
//   LeafRef), a routing OlcBTree mapping each leaf's low fence to its
//   LeafRef. Rebuilt on open from the leaf list.
// - Locks: a writer takes the LeafRef's version lock (then sets the
//   paper's persistent lock bit in the leaf); readers read the leaf with
//   relaxed atomics between ReadLock and ReadUnlock of the version and
//   retry on change. After floor() on the routing map, a key >= the
//   LeafRef's high fence moves right along the LeafRef chain (the split
//   that moved it may not be in the routing map yet). Splits update the
//   routing map while holding the splitting leaf's lock.
// - Leaves are never freed during normal operation (no merges; an empty
//   leaf keeps its range), so LeafRefs and leaves need no epochs. Open
//   unlinks empty leaves (other than the head) with the policy's
//   crash-safe Relink after invalidating the hints.
// - Hints: the count word is set to 0 (NAW) before the entries change and
//   rewritten last (NAW), so a crash leaves either valid hints or none.
//   Every hinted leaf is on the list: hints are invalidated before any leaf
//   leaves the list.
//
// Policy (one per tree):
//   static constexpr std::string_view kName;
//   using LeafT;  LeafT::kBytes, LeafT::kSlots, and the leaf operations used
//                 below (Format, Fill, FilledBytes, Locate, ValueAt, Find, Count, Full,
//                 Collect, SetLockBit, Insert, UpdateSlot, RemoveSlot,
//                 Relink, RecoverLeaf, Check, next)
//   static constexpr size_t kMetaBytes;   0 = no tree-specific block
//   void InitMeta(void* meta);            format + flush (create_index's
//                                         Format fence makes it durable)
//   Status RecoverMeta(void* meta, Pool*); before the leaf walk (logs)
//   uint64_t Split(LeafT* l, PPtr l_ptr, k, v, LeafT* nl, PPtr nl_ptr, void* meta);
//     inserts (k, v) too; returns the split key (nl's low fence).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "common/olc_btree.h"
#include "common/small_sort.h"
#include "pm/persist.h"
#include "pmindex/index.h"
#include "pmindex/pool.h"
#include "pmindex/registry.h"
#include "pmindex/status.h"
#include "sync/version_lock.h"

namespace pmindex::common {

inline constexpr unsigned kHeadSlot = 0;
inline constexpr unsigned kHintSlot = 1;
inline constexpr unsigned kMetaSlot = 2;

// PM block of rebuild hints.
struct HintBlock {
  static constexpr int kMaxHints = 63;
  uint64_t count;             // 0 = no valid hints
  uint64_t leaf[kMaxHints];   // PPtr raw values, in list order
};
static_assert(sizeof(HintBlock) == 512);

template <class Policy>
class PmLeafTree final : public Index {
 public:
  using LeafT = typename Policy::LeafT;
  static constexpr int kSlots = LeafT::kSlots;

  struct LeafRef {
    sync::VersionLock lock;
    LeafT* leaf = nullptr;
    uint64_t low = 0;                     // fixed at creation
    std::atomic<uint64_t> high{0};        // valid iff has_high
    std::atomic<bool> has_high{false};
    std::atomic<LeafRef*> next{nullptr};
  };

  PmLeafTree(const IndexEnv& env, int rebuild_threads)
      : pool_(env.pool), alloc_(env.alloc), rebuild_threads_(std::max(1, rebuild_threads)) {}
  ~PmLeafTree() override {
    (void)close();
  }

  // ---------------------------------------------------------- factories
  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, int rebuild_threads) {
    auto t = std::make_unique<PmLeafTree>(env, rebuild_threads);
    PMINDEX_RETURN_IF_ERROR(t->Init());
    return std::unique_ptr<Index>(std::move(t));
  }
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, int rebuild_threads) {
    auto t = std::make_unique<PmLeafTree>(env, rebuild_threads);
    PMINDEX_RETURN_IF_ERROR(t->Recover());
    return std::unique_ptr<Index>(std::move(t));
  }

  // ---------------------------------------------------------- Index
  std::string_view kind() const override { return Policy::kName; }
  bool persistent() const override { return true; }

  Status insert(Key k, Value v) override { return Write(k, v, Mode::kInsert); }
  Status upsert(Key k, Value v) override { return Write(k, v, Mode::kUpsert); }
  Status update(Key k, Value v) override {
    LeafRef* r = LockFor(k);
    int id = r->leaf->Locate(k);
    Status s = Status::NotFound();
    if (id >= 0) {
      r->leaf->UpdateSlot(id, v);
      s = Status::OK();
    }
    Unlock(r);
    return s;
  }
  Status remove(Key k) override {
    LeafRef* r = LockFor(k);
    int id = r->leaf->Locate(k);
    Status s = Status::NotFound();
    if (id >= 0) {
      r->leaf->RemoveSlot(id);
      s = Status::OK();
    }
    Unlock(r);
    return s;
  }

  std::optional<Value> lookup(Key k) override {
    LeafRef* r = Route(k);
    for (;;) {
      bool restart = false;
      uint64_t ver = r->lock.ReadLockOrRestart(restart);
      if (r->has_high.load(std::memory_order_acquire) &&
          k >= r->high.load(std::memory_order_relaxed)) {
        LeafRef* nx = r->next.load(std::memory_order_acquire);
        r->lock.ReadUnlockOrRestart(ver, restart);
        if (!restart) r = nx;
        continue;
      }
      uint64_t v = 0;
      bool found = r->leaf->Find(k, &v);
      r->lock.ReadUnlockOrRestart(ver, restart);
      if (restart) continue;
      if (!found) return std::nullopt;
      return v;
    }
  }

  size_t scan(Key from, size_t n, KV* out) override {
    size_t got = 0;
    if (n == 0) return 0;
    LeafRef* r = Route(from);
    KV buf[kSlots];
    while (r != nullptr && got < n) {
      bool restart = false;
      uint64_t ver = r->lock.ReadLockOrRestart(restart);
      bool hh = r->has_high.load(std::memory_order_acquire);
      uint64_t high = r->high.load(std::memory_order_relaxed);
      LeafRef* nx = r->next.load(std::memory_order_acquire);
      int m = 0;
      if (!(hh && from >= high)) m = r->leaf->Collect(buf);
      r->lock.ReadUnlockOrRestart(ver, restart);
      if (restart) continue;
      SmallSort(buf, m, [](const KV& e) { return e.key; });
      for (int i = 0; i < m && got < n; ++i) {
        if (buf[i].key >= from) out[got++] = buf[i];
      }
      if (got > 0) {
        if (out[got - 1].key == UINT64_MAX) break;
        from = std::max(from, out[got - 1].key + 1);
      }
      r = nx;
    }
    return got;
  }

  Status bulk_load(std::span<const KV> sorted, double fill) override {
    if (!(fill > 0.0 && fill <= 1.0)) return Status::InvalidArgument("bulk_load: fill must be in (0, 1]");
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i - 1].key >= sorted[i].key)
        return Status::InvalidArgument("bulk_load: keys not strictly ascending");
    if (head_->leaf->Count() != 0 || head_->next.load() != nullptr)
      return Status::InvalidArgument("bulk_load: index is not empty");
    if (sorted.empty()) return Status::OK();
    const size_t per = std::max<size_t>(1, static_cast<size_t>(kSlots * fill));
    const size_t nleaves = (sorted.size() + per - 1) / per;
    std::vector<PPtr> ptrs(nleaves);
    for (size_t i = 0; i < nleaves; ++i) {
      auto p = alloc_->Alloc(LeafT::kBytes);
      if (!p.ok()) {
        for (size_t j = 0; j < i; ++j) alloc_->Free(ptrs[j]);
        return p.status();
      }
      ptrs[i] = *p;
    }
    // Spread entries evenly: leaf i gets [i*n/nleaves, (i+1)*n/nleaves).
    const size_t n = sorted.size();
    for (size_t i = 0; i < nleaves; ++i) {
      size_t lo = i * n / nleaves, hi = (i + 1) * n / nleaves;
      LeafT* l = pool_->to_ptr<LeafT>(ptrs[i]);
      LeafT::Fill(l, &sorted[lo], static_cast<int>(hi - lo),
                  i + 1 < nleaves ? ptrs[i + 1] : PPtr());
      // Every new leaf durable before the head NAW makes the list reachable
      // (only the bytes Fill wrote; the rest is unused space).
      pm::flush(l, LeafT::FilledBytes(static_cast<int>(hi - lo)));
    }
    pm::fence();
    InvalidateHints();
    PPtr old_head = pool_->to_pptr(head_->leaf);
    pm::naw(pool_->root_slot(kHeadSlot), ptrs[0].raw());
    alloc_->Free(old_head);
    // DRAM layer.
    routing_.clear();
    refs_.clear();
    std::vector<KV> route(nleaves);
    LeafRef* prev = nullptr;
    for (size_t i = 0; i < nleaves; ++i) {
      LeafRef* r = NewRef(pool_->to_ptr<LeafT>(ptrs[i]), i == 0 ? 0 : sorted[i * n / nleaves].key);
      if (prev) LinkAfter(prev, r);
      else head_ = r;
      route[i] = {r->low, reinterpret_cast<uint64_t>(r)};
      prev = r;
    }
    routing_.bulk_load(route, 1.0);
    leaves_.store(nleaves);
    WriteHints();
    return Status::OK();
  }

  Status verify() override {
    PMINDEX_RETURN_IF_ERROR(routing_.verify());
    PPtr p(*pool_->root_slot(kHeadSlot));
    LeafRef* r = head_;
    uint64_t prev_max = 0;
    bool any = false;
    size_t idx = 0;
    KV buf[kSlots];
    while (r != nullptr) {
      std::string where = "leaf " + std::to_string(idx) + ": ";
      if (pool_->to_ptr<LeafT>(p) != r->leaf) return Status::Corruption(where + "PM list and DRAM leaf chain differ");
      std::string c = r->leaf->Check();
      if (!c.empty()) return Status::Corruption(where + c);
      if (r->lock.IsLocked()) return Status::Corruption(where + "version lock held");
      auto rt = routing_.lookup(r->low);
      if (!rt || *rt != reinterpret_cast<uint64_t>(r))
        return Status::Corruption(where + "low fence not in the routing map");
      LeafRef* nx = r->next.load();
      if ((nx != nullptr) != r->has_high.load() || (nx && nx->low != r->high.load()))
        return Status::Corruption(where + "high fence differs from the next leaf's low fence");
      int m = r->leaf->Collect(buf);
      for (int i = 0; i < m; ++i) {
        if (buf[i].key < r->low || (nx && buf[i].key >= r->high.load()))
          return Status::Corruption(where + "key " + std::to_string(buf[i].key) + " outside its fences");
      }
      SmallSort(buf, m, [](const KV& e) { return e.key; });
      if (m > 0) {
        if (any && buf[0].key <= prev_max) return Status::Corruption(where + "keys not above the previous leaf's");
        prev_max = buf[m - 1].key;
        any = true;
      }
      p = r->leaf->next();
      ++idx;
      r = nx;
    }
    if (!p.is_null()) return Status::Corruption("PM leaf list longer than the DRAM chain");
    if (idx != leaves_.load()) return Status::Corruption("leaf count differs from the list");
    if (routing_.size() != idx) return Status::Corruption("routing map size differs from the leaf count");
    HintBlock* h = hints();
    if (h->count > HintBlock::kMaxHints) return Status::Corruption("hint count out of range");
    return Status::OK();
  }

  IndexStats stats() override {
    IndexStats s;
    uint64_t entries = 0, leaves = 0;
    for (LeafRef* r = head_; r != nullptr; r = r->next.load(std::memory_order_acquire)) {
      entries += r->leaf->Count();
      ++leaves;
    }
    s.entries = entries;
    s.leaves = leaves;
    s.height = routing_.height() + 1;
    s.inner_nodes = routing_.inner_nodes() + routing_.leaves();
    s.pm_bytes = leaves * LeafT::kBytes + sizeof(HintBlock) + Policy::kMetaBytes;
    s.dram_bytes = routing_.dram_bytes() + leaves * sizeof(LeafRef);
    s.extra = {{"splits", static_cast<double>(splits_.load(std::memory_order_relaxed))},
               {"split_lines", static_cast<double>(split_lines_.load(std::memory_order_relaxed))},
               {"split_fences", static_cast<double>(split_fences_.load(std::memory_order_relaxed))}};
    return s;
  }

  Status for_each_block(const std::function<void(PPtr)>& fn) override {
    for (PPtr p(*pool_->root_slot(kHeadSlot)); !p.is_null(); p = pool_->to_ptr<LeafT>(p)->next()) fn(p);
    fn(PPtr(*pool_->root_slot(kHintSlot)));
    if constexpr (Policy::kMetaBytes > 0) fn(PPtr(*pool_->root_slot(kMetaSlot)));
    return Status::OK();
  }

  Status close() override {
    if (closed_) return Status::OK();
    closed_ = true;
    if (head_ != nullptr) WriteHints();
    return Status::OK();
  }

  // Test hooks.
  Policy& policy() { return policy_; }
  LeafT* head_leaf() const { return head_->leaf; }

 private:
  enum class Mode { kInsert, kUpsert };

  // ---------------------------------------------------------- create/open
  Status Init() {
    // Every block is allocated first, so that no allocator fence falls
    // between the flushes below and Format's fence (flushing any of them
    // after the slot-0 store is then a mutant pmcrash can see).
    auto hp = alloc_->Alloc(sizeof(HintBlock));
    if (!hp.ok()) return hp.status();
    PPtr mp;
    if constexpr (Policy::kMetaBytes > 0) {
      auto m = alloc_->Alloc(Policy::kMetaBytes);
      if (!m.ok()) return m.status();
      mp = *m;
    }
    auto lp = alloc_->Alloc(LeafT::kBytes);
    if (!lp.ok()) return lp.status();
    HintBlock* h = pool_->to_ptr<HintBlock>(*hp);
    pm::fill(h, 0, sizeof(HintBlock));
    // Flushed only: Format's fence below makes the hint block (and the
    // tree's meta block, which InitMeta flushes) durable before the slot-0
    // store that completes create_index. Before slot 0 is set a crash may
    // leave a pool that does not open (the create_index convention), so
    // nothing here needs an earlier fence (pmcrash --mutate found this
    // fence, InitMeta's and the slot 1/2 NAWs' fences undetectable).
    // pmcrash-redundant: the simulator's poison (0xA5...) reads as a hint
    // count above kMaxHints, which recovery ignores, so no crash image can
    // show an unflushed zero count; memory that reads as a small count with
    // leaf-like pointers (stale content of a reused file) would send
    // recovery's walks to blocks that are not leaves, so the zeroed block
    // must be durable.
    pm::flush(h, sizeof(HintBlock));
    if constexpr (Policy::kMetaBytes > 0) policy_.InitMeta(pool_->to_ptr(mp));
    // Slots 1 and 2 are plain stores: the root slots share one line (a
    // guarantee of the pool format, pm/pool_format.h), so they persist in
    // program order before slot 0 and slot 0's NAW flushes them with it.
    pm::store(pool_->root_slot(kHintSlot), hp->raw());
    if constexpr (Policy::kMetaBytes > 0) pm::store(pool_->root_slot(kMetaSlot), mp.raw());
    // The head leaf is formatted (flush + fence) right before the NAW that
    // links it: its fence is the one ordering the leaf, the hint block and
    // the meta block before slot 0.
    LeafT::Format(pool_->to_ptr<LeafT>(*lp), PPtr());
    // Slot 0 last: a non-zero head means the tree exists.
    pm::naw(pool_->root_slot(kHeadSlot), lp->raw());
    head_ = NewRef(pool_->to_ptr<LeafT>(*lp), 0);
    routing_.insert(0, reinterpret_cast<uint64_t>(head_));
    leaves_.store(1);
    hinted_leaves_ = 1;
    return Status::OK();
  }

  bool ValidLeafPtr(PPtr p) const {
    return !p.is_null() && p.pool_id() == pool_->id() && p.offset() % 256 == 0 &&
           p.offset() >= pool_->heap_begin() && p.offset() + LeafT::kBytes <= pool_->size();
  }

  struct LeafInfo {
    PPtr ptr;
    int count = 0;
    uint64_t min = 0, max = 0;
  };

  // Walks [from, until) (until null = to the end); false if the walk does
  // not reach `until` or meets an invalid pointer.
  bool WalkSegment(PPtr from, PPtr until, std::vector<LeafInfo>* out) const {
    KV buf[kSlots];
    const uint64_t limit = pool_->size() / LeafT::kBytes + 1;
    PPtr p = from;
    for (uint64_t steps = 0; p != until; ++steps) {
      if (p.is_null() || !ValidLeafPtr(p) || steps > limit) return false;
      LeafT* l = pool_->to_ptr<LeafT>(p);
      l->RecoverLeaf();
      LeafInfo li;
      li.ptr = p;
      li.count = l->Collect(buf);
      if (li.count > 0) {
        li.min = li.max = buf[0].key;
        for (int i = 1; i < li.count; ++i) {
          li.min = std::min(li.min, buf[i].key);
          li.max = std::max(li.max, buf[i].key);
        }
      }
      out->push_back(li);
      p = l->next();
    }
    return true;
  }

  Status Recover() {
    PPtr head(*pool_->root_slot(kHeadSlot));
    PPtr hint(*pool_->root_slot(kHintSlot));
    if (!ValidLeafPtr(head)) return Status::Corruption(std::string(Policy::kName) + ": bad head leaf pointer");
    if (hint.is_null() || hint.offset() + sizeof(HintBlock) > pool_->size())
      return Status::Corruption(std::string(Policy::kName) + ": bad hint block pointer");
    void* meta = nullptr;
    if constexpr (Policy::kMetaBytes > 0) {
      PPtr mp(*pool_->root_slot(kMetaSlot));
      if (mp.is_null() || mp.offset() + Policy::kMetaBytes > pool_->size())
        return Status::Corruption(std::string(Policy::kName) + ": bad meta block pointer");
      meta = pool_->to_ptr(mp);
      PMINDEX_RETURN_IF_ERROR(policy_.RecoverMeta(meta, pool_));
    }
    // Segments: [head, h0), [h0, h1), ..., [h_last, null).
    HintBlock* h = pool_->to_ptr<HintBlock>(hint);
    std::vector<PPtr> starts{head};
    uint64_t hc = std::atomic_ref<uint64_t>(h->count).load();
    if (hc <= HintBlock::kMaxHints) {
      for (uint64_t i = 0; i < hc; ++i) {
        PPtr p(h->leaf[i]);
        if (!ValidLeafPtr(p)) {
          starts.resize(1);
          break;
        }
        if (p != starts.back()) starts.push_back(p);
      }
    }
    std::vector<std::vector<LeafInfo>> seg(starts.size());
    std::vector<char> ok(starts.size(), 1);
    const int threads = std::min<int>(rebuild_threads_, static_cast<int>(starts.size()));
    auto work = [&](int t) {
      for (size_t s = t; s < starts.size(); s += threads) {
        PPtr until = s + 1 < starts.size() ? starts[s + 1] : PPtr();
        ok[s] = WalkSegment(starts[s], until, &seg[s]);
      }
    };
    if (threads <= 1) {
      work(0);
    } else {
      std::vector<std::thread> th;
      for (int t = 0; t < threads; ++t) th.emplace_back(work, t);
      for (auto& x : th) x.join();
    }
    std::vector<LeafInfo> all;
    bool all_ok = std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
    if (all_ok) {
      for (auto& s : seg) all.insert(all.end(), s.begin(), s.end());
    } else {
      // Hints did not describe the list: walk it alone.
      if (!WalkSegment(head, PPtr(), &all))
        return Status::Corruption(std::string(Policy::kName) + ": leaf list is broken");
    }
    // Order across leaves.
    bool any = false;
    uint64_t prev_max = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].count == 0) continue;
      if (any && all[i].min <= prev_max)
        return Status::Corruption(std::string(Policy::kName) + ": leaf " + std::to_string(i) +
                                  " keys not above the previous leaf's");
      prev_max = all[i].max;
      any = true;
    }
    // Unlink empty leaves other than the head.
    std::vector<LeafInfo> kept;
    kept.push_back(all[0]);
    bool unlinked = false;
    for (size_t i = 1; i < all.size(); ++i) {
      if (all[i].count == 0) {
        if (!unlinked) InvalidateHints();
        unlinked = true;
        PPtr nx = i + 1 < all.size() ? all[i + 1].ptr : PPtr();
        pool_->to_ptr<LeafT>(kept.back().ptr)->Relink(nx);
        continue;
      }
      kept.push_back(all[i]);
    }
    for (auto& li : kept) alloc_->MarkReachable(li.ptr);
    alloc_->MarkReachable(hint);
    if constexpr (Policy::kMetaBytes > 0) alloc_->MarkReachable(PPtr(*pool_->root_slot(kMetaSlot)));
    // DRAM layer.
    std::vector<KV> route(kept.size());
    LeafRef* prev = nullptr;
    for (size_t i = 0; i < kept.size(); ++i) {
      LeafRef* r = NewRef(pool_->to_ptr<LeafT>(kept[i].ptr), i == 0 ? 0 : kept[i].min);
      if (prev) LinkAfter(prev, r);
      else head_ = r;
      route[i] = {r->low, reinterpret_cast<uint64_t>(r)};
      prev = r;
    }
    routing_.bulk_load(route, 1.0);
    leaves_.store(kept.size());
    if (unlinked || !all_ok || hc == 0 || hc > HintBlock::kMaxHints) {
      WriteHints();
    } else {
      hinted_leaves_ = kept.size();
    }
    return Status::OK();
  }

  // ---------------------------------------------------------- hints
  HintBlock* hints() const { return pool_->to_ptr<HintBlock>(PPtr(*pool_->root_slot(kHintSlot))); }
  // The hints only speed up recovery, which checks them (each segment walk
  // must end exactly at the next hint, else it walks the whole list from
  // the head), so no crash state of the hint block makes a recovered tree
  // wrong and pmcrash cannot kill the mutants of these three persist
  // points. They stay: the count NAW = 0 durable before any entry changes
  // keeps a torn block (hints past line 0 from two generations) from
  // sending recovery's walks to blocks that are no longer list leaves.
  void InvalidateHints() {
    HintBlock* h = hints();
    // pmcrash-redundant: recovery validates the hints (see above); this
    // NAW keeps the hint block consistent, it does not order tree state.
    if (h->count != 0) pm::naw(&h->count, 0);
  }
  // Rewrites the hints from the current LeafRef chain. Serialized by
  // hint_mu_; safe alongside splits (the chain only grows, and every
  // LeafRef on it is on the PM list).
  void WriteHints() {
    std::lock_guard<std::mutex> g(hint_mu_);
    HintBlock* h = hints();
    std::vector<LeafRef*> chain;
    for (LeafRef* r = head_; r != nullptr; r = r->next.load(std::memory_order_acquire)) chain.push_back(r);
    const size_t n = chain.size();
    const size_t k = std::min<size_t>(HintBlock::kMaxHints, n > 1 ? n - 1 : 0);
    InvalidateHints();
    for (size_t i = 0; i < k; ++i) {
      LeafRef* r = chain[(i + 1) * n / (k + 1)];
      pm::store(&h->leaf[i], pool_->to_pptr(r->leaf).raw());
    }
    if (k > 0) {
      // Entries durable before the count makes them valid.
      // pmcrash-redundant: recovery validates the hints (see
      // InvalidateHints); this persist keeps the block consistent.
      pm::persist(h->leaf, k * sizeof(uint64_t));
      // pmcrash-redundant: recovery validates the hints (see
      // InvalidateHints); a count that never persists only costs a
      // restart its parallel walk.
      pm::naw(&h->count, k);
    }
    hinted_leaves_ = n;
  }

  // ---------------------------------------------------------- DRAM layer
  LeafRef* NewRef(LeafT* leaf, uint64_t low) {
    std::lock_guard<std::mutex> g(ref_mu_);
    refs_.push_back(std::make_unique<LeafRef>());
    LeafRef* r = refs_.back().get();
    r->leaf = leaf;
    r->low = low;
    return r;
  }
  static void LinkAfter(LeafRef* prev, LeafRef* r) {
    r->next.store(prev->next.load(std::memory_order_relaxed), std::memory_order_relaxed);
    r->has_high.store(prev->has_high.load(std::memory_order_relaxed), std::memory_order_relaxed);
    r->high.store(prev->high.load(std::memory_order_relaxed), std::memory_order_relaxed);
    prev->high.store(r->low, std::memory_order_relaxed);
    prev->has_high.store(true, std::memory_order_release);
    prev->next.store(r, std::memory_order_release);
  }

  LeafRef* Route(uint64_t k) const {
    auto f = routing_.floor(k);
    if (!f) olc_detail::Die("PmLeafTree: routing map has no entry for key 0");
    return reinterpret_cast<LeafRef*>(f->second);
  }

  // Locks the LeafRef covering k (moving right as needed) and sets the
  // leaf's persistent lock bit.
  LeafRef* LockFor(uint64_t k) {
    LeafRef* r = Route(k);
    for (;;) {
      r->lock.WriteLock();
      if (r->has_high.load(std::memory_order_relaxed) && k >= r->high.load(std::memory_order_relaxed)) {
        LeafRef* nx = r->next.load(std::memory_order_relaxed);
        r->lock.WriteUnlock();
        r = nx;
        continue;
      }
      r->leaf->SetLockBit(true);
      return r;
    }
  }
  static void Unlock(LeafRef* r) {
    r->leaf->SetLockBit(false);
    r->lock.WriteUnlock();
  }

  Status Write(Key k, Value v, Mode mode) {
    LeafRef* r = LockFor(k);
    LeafT* l = r->leaf;
    int id = l->Locate(k);
    if (id >= 0) {
      if (mode == Mode::kUpsert) l->UpdateSlot(id, v);
      Unlock(r);
      return mode == Mode::kUpsert ? Status::OK() : Status::AlreadyExists();
    }
    if (!l->Full()) {
      l->Insert(k, v);
      Unlock(r);
      return Status::OK();
    }
    auto np = alloc_->Alloc(LeafT::kBytes);
    if (!np.ok()) {
      Unlock(r);
      return np.status();
    }
    LeafT* nl = pool_->to_ptr<LeafT>(*np);
    void* meta = nullptr;
    if constexpr (Policy::kMetaBytes > 0) meta = pool_->to_ptr(PPtr(*pool_->root_slot(kMetaSlot)));
    // The split's own PM cost (the insert that caused it included), so a
    // benchmark can tell split line writes from plain inserts (Theorem 3.5
    // of the LB+-Tree paper counts the latter).
    const pm::Counters before = pm::ThreadCounters();
    uint64_t split_key = policy_.Split(l, pool_->to_pptr(l), k, v, nl, *np, meta);
    const pm::Counters spent = pm::ThreadCounters() - before;
    splits_.fetch_add(1, std::memory_order_relaxed);
    split_lines_.fetch_add(spent.lines_flushed, std::memory_order_relaxed);
    split_fences_.fetch_add(spent.fences, std::memory_order_relaxed);
    LeafRef* nr = NewRef(nl, split_key);
    LinkAfter(r, nr);
    routing_.insert(split_key, reinterpret_cast<uint64_t>(nr));
    Unlock(r);
    uint64_t nleaves = leaves_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (nleaves >= 2 * hinted_leaves_.load(std::memory_order_relaxed) && hint_mu_.try_lock()) {
      hint_mu_.unlock();
      WriteHints();
    }
    return Status::OK();
  }

  Pool* pool_;
  alloc::Allocator* alloc_;
  int rebuild_threads_;
  Policy policy_;
  OlcBTree<32, 32> routing_;
  LeafRef* head_ = nullptr;
  std::mutex ref_mu_;
  std::vector<std::unique_ptr<LeafRef>> refs_;
  std::mutex hint_mu_;
  std::atomic<uint64_t> leaves_{0};
  std::atomic<uint64_t> hinted_leaves_{0};
  // Since create/open: leaf splits and the lines flushed / fences they cost.
  std::atomic<uint64_t> splits_{0}, split_lines_{0}, split_fences_{0};
  bool closed_ = false;
};

// Options shared by the three trees: node=256|512|768|1024 (leaf bytes),
// rebuild_threads=N.
inline Status ValidatePmLeafTreeOptions(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"node", "rebuild_threads"}));
  auto n = o.get_enum("node", "256", {"256", "512", "768", "1024"});
  if (!n.ok()) return n.status();
  auto t = o.get_uint("rebuild_threads", 1, 1, 256);
  if (!t.ok()) return t.status();
  return Status::OK();
}

// Create (open = false) or open the PmLeafTree<P<node>> the options select.
template <template <size_t> class P>
Result<std::unique_ptr<Index>> MakePmLeafTree(const IndexEnv& env, const Options& o, bool open) {
  PMINDEX_RETURN_IF_ERROR(ValidatePmLeafTreeOptions(o));
  const std::string node = o.get_enum("node", "256", {"256", "512", "768", "1024"}).value();
  const int threads = static_cast<int>(o.get_uint("rebuild_threads", 1, 1, 256).value());
  auto go = [&](auto* tag) -> Result<std::unique_ptr<Index>> {
    using T = std::remove_pointer_t<decltype(tag)>;
    return open ? T::Open(env, threads) : T::Create(env, threads);
  };
  if (node == "512") return go(static_cast<PmLeafTree<P<512>>*>(nullptr));
  if (node == "768") return go(static_cast<PmLeafTree<P<768>>*>(nullptr));
  if (node == "1024") return go(static_cast<PmLeafTree<P<1024>>*>(nullptr));
  return go(static_cast<PmLeafTree<P<256>>*>(nullptr));
}

// The registry entry of a PmLeafTree index: the trees differ only in their
// name and leaf policy. Use: PMINDEX_REGISTER_INDEX(x, (PmLeafTreeInfo<P>("x"))).
template <template <size_t> class P>
IndexInfo PmLeafTreeInfo(std::string name) {
  return IndexInfo{
      .name = std::move(name),
      .persistent = true,
      .options_help = "node=256|512|768|1024 (leaf bytes; default 256) rebuild_threads=N (default 1)",
      .test_configs = {"node=256", "node=512", "node=1024"},
      .validate = ValidatePmLeafTreeOptions,
      .create = [](const IndexEnv& e, const Options& o) { return MakePmLeafTree<P>(e, o, false); },
      .open = [](const IndexEnv& e, const Options& o) { return MakePmLeafTree<P>(e, o, true); },
      .test_only = false,
      .stores_data = true,
  };
}

}  // namespace pmindex::common
