#include "trees/sorted_node/circtree.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "common/fingerprint.h"
#include "pm/pptr_decode.h"
#include "sync/version_lock.h"
#include "util/check.h"

namespace pmindex::circtree {

namespace {

using sorted_node::Ld;

inline uint32_t LineOf(uint32_t i) { return i / CircTree::kRecsPerLine; }

}  // namespace

void RingSlots::Init(Header* x, uint32_t level, uint64_t leftmost, uint64_t sibling, bool has_low, Key low) {
  // Not linked yet: no order matters.
  pm::store(&x->version, uint64_t{0});
  pm::store(&x->tag, kNodeTag);
  pm::store(&x->meta, Meta{}.Pack());
  pm::store(&x->level, level);
  pm::store(&x->pad, 0u);
  pm::store(&x->sibling, sibling);
  pm::store(&x->leftmost, leftmost);
  pm::store(&x->low, has_low ? low : 0);
  pm::store(&x->has_low, uint64_t{has_low ? 1u : 0u});
}

// ------------------------------------------------------------------ search

uint32_t CircTree::LowerBound(Header* x, Meta m, Key k) const {
  const Rec* r = R(x);
  const uint32_t n = m.count;
  auto key = [&](uint32_t i) { return Ld(r[Phys(m.start, i)].key); };
  switch (search_) {
    case Search::kBinary:
      return sorted_node::BinaryLowerBound(n, k, key);
    case Search::kSentinel:
      // Algorithm 1 of paper 002 over the ring's logical lines (sentinels:
      // each logical line's first key).
      return sorted_node::SentinelLowerBound(S(x), n, k, key);
    case Search::kLinear:
      break;
  }
  // Linear from the logical first record: two runs of physical slots,
  // [start, cap) and then [0, the rest).
  const uint32_t first = std::min(n, lay_.cap - m.start);
  const uint32_t p = sorted_node::LinearLowerBound(r + m.start, first, k);
  if (p < first || first == n) return p;
  return first + sorted_node::LinearLowerBound(r, n - first, k);
}

uint32_t CircTree::FingerprintFind(Header* x, Meta m, Key k) const {
  const uint8_t fp = common::Fingerprint(k);
  const uint8_t* f = F(x);
  const Rec* r = R(x);
  const uint32_t cap = lay_.cap;
  for (uint32_t base = 0; base < cap; base += 16) {
    // Physical slots: a match counts only if its slot is in the ring's range.
    uint32_t mask = sorted_node::FingerprintMatch16(f, base, cap, fp);
    while (mask != 0) {
      const uint32_t s = base + static_cast<uint32_t>(__builtin_ctz(mask));
      mask &= mask - 1;
      const uint32_t i = s >= m.start ? s - m.start : s + cap - m.start;  // logical index
      if (i < m.count && Ld(r[s].key) == k) return i;
    }
  }
  return m.count;
}

uint64_t CircTree::ChildAt(Header* x, Meta m, uint32_t p, Key k) const {
  const Rec* r = R(x);
  if (p < m.count && Ld(r[Phys(m.start, p)].key) == k) return Ld(r[Phys(m.start, p)].val);
  return p == 0 ? Ld(x->leftmost) : Ld(r[Phys(m.start, p - 1)].val);
}

uint64_t CircTree::MoveRight(Header* x, Meta m, uint32_t p, Key k) const {
  // Only a key above every key of x can belong to the right neighbour.
  if (p < m.count) return 0;
  return sorted_node::RightOf(x, k, [this](uint64_t raw) { return H(raw); });
}

// ------------------------------------------------------------------ writers

void CircTree::BeginWrite(Header* x) {
#if defined(PMINDEX_TSAN)
  pm::store(&x->version, x->version + 1, std::memory_order_release);
#else
  pm::store(&x->version, x->version + 1, std::memory_order_relaxed);
  // Orders the node's changes after the odd version (seqlock writer).
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

void CircTree::EndWrite(Header* x) { pm::store(&x->version, x->version + 1, std::memory_order_release); }

void CircTree::StoreMeta(Header* x, Meta m, pm::Site site) {
  pm::store(&x->meta, m.Pack(), std::memory_order_release);
  pm::flush(&x->meta, sizeof(uint64_t), site);
  pm::fence(site);
}

// Moves record `from` into slot `to` with the value stored first, then
// the key: until the key store, slot `to` shows its old key, which its
// complete neighbour on the side the records come from also holds.
static inline void MoveValFirst(Rec* r, uint32_t to, uint32_t from) {
  pm::store(&r[to].val, r[from].val);
  pm::store(&r[to].key, r[from].key);
}
// Moves record `from` into slot `to`, key first (a delete's shift): the
// half-moved slot shows the key of record `from`, whose slot is complete.
static inline void MoveKeyFirst(Rec* r, uint32_t to, uint32_t from) {
  pm::store(&r[to].key, r[from].key);
  pm::store(&r[to].val, r[from].val);
}

void CircTree::ShiftInsert(Header* x, uint32_t p, Key k, uint64_t v) {
  const Meta m = Meta::Unpack(x->meta);
  const uint32_t n = m.count;
  PMINDEX_CHECK(n < lay_.cap && p <= n, "circtree: shift insert into a full node");
  Rec* r = R(x);
  const bool left = p < n - p;  // the records left of p are fewer: they move left
  if (!left && p == n) {
    // Append: the record in the free slot after the ring's range, then the
    // metadata word that takes it in.
    const uint32_t s = Phys(m.start, n);
    pm::store(&r[s].val, v);
    pm::store(&r[s].key, k);
    pm::flush(&r[s], sizeof(Rec));
    pm::fence();
    StoreMeta(x, Meta{m.start, n + 1, m.left});
  } else if (left && p == 0) {
    // Prepend: the record in the free slot before the range, then the
    // metadata word (start one slot left, count + 1) that takes it in.
    const uint32_t s = Phys(m.start, -1);
    pm::store(&r[s].val, v);
    pm::store(&r[s].key, k);
    pm::flush(&r[s], sizeof(Rec));
    pm::fence();
    StoreMeta(x, Meta{s, n + 1, m.left});
  } else if (!left) {
    ShiftRightAndInsert(x, m, p, k, v);
  } else {
    ShiftLeftAndInsert(x, m, p, k, v);
  }
  if (left) {
    SetAux(x, p, 0, p + 1);
  } else {
    SetAux(x, p, p, n + 1);
  }
}

void CircTree::ShiftRightAndInsert(Header* x, Meta m, uint32_t p, Key k, uint64_t v) {
  const uint32_t n = m.count;
  Rec* r = R(x);
  // Right side moves right. The last record is copied into the free slot
  // after the range, durable before the metadata word takes the slot in
  // (side = right: of the equal pair now at the end the right one is
  // valid), and that word durable before any slot of the range changes.
  const uint32_t st = m.start;
  MoveValFirst(r, Phys(st, n), Phys(st, n - 1));
  pm::flush(&r[Phys(st, n)], sizeof(Rec));
  pm::fence();
  StoreMeta(x, Meta{st, n + 1, false});
  // From the end: value first, then key. Mid-record, slot j shows the
  // key of slot j+1, whose record is complete; the right one of two
  // equal keys is the valid one. A line left is made durable first.
  for (uint32_t j = n - 1; j > p; --j) {
    if (LineOf(Phys(st, j)) != LineOf(Phys(st, j + 1)) && j + 1 != n) {
      pm::flush(&r[Phys(st, j + 1)], sizeof(Rec));
      pm::fence();
    }
    MoveValFirst(r, Phys(st, j), Phys(st, j - 1));
  }
  if (LineOf(Phys(st, p)) != LineOf(Phys(st, p + 1)) && p + 1 != n) {
    pm::flush(&r[Phys(st, p + 1)], sizeof(Rec));
    pm::fence();
  }
  // The new record: its key store commits the insert.
  const uint32_t s = Phys(st, p);
  pm::store(&r[s].val, v);
  pm::store(&r[s].key, k);
  pm::flush(&r[s], sizeof(Rec));
  pm::fence();
}

void CircTree::ShiftLeftAndInsert(Header* x, Meta m, uint32_t p, Key k, uint64_t v) {
  const uint32_t n = m.count;
  Rec* r = R(x);
  // Left side moves left: the mirror image. The first record is copied
  // into the free slot before the range, then the metadata word moves
  // start onto it (side = left: the left one of an equal pair is valid).
  const uint32_t st = Phys(m.start, -1);  // the new start
  MoveValFirst(r, st, m.start);
  pm::flush(&r[st], sizeof(Rec));
  pm::fence();
  StoreMeta(x, Meta{st, n + 1, true});
  // In the new numbering: record j+1 into slot j for j = 1 .. p-1, value
  // first; mid-record slot j shows the key of slot j-1, complete.
  for (uint32_t j = 1; j < p; ++j) {
    if (LineOf(Phys(st, j)) != LineOf(Phys(st, j - 1)) && j - 1 != 0) {
      pm::flush(&r[Phys(st, j - 1)], sizeof(Rec));
      pm::fence();
    }
    MoveValFirst(r, Phys(st, j), Phys(st, j + 1));
  }
  if (LineOf(Phys(st, p)) != LineOf(Phys(st, p - 1)) && p - 1 != 0) {
    pm::flush(&r[Phys(st, p - 1)], sizeof(Rec));
    pm::fence();
  }
  const uint32_t s = Phys(st, p);
  pm::store(&r[s].val, v);
  pm::store(&r[s].key, k);  // commits the insert
  pm::flush(&r[s], sizeof(Rec));
  pm::fence();
}

void CircTree::ShiftDelete(Header* x, uint32_t p, bool left) {
  Meta m = Meta::Unpack(x->meta);
  const uint32_t n = m.count;
  PMINDEX_CHECK(p < n, "circtree: shift delete past the count");
  Rec* r = R(x);
  const uint32_t st = m.start;
  const uint32_t moves = left ? p : n - 1 - p;
  if (moves > 0 && m.left != left) {
    // The side bit must name this shift's valid side before any equal pair
    // can appear (none exists between operations).
    m.left = left;
    StoreMeta(x, m);
  }
  if (!left) {
    // Records p+1 .. n-1 move one slot left, key first: the first key store
    // commits the delete; mid-record, slot j shows the key of slot j+1,
    // which is complete, and the right one of two equal keys is valid.
    for (uint32_t j = p; j + 1 < n; ++j) {
      if (j > p && LineOf(Phys(st, j)) != LineOf(Phys(st, j - 1))) {
        pm::flush(&r[Phys(st, j - 1)], sizeof(Rec));
        pm::fence();
      }
      MoveKeyFirst(r, Phys(st, j), Phys(st, j + 1));
    }
    if (moves > 0) {
      pm::flush(&r[Phys(st, n - 2)], sizeof(Rec));
      pm::fence();
    }
    // Until the metadata word drops the last slot, slots n-2 and n-1 are
    // an equal pair.
    StoreMeta(x, Meta{st, n - 1, m.left});
    SetAux(x, p, p, n - 1);
  } else {
    // Records 0 .. p-1 move one slot right, from p down, key first; the
    // left one of two equal keys is valid.
    for (uint32_t j = p; j > 0; --j) {
      if (j < p && LineOf(Phys(st, j)) != LineOf(Phys(st, j + 1))) {
        pm::flush(&r[Phys(st, j + 1)], sizeof(Rec));
        pm::fence();
      }
      MoveKeyFirst(r, Phys(st, j), Phys(st, j - 1));
    }
    if (moves > 0) {
      pm::flush(&r[Phys(st, 1)], sizeof(Rec));
      pm::fence();
    }
    // Until the metadata word moves start past slot 0, slots 0 and 1 are
    // an equal pair.
    StoreMeta(x, Meta{Phys(st, 1), n - 1, m.left});
    SetAux(x, p, 0, p);
  }
}

Key CircTree::Split(uint64_t x_raw, uint64_t fresh) {
  Header* x = H(x_raw);
  Header* y = H(fresh);
  const Meta xm = Meta::Unpack(x->meta);
  const uint32_t n = xm.count;
  const uint32_t m = n / 2;
  const Rec* xr = R(x);
  Rec* yr = R(y);
  const Key sep = xr[Phys(xm.start, m)].key;
  // The new right node: records m.. of a leaf; of an inner node, record
  // m's child becomes its leftmost child and its key moves up. y's ring
  // starts at slot 0.
  const bool leaf = x->level == 0;
  InitNode(y, x->level, leaf ? 0 : xr[Phys(xm.start, m)].val, x->sibling, true, sep);
  const uint32_t from = leaf ? m : m + 1;
  for (uint32_t i = from; i < n; ++i) pm::store(&yr[i - from], xr[Phys(xm.start, i)]);
  pm::store(&y->meta, Meta{0, n - from, false}.Pack());
  SetAux(y, 0, 0, n - from);
  pm::flush(y, sizeof(Header));
  if (n > from) pm::flush(yr, (n - from) * sizeof(Rec));
  pm::fence();  // the new node durable before the link
  // FAIR: the sibling pointer links y (from now on x's records >= sep are
  // stale copies, which recovery cuts off), then the metadata word drops
  // them. Both in line 0, which reaches PM in store order: one flush.
  BeginWrite(x);
  pm::store(&x->sibling, fresh, std::memory_order_release);
  pm::store(&x->meta, Meta{xm.start, m, xm.left}.Pack(), std::memory_order_release);
  pm::flush(&x->sibling, sizeof(uint64_t));
  pm::fence();
  EndWrite(x);
  return sep;
}

void CircTree::NewRoot(uint64_t left, Key sep, uint64_t right, uint64_t fresh) {
  Header* r = H(fresh);
  InitNode(r, H(left)->level + 1, left, 0, false, 0);
  pm::store(&R(r)[0], Rec{sep, right});
  pm::store(&r->meta, Meta{0, 1, false}.Pack());
  SetAux(r, 0, 0, 1);
  pm::flush(r, sizeof(Header));
  pm::flush(R(r), sizeof(Rec));
  pm::fence();  // the new root durable before the root slot names it
  env_.pool->WriteRoot(0, fresh);
}

Status CircTree::Write(Op op, Key k, Value v) {
  alloc::Allocator::EpochGuard eg(*env_.alloc);
  sync::MutexLock g(mu_);
  uint64_t path[kMaxHeight];
  uint32_t depth = 0;
  const uint64_t raw = DescendToLeaf(k, path, &depth);
  Header* leaf = H(raw);
  const Meta lm = Meta::Unpack(leaf->meta);
  const uint32_t n = lm.count;
  const uint32_t p = LowerBound(leaf, lm, k);
  Rec* slot = &R(leaf)[Phys(lm.start, p < n ? p : 0)];
  const bool found = p < n && slot->key == k;
  if (op == Op::kRemove) {
    if (!found) return Status::NotFound();
    // The shorter side moves; on a tie, the side the metadata word names
    // (no extra persist to change it).
    BeginWrite(leaf);
    ShiftDelete(leaf, p, DeleteSide(lm, p));
    EndWrite(leaf);
    // One writer at a time (mu_): the path the descent took is still the tree's.
    if (Underfull(leaf) && raw != env_.pool->root(0)) MergeUpward(path, depth, raw);
    return Status::OK();
  }
  if (found) {
    if (op == Op::kInsert) return Status::AlreadyExists();
    pm::store(&slot->val, v, std::memory_order_release);  // one 8-byte store
    pm::flush(&slot->val, sizeof(uint64_t));
    pm::fence();
    return Status::OK();
  }
  if (op == Op::kUpdate) return Status::NotFound();
  if (n < lay_.cap) {
    BeginWrite(leaf);
    ShiftInsert(leaf, p, k, v);
    EndWrite(leaf);
    return Status::OK();
  }
  return SplitInsert(raw, path, depth, k, v);
}

uint64_t CircTree::DescendToLeaf(Key k, uint64_t* path, uint32_t* depth) {
  uint64_t raw = env_.pool->root(0);
  for (;;) {
    Header* x = H(raw);
    alloc::MeterVisit(*env_.alloc, x);
    const Meta m = Meta::Unpack(x->meta);
    const uint32_t xp = LowerBound(x, m, k);
    if (uint64_t right = MoveRight(x, m, xp, k)) {
      raw = right;
      continue;
    }
    if (x->level == 0) return raw;
    PMINDEX_CHECK(*depth < kMaxHeight, "circtree: tree deeper than %u", kMaxHeight);
    path[(*depth)++] = raw;
    raw = ChildAt(x, m, xp, k);
  }
}

Status CircTree::SplitInsert(uint64_t raw, const uint64_t* path, uint32_t depth, Key k, Value v) {
  Header* leaf = H(raw);
  // Splits: the leaf, each full ancestor, and a new root if they all are.
  // Every node is allocated first, so OutOfSpace changes nothing.
  uint64_t fresh[kMaxHeight + 2];
  uint32_t need = 0;
  PMINDEX_RETURN_IF_ERROR(AllocSplitNodes(path, depth, fresh, &need));
  auto insert_into = [&](Header* t, Key key, uint64_t val) PMINDEX_REQUIRES(mu_) {
    BeginWrite(t);
    ShiftInsert(t, LowerBound(t, Meta::Unpack(t->meta), key), key, val);
    EndWrite(t);
  };
  uint32_t used = 0;
  uint64_t right = fresh[used++];
  Key sep = Split(raw, right);
  insert_into(k >= sep ? H(right) : leaf, k, v);
  for (int32_t d = static_cast<int32_t>(depth) - 1;; --d) {
    if (d < 0) {
      NewRoot(env_.pool->root(0), sep, right, fresh[used++]);
      break;
    }
    Header* par = H(path[d]);
    if (Meta::Unpack(par->meta).count < lay_.cap) {
      insert_into(par, sep, right);
      break;
    }
    const uint64_t pr = fresh[used++];
    const Key psep = Split(path[d], pr);
    insert_into(sep >= psep ? H(pr) : par, sep, right);
    sep = psep;
    right = pr;
  }
  PMINDEX_CHECK(used == need, "circtree: split used %u of %u new nodes", used, need);
  return Status::OK();
}

// ------------------------------------------------------------------ merges

void CircTree::FlushRing(Header* x, uint32_t start, uint32_t a, uint32_t b, pm::Site site) {
  if (a >= b) return;
  Rec* r = R(x);
  const uint32_t p0 = Phys(start, a);
  const uint32_t n = b - a;
  const uint32_t run = std::min(n, lay_.cap - p0);  // up to the ring's physical end
  pm::flush(&r[p0], run * sizeof(Rec), site);
  if (n > run) pm::flush(&r[0], (n - run) * sizeof(Rec), site);
}

bool CircTree::MergeIfRoom(uint64_t node, uint64_t l_raw, uint64_t r_raw, uint64_t parent,
                           uint32_t sep_idx) {
  // One writer at a time (mu_): nothing refills node or changes l and r.
  if (!Underfull(H(node)) || !MergeKeepsRoom(H(l_raw), H(r_raw))) return false;
  Merge(l_raw, r_raw, parent, sep_idx);
  return true;
}

void CircTree::Merge(uint64_t l_raw, uint64_t r_raw, uint64_t p_raw, uint32_t sep_idx) {
  Header* l = H(l_raw);
  Header* r = H(r_raw);
  Header* par = H(p_raw);
  // Readers of l and r wait (odd versions) until the merge is done; r's
  // ends as kDead.
  BeginWrite(l);
  BeginWrite(r);
  const Meta lm = Meta::Unpack(l->meta);
  const Meta rm = Meta::Unpack(r->meta);
  const uint64_t after = r->sibling;
  Rec* lr = R(l);
  const Rec* rr = R(r);
  // 1. R's records (of an inner node: first its low key with its leftmost
  //    child, the separator pulled down) into L's free slots after its
  //    ring range: outside (start, count), unseen by readers and recovery.
  uint32_t c = lm.count;
  auto put = [&](Key key, uint64_t val) {
    Rec& d = lr[Phys(lm.start, c)];
    pm::store(&d.key, key);
    pm::store(&d.val, val);
    ++c;
  };
  if (l->level > 0) put(r->low, r->leftmost);
  for (uint32_t i = 0; i < rm.count; ++i) {
    const Rec& s = rr[Phys(rm.start, i)];
    put(s.key, s.val);
  }
  // Flushed here, made durable by step 2's fences, before step 3 commits.
  FlushRing(l, lm.start, lm.count, c);
  // 2. The parent forgets R (its own crash-safe delete shift): keys >=
  //    R.low now reach R through L's sibling pointer (the B-link rule).
  BeginWrite(par);
  ShiftDelete(par, sep_idx, DeleteSide(Meta::Unpack(par->meta), sep_idx));
  EndWrite(par);
  // 3. The commit, in line 0, which reaches PM in store order: the
  //    metadata word (alone, recovery's split rule undoes it: L's records
  //    at or above its sibling R's low are cut), then the sibling pointer
  //    past R, which commits the merge.
  pm::store(&l->meta, Meta{lm.start, c, lm.left}.Pack(), std::memory_order_release);
  pm::store(&l->sibling, after, std::memory_order_release);
  pm::flush(&l->meta, sizeof(uint64_t));
  pm::fence();
  SetAux(l, lm.count, lm.count, c);
  // 4. R is gone: a reader that meets it starts again from the root; it is
  //    freed once no reader can hold it (after a crash: unreachable, and
  //    recovery's adoption of the reachable nodes reclaims it).
  pm::store(&r->version, kDead, std::memory_order_release);
  EndWrite(l);
  env_.alloc->Retire(PPtr(r_raw));
}

// ------------------------------------------------------------------ recovery

void CircTree::Repair(uint64_t raw) {
  Header* x = H(raw);
  Rec* r = R(x);
  Meta m = Meta::Unpack(x->meta);
  if (x->sibling != 0) {
    Header* s = H(x->sibling);
    uint32_t t = 0;
    while (t < m.count && r[Phys(m.start, t)].key < s->low) ++t;
    if (t < m.count) {
      // A split cut short after its link: drop the copies the sibling holds.
      m.count = t;
      StoreMeta(x, m);
    }
  }
  for (uint32_t i = 0; i + 1 < m.count;) {
    if (r[Phys(m.start, i)].key == r[Phys(m.start, i + 1)].key) {
      // A half-done shift: remove the invalid one of the pair by a delete
      // shift on the same side (crash-safe itself: a crash here is
      // repaired again by the next open).
      if (m.left) {
        ShiftDelete(x, i + 1, true);
      } else {
        ShiftDelete(x, i, false);
      }
      m = Meta::Unpack(x->meta);
    } else {
      ++i;
    }
  }
  if (x->version != 0) pm::store(&x->version, uint64_t{0});
  SetAux(x, 0, 0, m.count);
}

// ------------------------------------------------------------------ registration

// (An IndexInfo list-initialized from the engine's entry.)
PMINDEX_REGISTER_INDEX(circtree, {sorted_node::RegistryEntry<CircTree>(
                                     "node=BYTES (a multiple of 64 from 256 to 65536; default 512) "
                                     "sentinel=on|off (default on, off with "
                                     "fingerprints=on) search=linear|binary|sentinel (default "
                                     "sentinel if sentinel=on, else linear) "
                                     "fingerprints=on|off (default off: one byte per slot, for "
                                     "leaf lookups; needs sentinel=off)")});

}  // namespace pmindex::circtree
