// The bottom layer's log-free merge of underfull leaves (paper 003, section
// III.B: "a log-free splitting/merging mechanism using shadow sibling
// pointers"; docs/layout/nobtree.md "The merge"). A merge of leaves l and r
// (r is l's right neighbour and both are children of parent p) is two
// failure-atomic commits, each leaving a tree that open accepts as is:
//
//   1. r's records are written into free slots of l (unlisted: no reader
//      or recovery looks at them) and flushed; p drops r's separator with
//      one state store, flushed; fence. r is now reachable through l's
//      sibling record only, as a split's new node is before its parent
//      names it (the B-link rule).
//   2. l's inactive sibling record := r's live one, then one state store
//      lists the new slots and flips the sibling bit (line 0 reaches PM in
//      store order); flushed; fence. r is unreachable: the allocator's
//      recovery gives it back after a crash, the epochs in a live tree.
//
// No log: a crash before 1's state store persists leaves the tree as it
// was; between 1 and 2, r stays linked by l's sibling record for good
// (correct, one hop longer); after 2, the merge is complete.
#include <algorithm>

#include "common/sorted_node.h"
#include "pm/persist.h"
#include "trees/two_layer/two_layer.h"

namespace pmindex::tlbtree {

namespace {

using sorted_node::Ld;

uint32_t Count(uint64_t s) { return std::min(st::Count(s), kSlots); }
uint32_t SlotOf(uint64_t s, uint32_t i) { return std::min(st::Slot(s, i), kSlots - 1); }

// Inner node p's children in key order (state ps): child 0 is leftmost,
// child i + 1 is named by the record at logical position i (whose key is
// its low key).
uint64_t ChildAt(const Node* p, uint64_t ps, uint32_t i) {
  return i == 0 ? Ld(p->leftmost) : Ld(p->rec[SlotOf(ps, i - 1)].val);
}

}  // namespace

bool TwoLayerTree::MergeLeafOf(Key k) {
  // Only with merge on do all operations hold epoch guards; this one keeps
  // a leaf MergeLeaf retires readable.
  if (!cfg_.merge) return false;
  alloc::Allocator::EpochGuard guard(*env_.alloc);
  alloc::EpochDomain::Guard g(top_epochs_);
  uint64_t path[kMaxHeight] = {};
  uint32_t hops = 0;
  Descend(k, path, &hops);
  return MergeLeaf(path[0], path[1], false);
}

bool TwoLayerTree::MergeLeaf(uint64_t raw, uint64_t parent, bool underfull) {
  auto give_up = [&] {
    merge_aborts_.fetch_add(1, std::memory_order_relaxed);
    return false;
  };
  if (parent == 0) return give_up();
  Node* p = N(parent);
  // Latches are only tried, never waited for: a writer holds one latch at
  // a time and never waits while holding it, a migration only tries too,
  // so no cycle of waits can form.
  uint64_t ps = 0;
  if (!TryLatch(p, &ps)) return give_up();
  if (Ld(p->tag) != kNodeTag || sorted_node::Ld32(p->level) != 1) {
    Unlatch(p, ps);
    return give_up();
  }
  const uint32_t pn = Count(ps);
  uint32_t at = pn + 1;
  for (uint32_t i = 0; i <= pn; ++i) {
    if (ChildAt(p, ps, i) == raw) {
      at = i;
      break;
    }
  }
  if (at > pn) {  // raw is not p's child (a split or a move came between)
    Unlatch(p, ps);
    return give_up();
  }
  // The pairs (left child index): raw's left neighbour and raw first.
  uint32_t pairs[2];
  uint32_t npairs = 0;
  if (at > 0) pairs[npairs++] = at - 1;
  if (at < pn) pairs[npairs++] = at;
  for (uint32_t pi = 0; pi < npairs; ++pi) {
    if (MergePair(p, ps, pairs[pi], raw, underfull)) {
      merges_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  Unlatch(p, ps);
  return give_up();
}

bool TwoLayerTree::MergePair(Node* p, uint64_t ps, uint32_t li, uint64_t raw, bool underfull) {
  const uint64_t lraw = ChildAt(p, ps, li), rraw = ChildAt(p, ps, li + 1);
  const Key rlow = Ld(p->rec[SlotOf(ps, li)].key);  // r's separator in p
  Node* l = N(lraw);
  Node* r = N(rraw);
  uint64_t ls = 0, rs = 0;
  if (!TryLatch(l, &ls)) return false;
  if (!TryLatch(r, &rs)) {
    Unlatch(l, ls);
    return false;
  }
  // Under the three latches nothing of l, r and p changes: check that
  // they are still neighbouring live leaves (no node a crash or a split
  // left between them), that raw is still underfull, and the fit.
  const SibRec& lsib = l->sib[st::Sib(ls)];
  const uint32_t ln = Count(ls), rn = Count(rs);
  const uint32_t xn = lraw == raw ? ln : rn;
  const bool ok = Ld(l->tag) == kNodeTag && Ld(r->tag) == kNodeTag &&
                  sorted_node::Ld32(l->level) == 0 && sorted_node::Ld32(r->level) == 0 &&
                  Ld(lsib.ptr) == rraw && Ld(lsib.key) == rlow &&
                  (!underfull || xn < kMergeBelow) && ln + rn <= kMergeMax;
  if (!ok) {
    Unlatch(r, rs);
    Unlatch(l, ls);
    return false;
  }
  CommitMerge(p, ps, li, l, ls, r, rs);
  env_.alloc->Retire(PPtr(rraw));
  return true;
}

void TwoLayerTree::CommitMerge(Node* p, uint64_t ps, uint32_t li, Node* l, uint64_t ls, Node* r,
                               uint64_t rs) {
  // 1a. r's records into free slots of l, in key order (all above l's),
  //     listed in a state that is not stored yet; the touched record
  //     lines flushed.
  uint32_t free_mask = ~st::UsedMask(ls) & ((1u << kSlots) - 1);
  uint64_t ns = ls;
  uint32_t lines = 0;
  for (uint32_t i = 0, rn = Count(rs); i < rn; ++i) {
    const uint32_t slot = static_cast<uint32_t>(__builtin_ctz(free_mask));
    free_mask &= free_mask - 1;
    const Rec& from = r->rec[SlotOf(rs, i)];
    pm::store(&l->rec[slot].key, Ld(from.key));
    pm::store(&l->rec[slot].val, Ld(from.val));
    ns = st::Insert(ns, Count(ns), slot);
    lines |= 1u << (slot / 4);
  }
  for (uint32_t line = 0; line < 3; ++line)
    if (lines & (1u << line)) pm::flush(&l->rec[line * 4], 4 * sizeof(Rec));
  // 1b. p without r's separator (still latched): r is reachable through
  //     l's sibling record only. One fence orders 1a and 1b before 2;
  //     they need no order between them (1b alone is a tree open
  //     accepts, and 1a alone is unlisted slots).
  const uint64_t nps = st::Bump(st::Remove(ps, li));
  pm::store(&p->state, nps, std::memory_order_release);
  pm::flush(&p->state, sizeof(uint64_t));
  pm::fence();
  // 2. l's inactive sibling record := r's live one; the commit flips the
  //    sibling bit and lists r's records. Both stores are in line 0,
  //    which reaches PM in store order: one persist.
  const SibRec& rsib = r->sib[st::Sib(rs)];
  const uint32_t inactive = 1 - st::Sib(ls);
  pm::store(&l->sib[inactive].key, Ld(rsib.key));
  pm::store(&l->sib[inactive].ptr, Ld(rsib.ptr));
  ns = st::Bump(ns) ^ st::kSibBit;  // still latched
  pm::store(&l->state, ns, std::memory_order_release);
  pm::flush(&l->state, sizeof(uint64_t));
  pm::fence();
  // 3. r is frozen: a reader that holds it reads the records l now has
  //    (and r's sibling still leads on); a writer that latches it sees
  //    the tag and descends again. Its version is bumped so that a
  //    reader that read it while latched reads it again.
  pm::store(&r->tag, kMergedTag);
  pm::store(&r->state, st::Bump(rs) & ~st::kLatch, std::memory_order_release);
  Unlatch(l, ns);
  Unlatch(p, nps);
}

}  // namespace pmindex::tlbtree
