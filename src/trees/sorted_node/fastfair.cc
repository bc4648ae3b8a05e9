#include "trees/sorted_node/fastfair.h"

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

void FlatSlots::Init(Header* x, uint32_t level, uint64_t leftmost, uint64_t sibling, bool has_low, Key low) {
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
  return sorted_node::LinearLowerBound(r, n, k);
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
    alloc::MeterVisit(*env_.alloc, x);
    if (x->level == 0) {  // a node's level never changes
      // A leaf's sibling changes only under mu_; its records under its lock.
      if (lock_leaf) Lock(x);
      const uint32_t n = lock_leaf ? x->count : std::min(Ld32(x->count), lay_.cap);
      const uint64_t right = MoveRight(x, n, LowerBound(x, n, k), k);
      if (right == 0) return raw;
      if (lock_leaf) Unlock(x, false);
      raw = right;
      continue;
    }
    // Inner nodes change only under mu_, which the caller holds.
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
  sync::MutexLock g(mu_);
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
  uint64_t fresh[kMaxHeight + 2];
  uint32_t need = 0;
  if (Status a = AllocSplitNodes(path, depth, fresh, &need); !a.ok()) {
    Unlock(leaf, false);
    return a;
  }
  uint32_t used = 0;
  uint64_t right = fresh[used++];
  Key sep = Split(raw, right);
  Header* t = k >= sep ? H(right) : leaf;
  ShiftInsert(t, LowerBound(t, t->count, k), k, v);
  Unlock(H(right), true);
  Unlock(leaf, true);
  for (int32_t d = static_cast<int32_t>(depth) - 1;; --d) {
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
  sync::MutexLock g(mu_);
  uint64_t path[kMaxHeight];
  uint32_t depth = 0;
  const uint64_t node = Descend(k, false, path, &depth);
  MergeUpward(path, depth, node);
}

bool FastFair::MergeIfRoom(uint64_t node, uint64_t l_raw, uint64_t r_raw, uint64_t parent,
                           uint32_t sep_idx) {
  Header* l = H(l_raw);
  Header* r = H(r_raw);
  Lock(l);
  Lock(r);
  // Rechecked under the locks: a writer may have refilled node.
  if (!Underfull(H(node)) || !MergeKeepsRoom(l, r)) {
    Unlock(r, false);
    Unlock(l, false);
    return false;
  }
  Merge(l_raw, r_raw, parent, sep_idx);
  return true;
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

// ------------------------------------------------------------------ recovery

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

// ------------------------------------------------------------------ registration

// (An IndexInfo list-initialized from the engine's entry.)
PMINDEX_REGISTER_INDEX(fastfair, {sorted_node::RegistryEntry<FastFair>(
                                     "node=BYTES (a multiple of 64 from 256 to 65536; default 512; "
                                     "the paper used 512|1024|2048|4096) "
                                     "sentinel=on|off (default on, off with fingerprints=on) "
                                     "search=linear|binary|sentinel (default sentinel "
                                     "if sentinel=on, else linear) fingerprints=on|off (default "
                                     "off: one byte per slot, for leaf lookups; "
                                     "needs sentinel=off)")});

}  // namespace pmindex::fastfair
