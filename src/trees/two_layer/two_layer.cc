#include "trees/two_layer/two_layer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <thread>
#include <unordered_map>

#include "alloc/numa_meter.h"
#include "common/sorted_node.h"
#include "pm/persist.h"
#include "pm/pptr_decode.h"
#include "sync/version_lock.h"
#include "util/check.h"

namespace pmindex::tlbtree {

namespace {

using sorted_node::Ld;

[[gnu::always_inline]] inline uint64_t LdState(const Node* x) { return Ld(x->state, std::memory_order_acquire); }
// True iff x's state word is still s (the seqlock validation).
[[gnu::always_inline]] inline bool Same(const Node* x, uint64_t s) { return sorted_node::Unchanged(x->state, s); }
[[gnu::always_inline]] inline uint32_t SlotAt(uint64_t s, uint32_t i) { return std::min(st::Slot(s, i), kSlots - 1); }
[[gnu::always_inline]] inline uint32_t CountOf(uint64_t s) { return std::min(st::Count(s), kSlots); }

// Asks for all four lines of a node at once: a search reads the state
// (line 0), then records by the slot array's order, spread over lines 1-3;
// fetched one after the other, those are up to four serial misses.
[[gnu::always_inline]] inline void PrefetchNode(const Node* x) {
  const char* p = reinterpret_cast<const char*>(x);
  __builtin_prefetch(p);
  __builtin_prefetch(p + 64);
  __builtin_prefetch(p + 128);
  __builtin_prefetch(p + 192);
}

inline void Backoff(unsigned* spins) {
  if (++*spins < 64) {
    sync::CpuRelax();
  } else {
    std::this_thread::yield();
  }
}

// The child of inner node x (state s) for k: the last key <= k names it;
// *sep = that key (untouched when it is the leftmost child).
inline uint64_t ChildFor(const Node* x, uint64_t s, Key k, Key* sep, bool* named) {
  uint64_t child = Ld(x->leftmost);
  for (uint32_t i = 0, n = CountOf(s); i < n; ++i) {
    const Rec& r = x->rec[SlotAt(s, i)];
    const Key rk = Ld(r.key);
    if (rk > k) break;
    child = Ld(r.val);
    *sep = rk;
    *named = true;
  }
  return child;
}

std::atomic<uint64_t> g_instances{0};

// True iff NOBtree's migration moved x (its tag says so). Out of line:
// inlined into the write paths, GCC 12 takes the tag load for an overflow
// of a zero-sized region (a false -Wstringop-overflow).
[[gnu::noinline]] bool Moved(const Node* x) { return Ld(x->tag) != kNodeTag; }

// The bytes InitNode wrote for a node of n records: line 0 and the
// record lines in use (the rest of the block is never read).
constexpr size_t WrittenBytes(uint32_t n) { return offsetof(Node, rec) + n * sizeof(Rec); }

}  // namespace

TwoLayerTree::TwoLayerTree(const IndexEnv& env, const TwoLayerConfig& c, std::string name)
    : env_(env),
      cfg_(c),
      name_(std::move(name)),
      instance_(g_instances.fetch_add(1, std::memory_order_relaxed) + 1),
      top_epochs_([](uint64_t item) { delete reinterpret_cast<TopLayer*>(item); }) {
  if (c.replicate_top) ntops_ = static_cast<uint32_t>(std::clamp(env.alloc->topology().nodes(), 1, 64));
  tops_ = std::make_unique<std::atomic<TopLayer*>[]>(ntops_);
  for (uint32_t i = 0; i < ntops_; ++i) tops_[i].store(nullptr, std::memory_order_relaxed);
  if (c.migration != Migration::kOff) access_ = std::make_unique<AccessStats>();
  relocates_ = access_ != nullptr || c.merge;
}

TwoLayerTree::~TwoLayerTree() {
  StopCoordinator();
  top_epochs_.Reclaim();  // no thread is inside: frees every replaced top layer
  for (uint32_t i = 0; i < ntops_; ++i) delete tops_[i].load(std::memory_order_acquire);
}

TwoLayerTree::Tally& TwoLayerTree::Mine() const {
  thread_local Tally t;
  if (t.owner != instance_) t = Tally{instance_};
  return t;
}

std::string TwoLayerTree::Where(uint64_t raw) const { return sorted_node::NodeWhere(name_, raw); }

Result<PPtr> TwoLayerTree::AllocNode(uint32_t level, int node) {
  if (node < 0 && cfg_.placement == Placement::kRoundRobin) {
    const int nodes = env_.alloc->topology().nodes();
    node = nodes > 1 ? static_cast<int>(Mine().turn++ % static_cast<uint32_t>(nodes)) : alloc::kAnyNode;
  }
  return env_.alloc->Alloc(level > 0 ? kInnerBlockBytes : kNodeBytes,
                           node < 0 ? alloc::kAnyNode : node);
}

void TwoLayerTree::InitNode(Node* x, uint32_t level, uint64_t leftmost, SibRec sib, std::span<const Rec> recs) const {
  // Not reachable yet: no order matters; the caller flushes the node.
  PMINDEX_CHECK(recs.size() <= kSlots, "tlbtree: %zu records for one node", recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    pm::store(&x->rec[i].key, recs[i].key);
    pm::store(&x->rec[i].val, recs[i].val);
  }
  pm::store(&x->leftmost, leftmost);
  pm::store(&x->sib[0].key, sib.key);
  pm::store(&x->sib[0].ptr, sib.ptr);
  pm::store(&x->sib[1].key, uint64_t{0});
  pm::store(&x->sib[1].ptr, uint64_t{0});
  pm::store(&x->tag, kNodeTag);
  pm::store(&x->level, level);
  pm::store(&x->pad, 0u);
  pm::store(&x->state, st::Identity(static_cast<uint32_t>(recs.size())), std::memory_order_release);
}

// ------------------------------------------------------------------ search

uint32_t TwoLayerTree::LowerBound(const Node* x, uint64_t s, Key k) {
  const uint32_t n = CountOf(s);
  uint32_t i = 0;
  while (i < n && Ld(x->rec[SlotAt(s, i)].key) < k) ++i;
  return i;
}

uint64_t TwoLayerTree::Descend(Key k, uint64_t* path, uint32_t* hops, Low* lows) const {
  const uint32_t r = TopIndex();
  const TopLayer* t = tops_[r].load(std::memory_order_acquire);
  Key top_low = 0;
  uint64_t raw = t->Find(k, &top_low);
  alloc::MeterNodeVisits(*env_.alloc, static_cast<int>(r), t->levels());
  Low low{top_low != 0, top_low};  // a root's low key is its top entry's (0: the first root)
  *hops = 0;
  uint32_t level = cfg_.height - 1;
  for (;;) {
    const Node* x = N(raw);
    PrefetchNode(x);
    alloc::MeterVisit(*env_.alloc, x);
    pm::ModelRead(x, sizeof(Node));
    const uint64_t s = LdState(x);
    const SibRec& sr = x->sib[st::Sib(s)];
    const uint64_t sk = Ld(sr.key), sp = Ld(sr.ptr);
    const bool right = sp != 0 && k >= sk;
    Key sep = 0;
    bool named = false;
    const uint64_t child = (!right && level > 0) ? ChildFor(x, s, k, &sep, &named) : 0;
    if (!Same(x, s)) continue;  // a writer committed meanwhile: read x again
    if (right) {
      raw = sp;
      low = Low{true, sk};
      if (level == cfg_.height - 1) ++*hops;  // a walk along the chain of roots
      continue;
    }
    if (path != nullptr) path[level] = raw;
    if (lows != nullptr) lows[level] = low;
    if (level == 0) return raw;
    if (named) low = Low{true, sep};
    raw = child;
    --level;
  }
}

uint64_t TwoLayerTree::LatchFor(uint64_t raw, Key k, uint64_t* s) {
  unsigned spins = 0;
  for (;;) {
    Node* x = N(raw);
    uint64_t cur = LdState(x);
    if (st::Latched(cur)) {
      Backoff(&spins);
      continue;
    }
    const SibRec& sr = x->sib[st::Sib(cur)];
    const uint64_t sk = Ld(sr.key), sp = Ld(sr.ptr);
    if (!Same(x, cur)) continue;
    if (sp != 0 && k >= sk) {  // the B-link rule: k's node is further right
      raw = sp;
      alloc::MeterVisit(*env_.alloc, N(raw));
      continue;
    }
    const uint64_t want = cur | st::kLatch;
    if (pm::compare_exchange(&x->state, cur, want)) {
      // Every slot store of this writer comes after the latch store for a
      // reader that sees it (seqlock: the reader then sees the state moved).
#if !defined(PMINDEX_TSAN)  // TSan does not model fences (sync/version_lock.h)
      std::atomic_thread_fence(std::memory_order_release);
#endif
      *s = want;
      return raw;
    }
  }
}

void TwoLayerTree::Unlatch(Node* x, uint64_t s_latched) const {
  pm::store(&x->state, s_latched & ~st::kLatch, std::memory_order_release);
}

bool TwoLayerTree::TryLatch(Node* x, uint64_t* s) const {
  uint64_t cur = LdState(x);
  if (st::Latched(cur) || !pm::compare_exchange(&x->state, cur, cur | st::kLatch)) return false;
#if !defined(PMINDEX_TSAN)  // as in LatchFor
  std::atomic_thread_fence(std::memory_order_release);
#endif
  *s = cur | st::kLatch;
  return true;
}

// ------------------------------------------------------------------ writers

void TwoLayerTree::AddRecord(Node* x, uint64_t s, uint32_t pos, Key k, uint64_t v, bool durable) {
  const uint32_t free_mask = ~st::UsedMask(s) & ((1u << kSlots) - 1);
  PMINDEX_CHECK(free_mask != 0, "tlbtree: AddRecord on a full node");
  const uint32_t slot = static_cast<uint32_t>(__builtin_ctz(free_mask));
  // 1. The record into a free slot (no reader looks at it), durable first.
  pm::store(&x->rec[slot].key, k);
  pm::store(&x->rec[slot].val, v);
  pm::flush(&x->rec[slot], sizeof(Rec));
  pm::fence();
  // 2. The commit: one 8-byte store of the state (slot listed, version
  //    bumped, latch released), flushed; fenced when the caller needs it
  //    durable on return (see the declaration).
  const uint64_t ns = st::Bump(st::Insert(s, pos, slot)) & ~st::kLatch;
  pm::store(&x->state, ns, std::memory_order_release);
  pm::flush(&x->state, sizeof(uint64_t));
  if (durable) pm::fence();
}

Status TwoLayerTree::Write(Op op, Key k, Value v) {
  const OpGuards guards(*this);
  uint64_t path[kMaxHeight] = {};
  uint32_t hops = 0;
  uint64_t s = 0;
  uint64_t raw = 0;
  for (;;) {
    raw = LatchFor(Descend(k, path, &hops), k, &s);
    if (!relocates_ || !Moved(N(raw))) break;
    Unlatch(N(raw), s);  // migration moved or a merge emptied this leaf meanwhile: descend again
  }
  Node* x = N(raw);
  const uint32_t n = CountOf(s);
  const uint32_t p = LowerBound(x, s, k);
  const bool found = p < n && Ld(x->rec[SlotAt(s, p)].key) == k;
  Status r = Status::OK();
  bool underfull = false;
  if (op == Op::kRemove) {
    if (!found) {
      Unlatch(x, s);
      r = Status::NotFound();
    } else {
      // One persisted state store drops the slot (and releases the latch).
      const uint64_t ns = st::Bump(st::Remove(s, p)) & ~st::kLatch;
      pm::store(&x->state, ns, std::memory_order_release);
      pm::flush(&x->state, sizeof(uint64_t));
      pm::fence();
      underfull = cfg_.merge && n - 1 < kMergeBelow;
    }
  } else if (found) {
    if (op == Op::kInsert) {
      r = Status::AlreadyExists();
    } else {
      uint64_t* val = &x->rec[SlotAt(s, p)].val;  // one failure-atomic 8-byte store
      pm::store(val, v, std::memory_order_release);
      pm::flush(val, sizeof(uint64_t));
      pm::fence();
    }
    Unlatch(x, s);
  } else if (op == Op::kUpdate) {
    Unlatch(x, s);
    r = Status::NotFound();
  } else if (n < kSlots) {
    AddRecord(x, s, p, k, v, true);
  } else {
    r = SplitInsert(raw, s, k, v, 0, path);
  }
  // The merge runs after the delete is durable and its latch released (it
  // latches the parent and two leaves itself, never waiting).
  if (underfull) MergeLeaf(raw, path[1], true);
  MaybeRebuild(hops);
  if (access_) {
    path[0] = raw;
    NotePath(path, k);
  }
  return r;
}

// A split of a full node, as the steps of SplitInsert compute it.
struct TwoLayerTree::SplitPlan {
  Key sep = 0;            // the split key: the first key that leaves x
  uint32_t keep = 0;      // records x keeps (the first `keep` in key order)
  uint64_t leftmost = 0;  // the new node's leftmost child (inner nodes)
  bool to_right = false;  // the pending record belongs to the new node
  uint32_t rn = 0;
  Rec right[kSlots] = {};  // the new node's records, in key order
};

void TwoLayerTree::PlanSplit(const Node* x, uint64_t s, Key k, uint64_t v, bool inner,
                             SplitPlan* plan) {
  PMINDEX_CHECK(CountOf(s) == kSlots, "tlbtree: split of a node that is not full");
  const uint32_t n = kSlots;
  Rec e[kSlots] = {};
  for (uint32_t i = 0; i < n; ++i) {
    const Rec& r = x->rec[SlotAt(s, i)];
    e[i] = Rec{Ld(r.key), Ld(r.val)};
  }
  // The left half keeps the first m records; a leaf moves e[m..n) right,
  // an inner node pushes e[m] up (its child becomes the new node's
  // leftmost) and moves e[m+1..n).
  const uint32_t m = n / 2;
  plan->sep = e[m].key;
  plan->keep = m;
  plan->leftmost = inner ? e[m].val : 0;
  plan->to_right = k >= plan->sep;
  Rec* right = plan->right;
  uint32_t rn = 0;
  for (uint32_t i = inner ? m + 1 : m; i < n; ++i) {
    if (plan->to_right && k < e[i].key && (rn == 0 || right[rn - 1].key < k))
      right[rn++] = Rec{k, v};
    right[rn++] = e[i];
  }
  if (plan->to_right && (rn == 0 || right[rn - 1].key < k)) right[rn++] = Rec{k, v};
  plan->rn = rn;
}

uint64_t TwoLayerTree::CommitSplit(Node* x, uint64_t s, uint64_t yraw, uint32_t level,
                                   const SplitPlan& plan) {
  const SibRec& live = x->sib[st::Sib(s)];
  // 1. The new node, complete (it inherits x's live sibling), durable.
  Node* y = N(yraw);
  InitNode(y, level, plan.leftmost, SibRec{Ld(live.key), Ld(live.ptr)},
           std::span<const Rec>(plan.right, plan.rn));
  pm::flush(y, WrittenBytes(plan.rn));
  pm::fence();
  // 2. x's inactive sibling record := {sep, y}; then the commit: one
  //    state store flips the sibling bit and drops the moved slots. Both
  //    are in line 0, which reaches PM in store order: one persist.
  const uint32_t inactive = 1 - st::Sib(s);
  pm::store(&x->sib[inactive].key, plan.sep);
  pm::store(&x->sib[inactive].ptr, yraw);
  const uint64_t ns = st::Bump(st::Truncate(s, plan.keep)) ^ st::kSibBit;  // still latched
  pm::store(&x->state, ns, std::memory_order_release);
  pm::flush(&x->state, sizeof(uint64_t));
  pm::fence();
  return ns;
}

uint64_t TwoLayerTree::LatchParent(uint32_t level, Key sep, uint64_t* path, uint64_t* ps) {
  uint64_t praw = LatchFor(path[level + 1], sep, ps);
  while (relocates_ && Moved(N(praw))) {
    // NOBtree's migration moved the parent since the descent: find its
    // copy by descending again (the new node is still linked by its left
    // neighbour's sibling record).
    Unlatch(N(praw), *ps);
    uint32_t h = 0;
    Descend(sep, path, &h);
    praw = LatchFor(path[level + 1], sep, ps);
  }
  return praw;
}

Status TwoLayerTree::SplitInsert(uint64_t raw, uint64_t s, Key k, uint64_t v, uint32_t level,
                                 const uint64_t* descent) {
  uint64_t path[kMaxHeight];
  std::copy(descent, descent + kMaxHeight, path);
  for (bool first = true;; first = false) {
    Node* x = N(raw);
    Result<PPtr> a = AllocNode(level);
    if (!a.ok()) {
      Unlatch(x, s);
      // The first split: nothing happened. Above it: the new node stays
      // reachable by its sibling link only (the B-link rule covers it).
      return first ? a.status() : Status::OK();
    }
    const uint64_t yraw = a.value().raw();
    SplitPlan plan;
    PlanSplit(x, s, k, v, level > 0, &plan);
    // Steps 1 and 2: the new node durable, then x's commit.
    const uint64_t ns = CommitSplit(x, s, yraw, level, plan);
    // 3. The pending record into the left half (commits and unlatches).
    if (plan.to_right) {
      Unlatch(x, ns);
    } else {
      // The user's record (a leaf) must be durable on return; a separator
      // (inner node) need not be (see AddRecord's declaration).
      AddRecord(x, ns, LowerBound(x, ns, k), k, v, level == 0);
    }
    // 4. The separator to the level above: x is released first (latches
    //    are taken bottom up, one at a time).
    if (level + 1 == cfg_.height) {
      // A root split: y is a new subindex, already on the chain of roots.
      root_splits_.fetch_add(1, std::memory_order_relaxed);
      TopAdd(plan.sep, yraw);
      return Status::OK();
    }
    uint64_t ps = 0;
    const uint64_t praw = LatchParent(level, plan.sep, path, &ps);
    k = plan.sep;
    v = yraw;
    ++level;
    if (CountOf(ps) < kSlots) {
      AddRecord(N(praw), ps, LowerBound(N(praw), ps, k), k, v, false);
      return Status::OK();
    }
    raw = praw;
    s = ps;
  }
}

Status TwoLayerTree::insert(Key k, Value v) { return Write(Op::kInsert, k, v); }
Status TwoLayerTree::update(Key k, Value v) { return Write(Op::kUpdate, k, v); }
Status TwoLayerTree::upsert(Key k, Value v) { return Write(Op::kUpsert, k, v); }
Status TwoLayerTree::remove(Key k) { return Write(Op::kRemove, k, 0); }

// ------------------------------------------------------------------ readers

std::optional<Value> TwoLayerTree::lookup(Key k) {
  const OpGuards guards(*this);
  uint32_t hops = 0;
  uint64_t path[kMaxHeight];
  uint64_t raw = Descend(k, access_ ? path : nullptr, &hops);
  for (;;) {
    const Node* x = N(raw);
    const uint64_t s = LdState(x);
    const SibRec& sr = x->sib[st::Sib(s)];
    const uint64_t sk = Ld(sr.key), sp = Ld(sr.ptr);
    const uint32_t p = LowerBound(x, s, k);
    const bool found = p < CountOf(s) && Ld(x->rec[SlotAt(s, p)].key) == k;
    const uint64_t val = found ? Ld(x->rec[SlotAt(s, p)].val) : 0;
    if (!Same(x, s)) continue;
    if (sp != 0 && k >= sk) {  // the leaf split after the descent chose it
      raw = sp;
      alloc::MeterVisit(*env_.alloc, N(raw));
      continue;
    }
    MaybeRebuild(hops);
    if (access_) {
      path[0] = raw;
      NotePath(path, k);
    }
    if (!found) return std::nullopt;
    return val;
  }
}

size_t TwoLayerTree::scan(Key from, size_t n, KV* out) {
  if (n == 0) return 0;
  const OpGuards guards(*this);
  uint32_t hops = 0;
  uint64_t path[kMaxHeight];
  uint64_t raw = Descend(from, access_ ? path : nullptr, &hops);
  size_t got = 0;
  Key lo = from;  // every key still to report is >= lo
  while (raw != 0 && got < n) {
    const Node* x = N(raw);
    const uint64_t s = LdState(x);
    const SibRec& sr = x->sib[st::Sib(s)];
    const uint64_t sk = Ld(sr.key), sp = Ld(sr.ptr);
    KV buf[kSlots];
    uint32_t b = 0;
    for (uint32_t i = 0, c = CountOf(s); i < c; ++i) {
      const Rec& r = x->rec[SlotAt(s, i)];
      const Key key = Ld(r.key);
      if (key >= lo) buf[b++] = KV{key, Ld(r.val)};
    }
    if (!Same(x, s)) continue;
    for (uint32_t i = 0; i < b && got < n; ++i) out[got++] = buf[i];
    // The next leaf's keys are all >= its split key (it never lowers).
    if (sp != 0) lo = std::max(lo, sk);
    raw = sp;
    if (raw != 0 && got < n) alloc::MeterVisit(*env_.alloc, N(raw));
  }
  MaybeRebuild(hops);
  if (access_) NotePath(path, from);
  return got;
}

// ------------------------------------------------------------------ top layer

std::vector<std::pair<Key, uint64_t>> TwoLayerTree::Chain() const {
  std::vector<std::pair<Key, uint64_t>> chain;
  uint64_t raw = env_.pool->root(0);
  Key low = 0;
  while (raw != 0) {
    const Node* x = N(raw);
    const uint64_t s = LdState(x);
    const SibRec& sr = x->sib[st::Sib(s)];
    const uint64_t sk = Ld(sr.key), sp = Ld(sr.ptr);
    if (!Same(x, s)) continue;
    chain.push_back({low, raw});
    low = sk;
    raw = sp;
  }
  return chain;
}

void TwoLayerTree::Install(const std::vector<std::pair<Key, uint64_t>>& chain) {
  bool replaced = false;
  for (uint32_t i = 0; i < ntops_; ++i) {  // one copy per replica, none shared
    TopLayer* old = tops_[i].exchange(new TopLayer(chain), std::memory_order_acq_rel);
    if (old != nullptr) {
      replaced = true;
      top_epochs_.Retire(reinterpret_cast<uint64_t>(old));
    }
  }
  if (replaced) rebuilds_.fetch_add(1, std::memory_order_relaxed);
}

void TwoLayerTree::RebuildTop() {
  pending_.clear();  // the chain has every root
  Install(Chain());
}

void TwoLayerTree::MergeTop() {
  if (access_ || pending_.empty()) {
    // Migration may have moved a node an entry names: only the chain is
    // sure. (Nothing pending: the layer already names every root.)
    if (access_) RebuildTop();
    return;
  }
  // Every root is in the layer or pending (a root appears only by a split,
  // whose TopAdd put it in one of the two, or by a rebuild from the chain),
  // and none moves without migration: the merge is the chain, in DRAM.
  std::vector<std::pair<Key, uint64_t>> all;
  const TopLayer* t = tops_[0].load(std::memory_order_relaxed);
  all.reserve(pending_.size() + uint64_t{t->leaves()} * TopLayer::kLeafSlots);
  t->ForEach([&all](uint32_t, Key k, uint64_t root) { all.emplace_back(k, root); });
  const size_t mid = all.size();
  std::sort(pending_.begin(), pending_.end());
  all.insert(all.end(), pending_.begin(), pending_.end());
  std::inplace_merge(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(mid), all.end());
  pending_.clear();
  Install(all);
}

void TwoLayerTree::TopAdd(Key k, uint64_t root) {
  sync::MutexLock g(top_mu_);
  if (access_ && Moved(N(root))) {
    // NOBtree moved the new root between its split and this insert (the
    // move replaced no entry: there was none yet). Naming the old node
    // would outlive it; the chain of roots leads to the copy.
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  bool full = false;
  for (uint32_t i = 0; i < ntops_; ++i)  // every replica at once (the paper's synchronous update)
    full |= tops_[i].load(std::memory_order_relaxed)->Insert(k, root) == TopLayer::Add::kFull;
  if (!full) return;
  skipped_.fetch_add(1, std::memory_order_relaxed);
  if (access_) return;  // NOBtree with migration: rebuilt from the chain on its trigger
  // Kept for the next merge, which comes once the entries left out reach
  // 1/kPendingShare of the layer (and at least kPendingMin): each left-out
  // entry makes the walks of its neighbours' keys longer, and a merge costs
  // one pass over the layer in DRAM (no walk of the chain in PM), so the
  // total merge work stays a small multiple of the layer's size.
  pending_.emplace_back(k, root);
  const uint64_t entries =
      uint64_t{tops_[0].load(std::memory_order_relaxed)->leaves()} * TopLayer::kLeafFill;
  if (pending_.size() >= kPendingMin && pending_.size() * kPendingShare >= entries) MergeTop();
}

void TwoLayerTree::MaybeRebuild(uint32_t hops) {
  if (cfg_.rebuild_avg > 0) {
    Tally& t = Mine();
    t.hops += hops;
    if (++t.window < kAvgWindow) return;
    const bool over = static_cast<double>(t.hops) > cfg_.rebuild_avg * t.window;
    t.window = 0;
    t.hops = 0;
    if (!over) return;
  } else if (hops < cfg_.rebuild) {
    return;
  }
  if (!top_mu_.TryLock()) return;  // another thread is at it
  MergeTop();
  top_mu_.Unlock();
}

// ------------------------------------------------------------------ create, load, close

Result<std::unique_ptr<Index>> TwoLayerTree::Create(const IndexEnv& env, const TwoLayerConfig& c, std::string name) {
  std::unique_ptr<TwoLayerTree> t(new TwoLayerTree(env, c, std::move(name)));
  // One empty subindex: a node on every level, each the leftmost child of
  // the one above.
  uint64_t below = 0;
  std::vector<uint64_t> made;
  for (uint32_t level = 0; level < c.height; ++level) {
    Result<PPtr> a = t->AllocNode(level);
    if (!a.ok()) {
      for (uint64_t m : made) env.alloc->Free(PPtr(m));
      return a.status();
    }
    const uint64_t raw = a.value().raw();
    made.push_back(raw);
    t->InitNode(t->N(raw), level, below, SibRec{0, 0}, {});
    pm::flush(t->N(raw), WrittenBytes(0));
    below = raw;
  }
  pm::fence();  // the subindex durable before the root slot names it
  env.pool->WriteRoot(0, below);
  // NOBtree: then its migration log (a crash before it is written: the
  // first move writes it; open cannot, the allocator is still recovering).
  if (c.migration != Migration::kOff) PMINDEX_RETURN_IF_ERROR(t->MakeLog());
  t->Install(t->Chain());
  t->StartCoordinator();
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status TwoLayerTree::bulk_load(std::span<const KV> sorted, double fill) {
  sync::MutexLock g(top_mu_);
  // Empty: one subindex whose nodes hold no record.
  std::vector<uint64_t> old;
  for (uint64_t raw = env_.pool->root(0); raw != 0;) {
    const Node* x = N(raw);
    const uint64_t s = LdState(x);
    if (st::Count(s) != 0 || x->sib[st::Sib(s)].ptr != 0)
      return Status::InvalidArgument(name_ + ": bulk_load needs an empty index");
    old.push_back(raw);
    raw = x->level == 0 ? 0 : x->leftmost;
  }
  PMINDEX_RETURN_IF_ERROR(sorted_node::CheckBulkInput(name_, sorted, fill));
  if (sorted.empty()) return Status::OK();
  const uint32_t per = std::clamp<uint32_t>(static_cast<uint32_t>(std::lround(fill * kSlots)), 1, kSlots);
  std::vector<uint64_t> made;
  auto fail = [&](const Status& s) {
    for (uint64_t m : made) env_.alloc->Free(PPtr(m));
    return s;
  };
  // items: (low key, value or child) of the level being built.
  std::vector<Rec> items;
  items.reserve(sorted.size());
  for (const KV& kv : sorted) items.push_back(Rec{kv.key, kv.value});
  for (uint32_t level = 0; level < cfg_.height; ++level) {
    const uint32_t take = level == 0 ? per : per + 1;  // an inner node: leftmost + per records
    const size_t nodes = (items.size() + take - 1) / take;
    std::vector<uint64_t> raws(nodes);
    for (size_t i = 0; i < nodes; ++i) {
      Result<PPtr> a = AllocNode(level);
      if (!a.ok()) return fail(a.status());
      raws[i] = a.value().raw();
      made.push_back(raws[i]);
    }
    std::vector<Rec> up(nodes);
    for (size_t i = 0; i < nodes; ++i) {
      const size_t b = i * take, e = std::min(items.size(), b + take);
      const bool inner = level > 0;
      const SibRec sib = i + 1 < nodes ? SibRec{items[e].key, raws[i + 1]} : SibRec{0, 0};
      const size_t from = inner ? b + 1 : b;
      InitNode(N(raws[i]), level, inner ? items[b].val : 0, sib, std::span<const Rec>(items.data() + from, e - from));
      pm::flush(N(raws[i]), WrittenBytes(static_cast<uint32_t>(e - from)));
      up[i] = Rec{items[b].key, raws[i]};
    }
    items.swap(up);
  }
  pm::fence();  // the loaded forest durable before the root slot names it
  env_.pool->WriteRoot(0, items[0].val);
  for (uint64_t o : old) env_.alloc->Free(PPtr(o));
  RebuildTop();
  return Status::OK();
}

Status TwoLayerTree::close() {
  StopCoordinator();
  if (closed_ || !ready_ || abandoned()) return Status::OK();
  closed_ = true;
  sync::MutexLock g(top_mu_);
  sync::MutexLock m(migrate_mu_);
  // Moved and merged leaves: no operation runs, so all of them go back now.
  if (relocates_) env_.alloc->Reclaim();
  common::ContentSum content;
  PMINDEX_RETURN_IF_ERROR(Walk(false, nullptr, &content, nullptr));
  common::WriteContentRecord(*env_.pool, content);
  return Status::OK();
}

// ------------------------------------------------------------------ recovery and walks

Status TwoLayerTree::ViewNode(uint64_t raw, uint32_t level, View* v) const {
  auto d = pm::Decode<Node>(*env_.pool, raw, kNodeBytes, 64, name_ + ": node");
  if (!d.ok()) return d.status();
  const Node* x = d.value();
  if (Ld(x->tag) != kNodeTag) return Status::Corruption(Where(raw) + " has no node tag");
  if (sorted_node::Ld32(x->level) != level)
    return Status::Corruption(Where(raw) + " is on the wrong level");
  const uint64_t s = LdState(x);
  const uint32_t n = st::Count(s);
  if (n > kSlots) return Status::Corruption(Where(raw) + " has a count above its capacity");
  v->state = s;
  v->level = level;
  v->leftmost = Fix(Ld(x->leftmost));
  v->sib = SibRec{Ld(x->sib[st::Sib(s)].key), Fix(Ld(x->sib[st::Sib(s)].ptr))};
  v->recs.clear();
  uint32_t seen = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t slot = st::Slot(s, i);
    if (slot >= kSlots || (seen & (1u << slot)))
      return Status::Corruption(Where(raw) + ": bad slot array");
    seen |= 1u << slot;
    const Rec r{Ld(x->rec[slot].key), level > 0 ? Fix(Ld(x->rec[slot].val)) : Ld(x->rec[slot].val)};
    if (!v->recs.empty() && v->recs.back().key >= r.key) return Status::Corruption(Where(raw) + ": keys not ascending");
    if (v->sib.ptr != 0 && r.key >= v->sib.key)
      return Status::Corruption(Where(raw) + ": key " + std::to_string(r.key) + " at or above its split key");
    v->recs.push_back(r);
  }
  if (level > 0) {
    auto c = pm::Decode<Node>(*env_.pool, v->leftmost, kNodeBytes, 64, name_ + ": leftmost child");
    if (!c.ok()) return c.status();
  }
  return Status::OK();
}

// What Walk carries from one level down to the next.
struct TwoLayerTree::WalkState {
  uint64_t limit = 0;                       // more nodes than fit in the pool: a cycle
  uint64_t total = 0;                       // nodes seen so far
  std::vector<uint64_t> named;              // children named by the level above, in order
  std::vector<Low> named_low;               // their separators
  std::unordered_map<uint64_t, Key> roots;  // chain of roots: raw -> low key
  uint64_t subindexes = 0;
};

Status TwoLayerTree::Walk(bool strict, std::vector<uint64_t>* nodes, common::ContentSum* content,
                          IndexStats* stats) const {
  const uint64_t first = env_.pool->root(0);
  auto d = pm::Decode<Node>(*env_.pool, first, kNodeBytes, 64, name_ + ": first root (root slot 0)");
  if (!d.ok()) return d.status();
  WalkState w;
  w.limit = env_.pool->size() / kNodeBytes + 1;
  uint64_t level_first = first;
  for (int32_t level = static_cast<int32_t>(cfg_.height) - 1; level >= 0; --level) {
    PMINDEX_RETURN_IF_ERROR(
        WalkLevel(&w, level_first, static_cast<uint32_t>(level), strict, nodes, content, stats));
    if (level > 0) level_first = w.named[0];
  }
  if (strict) PMINDEX_RETURN_IF_ERROR(CheckTopLayers(w, first));
  if (strict && log_ != 0 && Ld(env_.pool->to_ptr<MigrationLog>(PPtr(log_))->armed) != 0)
    return Status::Corruption(name_ + ": the migration log is armed while no move runs");
  if (stats != nullptr) {
    stats->height = cfg_.height;
    stats->extra.push_back({"subindexes", static_cast<double>(w.subindexes)});
  }
  return Status::OK();
}

Status TwoLayerTree::WalkLevel(WalkState* w, uint64_t first, uint32_t level, bool strict,
                               std::vector<uint64_t>* nodes, common::ContentSum* content,
                               IndexStats* stats) const {
  const bool top = level + 1 == cfg_.height;
  std::vector<uint64_t> next_named;
  std::vector<Low> next_low;
  size_t ni = 0;
  Low low;
  View v;
  for (uint64_t raw = first; raw != 0; raw = v.sib.ptr) {
    if (++w->total > w->limit) return Status::Corruption(name_ + ": a level's chain has a cycle");
    PMINDEX_RETURN_IF_ERROR(ViewNode(raw, level, &v));
    if (strict && st::Latched(v.state)) return Status::Corruption(Where(raw) + " is latched");
    if (!top) {
      if (ni < w->named.size() && w->named[ni] == raw) {
        if (!(w->named_low[ni] == low))
          return Status::Corruption(Where(raw) + ": low key differs from its separator");
        ++ni;
      } else if (ni == 0) {
        return Status::Corruption(Where(raw) +
                                  ": a level's first node is not its parent's leftmost child");
      }
      // else: a node a crash kept from its parent (reached by its sibling link)
    } else {
      w->roots[raw] = low.key;
      ++w->subindexes;
    }
    if (low.has && !v.recs.empty() && v.recs.front().key < low.key)
      return Status::Corruption(Where(raw) + ": key below its low key");
    if (level > 0) {
      next_named.push_back(v.leftmost);
      next_low.push_back(low);
      for (const Rec& r : v.recs) {
        next_named.push_back(r.val);
        next_low.push_back(Low{true, r.key});
      }
    } else if (content != nullptr) {
      for (const Rec& r : v.recs) content->Add(r.key, r.val);
    }
    if (nodes != nullptr) nodes->push_back(raw);
    if (stats != nullptr) CountNode(v, stats);
    if (v.sib.ptr != 0) {
      if (low.has && v.sib.key <= low.key)
        return Status::Corruption(Where(raw) + ": split key not above its low key");
      low = Low{true, v.sib.key};
    }
  }
  if (!top && ni != w->named.size())
    return Status::Corruption(name_ + ": a child named by level " + std::to_string(level + 1) +
                              " is not on its level's chain");
  if (level > 0) {
    w->named.swap(next_named);
    w->named_low.swap(next_low);
  }
  return Status::OK();
}

void TwoLayerTree::CountNode(const View& v, IndexStats* stats) {
  // The blocks AllocNode takes (an inner node of a pool made before the
  // inner class is one line smaller: not told apart here).
  stats->pm_bytes += v.level > 0 ? kInnerBlockBytes : kNodeBytes;
  if (v.level == 0) {
    ++stats->leaves;
    stats->entries += v.recs.size();
  } else {
    ++stats->inner_nodes;
  }
}

Status TwoLayerTree::CheckTopLayers(const WalkState& w, uint64_t first) const {
  for (uint32_t replica = 0; replica < ntops_; ++replica) {
    const TopLayer* t = tops_[replica].load(std::memory_order_acquire);
    bool have_prev = false;
    Key prev = 0;
    uint64_t entries = 0;
    Status bad = Status::OK();
    t->ForEach([&](uint32_t leaf, Key k, uint64_t root) {
      if (!bad.ok()) return;
      ++entries;
      if (entries == 1 && (k != 0 || root != first)) bad = Status::Corruption(name_ + ": top layer does not start at the first root");
      if (have_prev && k <= prev) bad = Status::Corruption(name_ + ": top layer keys not ascending");
      auto it = w.roots.find(root);
      if (it == w.roots.end() || it->second != k)
        bad = Status::Corruption(name_ + ": top layer entry " + std::to_string(k) + " names no subindex with that low key");
      if (t->LeafFor(k) != leaf) bad = Status::Corruption(name_ + ": top layer entry in the wrong leaf");
      have_prev = true;
      prev = k;
    });
    PMINDEX_RETURN_IF_ERROR(bad);
    if (entries == 0) return Status::Corruption(name_ + ": top layer is empty");
  }
  return Status::OK();
}

Result<std::unique_ptr<Index>> TwoLayerTree::Open(const IndexEnv& env, const TwoLayerConfig& given,
                                                  std::string name) {
  // The height is the pool's: its first root's level + 1. Options that
  // left it out (the header keeps options as they were given) take it from
  // there, so a pool made under an older default height opens as made.
  TwoLayerConfig c = given;
  {
    auto d = pm::Decode<Node>(*env.pool, env.pool->root(0), kNodeBytes, 64,
                              name + ": first root (root slot 0)");
    if (!d.ok()) return d.status();
    const uint32_t h = sorted_node::Ld32(d.value()->level) + 1;
    if (h < 2 || h > kMaxHeight)
      return Status::Corruption(name + ": the first root's level " + std::to_string(h - 1) +
                                " is not a height of 2.." + std::to_string(kMaxHeight));
    if (given.height_given && h != given.height)
      return Status::Corruption(name + ": the pool's options say height=" +
                                std::to_string(given.height) + " but its first root is on level " +
                                std::to_string(h - 1));
    c.height = h;
  }
  std::unique_ptr<TwoLayerTree> t(new TwoLayerTree(env, c, std::move(name)));
  std::vector<uint64_t> nodes;
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  PMINDEX_RETURN_IF_ERROR(t->ReadLog());  // reads only
  PMINDEX_RETURN_IF_ERROR(t->Walk(false, &nodes, &content, nullptr));  // reads only
  if (t->log_ != 0) nodes.push_back(t->log_);
  PMINDEX_RETURN_IF_ERROR(common::CheckContentRecord(*env.pool, env.salvage, content, t->name_));
  PMINDEX_RETURN_IF_ERROR(sorted_node::AdoptNodes(env, nodes, t->name_));  // no write before
  // Repairs: a latch a crash left set is cleared. The store is not
  // flushed: every open clears latches again, so a latch bit that reaches
  // PM is harmless (open and recovery ignore it). (A new node whose split
  // did not commit is unreachable and goes back to the allocator; an
  // inactive sibling record is never read; a separator a crash kept from
  // a parent is covered by the sibling link.)
  for (uint64_t raw : nodes) {
    if (raw == t->log_) continue;
    Node* x = t->N(raw);
    if (st::Latched(x->state)) pm::store(&x->state, x->state & ~st::kLatch);
  }
  t->FinishLog();  // an armed log: its move is redone (idempotent), then disarmed
  t->Install(t->Chain());
  t->StartCoordinator();
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status TwoLayerTree::verify() {
  sync::MutexLock g(top_mu_);
  sync::MutexLock m(migrate_mu_);
  return Walk(true, nullptr, nullptr, nullptr);
}

IndexStats TwoLayerTree::stats() {
  sync::MutexLock g(top_mu_);
  sync::MutexLock m(migrate_mu_);
  IndexStats s;
  IgnoreError(Walk(false, nullptr, nullptr, &s), "stats of a damaged tree are partial; verify() reports why");
  const TopLayer* t = tops_[0].load(std::memory_order_acquire);
  s.dram_bytes = t->bytes() * ntops_ + (access_ ? AccessStats::bytes() : 0);
  s.extra.push_back({"top_leaves", static_cast<double>(t->leaves())});
  s.extra.push_back({"top_levels", static_cast<double>(t->levels())});
  s.extra.push_back({"top_rebuilds", static_cast<double>(top_rebuilds())});
  s.extra.push_back({"top_skipped", static_cast<double>(top_skipped())});
  s.extra.push_back({"root_splits", static_cast<double>(root_splits())});
  s.extra.push_back({"top_replicas", static_cast<double>(ntops_)});
  if (cfg_.merge) {
    s.extra.push_back({"merges", static_cast<double>(merges())});
    s.extra.push_back({"merge_aborts", static_cast<double>(merge_aborts())});
  }
  if (access_) {
    s.extra.push_back({"migrations", static_cast<double>(migrations())});
    s.extra.push_back({"migration_aborts", static_cast<double>(migration_aborts())});
    s.extra.push_back({"migrations_queued", static_cast<double>(migrations_queued_.load(std::memory_order_relaxed))});
  }
  return s;
}

Status TwoLayerTree::for_each_block(const std::function<void(PPtr)>& fn) {
  sync::MutexLock g(top_mu_);
  sync::MutexLock m(migrate_mu_);
  std::vector<uint64_t> nodes;
  PMINDEX_RETURN_IF_ERROR(Walk(false, &nodes, nullptr, nullptr));
  if (log_ != 0) nodes.push_back(log_);
  for (uint64_t n : nodes) fn(PPtr(n));
  return Status::OK();
}

}  // namespace pmindex::tlbtree
