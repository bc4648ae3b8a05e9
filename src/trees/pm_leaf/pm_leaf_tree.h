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
// - DRAM: a routing OlcBTree whose entries map each PM leaf's low fence to
//   the leaf's address, so the routing tree's own leaves are the last inner
//   level of the tree and a PM leaf is reached with no DRAM object of its
//   own (a per-leaf DRAM descriptor would cost a dependent cache miss per
//   operation). Rebuilt on open from the leaf list.
// - Locks. Writers exclude each other per PM leaf with the paper's
//   persistent lock bit, kept in the leaf's first header word (the
//   original LB+-Tree sets it inside an HTM transaction; there is no TSX
//   here). A writer sets the bit while holding the write lock of the
//   routing leaf that points to the PM leaf, and clears it with a release
//   store when done: for a single-leaf change, in the store that commits
//   the change, before its write-back (as the original code does, so a
//   reader may see a change up to its write-back's end; the writer returns
//   only after it, so every acknowledged change is durable). Readers take
//   no lock: they seek the routing
//   entry (optimistic; the routing leaf's version v), check that the lock
//   bit is clear, read the PM leaf with relaxed atomic loads, and then
//   validate v. A reader that saw the bit clear and read a leaf a writer
//   then changed must fail that validation, because the writer's set step
//   bumped the routing leaf's version after the reader took v; a reader
//   that sees the bit set waits and restarts. Splits insert the new leaf
//   into the routing tree before clearing the bit, so a reader routed by a
//   stale routing view fails its validation. (lbtree routes the new leaf
//   before the split's first flush, with the new leaf's own bit set until
//   the split's NAW is durable, so that no writer changes it earlier.) Only the lock word is
//   written by more than one thread, so no counter is shared on the hot path.
// - Leaves are never freed during normal operation (no merges; an empty
//   leaf keeps its range), so optimistic readers need no epochs. Open
//   unlinks empty leaves (other than the head) with the policy's
//   crash-safe Relink after invalidating the hints.
// - Recovery validates, then repairs (a damaged pool is refused unchanged,
//   docs/pool-format.md "What open checks, in order"): every pointer through
//   pm::Decode, the meta block (CheckMeta), the whole leaf list and the key
//   order across leaves (as the repairs will leave it), and the allocator's
//   acceptance of every block it will keep are checked with reads only;
//   only then are split logs replayed and cleared (RepairMeta), leaves
//   repaired (RecoverLeaf), empty leaves unlinked and hints rewritten. A
//   refused open writes nothing to the pool.
// - Hints: the count word is set to 0 (NAW) before the entries change and
//   rewritten last (NAW), so a crash leaves either valid hints or none.
//   Every hinted leaf is on the list: hints are invalidated before any leaf
//   leaves the list.
//
// Policy (one per tree):
//   static constexpr std::string_view kName;
//   using LeafT;  LeafT::kBytes, LeafT::kSlots, and the leaf operations used
//                 below (Format, Fill, FilledBytes, Locate, ValueAt, Find, Count, Full,
//                 optionally InsertIfAbsent (with kInserted and kFull),
//                 Collect, SetLockBit, IsLocked, Prefetch, Insert, UpdateSlot,
//                 RemoveSlot, Relink, RecoverLeaf, Check, next). Every store
//                 to the lock bit's word while the bit is set keeps it set,
//                 except the commit of Insert/UpdateSlot/RemoveSlot called
//                 with release = true, which clears it. The operations
//                 on the point paths (Locate, Find, SetLockBit, Insert,
//                 InsertIfAbsent, UpdateSlot, RemoveSlot) are
//                 [[gnu::always_inline]]: a call frame's stores after a
//                 persist fence stall the next operation (docs/RESULTS.md).
//   static constexpr size_t kMetaBytes;   0 = no tree-specific block
//   void InitMeta(void* meta);            format + flush (create_index's
//                                         Format fence makes it durable)
//   Status CheckMeta(const void* meta, const Pool*, std::vector<MetaDrop>*) const;
//                                         recovery, read-only: validates the
//                                         block and reports the keys its
//                                         repair will drop from leaves
//   void RepairMeta(void* meta, Pool*);   recovery, after every check passed
//                                         (replays and clears split logs)
//   uint64_t Split(LeafT* l, PPtr l_ptr, k, v, LeafT* nl, PPtr nl_ptr, void* meta);
//     inserts (k, v) too; returns the split key (nl's low fence). l stays
//     locked; the caller then routes nl and unlocks l.
//   or, instead of Split (lbtree):
//   uint64_t SplitRouted(l, l_ptr, k, v, nl, nl_ptr, meta, route);
//     the same split, calling route(split_key) once while nl is locked (its
//     lock bit set) and before its first flush, so that the routing
//     insert's DRAM stores are not issued after the split's fences (where
//     they would wait for its write-backs); returns with l and nl unlocked.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "common/content_record.h"
#include "common/olc_btree.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pm/pptr_decode.h"
#include "pmindex/status.h"
#include "sync/mutex.h"
#include "sync/version_lock.h"
#include "trees/pm_leaf/small_sort.h"
#include "trees/pm_leaf/split_log.h"
#include "util/check.h"
#include "util/prefetch.h"

namespace pmindex::common {

inline constexpr unsigned kHeadSlot = 0;
inline constexpr unsigned kHintSlot = 1;
inline constexpr unsigned kMetaSlot = 2;
// Root slot 7 (pm::kCleanCloseSlot): the clean-close record, its nodes
// the leaves recovery keeps (the head and every non-empty leaf).

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
  // Routing tree: 1 KiB nodes (62 keys). Side by side with the original
  // LB+-Tree on 10M keys, 512-byte nodes measured the same and 256-byte
  // nodes about 30% slower on lookups (docs/RESULTS.md).
  using Routing = OlcBTree<62, 62>;

  PmLeafTree(const IndexEnv& env, int rebuild_threads)
      : pool_(env.pool),
        alloc_(env.alloc),
        rebuild_threads_(std::max(1, rebuild_threads)),
        salvage_(env.salvage),
        pairs_(env.pairs) {}
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

  Status insert(Key k, Value v) override { return Write(k, v, Mode::kInsert); }
  Status upsert(Key k, Value v) override { return Write(k, v, Mode::kUpsert); }
  Status update(Key k, Value v) override {
    LeafT* l = nullptr;
    const int id = LockSlotOf(k, &l);
    if (id < 0) return Status::NotFound();
    l->UpdateSlot(id, v, /*release=*/true);
    return Status::OK();
  }
  Status remove(Key k) override {
    LeafT* l = nullptr;
    const int id = LockSlotOf(k, &l);
    if (id < 0) return Status::NotFound();
    l->RemoveSlot(id, /*release=*/true);
    return Status::OK();
  }

  std::optional<Value> lookup(Key k) override {
    typename Routing::Cursor c;
    for (;;) {
      if (!SeekLeaf(k, &c)) continue;
      const LeafT* l = LeafAt(c);
      if (l->IsLocked()) {
        AwaitUnlocked(l);
        continue;
      }
      uint64_t v = 0;
      const bool found = l->Find(k, &v);
      if (!routing_.Valid(c)) continue;
      if (!found) return std::nullopt;
      return v;
    }
  }

  size_t scan(Key from, size_t n, KV* out) override {
    size_t got = 0;
    if (n == 0) return 0;
    KV buf[kSlots];
    typename Routing::Cursor c;
    bool positioned = false;
    while (got < n) {
      if (!positioned) {
        if (!SeekLeaf<true>(from, &c)) continue;
        positioned = true;
      }
      const LeafT* l = LeafAt(c);
      if (l->IsLocked()) {
        AwaitUnlocked(l);
        positioned = false;
        continue;
      }
      const int m = l->Collect(buf);
      // c.high is the leaf's upper fence in the routing leaf's view, which
      // the validation below confirms with the entries.
      const bool has_high = c.has_high;
      const uint64_t high = c.high;
      if (!routing_.Valid(c)) {
        positioned = false;
        continue;
      }
      SmallSort(buf, m, [](const KV& e) { return e.key; });
      for (int i = 0; i < m && got < n; ++i) {
        if (buf[i].key >= from) out[got++] = buf[i];
      }
      if (!has_high) break;
      from = high;
      // The next leaf: the next entry of the same routing leaf while there
      // is one (validated with the next leaf's reads), else a new seek.
      positioned = routing_.NextInLeaf(&c);
      if (positioned) LeafAt(c)->Prefetch();
    }
    return got;
  }

  Status bulk_load(std::span<const KV> sorted, double fill) override {
    if (!(fill > 0.0 && fill <= 1.0)) return Status::InvalidArgument("bulk_load: fill must be in (0, 1]");
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i - 1].key >= sorted[i].key)
        return Status::InvalidArgument("bulk_load: keys not strictly ascending");
    if (head_->Count() != 0 || !head_->next().is_null())
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
    PPtr old_head = pool_->to_pptr(head_);
    pool_->WriteRoot(kHeadSlot, ptrs[0].raw());
    alloc_->Free(old_head);
    // DRAM layer.
    std::vector<KV> route(nleaves);
    for (size_t i = 0; i < nleaves; ++i) {
      route[i] = {i == 0 ? 0 : sorted[i * n / nleaves].key,
                  reinterpret_cast<uint64_t>(pool_->to_ptr<LeafT>(ptrs[i]))};
    }
    head_ = pool_->to_ptr<LeafT>(ptrs[0]);
    routing_.clear();
    routing_.bulk_load(route, 1.0);
    leaves_.Set(nleaves);
    WriteHints();
    return Status::OK();
  }

  // REQUIRES: no writer runs.
  Status verify() override {
    PMINDEX_RETURN_IF_ERROR(routing_.verify());
    std::vector<KV> route;
    route.reserve(routing_.size());
    routing_.ForEach([&](uint64_t low, uint64_t leaf) { route.push_back({low, leaf}); });
    if (route.empty() || route[0].key != 0) return Status::Corruption("routing map has no entry for key 0");
    PPtr p(pool_->root(kHeadSlot));
    uint64_t prev_max = 0;
    bool any = false;
    KV buf[kSlots];
    for (size_t idx = 0; idx < route.size(); ++idx) {
      std::string where = "leaf " + std::to_string(idx) + ": ";
      const LeafT* l = reinterpret_cast<const LeafT*>(route[idx].value);
      if (pool_->to_ptr<LeafT>(p) != l) return Status::Corruption(where + "PM list and routing map differ");
      std::string c = l->Check();
      if (!c.empty()) return Status::Corruption(where + c);
      const bool has_high = idx + 1 < route.size();
      const uint64_t low = route[idx].key, high = has_high ? route[idx + 1].key : 0;
      int m = l->Collect(buf);
      for (int i = 0; i < m; ++i) {
        if (buf[i].key < low || (has_high && buf[i].key >= high))
          return Status::Corruption(where + "key " + std::to_string(buf[i].key) + " outside its fences");
      }
      SmallSort(buf, m, [](const KV& e) { return e.key; });
      if (m > 0) {
        if (any && buf[0].key <= prev_max) return Status::Corruption(where + "keys not above the previous leaf's");
        prev_max = buf[m - 1].key;
        any = true;
      }
      p = l->next();
    }
    if (!p.is_null()) return Status::Corruption("PM leaf list longer than the routing map");
    if (route.size() != leaves_.Sum()) return Status::Corruption("leaf count differs from the list");
    if (reinterpret_cast<const LeafT*>(route[0].value) != head_)
      return Status::Corruption("routing map's first leaf is not the head leaf");
    HintBlock* h = hints();
    if (h->count > HintBlock::kMaxHints) return Status::Corruption("hint count out of range");
    return Status::OK();
  }

  IndexStats stats() override {
    IndexStats s;
    uint64_t entries = 0, leaves = 0;
    ForEachLeaf([&](const LeafT* l) {
      entries += l->Count();
      ++leaves;
    });
    s.entries = entries;
    s.leaves = leaves;
    s.height = routing_.height() + 1;
    s.inner_nodes = routing_.inner_nodes() + routing_.leaves();
    s.pm_bytes = leaves * LeafT::kBytes + sizeof(HintBlock) + Policy::kMetaBytes;
    s.dram_bytes = routing_.dram_bytes();
    s.extra = {{"splits", static_cast<double>(splits_.Sum())},
               {"split_lines", static_cast<double>(split_lines_.Sum())},
               {"split_fences", static_cast<double>(split_fences_.Sum())}};
    return s;
  }

  Status for_each_block(const std::function<void(PPtr)>& fn) override {
    for (PPtr p(pool_->root(kHeadSlot)); !p.is_null(); p = pool_->to_ptr<LeafT>(p)->next()) fn(p);
    fn(PPtr(pool_->root(kHintSlot)));
    if constexpr (Policy::kMetaBytes > 0) fn(PPtr(pool_->root(kMetaSlot)));
    return Status::OK();
  }

  Status close() override {
    if (closed_) return Status::OK();
    closed_ = true;
    if (abandoned()) return Status::OK();  // the open was refused: write nothing
    if (head_ != nullptr) {
      WriteHints();
      WriteCleanCloseRecord();
    }
    return Status::OK();
  }

  // Test hooks.
  Policy& policy() { return policy_; }
  LeafT* head_leaf() const { return head_; }

 private:
  enum class Mode { kInsert, kUpsert };

  static const LeafT* LeafAt(const typename Routing::Cursor& c) {
    return reinterpret_cast<const LeafT*>(c.value);
  }

  // Positions c at the routing entry of the leaf covering k and starts
  // loading that leaf. False: retry (a concurrent routing change). Point
  // operations need no key range (kScan = false: a cheaper seek).
  template <bool kScan = false>
  [[gnu::always_inline]] bool SeekLeaf(uint64_t k, typename Routing::Cursor* c) const {
    auto r = kScan ? routing_.Seek(k, c) : routing_.SeekPoint(k, c);
    if (r == Routing::SeekResult::kRetry) return false;
    PMINDEX_CHECK(r != Routing::SeekResult::kNone, "PmLeafTree: routing map has no entry for key 0");
    LeafAt(*c)->Prefetch();
    pm::ModelRead(LeafAt(*c), LeafT::kBytes);
    return true;
  }

  // Waits while a writer holds l (the caller then seeks again).
  static void AwaitUnlocked(const LeafT* l) {
    for (unsigned spins = 0; l->IsLocked(); ++spins) {
      if (spins < 64) {
        sync::CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
  }

  // Calls fn(leaf) for every leaf in list order, through the routing map
  // (safe alongside writers: each routing leaf is read consistently, and
  // every routed PM leaf is on the list).
  template <class Fn>
  void ForEachLeaf(Fn&& fn) const {
    constexpr size_t kBatch = 256;
    KV batch[kBatch];
    uint64_t from = 0;
    for (;;) {
      const size_t got = routing_.scan(from, kBatch, batch);
      for (size_t i = 0; i < got; ++i) fn(reinterpret_cast<const LeafT*>(batch[i].value));
      if (got < kBatch || batch[got - 1].key == UINT64_MAX) return;
      from = batch[got - 1].key + 1;
    }
  }

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
    // Slots 1 and 2 first (nothing reads them while slot 0 is null), so
    // that their fences do not fall between the flushes below and Format's.
    // pmcrash-redundant: slots 0-3 share one line in each copy of the root
    // slots (pm/pool_format.h), so slot 0's WriteRoot below persists this
    // write with its own in program order, and no crash image shows slot 0
    // without it.
    pool_->WriteRoot(kHintSlot, hp->raw());
    // pmcrash-redundant: as the hint slot's write above (slot 2).
    if constexpr (Policy::kMetaBytes > 0) pool_->WriteRoot(kMetaSlot, mp.raw());
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
    // The head leaf is formatted (flush + fence) right before the write
    // that links it: its fence is the one ordering the leaf, the hint
    // block and the meta block before slot 0.
    LeafT::Format(pool_->to_ptr<LeafT>(*lp), PPtr());
    // Slot 0 last: a non-zero head means the tree exists.
    pool_->WriteRoot(kHeadSlot, lp->raw());
    head_ = pool_->to_ptr<LeafT>(*lp);
    routing_.insert(0, reinterpret_cast<uint64_t>(head_));
    leaves_.Set(1);
    hinted_leaves_ = 1;
    return Status::OK();
  }

  // Leaves are allocated in multiples of 256 bytes, so 256-byte aligned.
  static constexpr uint64_t kLeafAlign = 256;
  bool ValidLeafPtr(PPtr p) const {
    return pm::CheckPPtr(*pool_, p.raw(), LeafT::kBytes, kLeafAlign) == pm::PPtrFault::kOk;
  }

  struct LeafInfo {
    PPtr ptr;
    int count = 0;
    uint64_t min = 0, max = 0;
    ContentSum content;  // of the pairs the leaf keeps
  };

  // The keys >= DropFrom(p) leave leaf p when the meta block is repaired
  // (drops sorted by leaf); ~0 = none.
  static uint64_t DropFrom(const std::vector<MetaDrop>& drops, PPtr p) {
    uint64_t from = ~uint64_t{0};
    auto it = std::lower_bound(drops.begin(), drops.end(), p,
                               [](const MetaDrop& d, PPtr q) { return d.leaf < q; });
    for (; it != drops.end() && it->leaf == p; ++it) from = std::min(from, it->from);
    return from;
  }

  // Walks [from, until) (until null = to the end), reading only; false if
  // the walk does not reach `until` or meets an invalid pointer. Each
  // leaf's keys are taken as the meta repair will leave them (`drops`).
  // A leaf that fails its own checks (LeafT::CheckBeforeRecovery) also
  // ends the walk, with the reason in *bad.
  bool WalkSegment(PPtr from, PPtr until, const std::vector<MetaDrop>& drops,
                   std::vector<LeafInfo>* out, std::string* bad) const {
    KV buf[kSlots];
    const uint64_t limit = pool_->size() / LeafT::kBytes + 1;
    PPtr p = from;
    for (uint64_t steps = 0; p != until; ++steps) {
      if (p.is_null() || !ValidLeafPtr(p) || steps > limit) return false;
      const LeafT* l = pool_->to_ptr<LeafT>(p);
      LeafInfo li;
      li.ptr = p;
      int n = l->Collect(buf);
      // The checks verify() makes of a leaf, as far as they hold before
      // RecoverLeaf (a leaf the meta repair changes is left to verify).
      if (drops.empty() || DropFrom(drops, p) == ~uint64_t{0}) {
        std::string c = l->CheckBeforeRecovery();
        if (!c.empty()) {
          char hex[32];
          std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(p.raw()));
          *bad = std::string("leaf ") + hex + ": " + c;
          return false;
        }
      }
      if (!drops.empty()) {
        const uint64_t cut = DropFrom(drops, p);
        int m = 0;
        for (int i = 0; i < n; ++i)
          if (buf[i].key < cut) buf[m++] = buf[i];
        n = m;
      }
      li.count = n;
      for (int i = 0; i < n; ++i) li.content.Add(buf[i].key, buf[i].value);
      if (n > 0) {
        li.min = li.max = buf[0].key;
        for (int i = 1; i < n; ++i) {
          li.min = std::min(li.min, buf[i].key);
          li.max = std::max(li.max, buf[i].key);
        }
      }
      out->push_back(li);
      p = l->next();
    }
    return true;
  }

  // Runs fn(i) for i in [0, n) on up to rebuild_threads_ threads.
  template <class Fn>
  void ParallelFor(size_t n, Fn fn) const {
    const int threads = static_cast<int>(std::min<size_t>(rebuild_threads_, n));
    if (threads <= 1) {
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    std::vector<std::thread> th;
    for (int t = 0; t < threads; ++t)
      th.emplace_back([&, t] {
        for (size_t i = t; i < n; i += threads) fn(i);
      });
    for (auto& x : th) x.join();
  }

  // Open: validation (reads only; nothing is written until every check
  // that can refuse the pool has passed), then the repairs, then the DRAM
  // routing layer.
  Status Recover() {
    const std::string name(Policy::kName);
    PPtr head(pool_->root(kHeadSlot));
    PPtr hint(pool_->root(kHintSlot));
    {
      auto d = pm::Decode<LeafT>(*pool_, head.raw(), LeafT::kBytes, kLeafAlign, name + ": head leaf (root slot 0)");
      if (!d.ok()) return d.status();
    }
    auto hd = pm::Decode<HintBlock>(*pool_, hint.raw(), sizeof(HintBlock), 64, name + ": hint block (root slot 1)");
    if (!hd.ok()) return hd.status();
    // ---- Validation: reads only.
    void* meta = nullptr;
    std::vector<MetaDrop> drops;
    if constexpr (Policy::kMetaBytes > 0) {
      auto md = pm::Decode(*pool_, pool_->root(kMetaSlot), Policy::kMetaBytes, 64,
                           name + ": meta block (root slot 2)");
      if (!md.ok()) return md.status();
      meta = md.value();
      PMINDEX_RETURN_IF_ERROR(policy_.CheckMeta(meta, pool_, &drops));
      std::sort(drops.begin(), drops.end(), [](const MetaDrop& a, const MetaDrop& b) { return a.leaf < b.leaf; });
    }
    HintBlock* h = hd.value();
    const uint64_t hc = std::atomic_ref<uint64_t>(h->count).load();
    std::vector<LeafInfo> all;
    bool hints_ok = false;
    PMINDEX_RETURN_IF_ERROR(WalkLeafList(head, h, hc, drops, &all, &hints_ok));
    PMINDEX_RETURN_IF_ERROR(CheckHintsOnList(h, hc, all));
    PMINDEX_RETURN_IF_ERROR(CheckLeafOrder(all));
    // The leaves the repair keeps: the head and every non-empty leaf.
    std::vector<LeafInfo> kept;
    kept.push_back(all[0]);
    for (size_t i = 1; i < all.size(); ++i)
      if (all[i].count != 0) kept.push_back(all[i]);
    PMINDEX_RETURN_IF_ERROR(VisitKeptPairs(kept, drops));
    PMINDEX_RETURN_IF_ERROR(CheckCleanCloseRecord(kept));
    PMINDEX_RETURN_IF_ERROR(CheckLeafFloor(all.size()));
    PMINDEX_RETURN_IF_ERROR(AdoptBlocks(kept, hint));

    // ---- Repairs: everything above passed. The clean flag goes first.
    // The allocator's bound on blocks recovery would give back
    // (docs/crash-testing.md, "Recovery's bound on reclaiming") is checked
    // before the first write so that a refusal changes nothing.
    PMINDEX_RETURN_IF_ERROR(alloc_->CheckRecoveryBound());
    PMINDEX_RETURN_IF_ERROR(pool_->MarkInUse());
    if constexpr (Policy::kMetaBytes > 0) policy_.RepairMeta(meta, pool_);
    const bool unlinked = RepairLeafList(all, kept);

    // ---- The DRAM layer.
    std::vector<KV> route(kept.size());
    for (size_t i = 0; i < kept.size(); ++i) {
      route[i] = {i == 0 ? 0 : kept[i].min,
                  reinterpret_cast<uint64_t>(pool_->to_ptr<LeafT>(kept[i].ptr))};
    }
    head_ = pool_->to_ptr<LeafT>(kept[0].ptr);
    routing_.bulk_load(route, 1.0);
    leaves_.Set(kept.size());
    if (unlinked || !hints_ok || hc == 0 || hc > HintBlock::kMaxHints) {
      WriteHints();
    } else {
      hinted_leaves_ = kept.size();
    }
    return Status::OK();
  }

  // The leaf list from `head`, read only, into *all. The hint block's hc
  // leaves split it into segments [head, h0), [h0, h1), ..., [h_last, null)
  // walked in parallel; if the hints do not describe the list, it is walked
  // alone (*hints_ok false). Corruption if the list itself is broken.
  Status WalkLeafList(PPtr head, const HintBlock* h, uint64_t hc,
                      const std::vector<MetaDrop>& drops, std::vector<LeafInfo>* all,
                      bool* hints_ok) const {
    std::vector<PPtr> starts{head};
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
    std::vector<std::string> seg_bad(starts.size());
    ParallelFor(starts.size(), [&](size_t s) {
      PPtr until = s + 1 < starts.size() ? starts[s + 1] : PPtr();
      ok[s] = WalkSegment(starts[s], until, drops, &seg[s], &seg_bad[s]);
    });
    *hints_ok = std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
    if (*hints_ok) {
      for (auto& s : seg) all->insert(all->end(), s.begin(), s.end());
      return Status::OK();
    }
    std::string bad;
    if (!WalkSegment(head, PPtr(), drops, all, &bad))
      return Status::Corruption(std::string(Policy::kName) + ": " +
                                (bad.empty() ? std::string("leaf list is broken") : bad));
    return Status::OK();
  }

  // Every non-empty leaf's keys above the previous non-empty leaf's.
  static Status CheckLeafOrder(const std::vector<LeafInfo>& all) {
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
    return Status::OK();
  }

  // Marks the kept leaves, the hint block and the meta block reachable in
  // the allocator (DRAM only) and checks that each is a block the
  // allocator accepts; else FinishRecovery would refuse the pool after the
  // repairs.
  Status AdoptBlocks(const std::vector<LeafInfo>& kept, PPtr hint) {
    for (auto& li : kept) alloc_->MarkReachable(li.ptr);
    alloc_->MarkReachable(hint);
    if constexpr (Policy::kMetaBytes > 0) alloc_->MarkReachable(PPtr(pool_->root(kMetaSlot)));
    auto not_block = [&](PPtr p, const char* what) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(p.raw()));
      return Status::Corruption(std::string(Policy::kName) + ": " + what + " " + hex +
                                " is not an allocated block");
    };
    for (auto& li : kept)
      if (!alloc_->IsLive(li.ptr)) return not_block(li.ptr, "leaf");
    if (!alloc_->IsLive(hint)) return not_block(hint, "hint block");
    if constexpr (Policy::kMetaBytes > 0) {
      if (!alloc_->IsLive(PPtr(pool_->root(kMetaSlot)))) return not_block(PPtr(pool_->root(kMetaSlot)), "meta block");
    }
    return Status::OK();
  }

  // The repairs of the leaf list, after MarkInUse: the clean-close record
  // of a crashed pool, each leaf's own repair (stale lock bits, interrupted
  // operations), and the unlinking of empty leaves other than the head.
  // Returns whether it unlinked any (the hints are then stale).
  bool RepairLeafList(const std::vector<LeafInfo>& all, const std::vector<LeafInfo>& kept) {
    // The floor for the next open after a crash is the list the repairs
    // leave (the kept leaves), recorded before the first unlink.
    if (!pool_->was_clean() && !salvage_) {
      uint64_t entries = 0;
      for (const auto& li : kept) entries += static_cast<uint64_t>(li.count);
      const uint64_t rec = pm::CleanCloseRecord(entries, kept.size());
      if (pool_->root(pm::kCleanCloseSlot) != rec) pool_->WriteRoot(pm::kCleanCloseSlot, rec);
    }
    // After the split replays, which may leave a leaf for RecoverLeaf to
    // finish.
    ParallelFor(all.size(), [&](size_t i) { pool_->to_ptr<LeafT>(all[i].ptr)->RecoverLeaf(); });
    bool unlinked = false;
    PPtr prev = all[0].ptr;
    for (size_t i = 1; i < all.size(); ++i) {
      if (all[i].count == 0) {
        if (!unlinked) InvalidateHints();
        unlinked = true;
        PPtr nx = i + 1 < all.size() ? all[i + 1].ptr : PPtr();
        pool_->to_ptr<LeafT>(prev)->Relink(nx);
        continue;
      }
      prev = all[i].ptr;
    }
    return unlinked;
  }

  // The pair visitor (IndexEnv::pairs, index/pair_visitor.h) learns the pairs of the
  // kept leaves as the repairs leave them (the meta repair's drops applied;
  // RecoverLeaf changes no pair), before the bound check and the first
  // write; returns its first error. Not from WalkSegment's sums: a hinted
  // segment walk may read a leaf the list does not hold (a split's new
  // leaf before its link) before recovery falls back to the list alone.
  Status VisitKeptPairs(const std::vector<LeafInfo>& kept, const std::vector<MetaDrop>& drops) const {
    if (pairs_ == nullptr) return Status::OK();
    ParallelFor(kept.size(), [&](size_t i) {
      KV buf[kSlots];
      const int n = pool_->to_ptr<LeafT>(kept[i].ptr)->Collect(buf);
      // As WalkSegment keeps them (drops: keys >= the cut leave the leaf).
      const bool cuts = !drops.empty();
      const uint64_t cut = cuts ? DropFrom(drops, kept[i].ptr) : 0;
      for (int j = 0; j < n; ++j)
        if (!cuts || buf[j].key < cut) pairs_->Visit(buf[j].key, buf[j].value);
    });
    return pairs_->status();
  }

  // ---------------------------------------------------------- damage checks
  // Damage that leaves a well-formed but shorter list (a zeroed leaf reads
  // as an empty leaf without a sibling; the leaves after it are cut off)
  // passes the walk and, when the cut-off leaves share allocator pages with
  // reachable blocks, the allocator's page-level bound. Two checks refuse
  // it with reads only, so that a refused open writes nothing:
  //
  // Hints: every leaf WriteHints records is routed, and a routed leaf is on
  // the PM list except a split's new leaf between its routing and its link
  // (lbtree routes before the split's flushes), one per writer thread; no
  // leaf leaves the list before the hints are invalidated (count 0, NAW).
  // So a valid count names leaves all on the list after a clean close, and
  // at most one per writer otherwise (the writers assumed as for the
  // allocator's bound: the hardware threads, at least 16).
  Status CheckHintsOnList(const HintBlock* h, uint64_t hc, const std::vector<LeafInfo>& all) const {
    if (salvage_ || hc == 0 || hc > HintBlock::kMaxHints) return Status::OK();
    std::vector<uint64_t> on(all.size());
    for (size_t i = 0; i < all.size(); ++i) on[i] = all[i].ptr.raw();
    std::sort(on.begin(), on.end());
    uint64_t missing = 0;
    for (uint64_t i = 0; i < hc; ++i) {
      const uint64_t p = std::atomic_ref<const uint64_t>(h->leaf[i]).load();
      if (!std::binary_search(on.begin(), on.end(), p)) ++missing;
    }
    const uint64_t allowed =
        pool_->was_clean() ? 0 : std::max<uint64_t>(16, std::thread::hardware_concurrency());
    if (missing <= allowed) return Status::OK();
    return Status::Corruption(std::string(Policy::kName) + ": " + std::to_string(missing) + " of the " +
                              std::to_string(hc) + " hinted leaves are not on the leaf list (at most " +
                              std::to_string(allowed) +
                              " can be splits in flight), so damage cut the list short; nothing was changed");
  }
  // The clean-close record: close() writes the entries and kept leaves
  // (pm::kCleanCloseSlot) before the pool's clean flag can be set, so an open
  // that finds the flag set must find the same counts (nothing writes the
  // tree between close and the flag). Not checked for salvage copies.
  Status CheckCleanCloseRecord(const std::vector<LeafInfo>& kept) const {
    if (salvage_ || !pool_->was_clean()) return Status::OK();
    ContentSum content;
    for (const auto& li : kept) content.Add(li.content);
    const uint64_t rec = pool_->root(pm::kCleanCloseSlot);
    if (rec == 0) return CheckContentRecord(*pool_, salvage_, content, Policy::kName);
    uint64_t entries = 0;
    for (const auto& li : kept) entries += static_cast<uint64_t>(li.count);
    // The counts first: lost entries or leaves get the more precise message.
    if (pm::CleanCloseRecord(entries, kept.size()) == rec)
      return CheckContentRecord(*pool_, salvage_, content, Policy::kName);
    return Status::Corruption(std::string(Policy::kName) + ": the pool was closed cleanly with " +
                              std::to_string(pm::CleanCloseEntries(rec)) + " entries in " +
                              std::to_string(pm::CleanCloseNodes(rec)) +
                              " leaves, but its leaf list holds " + std::to_string(entries) + " in " +
                              std::to_string(kept.size()) + " (damaged leaves); nothing was changed");
  }
  // The clean-close record is also a floor after a crash: no leaf leaves
  // the PM list outside recovery (deletes leave empty leaves on it;
  // bulk_load needs a list of the head alone), so from the open that
  // followed the record's write (a clean close's, or a crashed open's,
  // written above before its first unlink) until a crash, the list holds
  // at least the leaves it counts. A shorter list was cut by damage: a
  // zeroed leaf reads as an empty leaf without a sibling, and a heap that
  // reads as zeros leaves the head alone, which recovery would otherwise
  // accept as an empty index. (The count is kept modulo 2^23, which never
  // exceeds the true count, so the check is only weaker past 2^23 leaves.)
  Status CheckLeafFloor(size_t on_list) const {
    if (salvage_ || pool_->was_clean()) return Status::OK();
    const uint64_t rec = pool_->root(pm::kCleanCloseSlot);
    if (rec == 0 || on_list >= pm::CleanCloseNodes(rec)) return Status::OK();
    return Status::Corruption(std::string(Policy::kName) + ": the leaf list holds " +
                              std::to_string(on_list) + " leaves, but it held " +
                              std::to_string(pm::CleanCloseNodes(rec)) +
                              " when the pool was last closed or recovered and no leaf leaves it "
                              "before recovery, so damage cut it short (a zeroed leaf or heap); "
                              "nothing was changed");
  }
  // Writes the clean-close record (close(), no writer running).
  void WriteCleanCloseRecord() {
    uint64_t entries = 0, leaves = 0;
    ContentSum content;
    KV buf[kSlots];
    ForEachLeaf([&](const LeafT* l) {
      const int n = l->Collect(buf);
      for (int i = 0; i < n; ++i) content.Add(buf[i].key, buf[i].value);
      entries += static_cast<uint64_t>(n);
      if (n != 0 || l == head_) ++leaves;
    });
    WriteContentRecord(*pool_, content);
    const uint64_t rec = pm::CleanCloseRecord(entries, leaves);
    if (pool_->root(pm::kCleanCloseSlot) != rec) pool_->WriteRoot(pm::kCleanCloseSlot, rec);
  }

  // ---------------------------------------------------------- hints
  HintBlock* hints() const { return pool_->to_ptr<HintBlock>(PPtr(pool_->root(kHintSlot))); }
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
  // Rewrites the hints from the routing map's leaves. Serialized by
  // hint_mu_; safe alongside splits (leaves are only added, and every
  // routed leaf is on the PM list).
  void WriteHints() PMINDEX_EXCLUDES(hint_mu_) {
    sync::MutexLock g(hint_mu_);
    HintBlock* h = hints();
    std::vector<const LeafT*> chain;
    chain.reserve(leaves_.Sum());
    ForEachLeaf([&](const LeafT* l) { chain.push_back(l); });
    const size_t n = chain.size();
    const size_t k = std::min<size_t>(HintBlock::kMaxHints, n > 1 ? n - 1 : 0);
    InvalidateHints();
    for (size_t i = 0; i < k; ++i) {
      pm::store(&h->leaf[i], pool_->to_pptr(chain[(i + 1) * n / (k + 1)]).raw());
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
    RaiseLeafFloor(n);
  }
  // Raises the floor CheckLeafFloor compares after a crash (the node count
  // of root slot 7) toward the routed leaves, so that a pool that crashed
  // without ever being closed is covered too. A split's new leaf is routed
  // before it is linked, so routed leaves may be missing from the list, one
  // per writer in the middle of a split: the floor leaves room for the
  // assumed writers (the hardware threads, at least 16) and at least for
  // half of the leaves (more writer threads than that, all preempted in a
  // split, cannot make a legitimate crash look damaged). Only when the
  // hints are rewritten (the leaves doubled): one root slot write each time.
  void RaiseLeafFloor(uint64_t routed) {
    const uint64_t writers = std::max<uint64_t>(16, std::thread::hardware_concurrency());
    if (routed <= writers) return;
    const uint64_t floor =
        std::min({routed - writers, routed / 2, (uint64_t{1} << 23) - 1});
    const uint64_t rec = pool_->root(pm::kCleanCloseSlot);
    if (rec != 0 && pm::CleanCloseNodes(rec) >= floor) return;
    pool_->WriteRoot(pm::kCleanCloseSlot,
                     pm::CleanCloseRecord(rec != 0 ? pm::CleanCloseEntries(rec) : 0, floor));
  }

  // ---------------------------------------------------------- locking
  // k's slot in its leaf, *l locked; or -1, no lock held, if k is absent.
  [[gnu::always_inline]] int LockSlotOf(uint64_t k, LeafT** l) {
    typename Routing::Cursor c;
    *l = LockFor(k, c);
    const int id = (*l)->Locate(k);
    if (id < 0) Unlock(*l);
    return id;
  }
  // Returns the leaf covering k with its lock bit set by this thread. The
  // bit is set under the routing leaf's write lock (see the contract), so
  // every optimistic reader that could have read the leaf before the bit
  // was set fails its validation.
  // *c is left naming the leaf's routing entry, its version the routing
  // leaf's version after this lock (for Routing::InsertNextTo).
  [[gnu::always_inline]] LeafT* LockFor(uint64_t k, typename Routing::Cursor& c) {
    for (;;) {
      if (!SeekLeaf(k, &c)) continue;
      LeafT* l = const_cast<LeafT*>(LeafAt(c));
      if (l->IsLocked()) {
        AwaitUnlocked(l);
        continue;
      }
      // Succeeds only if the routing leaf is unchanged since the seek: no
      // writer set the bit since (setting it needs this lock), and the
      // entry still covers k.
      if (!routing_.LockLeaf(c)) continue;
      l->SetLockBit(true);
      routing_.UnlockLeaf(c);
      return l;
    }
  }
  // Clears the lock bit: the release store publishes every change of the
  // leaf to readers that see the bit clear. Single-leaf changes instead
  // pass release = true to the leaf operation, whose commit store clears
  // the bit (no store to the line after its write-back: see lbtree_leaf.h).
  static void Unlock(LeafT* l) {
    // Every leaf operation keeps the bit set in the words it stores (the
    // policy contract); a lost bit would let readers see a half-done change.
    PMINDEX_CHECK(l->IsLocked(), "PmLeafTree: a leaf operation cleared the lock bit");
    l->SetLockBit(false);
  }

  // The common case (an insert into a leaf with room) inline in insert() and
  // upsert(), everything else out of line, so that the hot path keeps its
  // values in registers (no spills: see SeekPoint in olc_btree.h).
  [[gnu::always_inline]] Status Write(Key k, Value v, Mode mode) {
    typename Routing::Cursor c;
    LeafT* l = LockFor(k, c);
    int id;
    if constexpr (requires { l->InsertIfAbsent(k, v, true); }) {
      // The leaf's one-pass search-and-insert.
      id = l->InsertIfAbsent(k, v, /*release=*/true);
      if (id == LeafT::kInserted) return Status::OK();
    } else {
      id = l->Locate(k);
      if (id < 0 && !l->Full()) {
        l->Insert(k, v, /*release=*/true);
        return Status::OK();
      }
    }
    return WriteRest(l, k, v, mode, id, c.node, c.version, c.value);
  }
  // Write's other cases, with l locked and id its search result: k present
  // (id >= 0), or l full. (node, version, value): LockFor's cursor.
  [[gnu::noinline]] Status WriteRest(LeafT* l, Key k, Value v, Mode mode, int id,
                                     const void* node, uint64_t version, uint64_t value) {
    if (id >= 0) {
      if (mode == Mode::kUpsert) {
        l->UpdateSlot(id, v, /*release=*/true);
        return Status::OK();
      }
      Unlock(l);
      return Status::AlreadyExists();
    }
    // The leaf is full: split.
    auto np = alloc_->Alloc(LeafT::kBytes);
    if (!np.ok()) {
      Unlock(l);
      return np.status();
    }
    LeafT* nl = pool_->to_ptr<LeafT>(*np);
    // The split writes all of nl: fetch its lines for writing now, while it
    // sorts and copies, so that its stores (and the fence after them) do
    // not wait for one miss per line (fill-1.0 inserts 5% faster).
    PrefetchLinesForWrite(nl, LeafT::kBytes);
    void* meta = nullptr;
    if constexpr (Policy::kMetaBytes > 0) meta = pool_->to_ptr(PPtr(pool_->root(kMetaSlot)));
    // nl is routed before l's bit is cleared: a reader that waited on the
    // bit then fails its validation (the routing leaf changed) and re-seeks.
    // Next to l's entry in the routing leaf LockFor found, if no one changed
    // that leaf since (no second descent), else by a full insert.
    auto route = [&](uint64_t split_key) {
      typename Routing::Cursor c;
      c.node = node;
      c.version = version;
      c.value = value;
      if (!routing_.InsertNextTo(c, split_key, reinterpret_cast<uint64_t>(nl)))
        routing_.insert(split_key, reinterpret_cast<uint64_t>(nl));
    };
    // The split's own PM cost (the insert that caused it included), so a
    // benchmark can tell split line writes from plain inserts (Theorem 3.5
    // of the LB+-Tree paper counts the latter). Read field by field (see
    // pm::ThreadLinesFlushed).
    const uint64_t lines0 = pm::ThreadLinesFlushed(), fences0 = pm::ThreadFences();
    if constexpr (requires { policy_.SplitRouted(l, PPtr(), k, v, nl, *np, meta, route); }) {
      policy_.SplitRouted(l, pool_->to_pptr(l), k, v, nl, *np, meta, route);
    } else {
      route(policy_.Split(l, pool_->to_pptr(l), k, v, nl, *np, meta));
      Unlock(l);
    }
    splits_.Add(1);
    split_lines_.Add(static_cast<int64_t>(pm::ThreadLinesFlushed() - lines0));
    split_fences_.Add(static_cast<int64_t>(pm::ThreadFences() - fences0));
    leaves_.Add(1);
    const uint64_t nleaves = leaves_.Sum();
    if (nleaves >= 2 * hinted_leaves_.load(std::memory_order_relaxed) && hint_mu_.try_lock()) {
      hint_mu_.unlock();
      WriteHints();
    }
    return Status::OK();
  }

  Pool* pool_;
  alloc::Allocator* alloc_;
  int rebuild_threads_;
  bool salvage_;  // IndexEnv::salvage: the damage checks are off
  PairVisitor* pairs_;  // IndexEnv::pairs: told every kept pair at open
  Policy policy_;
  Routing routing_;
  LeafT* head_ = nullptr;  // the PM list's head (changed only by bulk_load and open)
  sync::Mutex hint_mu_;    // one WriteHints at a time
  // Striped (no line shared by every writer on the split path).
  olc_detail::StripedCounter leaves_;
  std::atomic<uint64_t> hinted_leaves_{0};
  // Since create/open: leaf splits and the lines flushed / fences they cost.
  olc_detail::StripedCounter splits_, split_lines_, split_fences_;
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
      .options_help =
          "node=256|512|768|1024 (leaf bytes; default 256) rebuild_threads=N (default 1)",
      .validate = ValidatePmLeafTreeOptions,
      .create = [](const IndexEnv& e, const Options& o) { return MakePmLeafTree<P>(e, o, false); },
      .open = [](const IndexEnv& e, const Options& o) { return MakePmLeafTree<P>(e, o, true); },
      .stores_data = true,
      .marks_in_use = true,
  };
}

}  // namespace pmindex::common
