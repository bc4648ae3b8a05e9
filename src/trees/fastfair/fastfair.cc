#include "trees/fastfair/fastfair.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "common/fingerprint.h"
#include "pm/pptr_decode.h"
#include "sync/version_lock.h"
#include "util/check.h"

namespace pmindex::fastfair {

namespace {

using sorted_node::Ld;
using sorted_node::Ld32;
using sorted_node::Unchanged;

inline uint32_t LineOf(uint32_t slot) { return slot / FastFair::kRecsPerLine; }

// A node's version, once no writer is inside (even), or kDead.
[[gnu::always_inline]] inline uint64_t AwaitEven(const uint64_t& version) {
  return sorted_node::AwaitEven<FastFair::kDead>(version);
}

}  // namespace

FastFair::FastFair(const IndexEnv& env, const Layout& lay, Search s, const Faults& f)
    : env_(env), lay_(lay), search_(s), faults_(f) {}

std::string FastFair::Where(uint64_t raw) const { return sorted_node::NodeWhere("fastfair", raw); }

void FastFair::InitNode(Header* x, uint32_t level, uint64_t leftmost, uint64_t sibling, bool has_low,
                        Key low) {
  // Field by field: a 64-byte-aligned Header passed by value draws an ABI
  // note from GCC. The node is not linked yet: no order matters.
  pm::store(&x->version, uint64_t{0});
  pm::store(&x->tag, kNodeTag);
  pm::store(&x->count, 0u);
  pm::store(&x->level, level);
  pm::store(&x->sibling, sibling);
  pm::store(&x->leftmost, leftmost);
  pm::store(&x->low, has_low ? low : 0);
  pm::store(&x->has_low, uint64_t{has_low ? 1u : 0u});
  pm::store(&x->pad, uint64_t{0});
}

// ------------------------------------------------------------------ search

uint32_t FastFair::LowerBound(Header* x, uint32_t n, Key k) const {
  const Rec* r = R(x);
  switch (search_) {
    case Search::kBinary:
      return sorted_node::BinaryLowerBound(n, k, [r](uint32_t i) { return Ld(r[i].key); });
    case Search::kSentinel:
      // Algorithm 1 of paper 002 (sentinels: each line's first key).
      return sorted_node::SentinelLowerBound(S(x), n, k, [r](uint32_t i) { return Ld(r[i].key); });
    case Search::kLinear:
      break;
  }
  for (uint32_t i = 0; i < n; ++i)
    if (Ld(r[i].key) >= k) return i;
  return n;
}

uint32_t FastFair::FingerprintFind(Header* x, uint32_t n, Key k) const {
  const uint8_t fp = common::Fingerprint(k);
  const uint8_t* f = F(x);
  const Rec* r = R(x);
  for (uint32_t base = 0; base < n; base += 16) {
    uint32_t m = sorted_node::FingerprintMatch16(f, base, n, fp);
    while (m != 0) {
      const uint32_t i = base + static_cast<uint32_t>(__builtin_ctz(m));
      if (Ld(r[i].key) == k) return i;
      m &= m - 1;
    }
  }
  return n;
}

uint64_t FastFair::ChildAt(Header* x, uint32_t n, uint32_t p, Key k) const {
  const Rec* r = R(x);
  if (p < n && Ld(r[p].key) == k) return Ld(r[p].val);
  return p == 0 ? Ld(x->leftmost) : Ld(r[p - 1].val);
}

uint64_t FastFair::MoveRight(Header* x, uint32_t n, uint32_t p, Key k) const {
  // Only a key above every key of x can belong to the right neighbour
  // (p = n: the search found no key >= k), so no other line is read.
  if (p < n) return 0;
  return sorted_node::RightOf(x, k, [this](uint64_t raw) { return H(raw); });
}

uint64_t FastFair::FindLeaf(Key k, uint64_t* version) const {
  uint64_t raw = env_.pool->root(0);
  for (;;) {
    Header* x = H(raw);
    const uint64_t v = AwaitEven(x->version);
    if (v == kDead) {  // merged away: start again (the parent no longer names it)
      raw = env_.pool->root(0);
      continue;
    }
    const uint32_t n = std::min(Ld32(x->count), lay_.cap);
    const uint32_t level = Ld32(x->level);
    const uint32_t p = LowerBound(x, n, k);
    const uint64_t right = MoveRight(x, n, p, k);
    const uint64_t child = (right == 0 && level > 0) ? ChildAt(x, n, p, k) : 0;
    if (!Unchanged(x->version, v)) continue;  // a writer changed x: read it again
    if (right != 0) {
      raw = right;
    } else if (level == 0) {
      *version = v;
      return raw;
    } else {
      raw = child;
    }
  }
}

std::optional<Value> FastFair::lookup(Key k) {
  alloc::Allocator::EpochGuard eg(*env_.alloc);
  for (;;) {
    uint64_t v = 0;
    Header* x = H(FindLeaf(k, &v));
    const uint32_t n = std::min(Ld32(x->count), lay_.cap);
    const uint32_t p = lay_.fingerprints ? FingerprintFind(x, n, k) : LowerBound(x, n, k);
    const bool found = p < n && Ld(R(x)[p].key) == k;
    const uint64_t val = found ? Ld(R(x)[p].val) : 0;
    if (!Unchanged(x->version, v)) continue;
    if (!found) return std::nullopt;
    return val;
  }
}

size_t FastFair::scan(Key from, size_t n, KV* out) {
  if (n == 0) return 0;
  alloc::Allocator::EpochGuard eg(*env_.alloc);
  size_t got = 0;
  Key cursor = from;
  bool inclusive = true;
  uint64_t v = 0;
  uint64_t raw = FindLeaf(from, &v);
  std::vector<KV> batch;
  while (raw != 0 && got < n) {
    Header* x = H(raw);
    uint64_t next = 0;
    for (;;) {
      v = AwaitEven(x->version);
      if (v == kDead) break;
      batch.clear();
      const uint32_t cnt = std::min(Ld32(x->count), lay_.cap);
      const Rec* r = R(x);
      for (uint32_t i = 0; i < cnt && batch.size() < n - got; ++i) {
        const Key key = Ld(r[i].key);
        if (key > cursor || (inclusive && key == cursor)) batch.push_back({key, Ld(r[i].val)});
      }
      next = Ld(x->sibling, std::memory_order_acquire);
      if (Unchanged(x->version, v)) break;
    }
    if (v == kDead) {  // merged into its left neighbour: find the cursor's leaf again
      raw = FindLeaf(cursor, &v);
      continue;
    }
    for (const KV& kv : batch) {
      out[got++] = kv;
      cursor = kv.key;
      inclusive = false;
    }
    raw = next;
  }
  return got;
}

// ------------------------------------------------------------------ writers

bool FastFair::TryLock(Header* x, uint64_t v) {
  uint64_t expected = v;
  if ((v & 1) != 0 || !pm::compare_exchange(&x->version, expected, v + 1)) return false;
#if !defined(PMINDEX_TSAN)
  // Orders the node's changes after the odd version (seqlock writer).
  std::atomic_thread_fence(std::memory_order_release);
#endif
  return true;
}

void FastFair::Lock(Header* x) {
  for (;;) {
    const uint64_t v = AwaitEven(x->version);
    PMINDEX_CHECK(v != kDead, "fastfair: a writer locks a node merged away");
    if (TryLock(x, v)) return;
  }
}

void FastFair::Unlock(Header* x, bool changed) {
  const uint64_t held = Ld(x->version);  // odd: ours
  pm::store(&x->version, changed ? held + 1 : held - 1, std::memory_order_release);
}

void FastFair::SetAux(Header* x, uint32_t from) {
  const uint32_t n = x->count;
  const Rec* r = R(x);
  // Not flushed: rebuilt from the records by recovery (paper 002, III).
  if (lay_.sentinel) {
    uint64_t* s = S(x);
    const uint32_t lines = (n + kRecsPerLine - 1) / kRecsPerLine;
    for (uint32_t l = LineOf(from); l < lines; ++l) pm::store(&s[l], r[l * kRecsPerLine].key);
  } else if (lay_.fingerprints) {
    uint8_t* f = F(x);
    for (uint32_t i = from; i < n; ++i) pm::store(&f[i], common::Fingerprint(r[i].key));
  }
}

void FastFair::ShiftInsert(Header* x, uint32_t p, Key k, uint64_t v) {
  const uint32_t n = x->count;
  PMINDEX_CHECK(n < lay_.cap && p <= n, "fastfair: shift insert into a full node");
  Rec* r = R(x);
  if (p < n) {
    // The last record copied into the free slot past the count (value,
    // then key), durable before the count makes the slot visible; the
    // count durable before any visible slot changes.
    pm::store(&r[n].val, r[n - 1].val);
    pm::store(&r[n].key, r[n - 1].key);
    pm::flush(&r[n], sizeof(Rec));
    pm::fence();
    pm::store(&x->count, n + 1);
    pm::flush(&x->count, sizeof(uint32_t));
    pm::fence();
    // Shift right, from the end: value first, then key. Mid-record, slot
    // j shows the key of its right neighbour (a copy already in place),
    // and the right one of two equal keys is the valid one.
    for (uint32_t j = n - 1; j > p; --j) {
      if (LineOf(j) != LineOf(j + 1) && j + 1 != n) {
        pm::flush(&r[j + 1], sizeof(Rec));  // the line we leave, durable first
        pm::fence();
      }
      pm::store(&r[j].val, r[j - 1].val);
      pm::store(&r[j].key, r[j - 1].key);
    }
    if (LineOf(p) != LineOf(p + 1) && p + 1 != n) {
      pm::flush(&r[p + 1], sizeof(Rec));
      pm::fence();
    }
    // The new record: its key store commits the insert.
    pm::store(&r[p].val, v);
    pm::store(&r[p].key, k);
    pm::flush(&r[p], sizeof(Rec));
    pm::fence();
  } else {
    // Append: the record, then the count that makes it visible.
    pm::store(&r[n].val, v);
    pm::store(&r[n].key, k);
    pm::flush(&r[n], sizeof(Rec));
    pm::fence();
    pm::store(&x->count, n + 1);
    pm::flush(&x->count, sizeof(uint32_t));
    pm::fence();
  }
  SetAux(x, p);
}

void FastFair::ShiftDelete(Header* x, uint32_t p) {
  const uint32_t n = x->count;
  PMINDEX_CHECK(p < n, "fastfair: shift delete past the count");
  Rec* r = R(x);
  // Shift left: key first, then value. The first key store (k[p+1] over
  // k[p]) commits the delete; mid-record, slot j shows its right
  // neighbour's key, and the right one of two equal keys is the valid one.
  for (uint32_t j = p; j + 1 < n; ++j) {
    if (j > p && LineOf(j) != LineOf(j - 1)) {
      pm::flush(&r[j - 1], sizeof(Rec));  // the line we leave, durable first
      pm::fence();
    }
    pm::store(&r[j].key, r[j + 1].key);
    pm::store(&r[j].val, r[j + 1].val);
  }
  if (p + 1 < n) {
    if (!faults_.delete_skips_last_flush) pm::flush(&r[n - 2], sizeof(Rec));
    pm::fence();
  }
  // Until the count drops, slots n-2 and n-1 are an equal pair.
  pm::store(&x->count, n - 1);
  pm::flush(&x->count, sizeof(uint32_t));
  pm::fence();
  SetAux(x, p);
}

Key FastFair::Split(uint64_t x_raw, uint64_t fresh) {
  Header* x = H(x_raw);
  Header* y = H(fresh);
  const uint32_t n = x->count;
  const uint32_t m = n / 2;
  const Rec* xr = R(x);
  Rec* yr = R(y);
  const Key sep = xr[m].key;
  // The new right node: records m.. of a leaf; of an inner node, record
  // m's child becomes its leftmost child and its key moves up.
  const bool leaf = x->level == 0;
  InitNode(y, x->level, leaf ? 0 : xr[m].val, x->sibling, true, sep);
  pm::store(&y->version, uint64_t{1});  // locked: the caller inserts into it before readers may
  const uint32_t from = leaf ? m : m + 1;
  for (uint32_t i = from; i < n; ++i) pm::store(&yr[i - from], xr[i]);
  pm::store(&y->count, n - from);
  SetAux(y, 0);
  pm::flush(y, sizeof(Header));
  if (n > from) pm::flush(yr, (n - from) * sizeof(Rec));
  pm::fence();  // the new node durable before the link
  // FAIR: the sibling pointer links y (from now on x's records >= sep are
  // stale copies, which recovery cuts off), then the count drops. Both in
  // line 0, which reaches PM in store order: one flush.
  pm::store(&x->sibling, fresh, std::memory_order_release);
  pm::store(&x->count, m);
  pm::flush(&x->sibling, sizeof(uint64_t));
  pm::fence();
  return sep;
}

void FastFair::NewRoot(uint64_t left, Key sep, uint64_t right, uint64_t fresh) {
  Header* r = H(fresh);
  if (faults_.root_before_node) env_.pool->WriteRoot(0, fresh);
  InitNode(r, H(left)->level + 1, left, 0, false, 0);
  pm::store(&R(r)[0], Rec{sep, right});
  pm::store(&r->count, 1u);
  SetAux(r, 0);
  pm::flush(r, sizeof(Header));
  pm::flush(R(r), sizeof(Rec));
  pm::fence();  // the new root durable before the root slot names it
  if (!faults_.root_before_node) env_.pool->WriteRoot(0, fresh);
}

Status FastFair::LeafOp(Header* leaf, Op op, Key k, Value v, bool* changed, bool* full) {
  const uint32_t n = leaf->count;
  const uint32_t p = LowerBound(leaf, n, k);
  const bool found = p < n && R(leaf)[p].key == k;
  if (op == Op::kRemove) {
    if (!found) return Status::NotFound();
    ShiftDelete(leaf, p);
    *changed = true;
    return Status::OK();
  }
  if (found) {
    if (op == Op::kInsert) return Status::AlreadyExists();
    pm::store(&R(leaf)[p].val, v, std::memory_order_release);  // one 8-byte store
    pm::flush(&R(leaf)[p].val, sizeof(uint64_t));
    pm::fence();
    *changed = true;
    return Status::OK();
  }
  if (op == Op::kUpdate) return Status::NotFound();
  if (n == lay_.cap) {
    *full = true;
    return Status::OK();
  }
  ShiftInsert(leaf, p, k, v);
  *changed = true;
  return Status::OK();
}

Status FastFair::Write(Op op, Key k, Value v) {
  alloc::Allocator::EpochGuard eg(*env_.alloc);
  for (;;) {
    uint64_t ver = 0;
    const uint64_t raw = FindLeaf(k, &ver);
    Header* leaf = H(raw);
    // Unchanged since the descent chose it, so still k's leaf.
    if (!TryLock(leaf, ver)) continue;
    bool changed = false, full = false;
    const Status s = LeafOp(leaf, op, k, v, &changed, &full);
    const bool merge = changed && op == Op::kRemove && Underfull(leaf) && raw != env_.pool->root(0);
    Unlock(leaf, changed);
    if (full) return SplitInsert(op, k, v);
    if (merge) Rebalance(k);
    return s;
  }
}

uint64_t FastFair::Descend(Key k, bool lock_leaf, uint64_t* path, uint32_t* depth) {
  *depth = 0;
  uint64_t raw = env_.pool->root(0);
  for (;;) {
    Header* x = H(raw);
    if (x->level == 0) {  // a node's level never changes
      // A leaf's sibling changes only under smo_mu_; its records under its lock.
      if (lock_leaf) Lock(x);
      const uint32_t n = lock_leaf ? x->count : std::min(Ld32(x->count), lay_.cap);
      const uint64_t right = MoveRight(x, n, LowerBound(x, n, k), k);
      if (right == 0) return raw;
      if (lock_leaf) Unlock(x, false);
      raw = right;
      continue;
    }
    // Inner nodes change only under smo_mu_, which the caller holds.
    const uint32_t n = x->count;
    const uint32_t p = LowerBound(x, n, k);
    if (uint64_t right = MoveRight(x, n, p, k)) {
      raw = right;
      continue;
    }
    PMINDEX_CHECK(*depth < kMaxHeight, "fastfair: tree deeper than %u", kMaxHeight);
    path[(*depth)++] = raw;
    raw = ChildAt(x, n, p, k);
  }
}

Status FastFair::SplitInsert(Op op, Key k, Value v) {
  std::lock_guard g(smo_mu_);
  uint64_t path[kMaxHeight];
  uint32_t depth = 0;
  const uint64_t raw = Descend(k, true, path, &depth);
  Header* leaf = H(raw);
  // Another writer may have changed the leaf since it was found full.
  bool changed = false, full = false;
  const Status s = LeafOp(leaf, op, k, v, &changed, &full);
  if (!full) {
    Unlock(leaf, changed);
    return s;
  }
  // Splits: the leaf, each full ancestor, and a new root if they all are.
  // Every node is allocated first, so OutOfSpace changes nothing.
  uint32_t need = 1;
  int32_t d = static_cast<int32_t>(depth) - 1;
  while (d >= 0 && H(path[d])->count == lay_.cap) {
    ++need;
    --d;
  }
  if (d < 0) ++need;
  uint64_t fresh[kMaxHeight + 2];
  for (uint32_t i = 0; i < need; ++i) {
    Result<PPtr> a = env_.alloc->Alloc(lay_.bytes);
    if (!a.ok()) {
      for (uint32_t j = 0; j < i; ++j) env_.alloc->Free(PPtr(fresh[j]));
      Unlock(leaf, false);
      return a.status();
    }
    fresh[i] = a.value().raw();
  }
  uint32_t used = 0;
  uint64_t right = fresh[used++];
  Key sep = Split(raw, right);
  Header* t = k >= sep ? H(right) : leaf;
  ShiftInsert(t, LowerBound(t, t->count, k), k, v);
  Unlock(H(right), true);
  Unlock(leaf, true);
  for (d = static_cast<int32_t>(depth) - 1;; --d) {
    if (d < 0) {
      NewRoot(env_.pool->root(0), sep, right, fresh[used++]);
      break;
    }
    Header* par = H(path[d]);
    Lock(par);
    if (par->count < lay_.cap) {
      ShiftInsert(par, LowerBound(par, par->count, sep), sep, right);
      Unlock(par, true);
      break;
    }
    const uint64_t pr = fresh[used++];
    const Key psep = Split(path[d], pr);
    Header* pt = sep >= psep ? H(pr) : par;
    ShiftInsert(pt, LowerBound(pt, pt->count, sep), sep, right);
    Unlock(H(pr), true);
    Unlock(par, true);
    sep = psep;
    right = pr;
  }
  PMINDEX_CHECK(used == need, "fastfair: split used %u of %u new nodes", used, need);
  return Status::OK();
}

// ------------------------------------------------------------------ merges

void FastFair::Rebalance(Key k) {
  std::lock_guard g(smo_mu_);
  uint64_t path[kMaxHeight];
  uint32_t depth = 0;
  uint64_t node = Descend(k, false, path, &depth);
  for (int32_t d = static_cast<int32_t>(depth) - 1; d >= 0; --d) {
    if (!MergeWithNeighbour(path[d], node)) break;
    node = path[d];  // the parent lost a separator: it may be underfull now
  }
  CollapseRoot();
}

bool FastFair::MergeWithNeighbour(uint64_t parent, uint64_t node) {
  Header* par = H(parent);
  const uint32_t pc = par->count;
  const Rec* pr = R(par);
  // Where the parent names node: -1 = its leftmost child. A node no parent
  // names (a split or merge a crash cut short) is left alone.
  int64_t at = -2;
  if (par->leftmost == node) {
    at = -1;
  } else {
    for (uint32_t i = 0; i < pc && at == -2; ++i)
      if (pr[i].val == node) at = i;
  }
  if (at == -2 || (at == -1 && pc == 0)) return false;
  // The pair (left, right) of neighbours under the parent, and the
  // separator that names right.
  const uint32_t sep_idx = at == -1 ? 0 : static_cast<uint32_t>(at);
  const uint64_t r_raw = pr[sep_idx].val;
  const uint64_t l_raw = sep_idx == 0 ? par->leftmost : pr[sep_idx - 1].val;
  Header* l = H(l_raw);
  Header* r = H(r_raw);
  if (l->sibling != r_raw) return false;  // an unnamed node between them
  Lock(l);
  Lock(r);
  const uint32_t total = l->count + r->count + (l->level > 0 ? 1 : 0);
  // Rechecked under the locks (a writer may have refilled node), and only
  // when the merged node keeps room, so that deletes and inserts at one
  // boundary do not merge and split in turn.
  if (!Underfull(H(node)) || total * 4 > lay_.cap * 3) {
    Unlock(r, false);
    Unlock(l, false);
    return false;
  }
  Merge(l_raw, r_raw, parent, sep_idx);
  return parent != env_.pool->root(0) && Underfull(par);
}

void FastFair::Merge(uint64_t l_raw, uint64_t r_raw, uint64_t p_raw, uint32_t sep_idx) {
  Header* l = H(l_raw);
  Header* r = H(r_raw);
  Header* par = H(p_raw);
  Rec* lr = R(l);
  const Rec* rr = R(r);
  const uint32_t nl = l->count;
  const uint64_t after = r->sibling;
  if (faults_.merge_links_first) {
    // The published bug: right is unlinked before left holds its records.
    pm::store(&l->sibling, after, std::memory_order_release);
    pm::flush(&l->sibling, sizeof(uint64_t));
    pm::fence();
  }
  // 1. Right's records (of an inner node: first its low key with its
  //    leftmost child) into left's free slots: past the count, unseen.
  uint32_t c = nl;
  auto put = [&](Key key, uint64_t val) {
    pm::store(&lr[c].key, key);
    pm::store(&lr[c].val, val);
    ++c;
  };
  if (l->level > 0) put(r->low, r->leftmost);
  for (uint32_t i = 0; i < r->count; ++i) put(rr[i].key, rr[i].val);
  // Flushed here, made durable by step 2's fences, before step 3 commits.
  if (c > nl) pm::flush(&lr[nl], (c - nl) * sizeof(Rec));
  // 2. The parent forgets right: its keys now reach it by left's sibling
  //    pointer (left's keys are all below right's low key).
  Lock(par);
  ShiftDelete(par, sep_idx);
  Unlock(par, true);
  // 3. The commit, in line 0, which reaches PM in store order: the count
  //    (alone, it is undone by recovery's cut at the sibling's low key),
  //    then the sibling pointer past right.
  pm::store(&l->count, c);
  pm::store(&l->sibling, after, std::memory_order_release);
  pm::flush(&l->count, sizeof(uint32_t));
  pm::fence();
  SetAux(l, nl);
  // 4. Right is gone: a reader holding it starts again; it is freed once
  //    no reader can hold it.
  pm::store(&r->version, kDead, std::memory_order_release);
  Unlock(l, true);
  env_.alloc->Retire(PPtr(r_raw));
}

void FastFair::CollapseRoot() {
  // An inner root left with one child (and no sibling: a root split a
  // crash cut short keeps its top level) hands the root to that child.
  for (;;) {
    const uint64_t raw = env_.pool->root(0);
    Header* x = H(raw);
    if (x->level == 0 || x->count != 0 || x->sibling != 0) return;
    Lock(x);
    env_.pool->WriteRoot(0, x->leftmost);
    pm::store(&x->version, kDead, std::memory_order_release);
    env_.alloc->Retire(PPtr(raw));
  }
}

Status FastFair::insert(Key k, Value v) { return Write(Op::kInsert, k, v); }
Status FastFair::update(Key k, Value v) { return Write(Op::kUpdate, k, v); }
Status FastFair::upsert(Key k, Value v) { return Write(Op::kUpsert, k, v); }
Status FastFair::remove(Key k) { return Write(Op::kRemove, k, 0); }

// ------------------------------------------------------------------ create, load

Result<std::unique_ptr<Index>> FastFair::Create(const IndexEnv& env, const Layout& lay, Search s,
                                                const Faults& f) {
  std::unique_ptr<FastFair> t(new FastFair(env, lay, s, f));
  Result<PPtr> root = env.alloc->Alloc(lay.bytes);
  if (!root.ok()) return root.status();
  Header* r = t->H(root.value().raw());
  t->InitNode(r, 0, 0, 0, false, 0);
  pm::flush(r, sizeof(Header));
  pm::fence();  // the empty root durable before the root slot names it
  // (Its flush-late mutant is killed: copy B durable before copy A is a
  // pair no crash leaves, which Pool::OpenImage refuses, and pmcrash fails
  // such an image inside create once a copy of slot 0 is published.)
  env.pool->WriteRoot(0, root.value().raw());
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

FastFair::~FastFair() { IgnoreError(close(), "a destructor has no caller to report to; close() returns it"); }

Status FastFair::close() {
  if (closed_ || !ready_ || abandoned()) return Status::OK();
  closed_ = true;
  std::lock_guard g(smo_mu_);
  return sorted_node::WriteContentRecord(
      env_, [this](uint64_t raw) { return H(raw); },
      [this](uint64_t raw, uint32_t level, NodeView* v) { return ViewNode(raw, level, v); });
}

Status FastFair::bulk_load(std::span<const KV> sorted, double fill) {
  std::lock_guard g(smo_mu_);
  const uint64_t old = env_.pool->root(0);
  Header* o = H(old);
  if (o->level != 0 || o->count != 0 || o->sibling != 0)
    return Status::InvalidArgument("fastfair: bulk_load needs an empty index");
  PMINDEX_RETURN_IF_ERROR(sorted_node::CheckBulkInput("fastfair", sorted, fill));
  if (sorted.empty()) return Status::OK();
  const uint32_t per = std::clamp<uint32_t>(static_cast<uint32_t>(std::lround(fill * lay_.cap)), 1, lay_.cap);
  std::vector<uint64_t> made;
  auto alloc = [&](uint64_t* raw) -> Status {
    Result<PPtr> a = env_.alloc->Alloc(lay_.bytes);
    if (!a.ok()) {
      for (uint64_t m : made) env_.alloc->Free(PPtr(m));
      return a.status();
    }
    *raw = a.value().raw();
    made.push_back(*raw);
    return Status::OK();
  };
  // One level: nodes of up to `per` records each, linked left to right.
  // items: (low key, value or child). An inner node's first item becomes
  // its leftmost child.
  std::vector<std::pair<Key, uint64_t>> items;
  items.reserve(sorted.size());
  for (const KV& kv : sorted) items.push_back({kv.key, kv.value});
  uint32_t level = 0;
  for (;;) {
    const uint32_t take = level == 0 ? per : per + 1;  // an inner node holds per + 1 children
    std::vector<std::pair<Key, uint64_t>> up;
    Header* prev = nullptr;
    for (size_t b = 0; b < items.size(); b += take) {
      const size_t e = std::min(items.size(), b + take);
      uint64_t raw = 0;
      PMINDEX_RETURN_IF_ERROR(alloc(&raw));
      Header* x = H(raw);
      const bool inner = level > 0;
      InitNode(x, level, inner ? items[b].second : 0, 0, b > 0, items[b].first);
      Rec* r = R(x);
      uint32_t c = 0;
      for (size_t i = inner ? b + 1 : b; i < e; ++i) pm::store(&r[c++], Rec{items[i].first, items[i].second});
      pm::store(&x->count, c);
      SetAux(x, 0);
      if (prev != nullptr) {
        pm::store(&prev->sibling, raw);
        pm::flush(prev, sizeof(Header));
      }
      if (c > 0) pm::flush(r, c * sizeof(Rec));
      prev = x;
      up.push_back({items[b].first, raw});
    }
    pm::flush(prev, sizeof(Header));
    items.swap(up);
    if (items.size() == 1) break;
    ++level;
  }
  pm::fence();  // the loaded tree durable before the root slot names it
  env_.pool->WriteRoot(0, items[0].second);
  env_.alloc->Free(PPtr(old));
  return Status::OK();
}

// ------------------------------------------------------------------ recovery

// Reads node `raw` of level `level` into v, with recovery's repairs
// applied to the copy (stale records of a cut-short split dropped, the
// left record of an equal-key pair dropped). Reads only.
Status FastFair::ViewNode(uint64_t raw, uint32_t level, NodeView* v) const {
  auto d = pm::Decode<Header>(*env_.pool, raw, lay_.bytes, 64, "fastfair: node");
  if (!d.ok()) return d.status();
  Header* x = d.value();
  if (x->tag != kNodeTag) return Status::Corruption(Where(raw) + " has no node tag");
  if (x->level != level) return Status::Corruption(Where(raw) + " is on the wrong level");
  if (x->count > lay_.cap) return Status::Corruption(Where(raw) + " has a count above its capacity");
  if (x->has_low > 1) return Status::Corruption(Where(raw) + " has a bad header");
  v->level = level;
  v->sibling = x->sibling;
  v->leftmost = x->leftmost;
  v->has_low = x->has_low != 0;
  v->low = x->low;
  uint32_t n = x->count;
  const Rec* r = R(x);
  if (v->sibling != 0) {
    auto s = pm::Decode<Header>(*env_.pool, v->sibling, lay_.bytes, 64, "fastfair: sibling");
    if (!s.ok()) return s.status();
    if (s.value()->tag != kNodeTag || s.value()->has_low != 1)
      return Status::Corruption(Where(raw) + ": its sibling is not a split-made node");
    const Key sl = s.value()->low;
    uint32_t t = 0;
    while (t < n && r[t].key < sl) ++t;
    n = t;
  }
  v->recs.clear();
  for (uint32_t i = 0; i < n; ++i) {
    if (i + 1 < n && r[i].key == r[i + 1].key) continue;  // half-done shift: the right one is valid
    if (!v->recs.empty() && v->recs.back().key >= r[i].key)
      return Status::Corruption(Where(raw) + ": keys not ascending");
    if (v->has_low && r[i].key < v->low) return Status::Corruption(Where(raw) + ": key below its low key");
    v->recs.push_back(r[i]);
  }
  return Status::OK();
}

Status FastFair::Validate(uint64_t root, std::vector<uint64_t>* nodes, common::ContentSum* content) const {
  auto rd = pm::Decode<Header>(*env_.pool, root, lay_.bytes, 64, "fastfair: root (root slot 0)");
  if (!rd.ok()) return rd.status();
  return sorted_node::ValidateLevels("fastfair", root, rd.value()->level, kMaxHeight,
                                     env_.pool->size() / lay_.bytes + 1,  // more nodes than fit = a cycle
                                     nodes, content, env_.pool->was_clean() && !env_.salvage,
                                     [this](uint64_t raw, uint32_t level, NodeView* v) {
                                       return ViewNode(raw, level, v);
                                     });
}

void FastFair::Repair(uint64_t raw) {
  Header* x = H(raw);
  Rec* r = R(x);
  if (x->sibling != 0 && !faults_.keep_split_copies) {
    Header* s = H(x->sibling);
    uint32_t t = 0;
    while (t < x->count && r[t].key < s->low) ++t;
    if (t < x->count) {
      // A split cut short after its link: drop the copies y holds.
      pm::store(&x->count, t);
      pm::flush(&x->count, sizeof(uint32_t));
      pm::fence();
    }
  }
  for (uint32_t i = 0; i + 1 < x->count;) {
    if (r[i].key == r[i + 1].key && !faults_.keep_duplicates) {
      ShiftDelete(x, i);  // crash-safe itself: a crash here is repaired again
    } else {
      ++i;
    }
  }
  if (x->version != 0) pm::store(&x->version, uint64_t{0});
  SetAux(x, 0);
}

Result<std::unique_ptr<Index>> FastFair::Open(const IndexEnv& env, const Layout& lay, Search s,
                                              const Faults& f) {
  std::unique_ptr<FastFair> t(new FastFair(env, lay, s, f));
  const uint64_t root = env.pool->root(0);
  std::vector<uint64_t> nodes;
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  PMINDEX_RETURN_IF_ERROR(t->Validate(root, &nodes, &content));  // reads only
  PMINDEX_RETURN_IF_ERROR(common::CheckContentRecord(*env.pool, env.salvage, content, "fastfair"));
  PMINDEX_RETURN_IF_ERROR(sorted_node::AdoptNodes(env, nodes, "fastfair"));  // no write before
  for (uint64_t n : nodes) t->Repair(n);
  pm::fence();
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

// ------------------------------------------------------------------ walks

void FastFair::WalkLevels(const std::function<void(uint64_t, Header*)>& fn) const {
  sorted_node::WalkLevels(env_.pool->root(0), [this](uint64_t raw) { return H(raw); }, fn);
}

// A node's own checks, then sorted_node::VerifyRange (its range and children).
Status FastFair::VerifyNode(uint64_t raw, uint32_t level, uint64_t* entries,
                            std::vector<uint64_t>* leaves) const {
  NodeView v;
  PMINDEX_RETURN_IF_ERROR(ViewNode(raw, level, &v));
  Header* x = H(raw);
  if (v.recs.size() != x->count) return Status::Corruption(Where(raw) + " holds stale or duplicate records");
  if (x->version & 1) return Status::Corruption(Where(raw) + " is locked");
  if (lay_.sentinel) {
    for (uint32_t l = 0; l * kRecsPerLine < x->count; ++l)
      if (S(x)[l] != R(x)[l * kRecsPerLine].key) return Status::Corruption(Where(raw) + ": stale sentinel");
  }
  if (lay_.fingerprints) {
    for (uint32_t i = 0; i < x->count; ++i)
      if (F(x)[i] != common::Fingerprint(R(x)[i].key)) return Status::Corruption(Where(raw) + ": stale fingerprint");
  }
  return sorted_node::VerifyRange("fastfair", raw, level, v, entries, leaves, [this](uint64_t y) { return H(y); },
                                  [&](uint64_t y, uint32_t l) { return VerifyNode(y, l, entries, leaves); });
}

Status FastFair::verify() {
  std::lock_guard g(smo_mu_);
  return sorted_node::VerifyTree(
      "fastfair", env_.pool->root(0), [this](uint64_t y) { return H(y); },
      [this](uint64_t y, uint32_t level, uint64_t* entries, std::vector<uint64_t>* leaves) {
        return VerifyNode(y, level, entries, leaves);
      });
}

IndexStats FastFair::stats() {
  std::lock_guard g(smo_mu_);
  IndexStats s;
  s.height = H(env_.pool->root(0))->level + 1;
  WalkLevels([&](uint64_t, Header* x) {
    s.pm_bytes += lay_.bytes;
    if (x->level == 0) {
      ++s.leaves;
      s.entries += x->count;
    } else {
      ++s.inner_nodes;
    }
  });
  return s;
}

Status FastFair::for_each_block(const std::function<void(PPtr)>& fn) {
  std::lock_guard g(smo_mu_);
  WalkLevels([&](uint64_t raw, Header*) { fn(PPtr(raw)); });
  return Status::OK();
}

// ------------------------------------------------------------------ registration

namespace {
Result<sorted_node::Config> Parse(const Options& o) { return sorted_node::ParseOptions(o, "fastfair"); }

PMINDEX_REGISTER_INDEX(fastfair, {
    .name = "fastfair",
    .persistent = true,
    .options_help =
        "node=BYTES (a multiple of 64 from 256 to 65536; default 512; the paper used 512|1024|2048|4096) "
        "sentinel=on|off (default on, off with fingerprints=on) search=linear|binary|sentinel (default sentinel "
        "if sentinel=on, else linear) fingerprints=on|off (default off: one byte per slot, for leaf lookups; "
        "needs sentinel=off)",
    .test_configs = {"node=256", "node=512,sentinel=off", "node=1024,search=binary", "node=512,fingerprints=on"},
    .validate = [](const Options& o) -> Status { return Parse(o).status(); },
    .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
      Result<sorted_node::Config> c = Parse(o);
      if (!c.ok()) return c.status();
      return FastFair::Create(env, c.value().lay, c.value().search);
    },
    .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
      Result<sorted_node::Config> c = Parse(o);
      if (!c.ok()) return c.status();
      return FastFair::Open(env, c.value().lay, c.value().search);
    },
    .marks_in_use = true,
});
}  // namespace

}  // namespace pmindex::fastfair
