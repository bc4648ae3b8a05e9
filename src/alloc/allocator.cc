// The persistent allocator (allocator.h, docs/allocator.md).
//
// Persistent state: the page words (page_word.h), kept in two copies, one
// pm::naw to each (copy A first) per page taken or given back. Everything
// below is DRAM and rebuilt on Attach.
//
// DRAM state and locks:
// - PageInfo per mapped page, in chunks that never move once published
//   (chunks_[i] is written before mapped_ covers it). kind/cls/node/span
//   fields are atomics so that Free/MarkReachable can validate any pointer
//   without a lock; they change only under the owning node's lock, and only
//   while the page has no live or cached block.
// - live bitmap per class page (atomic words): bit set = block handed out
//   (or marked during recovery). Alloc sets it, Free clears it; finding it
//   already set/clear is the double-use / double-free check.
// - avail bitmap + free_count + partial-list links: blocks sitting in the
//   central free lists, under the page's node lock.
// - NodeState: per node, free page extents and per-class partial lists,
//   under NodeState::mu.
// - ThreadCache: per thread per allocator (ThreadSlotOwner), owner thread
//   only, except at thread exit (registry mutex held) and destruction.
// Lock order: registry mutex > caches_mu_ > grow_mu_ > one NodeState::mu.
// Never two node locks at once.
#include "alloc/allocator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "alloc/epoch.h"
#include "alloc/page_word.h"
#include "alloc/size_classes.h"
#include "alloc/thread_slots.h"
#include "pm/persist.h"
#include "sync/mutex.h"
#include "util/check.h"

namespace pmindex::alloc {
namespace {

constexpr uint32_t kNoPage = UINT32_MAX;
constexpr size_t kChunkPages = 256;  // 64 MiB of heap per PageInfo chunk

struct PageInfo {
  std::atomic<PageKind> kind{PageKind::kFree};
  std::atomic<uint8_t> cls{0};
  std::atomic<uint16_t> node{0};
  std::atomic<uint32_t> span{0};         // head: length; tail: distance to head
  std::atomic<bool> span_live{false};    // head: the span is handed out / marked
  // Under the node lock.
  uint32_t free_count = 0;  // blocks in avail
  uint32_t prev = kNoPage, next = kNoPage;
  bool in_partial = false;
  bool orphan_tail = false;  // recovery: tail not covered by a head
  uint64_t avail[kBitmapWords] = {};
  std::atomic<uint64_t> live[kBitmapWords] = {};
};

struct PageChunk {
  PageInfo pages[kChunkPages];
};

struct alignas(64) NodeState {
  sync::Mutex mu;
  // Free pages: start -> length.
  std::map<uint32_t, uint32_t> extents PMINDEX_GUARDED_BY(mu);
  // Heads of partial-page lists.
  uint32_t partial[kNumClasses] PMINDEX_GUARDED_BY(mu);
  NodeState() { std::fill(std::begin(partial), std::end(partial), kNoPage); }
};

struct ThreadCache {
  std::vector<uint64_t> blocks[kNumClasses];  // pool offsets; allocations by the mode
  // Allocations for a given node (Alloc(n, node)), per node, made on first
  // use: NOBtree's per-node slab managers (paper 003, docs/papers.md).
  std::vector<std::array<std::vector<uint64_t>, kNumClasses>> by_node;
  std::vector<uint64_t>& For(int node, int c, int nodes) {
    if (node < 0) return blocks[c];
    if (by_node.empty()) by_node.resize(static_cast<size_t>(nodes));
    return by_node[static_cast<size_t>(node)][static_cast<size_t>(c)];
  }
};

struct BlockRef {
  uint32_t page = 0;
  uint32_t block = 0;
  int cls = -1;  // -1: a span
};

}  // namespace

struct Allocator::Impl final : ThreadSlotOwner {
  Pool* pool = nullptr;
  AllocOptions opt;
  std::shared_ptr<Topology> topo;
  int nodes = 1;
  uint16_t pool_id = 0;
  uint64_t heap_begin = 0;
  uint64_t* table = nullptr;   // page-table copy A
  uint64_t* mirror = nullptr;  // copy B
  size_t entries = 0;
  // Recovery: words whose two copies differed (index, resolved word),
  // rewritten by Finish() once the bound check passed.
  std::vector<std::pair<uint32_t, uint64_t>> word_repairs;
  size_t cache_cap = 0;
  size_t batch = 1;
  // Request size -> class: detail::kClassIndex, or kCoarseClassIndex in a
  // pool of fewer than kCoarseBelowPages pages (size_classes.h).
  const uint8_t* class_index = detail::kClassIndex.data();

  std::unique_ptr<std::atomic<PageChunk*>[]> chunks;
  sync::Mutex grow_mu;
  std::vector<std::unique_ptr<PageChunk>> chunk_store PMINDEX_GUARDED_BY(grow_mu);
  std::atomic<size_t> mapped{0};

  std::vector<std::unique_ptr<NodeState>> node_state;
  std::atomic<uint64_t> remote_allocs{0};
  std::atomic<uint64_t> rr_next{0};
  // Real topology with more than one node: each node's page runs are bound
  // to it (Topology::bind). Failures are counted, not fatal (a DAX file's
  // pages live where the device is; a file system may not honour mbind).
  bool bind_pages = false;
  std::atomic<uint64_t> bind_failures{0};

  std::atomic<bool> recovering{false};
  sync::Mutex recovery_mu;
  uint64_t bad_marks PMINDEX_GUARDED_BY(recovery_mu) = 0;
  std::string first_bad PMINDEX_GUARDED_BY(recovery_mu);
  RecoveryReport report;

  sync::Mutex caches_mu;
  std::vector<std::unique_ptr<ThreadCache>> caches PMINDEX_GUARDED_BY(caches_mu);

  std::unique_ptr<EpochDomain> epochs;

  ~Impl() override {
    // After a successful create/open, give back what the caches and the
    // epoch lists hold, so that a cleanly closed pool has no owned page
    // without an allocated block (FinishRecovery's bound after a clean
    // close counts on it). An allocator still in recovery writes nothing.
    // (epochs is null when Attach failed: nothing was handed out then.)
    const bool give_back = epochs != nullptr && !recovering.load(std::memory_order_acquire);
    if (give_back) epochs->Reclaim();
    Unregister();  // no ThreadExited from here on; caches die with *this
    if (give_back) {
      sync::MutexLock lock(caches_mu);
      for (auto& c : caches) FlushAll(*c);
    }
    epochs.reset();
  }

  // ------------------------------------------------------------ plumbing
  PageInfo& Page(uint32_t idx) const {
    return chunks[idx / kChunkPages].load(std::memory_order_acquire)->pages[idx % kChunkPages];
  }
  uint64_t PageOffset(uint32_t idx) const { return heap_begin + uint64_t{idx} * kPageBytes; }
  PPtr Ptr(uint64_t off) const { return PPtr::Make(pool_id, off); }
  // Copy A, then copy B (page_word.h: a crash between them leaves a pair
  // that resolves to the owned word).
  void WriteWord(uint32_t idx, uint64_t v) {
    pm::naw(&table[idx], v);
    pm::naw(&mirror[idx], v);
  }
  void SetWord(uint32_t idx, const PageWord& w) { WriteWord(idx, w.Encode()); }
  void ClearWord(uint32_t idx) { WriteWord(idx, 0); }

  ThreadCache& Cache() { return *static_cast<ThreadCache*>(Slot()); }
  void* CreateSlot() override {
    auto c = std::make_unique<ThreadCache>();
    ThreadCache* p = c.get();
    sync::MutexLock lock(caches_mu);
    caches.push_back(std::move(c));
    return p;
  }
  void ThreadExited(void* slot) override {
    auto* c = static_cast<ThreadCache*>(slot);
    FlushAll(*c);
    sync::MutexLock lock(caches_mu);
    std::erase_if(caches, [&](const std::unique_ptr<ThreadCache>& p) { return p.get() == c; });
  }

  int ChooseNode() {
    switch (opt.mode) {
      case NumaMode::kLocal:
        return topo->node_of_this_thread() % nodes;
      case NumaMode::kRoundRobin:
        return static_cast<int>(rr_next.fetch_add(1, std::memory_order_relaxed) % nodes);
      case NumaMode::kGivenNode:
        return opt.given_node;
    }
    return 0;
  }

  // Makes PageInfo exist for pages [0, n).
  void EnsureChunks(size_t n) PMINDEX_REQUIRES(grow_mu) {
    for (size_t c = 0; c * kChunkPages < n; ++c) {
      if (chunks[c].load(std::memory_order_relaxed) != nullptr) continue;
      chunk_store.push_back(std::make_unique<PageChunk>());
      chunks[c].store(chunk_store.back().get(), std::memory_order_release);
    }
  }

  // ------------------------------------------------------- free extents
  static void AddExtent(NodeState& ns, uint32_t start, uint32_t len) PMINDEX_REQUIRES(ns.mu) {
    auto next = ns.extents.lower_bound(start);
    if (next != ns.extents.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        start = prev->first;
        len += prev->second;
        ns.extents.erase(prev);
      }
    }
    if (next != ns.extents.end() && start + len == next->first) {
      len += next->second;
      ns.extents.erase(next);
    }
    ns.extents.emplace(start, len);
  }
  // Takes the lowest run of `len` free pages. Returns kNoPage if none.
  static uint32_t TakeExtent(NodeState& ns, uint32_t len) PMINDEX_REQUIRES(ns.mu) {
    for (auto it = ns.extents.begin(); it != ns.extents.end(); ++it) {
      if (it->second < len) continue;
      uint32_t start = it->first, rest = it->second - len;
      ns.extents.erase(it);
      if (rest != 0) ns.extents.emplace(start + len, rest);
      return start;
    }
    return kNoPage;
  }
  // Hands pages [start, start+count) to the nodes: the first
  // max(count / nodes, need) to `home`, the rest evenly to the others.
  void Distribute(uint32_t start, uint32_t count, int home, uint32_t need) {
    if (count == 0) return;
    uint32_t share = std::max<uint32_t>(1, count / nodes);
    uint32_t first = std::min(count, std::max(share, need));
    GiveRun(home, start, first);
    uint32_t pos = start + first, left = count - first;
    for (int i = 1; i < nodes && left > 0; ++i) {
      int n = (home + i) % nodes;
      uint32_t take = i == nodes - 1 ? left : std::min(left, share);
      GiveRun(n, pos, take);
      pos += take;
      left -= take;
    }
    if (left > 0) GiveRun(home, pos, left);
  }
  // Free pages [start, start+len) become node n's (bound to it first).
  void GiveRun(int n, uint32_t start, uint32_t len) {
    BindRun(n, start, len);
    NodeState& ns = *node_state[n];
    sync::MutexLock lock(ns.mu);
    AddExtent(ns, start, len);
  }
  void BindRun(int n, uint32_t start, uint32_t len) {
    if (!bind_pages || len == 0) return;
    Status s = topo->bind(pool->base() + PageOffset(start), uint64_t{len} * kPageBytes, n);
    if (!s.ok()) bind_failures.fetch_add(1, std::memory_order_relaxed);
  }
  // Binds the owned pages of [0, m) to the nodes their words name, in runs.
  void BindOwned(size_t m) {
    size_t i = 0;
    while (i < m) {
      const PageInfo& p = Page(static_cast<uint32_t>(i));
      if (p.kind.load(std::memory_order_relaxed) == PageKind::kFree) {
        ++i;
        continue;
      }
      const int n = p.node.load(std::memory_order_relaxed);
      size_t j = i + 1;
      while (j < m && Page(static_cast<uint32_t>(j)).kind.load(std::memory_order_relaxed) != PageKind::kFree &&
             Page(static_cast<uint32_t>(j)).node.load(std::memory_order_relaxed) == n) {
        ++j;
      }
      BindRun(n, static_cast<uint32_t>(i), static_cast<uint32_t>(j - i));
      i = j;
    }
  }

  // Maps more pages unless another thread already did since `seen` was
  // read. The new pages go to the nodes, `need` contiguous ones to `home`.
  Status Grow(size_t seen, uint32_t need, int home) {
    sync::MutexLock lock(grow_mu);
    size_t cur = mapped.load(std::memory_order_acquire);
    if (cur != seen) return Status::OK();
    if (cur + need > entries) {
      return Status::OutOfSpace("allocator: pool is at its maximum size");
    }
    PMINDEX_RETURN_IF_ERROR(pool->Grow(cur + need));
    size_t now = std::min(pool->pages_mapped(), entries);
    if (now <= cur) return Status::OutOfSpace("allocator: pool did not grow");
    EnsureChunks(now);
    mapped.store(now, std::memory_order_release);
    Distribute(static_cast<uint32_t>(cur), static_cast<uint32_t>(now - cur), home, need);
    return Status::OK();
  }

  // ------------------------------------------------------ partial lists
  void PushPartial(NodeState& ns, int c, uint32_t idx) PMINDEX_REQUIRES(ns.mu) {
    PageInfo& p = Page(idx);
    p.prev = kNoPage;
    p.next = ns.partial[c];
    if (p.next != kNoPage) Page(p.next).prev = idx;
    ns.partial[c] = idx;
    p.in_partial = true;
  }
  void RemovePartial(NodeState& ns, int c, uint32_t idx) PMINDEX_REQUIRES(ns.mu) {
    PageInfo& p = Page(idx);
    if (p.prev != kNoPage) {
      Page(p.prev).next = p.next;
    } else {
      ns.partial[c] = p.next;
    }
    if (p.next != kNoPage) Page(p.next).prev = p.prev;
    p.prev = p.next = kNoPage;
    p.in_partial = false;
  }

  // Turns free page idx into a page of class c owned by node n (ns).
  void FormatClassPage(NodeState& ns, int n, uint32_t idx, int c) PMINDEX_REQUIRES(ns.mu) {
    PageInfo& p = Page(idx);
    const uint32_t nb = ClassBlocks(c);
    std::fill(std::begin(p.avail), std::end(p.avail), 0);
    for (uint32_t w = 0; w < nb / 64; ++w) p.avail[w] = ~uint64_t{0};
    if (nb % 64 != 0) p.avail[nb / 64] = (uint64_t{1} << (nb % 64)) - 1;
    p.free_count = nb;
    p.cls.store(static_cast<uint8_t>(c), std::memory_order_relaxed);
    p.node.store(static_cast<uint16_t>(n), std::memory_order_relaxed);
    // Persist point: the page belongs to class c before any block is used.
    SetWord(idx, PageWord{PageKind::kClass, static_cast<uint8_t>(c), static_cast<uint16_t>(n), 0});
    p.kind.store(PageKind::kClass, std::memory_order_release);
    PushPartial(ns, c, idx);
  }

  // Gives an empty class page back to its node (ns).
  void ReleaseClassPage(NodeState& ns, uint32_t idx) PMINDEX_REQUIRES(ns.mu) {
    PageInfo& p = Page(idx);
    if (p.in_partial) RemovePartial(ns, p.cls.load(std::memory_order_relaxed), idx);
    p.kind.store(PageKind::kFree, std::memory_order_release);
    ClearWord(idx);  // persist point: the page is free
    p.free_count = 0;
    AddExtent(ns, idx, 1);
  }

  // Moves up to `want` blocks of class c from node n into `out`. Returns
  // false iff the node has neither a partial page of c nor a free page.
  bool TakeBlocks(int n, int c, size_t want, std::vector<uint64_t>& out) {
    NodeState& ns = *node_state[n];
    sync::MutexLock lock(ns.mu);
    if (ns.partial[c] == kNoPage) {
      uint32_t idx = TakeExtent(ns, 1);
      if (idx == kNoPage) return false;
      FormatClassPage(ns, n, idx, c);
    }
    const uint32_t size = ClassSize(c);
    while (want > 0 && ns.partial[c] != kNoPage) {
      uint32_t idx = ns.partial[c];
      PageInfo& p = Page(idx);
      const uint64_t base = PageOffset(idx);
      for (size_t w = 0; w < kBitmapWords && want > 0 && p.free_count > 0; ++w) {
        while (p.avail[w] != 0 && want > 0) {
          int b = std::countr_zero(p.avail[w]);
          p.avail[w] &= p.avail[w] - 1;
          --p.free_count;
          --want;
          out.push_back(base + (uint64_t{w} * 64 + b) * size);
        }
      }
      if (p.free_count == 0) RemovePartial(ns, c, idx);
    }
    return true;
  }

  // Returns one cached block of page idx to its node (ns).
  void ReturnBlock(NodeState& ns, uint32_t idx, uint64_t off) PMINDEX_REQUIRES(ns.mu) {
    PageInfo& p = Page(idx);
    const int c = p.cls.load(std::memory_order_relaxed);
    const uint32_t b = static_cast<uint32_t>((off - PageOffset(idx)) / ClassSize(c));
    const uint64_t m = uint64_t{1} << (b % 64);
    PMINDEX_CHECK((p.avail[b / 64] & m) == 0, "allocator: block %#" PRIx64 " returned twice to its page",
                  off);
    p.avail[b / 64] |= m;
    if (p.free_count++ == 0) PushPartial(ns, c, idx);
    if (p.free_count == ClassBlocks(c)) ReleaseClassPage(ns, idx);
  }

  // Returns cached blocks of class c beyond the first `keep` to their pages.
  void FlushClass(ThreadCache& tc, int c, size_t keep) { FlushBlocks(tc.blocks[c], keep); }
  void FlushBlocks(std::vector<uint64_t>& v, size_t keep) {
    if (v.size() <= keep) return;
    // Group by node so that each node's lock is taken once per run.
    std::sort(v.begin() + keep, v.end(), [&](uint64_t a, uint64_t b) {
      return Page(PageIndex(a)).node.load(std::memory_order_relaxed) <
             Page(PageIndex(b)).node.load(std::memory_order_relaxed);
    });
    size_t i = keep;
    while (i < v.size()) {
      const int n = Page(PageIndex(v[i])).node.load(std::memory_order_relaxed);
      NodeState& ns = *node_state[n];
      sync::MutexLock lock(ns.mu);
      for (; i < v.size(); ++i) {
        uint32_t idx = PageIndex(v[i]);
        if (Page(idx).node.load(std::memory_order_relaxed) != n) break;
        ReturnBlock(ns, idx, v[i]);
      }
    }
    v.resize(keep);
  }
  void FlushAll(ThreadCache& tc) {
    for (int c = 0; c < kNumClasses; ++c) FlushClass(tc, c, 0);
    for (auto& per_class : tc.by_node) {
      for (auto& v : per_class) FlushBlocks(v, 0);
    }
  }

  uint32_t PageIndex(uint64_t off) const {
    return static_cast<uint32_t>((off - heap_begin) / kPageBytes);
  }

  // ---------------------------------------------------------- validation
  // Returns true iff p is the start of a block of an owned page (live or
  // not). Otherwise writes the reason to `why`.
  bool Locate(PPtr p, BlockRef* r, std::string* why) const {
    char buf[160];
    if (p.is_null()) {
      *why = "null pointer";
      return false;
    }
    if (p.pool_id() != pool_id) {
      std::snprintf(buf, sizeof buf, "pointer %#" PRIx64 " belongs to pool id %u, not %u",
                    p.raw(), p.pool_id(), pool_id);
      *why = buf;
      return false;
    }
    const uint64_t off = p.offset();
    const size_t m = mapped.load(std::memory_order_acquire);
    if (off < heap_begin || (off - heap_begin) / kPageBytes >= m) {
      std::snprintf(buf, sizeof buf, "offset %#" PRIx64 " is outside the heap", off);
      *why = buf;
      return false;
    }
    const uint32_t idx = PageIndex(off);
    const uint64_t in = off - PageOffset(idx);
    const PageInfo& pg = Page(idx);
    switch (pg.kind.load(std::memory_order_acquire)) {
      case PageKind::kClass: {
        const int c = pg.cls.load(std::memory_order_relaxed);
        const uint32_t size = ClassSize(c);
        if (in % size != 0 || in / size >= ClassBlocks(c)) {
          std::snprintf(buf, sizeof buf,
                        "offset %#" PRIx64 " is not the start of a block (page %u, class %u bytes)",
                        off, idx, size);
          *why = buf;
          return false;
        }
        r->page = idx;
        r->block = static_cast<uint32_t>(in / size);
        r->cls = c;
        return true;
      }
      case PageKind::kSpanHead:
        if (in == 0) {
          r->page = idx;
          r->block = 0;
          r->cls = -1;
          return true;
        }
        [[fallthrough]];
      case PageKind::kSpanTail:
        std::snprintf(buf, sizeof buf, "offset %#" PRIx64 " points inside a large block", off);
        *why = buf;
        return false;
      case PageKind::kFree:
        break;
    }
    std::snprintf(buf, sizeof buf, "offset %#" PRIx64 " is in page %u, which is not allocated",
                  off, idx);
    *why = buf;
    return false;
  }

  BlockRef LocateOrCheck(PPtr p, const char* op) const {
    BlockRef r;
    std::string why;
    PMINDEX_CHECK(Locate(p, &r, &why), "allocator: %s(%#" PRIx64 "): bad pointer: %s", op, p.raw(),
                  why.c_str());
    return r;
  }

  bool IsLive(const BlockRef& r) const {
    const PageInfo& pg = Page(r.page);
    if (r.cls < 0) return pg.span_live.load(std::memory_order_acquire);
    return (pg.live[r.block / 64].load(std::memory_order_acquire) >> (r.block % 64)) & 1;
  }

  void CheckReady(const char* op) const {
    PMINDEX_CHECK(!recovering.load(std::memory_order_acquire),
                  "allocator: %s called before FinishRecovery() succeeded", op);
  }

  // ---------------------------------------------------------- alloc/free
  Result<PPtr> AllocSmall(size_t n, int node) {
    const int c = class_index[(n - 1) / 64];
    ThreadCache& tc = Cache();
    auto& v = tc.For(node, c, nodes);
    if (v.empty()) {
      const int home = node < 0 ? ChooseNode() : node;
      Status s = Refill(tc, v, c, home);
      if (s.is_out_of_space()) return Borrow(c, home, s);
      if (!s.ok()) return s;
    }
    const uint64_t off = v.back();
    v.pop_back();
    const uint32_t idx = PageIndex(off);
    const uint32_t b = static_cast<uint32_t>((off - PageOffset(idx)) / ClassSize(c));
    const uint64_t m = uint64_t{1} << (b % 64);
    uint64_t old = Page(idx).live[b / 64].fetch_or(m, std::memory_order_acq_rel);
    PMINDEX_CHECK((old & m) == 0, "allocator: block %#" PRIx64 " handed out twice", off);
    pm::CountAllocated(static_cast<int64_t>(ClassSize(c)));
    return Ptr(off);
  }

  // Fills v with blocks of class c from node `home`'s pages, else from the
  // next nodes' (a remote allocation), else from new pages.
  Status Refill(ThreadCache& tc, std::vector<uint64_t>& v, int c, int home) {
    bool flushed = false;
    for (;;) {
      const size_t seen = mapped.load(std::memory_order_acquire);
      if (TakeBlocks(home, c, batch, v)) return Status::OK();
      for (int i = 1; i < nodes; ++i) {
        if (TakeBlocks((home + i) % nodes, c, batch, v)) {
          remote_allocs.fetch_add(1, std::memory_order_relaxed);
          return Status::OK();
        }
      }
      Status s = Grow(seen, 1, home);
      if (s.ok()) continue;
      if (!s.is_out_of_space() || flushed) return s;
      // Blocks this thread holds in its cache may keep pages from being
      // given back; return them and try once more.
      FlushAll(tc);
      flushed = true;
    }
  }

  // The pool is full and no page of class c has a free block: hands out
  // one free block of the smallest larger class that has one (node `home`
  // first, then the next nodes) and whose blocks are aligned at least as a
  // block of c is, so that a small pool is not exhausted by many classes
  // each holding a mostly empty page. The block stays its page's: Free,
  // recovery and BlockSize see a block of that class, and nothing persisted
  // changes. Returns `oos` if no such block is free.
  Result<PPtr> Borrow(int c, int home, const Status& oos) {
    const int align = std::countr_zero(ClassSize(c));
    for (int bc = c + 1; bc < kNumClasses; ++bc) {
      if (std::countr_zero(ClassSize(bc)) < align) continue;
      for (int i = 0; i < nodes; ++i) {
        uint64_t off = 0;
        if (!TakeOneFromPartial((home + i) % nodes, bc, &off)) continue;
        if (i != 0) remote_allocs.fetch_add(1, std::memory_order_relaxed);
        const uint32_t idx = PageIndex(off);
        const uint32_t b = static_cast<uint32_t>((off - PageOffset(idx)) / ClassSize(bc));
        const uint64_t m = uint64_t{1} << (b % 64);
        const uint64_t old = Page(idx).live[b / 64].fetch_or(m, std::memory_order_acq_rel);
        PMINDEX_CHECK((old & m) == 0, "allocator: block %#" PRIx64 " handed out twice", off);
        pm::CountAllocated(static_cast<int64_t>(ClassSize(bc)));
        return Ptr(off);
      }
    }
    return oos;
  }

  // Moves one free block of a partial page of class c of node n to *off.
  // Returns false iff node n has no partial page of c (no page is formatted).
  bool TakeOneFromPartial(int n, int c, uint64_t* off) {
    NodeState& ns = *node_state[n];
    sync::MutexLock lock(ns.mu);
    const uint32_t idx = ns.partial[c];
    if (idx == kNoPage) return false;
    PageInfo& p = Page(idx);
    for (size_t w = 0; w < kBitmapWords; ++w) {
      if (p.avail[w] == 0) continue;
      const int b = std::countr_zero(p.avail[w]);
      p.avail[w] &= p.avail[w] - 1;
      if (--p.free_count == 0) RemovePartial(ns, c, idx);
      *off = PageOffset(idx) + (uint64_t{w} * 64 + b) * ClassSize(c);
      return true;
    }
    PMINDEX_CHECK(false, "allocator: partial page %u of class %u has no free block", idx,
                  ClassSize(c));
    return false;
  }

  // Takes `len` contiguous free pages of node n as a span. Returns the head
  // page or kNoPage.
  uint32_t TakeSpan(int n, uint32_t len) {
    NodeState& ns = *node_state[n];
    sync::MutexLock lock(ns.mu);
    uint32_t head = TakeExtent(ns, len);
    if (head == kNoPage) return kNoPage;
    const uint16_t node = static_cast<uint16_t>(n);
    // Persist order: tails first, then the head (the commit point).
    for (uint32_t d = 1; d < len; ++d) {
      PageInfo& t = Page(head + d);
      t.node.store(node, std::memory_order_relaxed);
      t.span.store(d, std::memory_order_relaxed);
      SetWord(head + d, PageWord{PageKind::kSpanTail, 0, node, d});
      t.kind.store(PageKind::kSpanTail, std::memory_order_release);
    }
    PageInfo& h = Page(head);
    h.node.store(node, std::memory_order_relaxed);
    h.span.store(len, std::memory_order_relaxed);
    h.span_live.store(true, std::memory_order_relaxed);
    SetWord(head, PageWord{PageKind::kSpanHead, 0, node, len});
    h.kind.store(PageKind::kSpanHead, std::memory_order_release);
    return head;
  }

  // Gives a span back to its node (ns).
  void ReleaseSpan(NodeState& ns, uint32_t head) PMINDEX_REQUIRES(ns.mu) {
    PageInfo& h = Page(head);
    const uint32_t len = h.span.load(std::memory_order_relaxed);
    // Persist order: the head first, so a crash leaves only orphan tails.
    h.kind.store(PageKind::kFree, std::memory_order_release);
    h.span_live.store(false, std::memory_order_relaxed);
    ClearWord(head);
    for (uint32_t d = 1; d < len; ++d) {
      Page(head + d).kind.store(PageKind::kFree, std::memory_order_release);
      ClearWord(head + d);
    }
    AddExtent(ns, head, len);
  }

  Result<PPtr> AllocSpan(size_t n, int node) {
    const uint64_t pages64 = (n + kPageBytes - 1) / kPageBytes;
    if (pages64 > entries) {
      return Status::OutOfSpace("allocator: request of " + std::to_string(n) +
                                " bytes exceeds the pool's maximum size");
    }
    const uint32_t len = static_cast<uint32_t>(pages64);
    const int home = node < 0 ? ChooseNode() : node;
    bool flushed = false;
    for (;;) {
      const size_t seen = mapped.load(std::memory_order_acquire);
      uint32_t head = TakeSpan(home, len);
      for (int i = 1; i < nodes && head == kNoPage; ++i) {
        head = TakeSpan((home + i) % nodes, len);
        if (head != kNoPage) remote_allocs.fetch_add(1, std::memory_order_relaxed);
      }
      if (head != kNoPage) {
        pm::CountAllocated(static_cast<int64_t>(uint64_t{len} * kPageBytes));
        return Ptr(PageOffset(head));
      }
      Status s = Grow(seen, len, home);
      if (s.ok()) continue;
      if (!s.is_out_of_space() || flushed) return s;
      FlushAll(Cache());
      flushed = true;
    }
  }

  void FreeBlock(PPtr p, const char* op) {
    const BlockRef r = LocateOrCheck(p, op);
    PageInfo& pg = Page(r.page);
    if (r.cls < 0) {
      PMINDEX_CHECK(pg.span_live.exchange(false, std::memory_order_acq_rel),
                    "allocator: %s(%#" PRIx64 "): double free (block is not allocated)", op, p.raw());
      const uint32_t len = pg.span.load(std::memory_order_relaxed);
      NodeState& ns = *node_state[pg.node.load(std::memory_order_relaxed)];
      {
        sync::MutexLock lock(ns.mu);
        ReleaseSpan(ns, r.page);
      }
      pm::CountAllocated(-static_cast<int64_t>(uint64_t{len} * kPageBytes));
      return;
    }
    const uint64_t m = uint64_t{1} << (r.block % 64);
    uint64_t old = pg.live[r.block / 64].fetch_and(~m, std::memory_order_acq_rel);
    PMINDEX_CHECK((old & m) != 0, "allocator: %s(%#" PRIx64 "): double free (block is not allocated)",
                  op, p.raw());
    pm::CountAllocated(-static_cast<int64_t>(ClassSize(r.cls)));
    ThreadCache& tc = Cache();
    // A thread that allocates by node keeps freed blocks in the slab of
    // their node, where its next allocation for that node finds them.
    auto& v = tc.by_node.empty() ? tc.blocks[r.cls] : tc.For(pg.node.load(std::memory_order_relaxed), r.cls, nodes);
    v.push_back(p.offset());
    if (v.size() > cache_cap) FlushBlocks(v, cache_cap / 2);
  }

  // ------------------------------------------------------------ recovery
  // Rebuilds DRAM state from the page table. Pages [0, mapped) only.
  Status LoadPageTable(bool fresh) {
    const size_t m = mapped.load(std::memory_order_relaxed);
    if (fresh) {
      for (size_t i = 0; i < entries; ++i) {
        if (table[i] != 0 || mirror[i] != 0) ClearWord(static_cast<uint32_t>(i));
      }
      DistributeFree(m);
      return Status::OK();
    }
    PMINDEX_RETURN_IF_ERROR(LoadPageWords(m));
    PMINDEX_RETURN_IF_ERROR(CheckSpans(m));
    DistributeFree(m);
    return Status::OK();
  }

  // LoadPageTable's first step: each page's word, resolved from its two
  // copies (a repair is queued in word_repairs, written later), decoded
  // into its PageInfo. Corruption for copies that disagree beyond repair,
  // an invalid word, or a page in use beyond the mapped m pages.
  Status LoadPageWords(size_t m) {
    char buf[200];
    word_repairs.clear();
    for (size_t i = 0; i < entries; ++i) {
      uint64_t w = 0;
      switch (PageWord::Resolve(table[i], mirror[i], kNumClasses, &w)) {
        case PageWord::Copies::kAgree:
          break;
        case PageWord::Copies::kRepair:
          word_repairs.push_back({static_cast<uint32_t>(i), w});
          break;
        case PageWord::Copies::kCorrupt:
          std::snprintf(buf, sizeof buf,
                        "allocator: page %zu has two page-table copies that disagree and neither "
                        "can be trusted (%#" PRIx64 ", %#" PRIx64 ")",
                        i, table[i], mirror[i]);
          return Status::Corruption(buf);
      }
      if (w == 0) continue;
      PageWord pw;
      if (!PageWord::Decode(w, kNumClasses, &pw)) {
        std::snprintf(buf, sizeof buf, "allocator: page %zu has an invalid page word %#" PRIx64,
                      i, w);
        return Status::Corruption(buf);
      }
      if (i >= m) {
        std::snprintf(buf, sizeof buf,
                      "allocator: page %zu is marked in use but lies beyond the mapped %zu pages",
                      i, m);
        return Status::Corruption(buf);
      }
      PageInfo& p = Page(static_cast<uint32_t>(i));
      p.node.store(static_cast<uint16_t>(pw.node % nodes), std::memory_order_relaxed);
      switch (pw.kind) {
        case PageKind::kClass:
          p.cls.store(pw.size_class, std::memory_order_relaxed);
          break;
        case PageKind::kSpanHead:
          if (i + pw.span > m) {
            std::snprintf(buf, sizeof buf,
                          "allocator: large block at page %zu of %u pages runs past the heap", i,
                          pw.span);
            return Status::Corruption(buf);
          }
          break;
        default:
          break;
      }
      p.span.store(pw.span, std::memory_order_relaxed);
      p.kind.store(pw.kind, std::memory_order_relaxed);
    }
    return Status::OK();
  }

  // LoadPageTable's second step, over the loaded pages [0, m): a large
  // block's head must have all its tails (they are written first and
  // cleared last; Corruption otherwise), and tails that no head covers are
  // marked orphans of a crash.
  Status CheckSpans(size_t m) {
    char buf[200];
    for (size_t i = 0; i < m; ++i) {
      PageInfo& p = Page(static_cast<uint32_t>(i));
      PageKind k = p.kind.load(std::memory_order_relaxed);
      if (k == PageKind::kSpanHead) {
        const uint32_t len = p.span.load(std::memory_order_relaxed);
        for (uint32_t d = 1; d < len; ++d) {
          PageInfo& t = Page(static_cast<uint32_t>(i + d));
          if (t.kind.load(std::memory_order_relaxed) != PageKind::kSpanTail ||
              t.span.load(std::memory_order_relaxed) != d) {
            std::snprintf(buf, sizeof buf,
                          "allocator: large block at page %zu (%u pages) lacks its page %zu", i,
                          len, i + d);
            return Status::Corruption(buf);
          }
          t.node.store(p.node.load(std::memory_order_relaxed), std::memory_order_relaxed);
        }
      } else if (k == PageKind::kSpanTail) {
        const uint32_t d = p.span.load(std::memory_order_relaxed);
        bool covered = false;
        if (d <= i) {
          PageInfo& h = Page(static_cast<uint32_t>(i - d));
          covered = h.kind.load(std::memory_order_relaxed) == PageKind::kSpanHead &&
                    h.span.load(std::memory_order_relaxed) > d;
        }
        p.orphan_tail = !covered;
      }
    }
    return Status::OK();
  }

  // Free pages among [0, m) go to node (index * nodes / m), in runs.
  void DistributeFree(size_t m) {
    size_t i = 0;
    while (i < m) {
      if (Page(static_cast<uint32_t>(i)).kind.load(std::memory_order_relaxed) != PageKind::kFree) {
        ++i;
        continue;
      }
      const int n = static_cast<int>(i * nodes / m);
      size_t j = i;
      while (j < m && static_cast<int>(j * nodes / m) == n &&
             Page(static_cast<uint32_t>(j)).kind.load(std::memory_order_relaxed) ==
                 PageKind::kFree) {
        ++j;
      }
      BindRun(n, static_cast<uint32_t>(i), static_cast<uint32_t>(j - i));
      // Open runs alone; the lock only states what AddExtent needs.
      NodeState& ns = *node_state[n];
      sync::MutexLock lock(ns.mu);
      AddExtent(ns, static_cast<uint32_t>(i), static_cast<uint32_t>(j - i));
      i = j;
    }
  }

  // Counts what FinishRecovery would give back although it was allocated
  // and compares it with the bound. Writes nothing (pool or DRAM state other
  // than the report).
  Status CheckBound() {
    const size_t m = mapped.load(std::memory_order_acquire);
    // Count first, write nothing: what would be given back although it was
    // allocated. A crash explains a few such units (blocks allocated but
    // not yet linked, blocks in threads' caches or awaiting their epoch);
    // more than the bound means damage cut off reachable data.
    RecoveryReport rep;
    rep.bound = report.bound;
    for (size_t i = 0; i < m; ++i) {
      PageInfo& p = Page(static_cast<uint32_t>(i));
      switch (p.kind.load(std::memory_order_relaxed)) {
        case PageKind::kClass: {
          ++rep.pages_owned;
          ++rep.class_pages;
          uint64_t live = 0;
          for (uint32_t w = 0; w < kBitmapWords; ++w)
            live += std::popcount(p.live[w].load(std::memory_order_relaxed));
          rep.reachable_blocks += live;
          if (live == 0) ++rep.unreachable_pages;
          break;
        }
        case PageKind::kSpanHead:
          ++rep.pages_owned;
          if (p.span_live.load(std::memory_order_relaxed)) {
            ++rep.reachable_spans;
          } else {
            ++rep.unreachable_spans;
          }
          break;
        case PageKind::kSpanTail:
          ++rep.pages_owned;
          if (p.orphan_tail) {
            // One run per head position the tails point back to.
            const uint32_t d = p.span.load(std::memory_order_relaxed);
            const bool first_of_run =
                i == 0 || !Page(static_cast<uint32_t>(i - 1)).orphan_tail ||
                (i - 1) - Page(static_cast<uint32_t>(i - 1)).span.load(std::memory_order_relaxed) !=
                    i - d;
            if (first_of_run) ++rep.orphan_runs;
          }
          break;
        case PageKind::kFree:
          break;
      }
    }
    rep.done = true;
    if (rep.units() > rep.bound) {
      rep.refused = true;
      report = rep;
      return Status::Corruption(
          "allocator: recovery would reclaim " + std::to_string(rep.units()) +
          " allocated unit(s) that nothing reachable uses (" +
          std::to_string(rep.unreachable_pages) + " of " + std::to_string(rep.class_pages) +
          " class pages without a reachable block, " + std::to_string(rep.unreachable_spans) +
          " unreachable large block(s), " + std::to_string(rep.orphan_runs) +
          " orphan span run(s)); at most " + std::to_string(rep.bound) +
          " can be explained by operations in flight, so reachable data was probably cut "
          "off by damage; nothing was changed");
    }
    report = rep;
    return Status::OK();
  }

  Status Finish() {
    if (!recovering.load(std::memory_order_acquire)) {
      return Status::InvalidArgument("allocator: FinishRecovery() outside recovery");
    }
    {
      sync::MutexLock lock(recovery_mu);
      if (bad_marks != 0) {
        return Status::Corruption("allocator: " + std::to_string(bad_marks) +
                                  " reachable pointer(s) are not allocated blocks; first: " +
                                  first_bad);
      }
    }
    const size_t m = mapped.load(std::memory_order_acquire);
    PMINDEX_RETURN_IF_ERROR(CheckBound());
    // Accepted: first both copies of every word that differed.
    for (const auto& [idx, w] : word_repairs) WriteWord(idx, w);
    word_repairs.clear();
    for (size_t i = 0; i < m; ++i) {
      const uint32_t idx = static_cast<uint32_t>(i);
      PageInfo& p = Page(idx);
      NodeState& ns = *node_state[p.node.load(std::memory_order_relaxed)];
      sync::MutexLock lock(ns.mu);
      switch (p.kind.load(std::memory_order_relaxed)) {
        case PageKind::kClass: {
          const int c = p.cls.load(std::memory_order_relaxed);
          const uint32_t nb = ClassBlocks(c);
          uint32_t live = 0;
          for (uint32_t w = 0; w * 64 < nb; ++w) {
            uint64_t valid = nb - w * 64 >= 64 ? ~uint64_t{0} : (uint64_t{1} << (nb - w * 64)) - 1;
            uint64_t l = p.live[w].load(std::memory_order_relaxed);
            p.avail[w] = ~l & valid;
            live += std::popcount(l);
          }
          p.free_count = nb - live;
          if (live == 0) {
            p.in_partial = false;
            p.kind.store(PageKind::kFree, std::memory_order_release);
            ClearWord(idx);
            p.free_count = 0;
            AddExtent(ns, idx, 1);
          } else if (p.free_count > 0) {
            PushPartial(ns, c, idx);
          }
          break;
        }
        case PageKind::kSpanHead:
          if (!p.span_live.load(std::memory_order_relaxed)) ReleaseSpan(ns, idx);
          break;
        case PageKind::kSpanTail:
          if (p.orphan_tail) {
            p.orphan_tail = false;
            p.kind.store(PageKind::kFree, std::memory_order_release);
            ClearWord(idx);
            AddExtent(ns, idx, 1);
          }
          break;
        case PageKind::kFree:
          break;
      }
    }
    recovering.store(false, std::memory_order_release);
    return Status::OK();
  }

  void Mark(PPtr p) {
    PMINDEX_CHECK(recovering.load(std::memory_order_acquire),
                  "allocator: MarkReachable(%#" PRIx64 ") called outside recovery", p.raw());
    BlockRef r;
    std::string why;
    if (!Locate(p, &r, &why)) {
      sync::MutexLock lock(recovery_mu);
      if (bad_marks++ == 0) first_bad = why;
      return;
    }
    PageInfo& pg = Page(r.page);
    if (r.cls < 0) {
      pg.span_live.store(true, std::memory_order_release);
    } else {
      pg.live[r.block / 64].fetch_or(uint64_t{1} << (r.block % 64), std::memory_order_acq_rel);
    }
  }
};

// ==================================================================== API

Allocator::Allocator() = default;

Allocator::~Allocator() = default;

Result<std::unique_ptr<Allocator>> Allocator::Attach(Pool* pool, bool fresh,
                                                     const AllocOptions& opt) {
  if (pool == nullptr) return Status::InvalidArgument("allocator: no pool");
  auto impl = std::make_unique<Impl>();
  impl->pool = pool;
  impl->opt = opt;
  impl->topo = opt.topology ? opt.topology : Topology::Default();
  impl->nodes = impl->topo->nodes();
  impl->bind_pages = !impl->topo->simulated() && impl->nodes > 1;
  if (impl->nodes < 1 || impl->nodes > 65535) {
    return Status::InvalidArgument("allocator: topology has " + std::to_string(impl->nodes) +
                                   " nodes (want 1..65535)");
  }
  if (opt.mode == NumaMode::kGivenNode && (opt.given_node < 0 || opt.given_node >= impl->nodes)) {
    return Status::InvalidArgument("allocator: given node " + std::to_string(opt.given_node) +
                                   " is not in [0, " + std::to_string(impl->nodes) + ")");
  }
  if (opt.thread_cache_blocks > 65536) {
    return Status::InvalidArgument("allocator: thread_cache_blocks " +
                                   std::to_string(opt.thread_cache_blocks) + " exceeds 65536");
  }
  impl->pool_id = pool->id();
  impl->heap_begin = pool->heap_begin();
  impl->table = pool->page_table();
  impl->mirror = pool->page_table_mirror();
  impl->entries = std::min<size_t>(pool->page_table_entries(), kNoPage - 1);
  impl->cache_cap = opt.thread_cache_blocks;
  impl->batch = std::max<size_t>(1, opt.thread_cache_blocks / 2);
  if (impl->entries < kCoarseBelowPages) impl->class_index = detail::kCoarseClassIndex.data();
  if (impl->heap_begin % kPageBytes != 0 || impl->table == nullptr || impl->entries == 0) {
    return Status::Corruption("allocator: pool has no usable heap");
  }
  for (int n = 0; n < impl->nodes; ++n) impl->node_state.push_back(std::make_unique<NodeState>());
  const size_t nchunks = (impl->entries + kChunkPages - 1) / kChunkPages;
  impl->chunks = std::make_unique<std::atomic<PageChunk*>[]>(nchunks);
  for (size_t i = 0; i < nchunks; ++i) impl->chunks[i].store(nullptr, std::memory_order_relaxed);
  const size_t m = std::min(pool->pages_mapped(), impl->entries);
  {
    sync::MutexLock lock(impl->grow_mu);  // uncontended: nothing else runs yet
    impl->EnsureChunks(m);
  }
  impl->mapped.store(m, std::memory_order_release);
  PMINDEX_RETURN_IF_ERROR(impl->LoadPageTable(fresh));
  if (impl->bind_pages) impl->BindOwned(m);
  impl->recovering.store(!fresh, std::memory_order_release);
  Impl* raw = impl.get();
  impl->epochs = std::make_unique<EpochDomain>([raw](uint64_t item) {
    raw->FreeBlock(PPtr(item), "Reclaim");
  });
  std::unique_ptr<Allocator> a(new Allocator());
  a->impl_ = std::move(impl);
  return a;
}

Result<PPtr> Allocator::Alloc(size_t n, int node) {
  impl_->CheckReady("Alloc");
  if (node != kAnyNode && (node < 0 || node >= impl_->nodes)) {
    return Status::InvalidArgument("allocator: node " + std::to_string(node) + " is not in [0, " +
                                   std::to_string(impl_->nodes) + ")");
  }
  if (n == 0) n = 1;
  if (n <= kMaxSmallSize) return impl_->AllocSmall(n, node);
  return impl_->AllocSpan(n, node);
}

void* Allocator::AllocRaw(size_t n, PPtr* out, int node) {
  Result<PPtr> r = Alloc(n, node);
  PPtr p = r.ok() ? r.value() : PPtr();
  if (out != nullptr) *out = p;
  return impl_->pool->to_ptr(p);
}

void Allocator::Free(PPtr p) {
  impl_->CheckReady("Free");
  impl_->FreeBlock(p, "Free");
}

void Allocator::Retire(PPtr p) {
  impl_->CheckReady("Retire");
  BlockRef r = impl_->LocateOrCheck(p, "Retire");
  PMINDEX_CHECK(impl_->IsLive(r), "allocator: Retire(%#" PRIx64 "): block is not allocated", p.raw());
  impl_->epochs->Retire(p.raw());
}

void Allocator::Reclaim() { impl_->epochs->Reclaim(); }

void Allocator::MarkReachable(PPtr p) { impl_->Mark(p); }

Status Allocator::FinishRecovery() { return impl_->Finish(); }

void Allocator::SetRecoveryBound(uint64_t units) { impl_->report.bound = units; }

Status Allocator::CheckRecoveryBound() {
  if (!in_recovery()) return Status::InvalidArgument("allocator: CheckRecoveryBound() outside recovery");
  return impl_->CheckBound();
}

const RecoveryReport& Allocator::recovery_report() const { return impl_->report; }

bool Allocator::in_recovery() const { return impl_->recovering.load(std::memory_order_acquire); }

void Allocator::ForEachLiveBlock(const std::function<void(PPtr, size_t)>& fn) const {
  const Impl& im = *impl_;
  const size_t m = im.mapped.load(std::memory_order_acquire);
  for (size_t i = 0; i < m; ++i) {
    const uint32_t idx = static_cast<uint32_t>(i);
    const PageInfo& p = im.Page(idx);
    switch (p.kind.load(std::memory_order_acquire)) {
      case PageKind::kClass: {
        const int c = p.cls.load(std::memory_order_relaxed);
        const uint32_t size = ClassSize(c);
        for (size_t w = 0; w < kBitmapWords; ++w) {
          uint64_t l = p.live[w].load(std::memory_order_acquire);
          while (l != 0) {
            int b = std::countr_zero(l);
            l &= l - 1;
            fn(im.Ptr(im.PageOffset(idx) + (w * 64 + b) * size), size);
          }
        }
        break;
      }
      case PageKind::kSpanHead:
        if (p.span_live.load(std::memory_order_acquire)) {
          fn(im.Ptr(im.PageOffset(idx)), uint64_t{p.span.load(std::memory_order_relaxed)} * kPageBytes);
        }
        break;
      default:
        break;
    }
  }
}

size_t Allocator::BlockSize(PPtr p) const {
  BlockRef r = impl_->LocateOrCheck(p, "BlockSize");
  if (r.cls >= 0) return ClassSize(r.cls);
  return uint64_t{impl_->Page(r.page).span.load(std::memory_order_relaxed)} * kPageBytes;
}

int Allocator::NodeOf(PPtr p) const {
  BlockRef r = impl_->LocateOrCheck(p, "NodeOf");
  return impl_->Page(r.page).node.load(std::memory_order_relaxed);
}

int Allocator::NodeOfAddress(const void* p) const {
  const Impl& im = *impl_;
  const char* base = im.pool->base();
  const char* c = static_cast<const char*>(p);
  if (c < base + im.heap_begin) return -1;
  const uint64_t idx = static_cast<uint64_t>(c - base - im.heap_begin) / kPageBytes;
  if (idx >= im.mapped.load(std::memory_order_acquire)) return -1;
  const PageInfo& pg = im.Page(static_cast<uint32_t>(idx));
  if (pg.kind.load(std::memory_order_relaxed) == PageKind::kFree) return -1;
  return pg.node.load(std::memory_order_relaxed);
}

bool Allocator::IsLive(PPtr p) const {
  BlockRef r;
  std::string why;
  return impl_->Locate(p, &r, &why) && impl_->IsLive(r);
}

std::span<const uint32_t> Allocator::SizeClasses() {
  return {detail::kClassSizes.data(), detail::kClassSizes.size()};
}

AllocStats Allocator::stats() const {
  AllocStats s;
  const Impl& im = *impl_;
  const size_t m = im.mapped.load(std::memory_order_acquire);
  for (size_t i = 0; i < m; ++i) {
    const PageInfo& p = im.Page(static_cast<uint32_t>(i));
    switch (p.kind.load(std::memory_order_acquire)) {
      case PageKind::kClass: {
        ++s.pages_owned;
        uint64_t n = 0;
        for (size_t w = 0; w < kBitmapWords; ++w) {
          n += std::popcount(p.live[w].load(std::memory_order_relaxed));
        }
        s.blocks_in_use += n;
        s.bytes_in_use += n * ClassSize(p.cls.load(std::memory_order_relaxed));
        break;
      }
      case PageKind::kSpanHead:
        ++s.pages_owned;
        if (p.span_live.load(std::memory_order_relaxed)) {
          ++s.blocks_in_use;
          s.bytes_in_use += uint64_t{p.span.load(std::memory_order_relaxed)} * kPageBytes;
        }
        break;
      case PageKind::kSpanTail:
        ++s.pages_owned;
        break;
      case PageKind::kFree:
        break;
    }
  }
  s.remote_allocs = im.remote_allocs.load(std::memory_order_relaxed);
  s.bind_failures = im.bind_failures.load(std::memory_order_relaxed);
  s.retired_pending = im.epochs->pending();
  return s;
}

Pool* Allocator::pool() const { return impl_->pool; }

Topology& Allocator::topology() const { return *impl_->topo; }

Allocator::EpochGuard::EpochGuard(Allocator& a) : a_(a) { a_.impl_->epochs->Enter(); }

Allocator::EpochGuard::~EpochGuard() { a_.impl_->epochs->Exit(); }

}  // namespace pmindex::alloc
