#include "trees/nvtree/nvtree.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "pm/pptr_decode.h"
#include "index/registry.h"
#include "util/check.h"

namespace pmindex::nvtree {

namespace {

using sync::OlcLoad;
using sync::OlcStore;

uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// Snapshot written at clean shutdown: the PLN entries, grouped by PLN.
struct SnapshotHeader {
  uint64_t tag;      // kSnapshotTag
  uint64_t entries;  // PlnEntry-like records {low, ln}
  uint64_t plns;     // followed by `plns` uint32 caps-in-units and counts
  uint64_t pad;
};
constexpr uint64_t kSnapshotTag = 0x4E56534E41503031;  // "NVSNAP01"
static_assert(sizeof(SnapshotHeader) == 32);

}  // namespace

// ------------------------------------------------------------------ Layout

uint64_t Layout::FindPln(Key k) const {
  uint64_t id = 0;
  for (uint32_t l = 0; l < height; ++l) {
    const uint64_t* node = in.get() + id * fanout;
    uint64_t cnt = node[0];
    const uint64_t* keys = node + 1;
    // Number of keys <= k: the child to descend into.
    uint64_t lo = 0, hi = cnt;
    while (lo < hi) {
      uint64_t mid = (lo + hi) / 2;
      if (keys[mid] <= k) lo = mid + 1; else hi = mid;
    }
    id = id * fanout + 1 + lo;
  }
  return id - level_first[height];
}

uint64_t Layout::dram_bytes() const {
  return sizeof(Layout) + in_nodes * fanout * sizeof(uint64_t) + arena_bytes +
         pln_off.size() * sizeof(uint64_t);
}

// ------------------------------------------------------------------ NvTree

NvTree::NvTree(const IndexEnv& env, const Config& cfg)
    : env_(env),
      cfg_(cfg),
      model_(cfg.strategy == Strategy::kOff ? nullptr : &CostModel::Measured()),
      stripes_(new std::atomic<uint32_t>[kStripes]),
      epoch_([this](uint64_t item) { Reclaim(item); }) {
  for (size_t i = 0; i < kStripes; ++i) stripes_[i].store(0, std::memory_order_relaxed);
}

void NvTree::Reclaim(uint64_t item) {
  if (item & 1) {
    auto* l = reinterpret_cast<Layout*>(item & ~uint64_t{1});
    sync::MutexLock g(layouts_mu_);
    for (auto it = layouts_.begin(); it != layouts_.end(); ++it) {
      if (it->get() == l) {
        layouts_.erase(it);
        break;
      }
    }
  } else {
    env_.alloc->Free(PPtr(item));
  }
}

std::atomic<uint32_t>& NvTree::Stripe(uint64_t raw) const {
  uint64_t h = (raw >> 6) * 0x9E3779B97F4A7C15ull;
  return stripes_[h >> 54];  // top 10 bits: kStripes == 1024
}

void NvTree::LockStripe(uint64_t raw) const {
  auto& s = Stripe(raw);
  for (unsigned spins = 0;; ++spins) {
    uint32_t z = 0;
    if (s.load(std::memory_order_relaxed) == 0 &&
        s.compare_exchange_weak(z, 1, std::memory_order_acquire, std::memory_order_relaxed))
      return;
    if (spins < 64) sync::CpuRelax(); else std::this_thread::yield();
  }
}

void NvTree::UnlockStripe(uint64_t raw) const { Stripe(raw).store(0, std::memory_order_release); }

// Defined here, where Layout is complete.
NvTree::~NvTree() = default;

NvTree::Where NvTree::Locate(Key k) const {
  for (;;) {
    Layout* l = layout_.load(std::memory_order_acquire);
    uint64_t o = l->FindPln(k);
    Pln* p = l->pln(o);
    bool restart = false;
    uint64_t v = p->lock.ReadLockOrRestart(restart);
    if (restart) {
      std::this_thread::yield();  // obsolete: a rebuild published new arrays
      continue;
    }
    uint32_t n = std::min(OlcLoad(p->n), p->cap);
    uint32_t pos = 0;
    for (uint32_t i = 1; i < n; ++i) {
      if (OlcLoad(p->e[i].low) <= k) pos = i; else break;
    }
    uint64_t raw = OlcLoad(p->e[pos].ln);
    p->lock.CheckOrRestart(v, restart);
    if (restart) continue;
    return Where{l, o, pos, v, ToLn(raw), raw};
  }
}

void NvTree::CountRead(const Where& w) {
  if (cfg_.strategy == Strategy::kOff) return;
  n_reads_.fetch_add(1, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(w.layout->pln(w.pln)->e[w.pos].reads).fetch_add(1, std::memory_order_relaxed);
}

void NvTree::CountWrite(const Where& w, int elements) {
  if (cfg_.strategy == Strategy::kOff) return;
  n_writes_.fetch_add(elements, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(w.layout->pln(w.pln)->e[w.pos].writes)
      .fetch_add(elements, std::memory_order_relaxed);
}

std::optional<Value> NvTree::lookup(Key k) {
  alloc::EpochDomain::Guard g(epoch_);
  for (;;) {
    Where w = Locate(k);
    uint64_t n = std::min<uint64_t>(w.ln->count_acquire(), w.ln->capacity());
    std::optional<Value> r = LnFind(w.ln, n, k);
    bool restart = false;
    w.layout->pln(w.pln)->lock.CheckOrRestart(w.version, restart);
    if (restart) continue;
    CountRead(w);
    return r;
  }
}

int NvTree::Plan(Op op, Key k, Value v, const std::optional<Value>& cur, LnElement* e, bool* neg,
                 Status* st) {
  switch (op) {
    case Op::kInsert:
      if (cur) {
        *st = Status::AlreadyExists();
        return 0;
      }
      break;
    case Op::kUpdate:
      if (!cur) {
        *st = Status::NotFound();
        return 0;
      }
      break;
    case Op::kUpsert:
      break;
    case Op::kRemove:
      if (!cur) {
        *st = Status::NotFound();
        return 0;
      }
      e[0] = {k, *cur};
      neg[0] = true;
      return 1;
  }
  *st = Status::OK();
  int n = 0;
  if (cur) {
    if (*cur == v) return 0;  // nothing would change
    e[n] = {k, *cur};
    neg[n++] = true;
  }
  e[n] = {k, v};
  neg[n++] = false;
  return n;
}

Status NvTree::insert(Key k, Value v) { return Write(Op::kInsert, k, v); }
Status NvTree::update(Key k, Value v) { return Write(Op::kUpdate, k, v); }
Status NvTree::upsert(Key k, Value v) { return Write(Op::kUpsert, k, v); }
Status NvTree::remove(Key k) { return Write(Op::kRemove, k, 0); }

Status NvTree::Write(Op op, Key k, Value v) {
  alloc::EpochDomain::Guard g(epoch_);
  for (;;) {
    Where w = Locate(k);
    LockStripe(w.ln_raw);
    bool restart = false;
    // Validated after taking the stripe: the LN is still linked, and stays
    // linked while we hold its stripe.
    w.layout->pln(w.pln)->lock.CheckOrRestart(w.version, restart);
    if (restart) {
      UnlockStripe(w.ln_raw);
      continue;
    }
    if (std::optional<Status> done = TryAppend(op, k, v, w, Ln::Load(w.ln->n_element)))
      return *done;
    UnlockStripe(w.ln_raw);
    return WriteFull(op, k, v);
  }
}

std::optional<Status> NvTree::TryAppend(Op op, Key k, Value v, const Where& w, uint64_t n) {
  const std::optional<Value> cur = LnFind(w.ln, n, k);
  LnElement e[2];
  bool neg[2];
  Status st;
  const int cnt = Plan(op, k, v, cur, e, neg, &st);
  if (cnt == 0) {
    UnlockStripe(w.ln_raw);
    return st;
  }
  if (n + cnt > w.ln->capacity()) return std::nullopt;
  LnAppend(w.ln, e, neg, cnt);
  UnlockStripe(w.ln_raw);
  CountWrite(w, cnt);
  return Status::OK();
}

Result<PPtr> NvTree::AllocLn(uint32_t bytes, Ln** out) {
  Result<PPtr> r = env_.alloc->Alloc(bytes);
  if (!r.ok()) return r;
  *out = ToLn(r.value().raw());
  return r;
}

uint64_t NvTree::LeftSibling(const Layout& l, uint64_t pln, uint32_t pos) const {
  if (pos > 0) return OlcLoad(l.pln(pln)->e[pos - 1].ln);
  if (pln == 0) return 0;
  const Pln* q = l.pln(pln - 1);
  return OlcLoad(q->e[OlcLoad(q->n) - 1].ln);
}

void NvTree::LinkFrom(uint64_t left_raw, uint64_t new_raw) {
  // The single atomic write that publishes a split/replace/merge: the new
  // LN(s) were persisted before it.
  if (left_raw == 0) {
    env_.pool->WriteRoot(0, new_raw);
  } else {
    pm::naw(&ToLn(left_raw)->next, new_raw);
  }
}

Status NvTree::WriteFull(Op op, Key k, Value v) {
  sync::MutexLock guard(structure_mu_);
  // Under structure_mu_ no PLN changes but ours, so Locate is stable.
  Where w = Locate(k);
  Ln* x = w.ln;
  LockStripe(w.ln_raw);
  const uint64_t n = Ln::Load(x->n_element);
  // Someone may have restructured it meanwhile.
  if (std::optional<Status> done = TryAppend(op, k, v, w, n)) return *done;

  // Valid elements with the pending operation applied: the new LN(s)
  // receive the operation's result directly (section 4.4).
  std::vector<KV> live;
  const bool present = LiveAfter(x, n, op, k, v, &live);
  Pln* p = w.layout->pln(w.pln);
  const uint32_t pn = p->n;
  // Split a leaf at least half full; else replace it by a compact copy,
  // or merge it with its right sibling under the same PLN if that one is
  // less than half full.
  Rebuild rb;
  rb.kind = Restructure::kReplace;  // also when the right sibling lies under another PLN
  if (2 * live.size() >= x->capacity()) {
    rb.kind = Restructure::kSplit;
  } else if (w.pos + 1 < pn) {
    rb.r_raw = p->e[w.pos + 1].ln;
    Ln* r = ToLn(rb.r_raw);
    rb.kind =
        2 * Ln::Load(r->n_element) >= r->capacity() ? Restructure::kReplace : Restructure::kMerge;
  }
  const uint64_t left_raw = LeftSibling(*w.layout, w.pln, w.pos);
  if (Status made = MakeNewLeaves(w, &live, &rb); !made.ok()) {
    // OutOfSpace: free what was allocated, nothing was linked.
    for (PPtr f : rb.fresh) env_.alloc->Free(f);
    UnlockStripe(w.ln_raw);
    return made;
  }
  // One fence for all new LNs: each was flushed by LnInit; they must be
  // durable before the pointer write below makes them reachable.
  pm::fence();

  p->lock.WriteLock();  // readers of this PLN wait; they would see old LNs
  LinkFrom(left_raw, rb.first_raw);
  ReplaceInPln(w, pn, rb);
  if (rb.kind == Restructure::kMerge && &Stripe(rb.r_raw) != &Stripe(w.ln_raw))
    UnlockStripe(rb.r_raw);
  UnlockStripe(w.ln_raw);

  epoch_.Retire(w.ln_raw);
  if (rb.kind == Restructure::kMerge) epoch_.Retire(rb.r_raw);
  CountRestructure(rb.kind);
  if (cfg_.strategy != Strategy::kOff) {
    int elems = op == Op::kUpdate || (op == Op::kUpsert && present) ? 2 : 1;
    n_writes_.fetch_add(elems, std::memory_order_relaxed);
  }
  return Status::OK();
}

bool NvTree::LiveAfter(Ln* x, uint64_t n, Op op, Key k, Value v, std::vector<KV>* live) const {
  LnLive(x, n, live);
  auto it =
      std::lower_bound(live->begin(), live->end(), k, [](const KV& a, Key b) { return a.key < b; });
  const bool present = it != live->end() && it->key == k;
  if (op == Op::kRemove) {
    PMINDEX_CHECK(present, "nvtree: remove of a key its locked leaf does not hold");
    live->erase(it);
  } else if (present) {
    it->value = v;
  } else {
    live->insert(it, KV{k, v});
  }
  return present;
}

Status NvTree::MakeNewLeaves(const Where& w, std::vector<KV>* live_in, Rebuild* rb) {
  std::vector<KV>& live = *live_in;
  Ln* x = w.ln;
  Pln* p = w.layout->pln(w.pln);
  const PlnEntry ent{x->low, w.ln_raw, OlcLoad(p->e[w.pos].reads), OlcLoad(p->e[w.pos].writes)};
  const uint32_t size_x = x->size_bytes();
  const uint64_t c = live.size();
  const uint64_t x_next = x->next_raw();
  if (rb->kind == Restructure::kSplit) {
    uint32_t sz = size_x;
    if (cfg_.strategy != Strategy::kOff) {
      LnStats s{ent.reads, ent.writes, n_reads_.load(std::memory_order_relaxed),
                n_writes_.load(std::memory_order_relaxed),
                n_leaves_.load(std::memory_order_relaxed)};
      sz = NewLeafSize(cfg_.strategy, size_x, s, *model_, std::min(cfg_.min_leaf, size_x),
                       std::max(cfg_.max_leaf, size_x));
    }
    const uint64_t half = c / 2;
    while (Ln::CapacityFor(sz) < c - half + 1 && sz + 64 <= Ln::kMaxBytes) sz += 64;
    PMINDEX_CHECK(Ln::CapacityFor(sz) >= c - half, "nvtree: split leaf of %u bytes too small", sz);
    Ln *a, *b;
    Result<PPtr> rbp = AllocLn(sz, &b);
    if (!rbp.ok()) return rbp.status();
    rb->fresh.push_back(rbp.value());
    Result<PPtr> ra = AllocLn(sz, &a);
    if (!ra.ok()) return ra.status();
    rb->fresh.push_back(ra.value());
    const Key sep = live[half].key;
    LnInit(b, sz, sep, x_next, live.data() + half, c - half);
    LnInit(a, sz, ent.low, rbp.value().raw(), live.data(), half);
    rb->first_raw = ra.value().raw();
    // Table 3: each half inherits half of the splitting LN's counters.
    rb->repl.push_back({ent.low, rb->first_raw, ent.reads / 2, ent.writes / 2});
    rb->repl.push_back({sep, rbp.value().raw(), ent.reads / 2, ent.writes / 2});
  } else if (rb->kind == Restructure::kReplace) {
    Ln* a;
    Result<PPtr> ra = AllocLn(size_x, &a);
    if (!ra.ok()) return ra.status();
    rb->fresh.push_back(ra.value());
    LnInit(a, size_x, ent.low, x_next, live.data(), c);
    rb->first_raw = ra.value().raw();
    rb->repl.push_back({ent.low, rb->first_raw, ent.reads, ent.writes});
  } else {
    Ln* r = ToLn(rb->r_raw);
    const bool same = &Stripe(rb->r_raw) == &Stripe(w.ln_raw);
    if (!same) LockStripe(rb->r_raw);
    std::vector<KV> rl;
    LnLive(r, Ln::Load(r->n_element), &rl);
    live.insert(live.end(), rl.begin(), rl.end());
    uint32_t sz = std::max(size_x, r->size_bytes());
    PMINDEX_CHECK(Ln::CapacityFor(sz) >= live.size(), "nvtree: merged leaf of %u bytes too small", sz);
    Ln* a;
    Result<PPtr> ra = AllocLn(sz, &a);
    if (!ra.ok()) {
      if (!same) UnlockStripe(rb->r_raw);
      return ra.status();
    }
    rb->fresh.push_back(ra.value());
    LnInit(a, sz, ent.low, r->next_raw(), live.data(), live.size());
    rb->first_raw = ra.value().raw();
    rb->repl.push_back({ent.low, rb->first_raw, ent.reads + OlcLoad(p->e[w.pos + 1].reads),
                        ent.writes + OlcLoad(p->e[w.pos + 1].writes)});
  }
  return Status::OK();
}

void NvTree::ReplaceInPln(const Where& w, uint32_t pn, const Rebuild& rb) {
  Pln* p = w.layout->pln(w.pln);
  const std::vector<PlnEntry>& repl = rb.repl;
  const uint32_t removed = rb.kind == Restructure::kMerge ? 2 : 1;
  const uint32_t new_n = pn - removed + static_cast<uint32_t>(repl.size());
  if (new_n <= p->cap) {
    if (rb.kind == Restructure::kSplit) {
      for (uint32_t i = pn; i > w.pos + 1; --i) {
        OlcStore(p->e[i].low, p->e[i - 1].low);
        OlcStore(p->e[i].ln, p->e[i - 1].ln);
        OlcStore(p->e[i].reads, OlcLoad(p->e[i - 1].reads));
        OlcStore(p->e[i].writes, OlcLoad(p->e[i - 1].writes));
      }
    } else if (rb.kind == Restructure::kMerge) {
      for (uint32_t i = w.pos + 1; i + 1 < pn; ++i) {
        OlcStore(p->e[i].low, p->e[i + 1].low);
        OlcStore(p->e[i].ln, p->e[i + 1].ln);
        OlcStore(p->e[i].reads, OlcLoad(p->e[i + 1].reads));
        OlcStore(p->e[i].writes, OlcLoad(p->e[i + 1].writes));
      }
    }
    for (size_t j = 0; j < repl.size(); ++j) {
      PlnEntry& d = p->e[w.pos + j];
      OlcStore(d.low, repl[j].low);
      OlcStore(d.ln, repl[j].ln);
      OlcStore(d.reads, repl[j].reads);
      OlcStore(d.writes, repl[j].writes);
    }
    OlcStore(p->n, new_n);
    p->lock.WriteUnlock();
    return;
  }
  // The PLN is full: rebuild-from-PLN. Searches keep using the old arrays
  // (except this locked PLN) until the new ones are published.
  uint64_t t0 = NowNs();
  std::vector<PlnEntry> all = CollectEntries(*w.layout);
  auto pos =
      std::find_if(all.begin(), all.end(), [&](const PlnEntry& e2) { return e2.ln == w.ln_raw; });
  PMINDEX_CHECK(pos != all.end(), "nvtree: the split leaf is in no PLN");
  pos = all.erase(pos, pos + removed);
  all.insert(pos, repl.begin(), repl.end());
  Publish(BuildLayout(all, {}), w.pln);
  rebuilds_.fetch_add(1, std::memory_order_relaxed);
  rebuild_ns_.fetch_add(NowNs() - t0, std::memory_order_relaxed);
}

void NvTree::CountRestructure(Restructure kind) {
  switch (kind) {
    case Restructure::kSplit:
      splits_.fetch_add(1, std::memory_order_relaxed);
      n_leaves_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Restructure::kReplace:
      replaces_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Restructure::kMerge:
      merges_.fetch_add(1, std::memory_order_relaxed);
      n_leaves_.fetch_sub(1, std::memory_order_relaxed);
      break;
  }
}

std::vector<PlnEntry> NvTree::CollectEntries(const Layout& l) const {
  std::vector<PlnEntry> all;
  for (uint64_t o = 0; o < l.plns(); ++o) {
    const Pln* p = l.pln(o);
    for (uint32_t i = 0; i < p->n; ++i) {
      all.push_back({p->e[i].low, p->e[i].ln, OlcLoad(p->e[i].reads), OlcLoad(p->e[i].writes)});
    }
  }
  return all;
}

std::unique_ptr<Layout> NvTree::BuildLayout(const std::vector<PlnEntry>& entries,
                                            const std::vector<uint32_t>& groups) const {
  PMINDEX_CHECK(!entries.empty(), "nvtree: layout of no leaves");
  auto l = std::make_unique<Layout>();
  const uint32_t F = cfg_.in_fanout;
  l->fanout = F;
  // PLN contents: `groups` gives the entry count of each PLN (snapshot
  // load); otherwise one LN per PLN, which delays the next rebuild the most
  // (section 4.5).
  std::vector<uint32_t> cnt = groups;
  if (cnt.empty()) cnt.assign(entries.size(), 1);
  const uint64_t P = cnt.size();
  // Hot-write PLNs get a second unit (section 5.5).
  uint64_t total_w = 0;
  for (const PlnEntry& e : entries) total_w += e.writes;
  std::vector<uint32_t> units(P, 1);
  size_t idx = 0;
  uint64_t arena = 0;
  l->pln_off.resize(P);
  for (uint64_t o = 0; o < P; ++o) {
    uint64_t w = 0;
    for (uint32_t j = 0; j < cnt[o]; ++j) w += entries[idx + j].writes;
    idx += cnt[o];
    if (cfg_.strategy != Strategy::kOff && total_w > 0 && w * P > total_w) units[o] = 2;
    while (Pln::CapacityFor(units[o] * cfg_.pln_unit) < cnt[o] + 1) ++units[o];
    l->pln_off[o] = arena;
    arena += uint64_t{units[o]} * cfg_.pln_unit;
  }
  PMINDEX_CHECK(idx == entries.size(), "nvtree: layout placed %zu of %zu leaves", static_cast<size_t>(idx), entries.size());
  l->arena_bytes = arena;
  l->arena = std::unique_ptr<std::byte[], void (*)(std::byte*)>(
      static_cast<std::byte*>(std::aligned_alloc(64, arena)), [](std::byte* b) { std::free(b); });
  PMINDEX_CHECK(l->arena != nullptr, "nvtree: out of memory for a layout of %llu bytes", static_cast<unsigned long long>(arena));
  idx = 0;
  for (uint64_t o = 0; o < P; ++o) {
    Pln* p = new (l->arena.get() + l->pln_off[o]) Pln;
    p->cap = Pln::CapacityFor(units[o] * cfg_.pln_unit);
    p->n = cnt[o];
    for (uint32_t j = 0; j < cnt[o]; ++j) p->e[j] = entries[idx++];
  }
  // INs: the smallest complete F-ary tree over the PLNs.
  uint32_t h = 0;
  for (uint64_t span = 1; span < P; span *= F) ++h;
  l->height = h;
  l->level_first.assign(h + 1, 0);
  for (uint32_t i = 1; i <= h; ++i) l->level_first[i] = l->level_first[i - 1] * F + 1;
  l->in_nodes = l->level_first[h];
  l->in.reset(new uint64_t[std::max<uint64_t>(l->in_nodes, 1) * F]());
  // span[i] = PLNs below one node of level i.
  std::vector<uint64_t> span(h + 1, 1);
  for (int i = static_cast<int>(h) - 1; i >= 0; --i) span[i] = span[i + 1] * F;
  for (uint32_t lv = 0; lv < h; ++lv) {
    for (uint64_t o = 0; o * span[lv] < P; ++o) {
      uint64_t* node = l->in.get() + (l->level_first[lv] + o) * F;
      uint64_t keys = 0;
      for (uint32_t j = 1; j < F; ++j) {
        uint64_t first_pln = (o * F + j) * span[lv + 1];
        if (first_pln >= P) break;
        node[1 + keys++] = l->pln(first_pln)->e[0].low;
      }
      node[0] = keys;
    }
  }
  return l;
}

void NvTree::Publish(std::unique_ptr<Layout> next, uint64_t locked_pln) {
  Layout* old = layout_.load(std::memory_order_relaxed);
  Layout* raw = next.get();
  {
    sync::MutexLock g(layouts_mu_);
    layouts_.push_back(std::move(next));
  }
  layout_.store(raw, std::memory_order_release);
  if (old == nullptr) return;
  // Every old PLN becomes obsolete before structure_mu_ is released, so no
  // reader or appender validates against the old arrays after an LN they
  // route to could have been replaced through the new ones.
  for (uint64_t o = 0; o < old->plns(); ++o) {
    Pln* p = old->pln(o);
    if (o != locked_pln) p->lock.WriteLock();
    p->lock.WriteUnlockObsolete();
  }
  epoch_.Retire(reinterpret_cast<uint64_t>(old) | 1);
}

// ---------------------------------------------------------------- recovery

Result<std::unique_ptr<Index>> NvTree::Create(const IndexEnv& env, const Config& cfg) {
  std::unique_ptr<NvTree> t(new NvTree(env, cfg));
  Ln* head;
  Result<PPtr> r = t->AllocLn(cfg.leaf_bytes, &head);
  if (!r.ok()) return r.status();
  // Slots 2 and 1 first (nothing reads them while slot 0 is null), so that
  // their fences do not fall between the head LN's flush and its fence.
  // pmcrash-redundant: slots 0-3 share one line in each copy of the root
  // slots (pm/pool_format.h), so slot 0's WriteRoot below persists this
  // write with its own in program order, and no crash image shows slot 0
  // without it.
  env.pool->WriteRoot(2, kFormatTag);
  // pmcrash-redundant: as the format tag's write above (slot 1).
  if (env.pool->root(1) != 0) env.pool->WriteRoot(1, 0);
  LnInit(head, cfg.leaf_bytes, 0, 0, nullptr, 0);
  // The head LN durable before slot 0 (written last: a non-zero slot 0
  // means the tree exists) points to it.
  pm::fence();
  env.pool->WriteRoot(0, r.value().raw());
  {
    sync::MutexLock g(t->structure_mu_);  // uncontended: the tree is not shared yet
    t->Publish(t->BuildLayout({PlnEntry{0, r.value().raw(), 0, 0}}, {}), 0);
  }
  t->n_leaves_.store(1);
  return std::unique_ptr<Index>(std::move(t));
}

Result<std::unique_ptr<Index>> NvTree::Open(const IndexEnv& env, const Config& cfg) {
  std::unique_ptr<NvTree> t(new NvTree(env, cfg));
  Pool* pool = env.pool;
  if (pool->root(2) != kFormatTag || pool->root(0) == 0)
    return Status::Corruption("nvtree: pool holds no nvtree root (bad format tag or null head)");
  uint64_t snap = pool->root(1);
  // Validation only reads the pool (LoadSnapshot and RebuildFromLn check
  // every pointer and mark blocks reachable in DRAM), so a refused open
  // leaves the pool as it was. (Only a salvage copy, IndexEnv::salvage, gets
  // a write earlier: RebuildFromLn's cut of the list at a bad LN.)
  Status st;
  if ((snap & 1) != 0) {
    st = t->LoadSnapshot(snap & ~uint64_t{1});
    t->recovered_clean_ = st.ok();
  }
  if (!t->recovered_clean_) {
    st = t->RebuildFromLn();
    if (!st.ok()) {
      t->closed_ = true;  // nothing to shut down; the allocator is still recovering
      return st;
    }
  }
  // Every live key within its LN's fences, as verify() checks (without
  // this check, random bytes or a zeroed 4 KiB over an LN's elements
  // would open, and verify() would then find keys outside the fences). Recovery writes no
  // element, so any state verify accepts after a crash passes. This reads
  // every LN's elements once, which rebuild-from-LN and the snapshot
  // otherwise avoid. Not for salvage copies.
  // The same walk sums the live pairs, compared below with the content
  // record (common/content_record.h), and tells them to the pair visitor (IndexEnv::pairs).
  common::ContentSum content(env);
  if (!env.salvage) {
    Status f = t->CheckLnFences(&content);
    if (!f.ok()) {
      t->closed_ = true;  // the allocator is still recovering: close must not write
      return f;
    }
  }
  // Every LN is marked reachable: the allocator's bound on what recovery
  // would give back is checked before the first write, so a
  // refusal by the bound leaves the pool, its clean flag included, as it
  // was. Checked whatever slot 1 holds: open_index's own MarkInUse follows.
  Status b = env.alloc->CheckRecoveryBound();
  // A pool closed cleanly must hold the pairs its close() summed (root
  // slot 6), else a key or a value was damaged while it was closed (issue
  // 15). Last of the read-only checks, so that a structural fault (e.g. a
  // cut list, which loses pairs too) is named by its own check.
  if (b.ok()) b = common::CheckContentRecord(*pool, env.salvage, content, "nvtree");
  if (!b.ok()) {
    t->closed_ = true;  // the allocator is still recovering: close must not write
    return b;
  }
  // Validated: now reset the clean flag, before any operation can change
  // the tree, so a crash from here on rebuilds from the LNs whatever the
  // snapshot says (the snapshot block itself is unreachable and freed by
  // the allocator's recovery).
  if (snap != 0) {
    Status m = pool->MarkInUse();
    if (!m.ok()) {
      t->closed_ = true;
      return m;
    }
    pool->WriteRoot(1, 0);
  }
  return std::unique_ptr<Index>(std::move(t));
}

Status NvTree::CheckLnFences(common::ContentSum* content) const {
  std::vector<KV> live;
  uint64_t raw = env_.pool->root(0);
  Ln* ln = nullptr;
  if (raw != 0) PMINDEX_RETURN_IF_ERROR(CheckLn(raw, &ln));
  while (ln != nullptr) {
    const uint64_t next = ln->next_raw();
    Ln* nx = nullptr;
    if (next != 0) PMINDEX_RETURN_IF_ERROR(CheckLn(next, &nx));
    LnLive(ln, Ln::Load(ln->n_element), &live);
    const Key low = Ln::Load(ln->low);
    for (const KV& kv : live) {
      if (kv.key < low || (nx != nullptr && kv.key >= Ln::Load(nx->low)))
        return Status::Corruption("nvtree: key " + std::to_string(kv.key) + " outside the fences of LN " +
                                  Hex(raw) + "; nothing was changed");
      content->Add(kv.key, kv.value);
    }
    raw = next;
    ln = nx;
  }
  return Status::OK();
}

common::ContentSum NvTree::SumLivePairs() const {
  // Keys stay within their LN's fences, so each key is live in one LN at
  // most, and LnLive gives it once: the pairs lookups return.
  common::ContentSum content;
  std::vector<KV> live;
  for (uint64_t raw = env_.pool->root(0); raw != 0; raw = ToLn(raw)->next_raw()) {
    const Ln* ln = ToLn(raw);
    LnLive(ln, Ln::Load(ln->n_element), &live);
    for (const KV& kv : live) content.Add(kv.key, kv.value);
  }
  return content;
}

Status NvTree::CheckLn(uint64_t raw, Ln** out) const {
  Pool* pool = env_.pool;
  auto d = pm::Decode<Ln>(*pool, raw, Ln::kMinBytes, 64, "nvtree: LN");
  if (!d.ok()) return d.status();
  Ln* ln = d.value();
  if (!ln->meta_ok() ||
      pm::CheckPPtr(*pool, raw, ln->size_bytes(), 64) != pm::PPtrFault::kOk)
    return Status::Corruption("nvtree: LN " + Hex(raw) + " has a bad header");
  if (Ln::Load(ln->n_element) > ln->capacity())
    return Status::Corruption("nvtree: LN " + Hex(raw) + " nElement exceeds its capacity");
  *out = ln;
  return Status::OK();
}

Status NvTree::RebuildFromLn() {
  // rebuild-from-LN (section 4.5): walk the list; the low fences persisted
  // in the LNs give the PLN keys, so no element is scanned.
  std::vector<PlnEntry> entries;
  uint64_t raw = env_.pool->root(0);
  Key prev_low = 0;
  while (raw != 0) {
    Ln* ln = nullptr;
    Status st = CheckLn(raw, &ln);
    if (st.ok()) {
      Key low = Ln::Load(ln->low);
      if (entries.empty() ? low != 0 : low <= prev_low)
        st = Status::Corruption("nvtree: LN list out of order at " + Hex(raw));
    }
    if (!st.ok()) {
      if (!env_.salvage || entries.empty()) return st;
      // A copy opened for salvage (IndexEnv::salvage): the list ends at the
      // last LN that passed, and the cut is written into the copy so that
      // scans stop there too. What lay beyond is not reached.
      pm::naw(&ToLn(entries.back().ln)->next, uint64_t{0});
      break;
    }
    Key low = Ln::Load(ln->low);
    prev_low = low;
    entries.push_back({low, raw, 0, 0});
    env_.alloc->MarkReachable(PPtr(raw));
    // The allocator must accept it, else FinishRecovery would refuse the
    // pool after Open's write (slot 1).
    if (!env_.alloc->IsLive(PPtr(raw)))
      return Status::Corruption("nvtree: LN " + Hex(raw) + " is not an allocated block");
    raw = ln->next_raw();
  }
  n_leaves_.store(entries.size());
  sync::MutexLock g(structure_mu_);  // Open: uncontended
  Publish(BuildLayout(entries, {}), 0);
  return Status::OK();
}

Status NvTree::LoadSnapshot(uint64_t raw) {
  Pool* pool = env_.pool;
  auto d = pm::Decode<SnapshotHeader>(*pool, raw, sizeof(SnapshotHeader), 64,
                                      "nvtree: snapshot (root slot 1)");
  if (!d.ok()) return d.status();
  auto* h = d.value();
  // entries and plns are bounded by the pool's size before the product is
  // formed, so the body's size cannot overflow.
  if (h->tag != kSnapshotTag || h->entries == 0 || h->plns == 0 || h->plns > h->entries ||
      h->entries > pool->size() / 16 ||
      pm::CheckPPtr(*pool, raw, sizeof(SnapshotHeader) + h->entries * 16 + h->plns * 4, 64) !=
          pm::PPtrFault::kOk)
    return Status::Corruption("nvtree: bad snapshot header");
  const uint64_t* rec = reinterpret_cast<const uint64_t*>(h + 1);
  const uint32_t* grp = reinterpret_cast<const uint32_t*>(rec + 2 * h->entries);
  std::vector<PlnEntry> entries;
  std::vector<uint32_t> groups(grp, grp + h->plns);
  uint64_t sum = 0;
  for (uint32_t g : groups) {
    if (g == 0) return Status::Corruption("nvtree: empty PLN in snapshot");
    sum += g;
  }
  if (sum != h->entries) return Status::Corruption("nvtree: snapshot counts disagree");
  uint64_t expect = pool->root(0);
  for (uint64_t i = 0; i < h->entries; ++i) {
    Ln* ln;
    uint64_t lraw = rec[2 * i + 1];
    if (lraw != expect) return Status::Corruption("nvtree: snapshot disagrees with the LN list");
    PMINDEX_RETURN_IF_ERROR(CheckLn(lraw, &ln));
    if (rec[2 * i] != Ln::Load(ln->low) || (i > 0 && rec[2 * i] <= entries.back().low) ||
        (i == 0 && rec[0] != 0))
      return Status::Corruption("nvtree: snapshot keys out of order");
    entries.push_back({rec[2 * i], lraw, 0, 0});
    expect = ln->next_raw();
  }
  if (expect != 0) return Status::Corruption("nvtree: snapshot misses LNs");
  for (const PlnEntry& e : entries) {
    env_.alloc->MarkReachable(PPtr(e.ln));
    if (!env_.alloc->IsLive(PPtr(e.ln)))
      return Status::Corruption("nvtree: LN " + Hex(e.ln) + " is not an allocated block");
  }
  n_leaves_.store(entries.size());
  sync::MutexLock g(structure_mu_);  // Open: uncontended
  Publish(BuildLayout(entries, groups), 0);
  return Status::OK();
}

Status NvTree::close() {
  if (closed_) return Status::OK();
  closed_ = true;
  if (abandoned()) return Status::OK();  // the open was refused: write nothing
  if (layout_.load(std::memory_order_acquire) == nullptr) return Status::OK();
  sync::MutexLock g(structure_mu_);
  // Drain retired LNs (no operation runs any more).
  for (int i = 0; i < 4 && epoch_.pending() > 0; ++i) epoch_.Reclaim();
  // The content record first (common/content_record.h): it does not depend on the
  // snapshot, so a close that finds no room for the snapshot still writes
  // it, before Pool::Close can set the clean flag.
  common::WriteContentRecord(*env_.pool, SumLivePairs());
  // Instant recovery (section 4.6): persist the PLN contents, then one NAW
  // sets the pointer and the clean bit together.
  Layout* l = layout_.load(std::memory_order_acquire);
  std::vector<PlnEntry> all = CollectEntries(*l);
  const uint64_t bytes = sizeof(SnapshotHeader) + all.size() * 16 + l->plns() * 4;
  Result<PPtr> r = env_.alloc->Alloc(bytes);
  // Out of space: close still succeeds, without the clean bit; the next
  // open rebuilds from the LNs, which are complete and consistent.
  if (!r.ok()) return Status::OK();
  auto* h = env_.pool->to_ptr<SnapshotHeader>(r.value());
  pm::store(h, SnapshotHeader{kSnapshotTag, all.size(), l->plns(), 0});
  auto* rec = reinterpret_cast<uint64_t*>(h + 1);
  for (size_t i = 0; i < all.size(); ++i) {
    pm::store(&rec[2 * i], all[i].low);
    pm::store(&rec[2 * i + 1], all[i].ln);
  }
  auto* grp = reinterpret_cast<uint32_t*>(rec + 2 * all.size());
  for (uint64_t o = 0; o < l->plns(); ++o) pm::store(&grp[o], l->pln(o)->n);
  // The snapshot must be durable before the clean bit can point to it.
  pm::flush(h, bytes);
  pm::fence();
  env_.pool->WriteRoot(1, r.value().raw() | 1);
  return Status::OK();
}

// -------------------------------------------------------------- bulk, scan

Status NvTree::bulk_load(std::span<const KV> sorted, double fill) {
  if (!(fill > 0 && fill <= 1)) return Status::InvalidArgument("nvtree: fill must be in (0, 1]");
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].key >= sorted[i].key)
      return Status::InvalidArgument("nvtree: bulk_load keys not strictly ascending");
  alloc::EpochDomain::Guard eg(epoch_);
  sync::MutexLock g(structure_mu_);
  Layout* l = layout_.load(std::memory_order_acquire);
  uint64_t head = env_.pool->root(0);
  if (l->plns() != 1 || l->pln(0)->n != 1 || Ln::Load(ToLn(head)->n_element) != 0)
    return Status::InvalidArgument("nvtree: bulk_load needs an empty index");
  if (sorted.empty()) return Status::OK();
  const uint32_t bytes = cfg_.leaf_bytes;
  const uint64_t per = std::max<uint64_t>(1, static_cast<uint64_t>(Ln::CapacityFor(bytes) * fill));
  const uint64_t lns = (sorted.size() + per - 1) / per;
  std::vector<PlnEntry> entries(lns);
  std::vector<PPtr> fresh;
  uint64_t next = 0;
  for (uint64_t i = lns; i-- > 0;) {
    Ln* ln;
    Result<PPtr> r = AllocLn(bytes, &ln);
    if (!r.ok()) {
      for (PPtr f : fresh) env_.alloc->Free(f);
      return r.status();
    }
    fresh.push_back(r.value());
    uint64_t b = i * per, e = std::min<uint64_t>(sorted.size(), b + per);
    Key low = i == 0 ? 0 : sorted[b].key;
    LnInit(ln, bytes, low, next, sorted.data() + b, e - b);
    entries[i] = {low, r.value().raw(), 0, 0};
    next = r.value().raw();
  }
  pm::fence();  // every new LN durable before the head pointer moves
  Pln* p = l->pln(0);
  LockStripe(head);
  p->lock.WriteLock();
  env_.pool->WriteRoot(0, next);
  n_leaves_.store(lns);
  Publish(BuildLayout(entries, {}), 0);
  UnlockStripe(head);
  epoch_.Retire(head);
  return Status::OK();
}

size_t NvTree::scan(Key from, size_t n, KV* out) {
  if (n == 0) return 0;
  alloc::EpochDomain::Guard eg(epoch_);
  // structure_mu_ keeps the LN list fixed; appends go on (each LN is read
  // up to the nElement loaded once).
  sync::MutexLock g(structure_mu_);
  Where w = Locate(from);
  size_t got = 0;
  std::vector<KV> live;
  for (uint64_t raw = w.ln_raw; raw != 0 && got < n; raw = ToLn(raw)->next_raw()) {
    Ln* ln = ToLn(raw);
    LnLive(ln, std::min<uint64_t>(ln->count_acquire(), ln->capacity()), &live);
    for (const KV& kv : live) {
      if (kv.key < from) continue;
      out[got++] = kv;
      if (got == n) break;
    }
  }
  return got;
}

// ------------------------------------------------------------ verification

Status NvTree::verify() {
  alloc::EpochDomain::Guard eg(epoch_);
  sync::MutexLock g(structure_mu_);
  Layout* l = layout_.load(std::memory_order_acquire);
  std::vector<PlnEntry> all = CollectEntries(*l);
  uint64_t raw = env_.pool->root(0);
  std::vector<KV> live;
  size_t i = 0;
  for (; raw != 0; ++i) {
    Ln* ln;
    PMINDEX_RETURN_IF_ERROR(CheckLn(raw, &ln));
    if (i >= all.size()) return Status::Corruption("nvtree: LN " + Hex(raw) + " missing from PLNs");
    if (all[i].ln != raw || all[i].low != Ln::Load(ln->low))
      return Status::Corruption("nvtree: PLN entry " + std::to_string(i) + " disagrees with LN list");
    if (i == 0 ? all[i].low != 0 : all[i].low <= all[i - 1].low)
      return Status::Corruption("nvtree: LN low keys not ascending at " + Hex(raw));
    uint64_t next = ln->next_raw();
    LnLive(ln, Ln::Load(ln->n_element), &live);
    Ln* nx = nullptr;
    if (next != 0) PMINDEX_RETURN_IF_ERROR(CheckLn(next, &nx));
    for (const KV& kv : live) {
      if (kv.key < Ln::Load(ln->low) || (nx != nullptr && kv.key >= Ln::Load(nx->low)))
        return Status::Corruption("nvtree: key " + std::to_string(kv.key) + " outside the fences of LN " + Hex(raw));
    }
    raw = next;
  }
  if (i != all.size()) return Status::Corruption("nvtree: PLNs route to LNs not in the list");
  for (uint64_t o = 0; o < l->plns(); ++o) {
    Pln* p = l->pln(o);
    if (p->n == 0 || p->n > p->cap) return Status::Corruption("nvtree: PLN " + std::to_string(o) + " count out of range");
    if (p->lock.IsLocked() || p->lock.IsObsolete())
      return Status::Corruption("nvtree: PLN " + std::to_string(o) + " locked or obsolete");
    for (uint32_t j = 0; j < p->n; ++j) {
      if (l->FindPln(p->e[j].low) != o)
        return Status::Corruption("nvtree: IN routing of key " + std::to_string(p->e[j].low) + " misses PLN " + std::to_string(o));
    }
  }
  return Status::OK();
}

IndexStats NvTree::stats() {
  alloc::EpochDomain::Guard eg(epoch_);
  sync::MutexLock g(structure_mu_);
  Layout* l = layout_.load(std::memory_order_acquire);
  IndexStats s;
  s.height = l->height + 2;
  std::vector<KV> live;
  for (uint64_t raw = env_.pool->root(0); raw != 0; raw = ToLn(raw)->next_raw()) {
    Ln* ln = ToLn(raw);
    LnLive(ln, ln->count_acquire(), &live);
    s.entries += live.size();
    s.leaves += 1;
    s.pm_bytes += ln->size_bytes();
  }
  uint64_t ins = 0;
  for (uint32_t lv = 0; lv < l->height; ++lv) {
    uint64_t span = 1;
    for (uint32_t j = lv; j < l->height; ++j) span *= l->fanout;
    ins += (l->plns() + span - 1) / span;
  }
  s.inner_nodes = ins + l->plns();
  sync::MutexLock g2(layouts_mu_);
  for (const auto& x : layouts_) s.dram_bytes += x->dram_bytes();
  s.extra = {{"rebuilds", static_cast<double>(rebuilds())},
             {"rebuild_s", rebuild_seconds()},
             {"splits", static_cast<double>(splits())},
             {"replaces", static_cast<double>(replaces())},
             {"merges", static_cast<double>(merges())}};
  return s;
}

Status NvTree::for_each_block(const std::function<void(PPtr)>& fn) {
  sync::MutexLock g(structure_mu_);
  for (uint64_t raw = env_.pool->root(0); raw != 0; raw = ToLn(raw)->next_raw()) fn(PPtr(raw));
  uint64_t snap = env_.pool->root(1);
  if (snap & 1) fn(PPtr(snap & ~uint64_t{1}));
  return Status::OK();
}

// ------------------------------------------------------------ registration

namespace {

Result<Config> ParseConfig(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"node", "adaptive", "pln", "fanout"}));
  Config c;
  Result<uint64_t> node = o.get_uint("node", 1024, Ln::kMinBytes, Ln::kMaxBytes);
  if (!node.ok()) return node.status();
  if (!Ln::ValidSize(static_cast<uint32_t>(node.value())))
    return Status::InvalidArgument("nvtree: node must be a multiple of 64 in [128, 4160] (e.g. 512|1024|2048|4096)");
  c.leaf_bytes = static_cast<uint32_t>(node.value());
  Result<std::string> ad =
      o.get_enum("adaptive", "off", {"off", "conservative", "aggressive", "balanced"});
  if (!ad.ok()) return ad.status();
  ParseStrategy(ad.value(), &c.strategy);
  Result<uint64_t> pln = o.get_uint("pln", 256, 64, 4096);
  if (!pln.ok()) return pln.status();
  if (pln.value() % 64 != 0) return Status::InvalidArgument("nvtree: pln must be a multiple of 64");
  c.pln_unit = static_cast<uint32_t>(pln.value());
  Result<uint64_t> fo = o.get_uint("fanout", 32, 2, 1024);
  if (!fo.ok()) return fo.status();
  c.in_fanout = static_cast<uint32_t>(fo.value());
  c.min_leaf = std::min<uint32_t>(256, c.leaf_bytes);
  return c;
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    nvtree,
    {
        .name = "nvtree",
        .persistent = true,
        .options_help =
            "node=BYTES (leaf size: a multiple of 64 from 128 to 4160; default 1024; the "
            "paper used 512|1024|2048|4096) adaptive=off|conservative|aggressive|balanced "
            "(default off) pln=BYTES (multiple of 64, 64..4096; default 256) "
            "fanout=N (2..1024; default 32)",
        .validate = [](const Options& o) -> Status { return ParseConfig(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Config> c = ParseConfig(o);
          if (!c.ok()) return c.status();
          return NvTree::Create(env, c.value());
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Config> c = ParseConfig(o);
          if (!c.ok()) return c.status();
          return NvTree::Open(env, c.value());
        },
        .marks_in_use = true,
        .unreachable_after_clean = 1,  // the snapshot block, freed by recovery
        .verify_after_crash = 4,       // one writer's replaced LNs (registry.h)
    });

}  // namespace pmindex::nvtree
