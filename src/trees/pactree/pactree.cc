// pactree: PACTree (Kim et al., SOSP 2021) in this project's layers.
//
// Two layers (docs/layout/pactree.md):
// - The data layer, in PM and the only persistent state: a singly linked
//   list of data nodes sorted by anchor key (data_node.h), each holding up
//   to `slots` unsorted pairs with fingerprints and a validity bitmap. It
//   is crash-consistent without a log: an insert or remove commits with
//   one NAW of the node's bitmap, an update with the 8-byte value store
//   and its persist, a split with the NAW of the left node's `next` that
//   links a new right sibling written and persisted while unreachable
//   (copy-on-write of the upper half), a merge (a remove that leaves a node
//   and its right sibling with fewer than slots/2 pairs together, the
//   paper's rule) with the `next` store that unlinks the right sibling,
//   whose pairs were copied into free slots of the left one and made live
//   by a bitmap store before it on the same line. A node merged away names
//   the node that took its pairs (`merged`) and is retired to the
//   allocator's epochs once the search layer no longer names it: every
//   operation runs inside an epoch guard, so a node pointer, once read,
//   stays readable for the operation.
// - The search layer (search_layer.h): anchor key -> data node. With
//   search=pm (the default, the paper's) a persistent trie in the pool
//   standing for PDL-ART (pm_trie.h), its root named by the head node and
//   kept across opens; with search=dram this project's DRAM OLC B+-tree,
//   rebuilt from the data layer at every open. Splits do not update it:
//   they (and merges) append to per-NUMA update logs (update_log.h) that
//   an updater thread applies. A search-layer floor may therefore be a stale anchor
//   left of the node that owns a key; every operation moves right along
//   `next` while the next node's anchor is <= its key.
//
// Concurrency: each data node's version word is an optimistic lock (odd:
// held). Readers (lookup, scan) take no lock: they read the version, read
// the node with relaxed loads and validate the version, retrying the node
// on a change. Writers lock the node, move right under lock coupling if
// the key is past the node's range, and change it under the lock. The
// search layer is OLC itself. Writers release the lock together with the
// store that commits (pm::naw's second word), before that store's
// write-back ends: a reader may see a pair a moment before it is durable
// (IndexInfo::reads_see_only_durable is false); the writer returns after.
//
// Recovery (open): a read-only walk validates the chain and every slot,
// sums and visits the live pairs, and checks the persistent search layer
// against the chain; then (after MarkInUse) clears the bits of pairs a
// split had moved when the crash came, resets lock words, and queues the
// anchors the search layer lacks (update log entries the crash lost) and
// removes its leaves that name nodes merged away.
#include <algorithm>
#include <atomic>
#include <bit>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "common/content_record.h"
#include "common/fingerprint.h"
#include "common/olc_btree.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "pm/pptr_decode.h"
#include "trees/pactree/data_node.h"
#include "trees/pactree/pm_trie.h"
#include "trees/pactree/search_layer.h"
#include "trees/pactree/update_log.h"
#include "util/check.h"
#include "util/prefetch.h"

namespace pmindex::pactree {
namespace {

constexpr std::string_view kKind = "pactree";

struct Params {
  uint32_t slots = kMaxSlots;
  bool background = true;  // updater=thread
  bool pm_search = true;   // search=pm
};

Result<Params> ParseParams(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"slots", "updater", "search"}));
  Result<uint64_t> slots = o.get_uint("slots", kMaxSlots, kMinSlots, kMaxSlots);
  if (!slots.ok()) return slots.status();
  Result<std::string> up = o.get_enum("updater", "thread", {"thread", "inline"});
  if (!up.ok()) return up.status();
  Result<std::string> search = o.get_enum("search", "pm", {"pm", "dram"});
  if (!search.ok()) return search.status();
  return Params{static_cast<uint32_t>(slots.value()), up.value() == "thread",
                search.value() == "pm"};
}

class PacTree final : public Index {
 public:
  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, const Params& p);
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, const Params& p);

  Status insert(Key k, Value v) override { return Write(Op::kInsert, k, v); }
  Status update(Key k, Value v) override { return Write(Op::kUpdate, k, v); }
  Status upsert(Key k, Value v) override { return Write(Op::kUpsert, k, v); }
  Status remove(Key k) override;
  std::optional<Value> lookup(Key k) override;
  size_t scan(Key from, size_t n, KV* out) override;
  Status bulk_load(std::span<const KV> sorted, double fill) override;
  Status verify() override;
  IndexStats stats() override;
  Status for_each_block(const std::function<void(PPtr)>& fn) override;
  // The logs applied and every retired node freed.
  void quiesce() override {
    if (logs_) logs_->Drain();
    env_.alloc->Reclaim();
  }
  Status close() override;

 private:
  enum class Op : uint8_t { kInsert, kUpdate, kUpsert };

  PacTree(const IndexEnv& env, const Params& p)
      : env_(env),
        p_(p),
        node_bytes_(NodeBytes(p.slots)),
        live_mask_(p.slots == 64 ? ~uint64_t{0} : (uint64_t{1} << p.slots) - 1) {}

  NodeHeader* N(uint64_t raw) const { return env_.pool->to_ptr<NodeHeader>(PPtr(raw)); }
  // The data node the search layer names for k: its anchor is <= k, and
  // the node owning k is it or one to its right, or it was merged away
  // (its `merged` leads left, to an anchor still <= k). REQUIRES: inside
  // an epoch guard. The layer is a hint: a
  // name that is not a data node at or below k (only a damaged pool's
  // trie gives one) is replaced by the head.
  NodeHeader* Floor(Key k) const {
    const uint64_t r = search_->Floor(k);
    if (r != 0 && r != head_raw_ &&
        pm::CheckPPtr(*env_.pool, r, node_bytes_, 64) == pm::PPtrFault::kOk) {
      NodeHeader* x = N(r);
      if (Ld(x->tag) == kNodeTag && Ld(x->anchor) <= k) return x;
    }
    return N(head_raw_);
  }
  // Sets search_ (and the trie) and starts the update logs.
  void StartSearchLayer(std::unique_ptr<PmTrie> trie);

  // Node locks: the version word (data_node.h).
  static uint64_t AwaitUnlocked(const NodeHeader* x);
  static bool Unchanged(const NodeHeader* x, uint64_t v);
  static uint64_t Lock(NodeHeader* x);
  static void Unlock(NodeHeader* x, uint64_t held, bool changed) {
    pm::store(&x->version, changed ? held + 1 : held - 1, std::memory_order_release);
  }
  // The node owning k, locked (never a node merged away); *held receives
  // its lock word. REQUIRES: inside an epoch guard.
  NodeHeader* LockOwner(Key k, uint64_t* held);

  Status Write(Op op, Key k, Value v);
  // Writes pair (k, v) and its fingerprint into the free slot i of x
  // (locked) and flushes both lines; no fence.
  void FillSlot(NodeHeader* x, uint32_t i, Key k, Value v);
  // x is locked, full, and owns k, which it does not hold: splits x and
  // inserts (k, v) into the half that owns it. Unlocks x.
  Status SplitInsert(NodeHeader* x, uint64_t held, Key k, Value v);
  // A node a merge took out of the chain, for the update logs.
  struct Unlinked {
    Key anchor = 0;
    uint64_t raw = 0;
  };
  // remove() inside its epoch guard; *gone: the node a merge unlinked.
  Status RemoveKey(Key k, Unlinked* gone);
  // x is locked (*held); `changed`: x was changed under this lock. If x
  // and its right sibling y hold fewer than slots/2 pairs together, x
  // takes y's pairs and y leaves the chain (Absorb; *gone = y). Unlocks
  // both; true iff merged.
  bool MergeNext(NodeHeader* x, uint64_t held, bool changed, Unlinked* gone);
  // Copies y's pairs into x's free slots and unlinks y (both locked,
  // y = x's next, the pairs fit); marks y merged into x.
  void Absorb(NodeHeader* x, NodeHeader* y);
  // Merges the node left of `anchor` (a chain node's) with its right
  // sibling if the rule allows (MergeNext).
  void MergeLeftOf(Key anchor, Unlinked* gone);

  // Read-only validation of the data layer for open and verify: the chain
  // from the head (decoded, tagged, anchors strictly ascending from 0),
  // every live slot (key >= anchor, fingerprint, no duplicate). Fills
  // *nodes with the chain, *stale with (node index, bitmap of pairs at or
  // past the next anchor), and sums the live pairs owned into *content.
  struct Chain {
    std::vector<uint64_t> raws;
    std::vector<Key> anchors;  // raws' anchors, ascending
    std::vector<std::pair<size_t, uint64_t>> stale;
    uint64_t pairs = 0;
  };
  Status Walk(uint64_t head_raw, Chain* chain, common::ContentSum* content) const;
  void RebuildSearchLayer(const std::vector<uint64_t>& raws);
  // bulk_load's search=pm part: a new trie mapping the new chain (written,
  // not yet linked) whose root the new head names. OutOfSpace frees it.
  Result<std::unique_ptr<PmTrie>> BuildTrie(const std::vector<uint64_t>& raws,
                                            const std::vector<Key>& anchors);
  // Open's check of the persistent search layer and its blocks.
  Status CheckTrie(const Chain& chain, PmTrie::Census* census) const;
  Status VerifyQuiesced();
  Status VerifySearchLayer(const Chain& chain) const;

  IndexEnv env_;
  Params p_;
  uint32_t node_bytes_;
  uint64_t live_mask_;
  uint64_t head_raw_ = 0;
  // Destroyed after logs_, which applies to them until it stops.
  DramSearch dram_;               // search=dram
  std::unique_ptr<PmTrie> trie_;  // search=pm
  SearchLayer* search_ = &dram_;
  std::unique_ptr<UpdateLogs> logs_;
  uint64_t repaired_ = 0;  // anchors open found missing from the search layer
  olc_detail::StripedCounter size_;
  olc_detail::StripedCounter splits_;
  olc_detail::StripedCounter merges_;
  bool ready_ = false;
  bool closed_ = false;
};

// ------------------------------------------------------------------ locks

uint64_t PacTree::AwaitUnlocked(const NodeHeader* x) {
  uint64_t v = LdAcquire(x->version);
  for (unsigned spins = 0; (v & 1) != 0; ++spins) {
    if (spins < 64) {
      sync::CpuRelax();
    } else {
      std::this_thread::yield();
    }
    v = LdAcquire(x->version);
  }
  return v;
}

bool PacTree::Unchanged(const NodeHeader* x, uint64_t v) {
#if defined(PMINDEX_TSAN)
  return LdAcquire(x->version) == v;
#else
  std::atomic_thread_fence(std::memory_order_acquire);
  return Ld(x->version) == v;
#endif
}

uint64_t PacTree::Lock(NodeHeader* x) {
  for (;;) {
    const uint64_t v = AwaitUnlocked(x);
    uint64_t expected = v;
    if (pm::compare_exchange(&x->version, expected, v + 1)) {
#if !defined(PMINDEX_TSAN)
      // Orders the node's changes after the odd version (seqlock writer).
      std::atomic_thread_fence(std::memory_order_release);
#endif
      return v + 1;
    }
  }
}

NodeHeader* PacTree::LockOwner(Key k, uint64_t* held) {
  NodeHeader* x = Floor(k);
  for (;;) {
    alloc::MeterVisit(*env_.alloc, x);
    pm::ModelRead(x, 2 * pm::kCacheLine);  // the header line and the fingerprints
    *held = Lock(x);
    if (x->merged != 0) {  // merged away: its left sibling took its keys
      Unlock(x, *held, false);
      x = N(x->merged);
      continue;
    }
    const uint64_t nx = x->next;
    if (nx == 0 || x->high > k) return x;
    // A stale anchor: x split and the search layer does not know yet.
    Unlock(x, *held, false);
    x = N(nx);
  }
}

// ---------------------------------------------------------------- readers

std::optional<Value> PacTree::lookup(Key k) {
  alloc::Allocator::EpochGuard eg(*env_.alloc);  // a node merged away stays readable
  const NodeHeader* x = Floor(k);
  for (;;) {
    alloc::MeterVisit(*env_.alloc, x);
    pm::ModelRead(x, 2 * pm::kCacheLine);  // the header line and the fingerprints
    // Line 1 (fingerprints) fetched while line 0 (lock, high key, bitmap)
    // is: neither address depends on the other's content.
    PrefetchLine(x->fpw);
    const uint64_t v = AwaitUnlocked(x);
    // Set once, before the unlock that follows the merge: no validation.
    if (const uint64_t to = LdAcquire(x->merged); to != 0) {
      x = N(to);
      continue;
    }
    const uint64_t nx = LdAcquire(x->next);
    if (nx != 0 && Ld(x->high) <= k) {
      if (Unchanged(x, v)) x = N(nx);
      continue;
    }
    const int i = FindSlot(x, p_.slots, Ld(x->bitmap) & live_mask_, k);
    if (i >= 0) pm::ModelRead(&Slots(x)[i], sizeof(KV));
    const Value val = i >= 0 ? Ld(Slots(x)[i].value) : 0;
    if (!Unchanged(x, v)) continue;
    if (i < 0) return std::nullopt;
    return val;
  }
}

size_t PacTree::scan(Key from, size_t n, KV* out) {
  if (n == 0) return 0;
  alloc::Allocator::EpochGuard eg(*env_.alloc);  // a node merged away stays readable
  const NodeHeader* x = Floor(from);
  size_t got = 0;
  KV buf[kMaxSlots];
  while (x != nullptr && got < n) {
    alloc::MeterVisit(*env_.alloc, x);
    pm::ModelRead(x, NodeBytes(p_.slots));
    const uint64_t v = AwaitUnlocked(x);
    if (const uint64_t to = LdAcquire(x->merged); to != 0) {
      x = N(to);  // left, to pairs below `from` already returned: skipped
      continue;
    }
    const uint64_t nx = LdAcquire(x->next);
    const bool bounded = nx != 0;
    const Key upper = bounded ? Ld(x->high) : 0;
    if (bounded && upper <= from) {  // a stale anchor, or from is past x
      if (Unchanged(x, v)) x = N(nx);
      continue;
    }
    uint32_t cnt = 0;
    const KV* s = Slots(x);
    for (uint64_t m = Ld(x->bitmap) & live_mask_; m != 0; m &= m - 1) {
      const int i = __builtin_ctzll(m);
      const Key key = Ld(s[i].key);
      if (key >= from && (!bounded || key < upper)) buf[cnt++] = KV{key, Ld(s[i].value)};
    }
    if (!Unchanged(x, v)) continue;
    std::sort(buf, buf + cnt, [](const KV& a, const KV& b) { return a.key < b.key; });
    for (uint32_t i = 0; i < cnt && got < n; ++i) out[got++] = buf[i];
    if (bounded) from = upper;  // every pair below it is returned
    x = bounded ? N(nx) : nullptr;
  }
  return got;
}

// ---------------------------------------------------------------- writers

void PacTree::FillSlot(NodeHeader* x, uint32_t i, Key k, Value v) {
  KV* s = Slots(x);
  pm::store(&s[i].key, k);
  pm::store(&s[i].value, v);
  pm::store(&x->fpw[i / 8], WithFingerprint(x->fpw[i / 8], i, common::Fingerprint(k)));
  pm::flush(&s[i], sizeof(KV));
  pm::flush(&x->fpw[i / 8], sizeof(uint64_t));
}

Status PacTree::Write(Op op, Key k, Value v) {
  alloc::Allocator::EpochGuard eg(*env_.alloc);
  uint64_t held;
  NodeHeader* x = LockOwner(k, &held);
  const uint64_t bm = x->bitmap & live_mask_;
  const int i = FindSlot(x, p_.slots, bm, k);
  if (i >= 0) {
    if (op == Op::kInsert) {
      Unlock(x, held, false);
      return Status::AlreadyExists();
    }
    // One 8-byte word: a crash leaves the old or the new value.
    uint64_t* val = &Slots(x)[i].value;
    pm::store(val, v);
    pm::flush(val, sizeof(uint64_t));
    pm::fence();
    Unlock(x, held, true);
    return Status::OK();
  }
  if (op == Op::kUpdate) {
    Unlock(x, held, false);
    return Status::NotFound();
  }
  const uint64_t free = ~bm & live_mask_;
  if (free == 0) return SplitInsert(x, held, k, v);
  const uint32_t j = static_cast<uint32_t>(__builtin_ctzll(free));
  FillSlot(x, j, k, v);
  pm::fence();  // the pair and its fingerprint durable before the bit that makes them live
  pm::naw(&x->bitmap, bm | (uint64_t{1} << j), &x->version, held + 1);  // commits; unlocks
  size_.Add(1);
  return Status::OK();
}

Status PacTree::SplitInsert(NodeHeader* x, uint64_t held, Key k, Value v) {
  // Copy-on-write of the upper half: the new right sibling gets the pairs
  // from the median up (and (k, v) if it belongs there), written and
  // persisted while nothing points to it.
  KV all[kMaxSlots];
  const KV* s = Slots(x);
  for (uint32_t i = 0; i < p_.slots; ++i) all[i] = s[i];
  std::sort(all, all + p_.slots, [](const KV& a, const KV& b) { return a.key < b.key; });
  const uint32_t half = p_.slots / 2;
  const Key anchor = all[half].key;  // > every key left of it, so > x's anchor
  Result<PPtr> a = env_.alloc->Alloc(node_bytes_);
  if (!a.ok()) {
    Unlock(x, held, false);
    return a.status();  // nothing changed
  }
  const uint64_t yraw = a.value().raw();
  NodeHeader* y = N(yraw);
  KV* ys = Slots(y);
  uint64_t fpw[kMaxSlots / 8] = {};
  uint32_t cnt = 0;
  bool placed = k < anchor;
  for (uint32_t i = half; i < p_.slots; ++i) {
    if (!placed && k < all[i].key) {
      pm::store(&ys[cnt], KV{k, v});
      fpw[cnt / 8] = WithFingerprint(fpw[cnt / 8], cnt, common::Fingerprint(k));
      ++cnt;
      placed = true;
    }
    pm::store(&ys[cnt], all[i]);
    fpw[cnt / 8] = WithFingerprint(fpw[cnt / 8], cnt, common::Fingerprint(all[i].key));
    ++cnt;
  }
  if (!placed) {
    pm::store(&ys[cnt], KV{k, v});
    fpw[cnt / 8] = WithFingerprint(fpw[cnt / 8], cnt, common::Fingerprint(k));
    ++cnt;
  }
  pm::store(&y->version, uint64_t{0});
  pm::store(&y->tag, kNodeTag);
  pm::store(&y->anchor, anchor);
  pm::store(&y->next, x->next);
  pm::store(&y->high, x->next != 0 ? x->high : Key{0});
  pm::store(&y->bitmap, (uint64_t{1} << cnt) - 1);  // cnt <= slots / 2 + 1 < 64
  pm::store(&y->search, uint64_t{0});
  pm::store(&y->merged, uint64_t{0});
  for (uint32_t w = 0; w < kMaxSlots / 8; ++w) pm::store(&y->fpw[w], fpw[w]);
  pm::persist(y, sizeof(NodeHeader) + cnt * sizeof(KV));  // durable before the link
  uint64_t moved = 0;
  for (uint32_t i = 0; i < p_.slots; ++i)
    if (s[i].key >= anchor) moved |= uint64_t{1} << i;
  const uint64_t kept = (x->bitmap & live_mask_) & ~moved;
  // The link commits the split (and the insert when k went right): from
  // here x owns only the keys below `anchor`. `next` and `bitmap` share a
  // line, so they become durable in this order: one NAW makes both
  // durable, and a crash leaves neither, both, or the link alone (open
  // then clears the moved pairs' bits).
  pm::store(&x->next, yraw, std::memory_order_release);
  pm::store(&x->high, anchor);
  pm::naw(&x->bitmap, kept);
  if (k < anchor) {
    // A moved slot takes (k, v) only now: its clear bit is durable, so
    // its new content cannot become live before the bitmap NAW below.
    const uint32_t j = static_cast<uint32_t>(__builtin_ctzll(moved));
    FillSlot(x, j, k, v);
    pm::fence();
    pm::naw(&x->bitmap, kept | (uint64_t{1} << j));
  }
  logs_->Append(anchor, yraw);
  Unlock(x, held, true);
  size_.Add(1);
  splits_.Add(1);
  return Status::OK();
}

Status PacTree::remove(Key k) {
  Unlinked gone;
  const Status st = RemoveKey(k, &gone);
  // Queued after the guard: with updater=inline the node is retired here
  // and, when no other thread is inside a guard, freed at once (so that
  // the crash simulator sees its block reused).
  if (gone.raw != 0) logs_->Append(gone.anchor, gone.raw, /*remove=*/true);
  return st;
}

Status PacTree::RemoveKey(Key k, Unlinked* gone) {
  alloc::Allocator::EpochGuard eg(*env_.alloc);
  uint64_t held;
  NodeHeader* x = LockOwner(k, &held);
  const uint64_t bm = x->bitmap & live_mask_;
  const int i = FindSlot(x, p_.slots, bm, k);
  if (i < 0) {
    Unlock(x, held, false);
    return Status::NotFound();
  }
  // The bit's NAW commits the delete; the slot is reused by later inserts.
  const uint64_t left = bm & ~(uint64_t{1} << i);
  size_.Add(-1);
  // Underflow (the paper's rule): merge with the right sibling if the two
  // hold fewer than slots/2 pairs. Else the left sibling with x, as the
  // paper does, but only for the last node (no right sibling) and a node
  // left empty: finding the left sibling costs a search-layer descent
  // (the paper's list has prev pointers); on every underfull delete it
  // cut the delete rate by a third for 3% of the footprint
  // (docs/RESULTS.md).
  const int half = static_cast<int>(p_.slots / 2);
  const int count = std::popcount(left);
  const uint64_t nx = x->next;
  const Key anchor = x->anchor;
  const bool try_left = count < half && anchor != 0 && (nx == 0 || left == 0);
  // An unlocked look at the right sibling's count (MergeNext checks again
  // under its lock).
  const bool try_right =
      count < half && nx != 0 && count + std::popcount(Ld(N(nx)->bitmap) & live_mask_) < half;
  if (!try_left && !try_right) {
    pm::naw(&x->bitmap, left, &x->version, held + 1);  // no merge follows: unlocks
    return Status::OK();
  }
  pm::naw(&x->bitmap, left);
  if (!MergeNext(x, held, true, gone) && try_left) MergeLeftOf(anchor, gone);
  return Status::OK();
}

bool PacTree::MergeNext(NodeHeader* x, uint64_t held, bool changed, Unlinked* gone) {
  const uint64_t yraw = x->next;
  NodeHeader* y = yraw != 0 ? N(yraw) : nullptr;
  const int half = static_cast<int>(p_.slots / 2);
  const int xcount = std::popcount(x->bitmap & live_mask_);
  // An unlocked first look at y's count (checked again under its lock).
  if (y != nullptr && xcount + std::popcount(Ld(y->bitmap) & live_mask_) >= half) y = nullptr;
  // Locks go left to right (x, then its next), as every writer's; y is in
  // the chain while x, locked and live, names it.
  const uint64_t yheld = y != nullptr ? Lock(y) : 0;
  if (y == nullptr || xcount + std::popcount(y->bitmap & live_mask_) >= half) {
    if (y != nullptr) Unlock(y, yheld, false);
    Unlock(x, held, changed);
    return false;
  }
  *gone = Unlinked{y->anchor, yraw};  // leaves the search layer, then is retired
  Absorb(x, y);
  Unlock(y, yheld, true);
  Unlock(x, held, true);
  merges_.Add(1);
  return true;
}

void PacTree::Absorb(NodeHeader* x, NodeHeader* y) {
  const uint64_t xb = x->bitmap & live_mask_;
  uint64_t free = ~xb & live_mask_;
  uint64_t add = 0;
  const KV* ys = Slots(y);
  KV* xs = Slots(x);
  for (uint64_t m = y->bitmap & live_mask_; m != 0; m &= m - 1) {
    const KV kv = ys[__builtin_ctzll(m)];
    const uint32_t j = static_cast<uint32_t>(__builtin_ctzll(free));
    free &= free - 1;
    pm::store(&xs[j].key, kv.key);  // word by word: optimistic readers load them so
    pm::store(&xs[j].value, kv.value);
    pm::store(&x->fpw[j / 8], WithFingerprint(x->fpw[j / 8], j, common::Fingerprint(kv.key)));
    add |= uint64_t{1} << j;
  }
  // Each line written once: the fingerprints' and the slots' (four a line).
  pm::flush(x->fpw, sizeof(x->fpw));
  constexpr uint32_t kPerLine = pm::kCacheLine / sizeof(KV);
  for (uint64_t m = add; m != 0;) {
    const uint32_t line = static_cast<uint32_t>(__builtin_ctzll(m)) / kPerLine;
    pm::flush(&xs[line * kPerLine], pm::kCacheLine);
    m &= ~(uint64_t{(1u << kPerLine) - 1} << (line * kPerLine));
  }
  pm::fence();  // y's pairs durable in x while their bits are clear
  // Line 0 of x: the bits, `high`, then `next`, durable in program order.
  // A crash leaves none, the bits (copies of y's pairs at or past x's next
  // anchor, still y's: dead, open clears them), the bits and `high`, or
  // all three: the unlink commits the merge and y is unreachable.
  pm::store(&x->bitmap, xb | add);
  pm::store(&x->high, y->high);
  // The unlink must be durable before y's block is reused: every image
  // without it is consistent (the merge not done), but one naming a reused
  // block is not. y is reused only after the updater removed its entry
  // (whose persist fences) and the allocation that reuses it fenced too.
  // pmcrash-redundant(drop-fence,flush-late): the simulator counts those
  // later fences (of any thread) for this flushed line; on hardware this
  // thread's fence orders the write-back before the remove entry is queued.
  pm::naw(&x->next, y->next);
  // (DRAM meaning only: y is unreachable in every image from here.)
  pm::store(&y->merged, env_.pool->to_pptr(x).raw(), std::memory_order_release);
}

void PacTree::MergeLeftOf(Key anchor, Unlinked* gone) {
  uint64_t held;
  NodeHeader* p = LockOwner(anchor - 1, &held);
  MergeNext(p, held, false, gone);
}

// ----------------------------------------------------------- bulk, create

Result<std::unique_ptr<Index>> PacTree::Create(const IndexEnv& env, const Params& p) {
  std::unique_ptr<PacTree> t(new PacTree(env, p));
  Result<PPtr> h = env.alloc->Alloc(t->node_bytes_);
  if (!h.ok()) return h.status();
  t->head_raw_ = h.value().raw();
  std::unique_ptr<PmTrie> trie;
  if (p.pm_search) {
    // A trie holding the head's leaf, flushed; the head's persist fences both.
    // A small pool gets a small root (pm_trie.h): its page is the pool's
    // to fill.
    Result<uint64_t> root = PmTrie::MakeRoot(*env.pool, *env.alloc,
                                             PmTrie::RootBitsFor(env.pool->size()), t->head_raw_);
    if (!root.ok()) {
      env.alloc->Free(h.value());
      return root.status();
    }
    trie = std::make_unique<PmTrie>(*env.pool, *env.alloc, root.value(), 1, 1);
  }
  // (Not N(): GCC then warns that the null it maps 0 to is written.)
  auto* x = reinterpret_cast<NodeHeader*>(env.pool->base() + h.value().offset());
  pm::fill(x, 0, sizeof(NodeHeader));
  pm::store(&x->tag, kNodeTag);
  if (trie) pm::store(&x->search, trie->root_raw());
  // Line 0 (and the trie's root, flushed) durable before root slot 0
  // names the head. Line 1 (zero fingerprints) need not be: a slot's
  // fingerprint is persisted with its pair before the slot's bit is set,
  // and no bit is set yet.
  pm::persist(x, 64);
  env.pool->WriteRoot(0, t->head_raw_);
  if (!trie) t->dram_.Insert(0, t->head_raw_);
  t->StartSearchLayer(std::move(trie));
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status PacTree::bulk_load(std::span<const KV> sorted, double fill) {
  // REQUIRES (as every bulk_load): no other operation on the index. It
  // must never have split, so the head is the only node and no update is
  // pending in the logs.
  logs_->Drain();  // merges' removes applied: the old trie is not in use when it is freed
  NodeHeader* head = N(head_raw_);
  if (head->next != 0 || (head->bitmap & live_mask_) != 0)
    return Status::InvalidArgument("pactree: bulk_load needs an empty index");
  if (!(fill > 0.0 && fill <= 1.0))
    return Status::InvalidArgument("pactree: bulk_load: fill " + std::to_string(fill) +
                                   " is outside (0, 1]");
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].key >= sorted[i].key)
      return Status::InvalidArgument(
          "pactree: bulk_load: keys not strictly ascending at position " + std::to_string(i));
  if (sorted.empty()) return Status::OK();
  const size_t per = std::max<size_t>(1, static_cast<size_t>(p_.slots * fill));
  const size_t count = (sorted.size() + per - 1) / per;
  std::vector<uint64_t> raws;
  raws.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    Result<PPtr> a = env_.alloc->Alloc(node_bytes_);
    if (!a.ok()) {
      for (uint64_t r : raws) env_.alloc->Free(PPtr(r));
      return a.status();  // nothing changed
    }
    raws.push_back(a.value().raw());
  }
  // A new chain, its first node the new head (anchor 0), written and
  // flushed while unreachable, and (search=pm) a new trie mapping it that
  // the new head names; one fence, then root slot 0 (written durably by
  // the pool, old or new after a crash) swaps the whole chain and the
  // trie in.
  std::vector<Key> anchors(count);
  for (size_t c = 0; c < count; ++c) anchors[c] = c == 0 ? Key{0} : sorted[c * per].key;
  for (size_t c = 0; c < count; ++c) {
    NodeHeader* y = N(raws[c]);
    const size_t b = c * per, e = std::min(sorted.size(), b + per);
    uint64_t fpw[kMaxSlots / 8] = {};
    for (size_t i = b; i < e; ++i) {
      const uint32_t j = static_cast<uint32_t>(i - b);
      pm::store(&Slots(y)[j], sorted[i]);
      fpw[j / 8] = WithFingerprint(fpw[j / 8], j, common::Fingerprint(sorted[i].key));
    }
    const uint32_t cnt = static_cast<uint32_t>(e - b);
    pm::store(&y->version, uint64_t{0});
    pm::store(&y->tag, kNodeTag);
    pm::store(&y->anchor, anchors[c]);
    pm::store(&y->next, c + 1 < count ? raws[c + 1] : uint64_t{0});
    pm::store(&y->high, c + 1 < count ? sorted[e].key : Key{0});
    pm::store(&y->bitmap, cnt == 64 ? ~uint64_t{0} : (uint64_t{1} << cnt) - 1);
    pm::store(&y->search, uint64_t{0});
    pm::store(&y->merged, uint64_t{0});
    for (uint32_t w = 0; w < kMaxSlots / 8; ++w) pm::store(&y->fpw[w], fpw[w]);
    pm::flush(y, sizeof(NodeHeader) + cnt * sizeof(KV));
  }
  std::unique_ptr<PmTrie> built;
  if (trie_) {
    Result<std::unique_ptr<PmTrie>> b = BuildTrie(raws, anchors);
    if (!b.ok()) {
      for (uint64_t r : raws) env_.alloc->Free(PPtr(r));
      return b.status();  // nothing changed
    }
    built = std::move(b).value();
  }
  pm::fence();
  env_.pool->WriteRoot(0, raws[0]);
  // The old head (and trie) are unreachable now (after a crash, recovery
  // reclaims them).
  env_.alloc->Free(PPtr(head_raw_));
  head_raw_ = raws[0];
  size_.Set(sorted.size());
  if (trie_) {
    trie_->Adopt(*built);
  } else {
    RebuildSearchLayer(raws);
  }
  return Status::OK();
}

Result<std::unique_ptr<PmTrie>> PacTree::BuildTrie(const std::vector<uint64_t>& raws,
                                                   const std::vector<Key>& anchors) {
  Result<uint64_t> root = PmTrie::MakeRoot(*env_.pool, *env_.alloc, trie_->root_bits());
  if (!root.ok()) return root.status();
  auto t = std::make_unique<PmTrie>(*env_.pool, *env_.alloc, root.value(), 1, 0);
  for (size_t c = 0; c < raws.size(); ++c) {
    if (!t->Insert(anchors[c], raws[c])) {
      t->FreeAll();
      return Status::OutOfSpace("pactree: bulk_load: no space for the search layer");
    }
  }
  NodeHeader* head = N(raws[0]);
  pm::store(&head->search, root.value());
  pm::flush(head, 64);
  return t;
}

void PacTree::StartSearchLayer(std::unique_ptr<PmTrie> trie) {
  trie_ = std::move(trie);
  search_ = trie_ ? static_cast<SearchLayer*>(trie_.get()) : &dram_;
  logs_ = std::make_unique<UpdateLogs>(*search_, *env_.alloc, p_.background,
                                       [this](uint64_t r) { return LdAcquire(N(r)->merged) != 0; });
}

void PacTree::RebuildSearchLayer(const std::vector<uint64_t>& raws) {
  std::vector<KV> anchors;
  anchors.reserve(raws.size());
  for (uint64_t r : raws) anchors.push_back(KV{N(r)->anchor, r});
  dram_.Rebuild(anchors);
}

// ---------------------------------------------------------------- recovery

Status PacTree::Walk(uint64_t head_raw, Chain* chain, common::ContentSum* content) const {
  const uint64_t limit = env_.pool->size() / node_bytes_ + 1;  // more nodes than fit: a cycle
  Key prev_anchor = 0;
  for (uint64_t r = head_raw; r != 0;) {
    auto d = pm::Decode<NodeHeader>(*env_.pool, r, node_bytes_, 64, "pactree: data node");
    if (!d.ok()) return d.status();
    const NodeHeader* x = d.value();
    // Messages are built only on an error: the walk reads millions of slots.
    auto where = [r] { return "pactree: data node " + std::to_string(r); };
    if (x->tag != kNodeTag) return Status::Corruption(where() + " has no data-node tag");
    if (chain->raws.empty() ? x->anchor != 0 : x->anchor <= prev_anchor)
      return Status::Corruption(
          where() + ": anchor " + std::to_string(x->anchor) +
          (chain->raws.empty() ? " in the head (must be 0)"
                               : " not above the previous anchor " + std::to_string(prev_anchor)));
    if ((x->bitmap & ~live_mask_) != 0)
      return Status::Corruption(where() + ": bitmap marks slots past the node's " +
                                std::to_string(p_.slots));
    if (chain->raws.size() >= limit)
      return Status::Corruption("pactree: the data-node chain has a cycle");
    chain->raws.push_back(r);
    chain->anchors.push_back(x->anchor);
    prev_anchor = x->anchor;
    r = x->next;
  }
  for (size_t n = 0; n < chain->raws.size(); ++n) {
    const NodeHeader* x = N(chain->raws[n]);
    const bool bounded = n + 1 < chain->raws.size();
    const Key upper = bounded ? N(chain->raws[n + 1])->anchor : 0;
    const KV* s = Slots(x);
    Key keys[kMaxSlots];
    uint32_t cnt = 0;
    uint64_t stale = 0;
    for (uint64_t m = x->bitmap; m != 0; m &= m - 1) {
      const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(m));
      auto where = [&] {
        return "pactree: data node " + std::to_string(chain->raws[n]) + " slot " +
               std::to_string(i);
      };
      if (s[i].key < x->anchor)
        return Status::Corruption(where() + ": key " + std::to_string(s[i].key) +
                                  " below the anchor " + std::to_string(x->anchor));
      if (FingerprintAt(x, i) != common::Fingerprint(s[i].key))
        return Status::Corruption(where() + ": the fingerprint does not match the key");
      if (bounded && s[i].key >= upper) {
        stale |= uint64_t{1} << i;  // moved by a split the crash interrupted
        continue;
      }
      keys[cnt++] = s[i].key;
      if (content != nullptr) content->Add(s[i].key, s[i].value);
    }
    std::sort(keys, keys + cnt);
    for (uint32_t i = 1; i < cnt; ++i)
      if (keys[i] == keys[i - 1])
        return Status::Corruption("pactree: data node " + std::to_string(chain->raws[n]) +
                                  " holds key " + std::to_string(keys[i]) + " twice");
    if (stale != 0) chain->stale.emplace_back(n, stale);
    chain->pairs += cnt;
  }
  return Status::OK();
}

Result<std::unique_ptr<Index>> PacTree::Open(const IndexEnv& env, const Params& p) {
  std::unique_ptr<PacTree> t(new PacTree(env, p));
  if (env.pool->root(0) == 0)
    return Status::Corruption("pactree: root slot 0 names no head data node");
  Chain chain;
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  PMINDEX_RETURN_IF_ERROR(t->Walk(env.pool->root(0), &chain, &content));  // reads only
  PMINDEX_RETURN_IF_ERROR(common::CheckContentRecord(*env.pool, env.salvage, content, kKind));
  PmTrie::Census census;
  if (p.pm_search) PMINDEX_RETURN_IF_ERROR(t->CheckTrie(chain, &census));  // reads only
  for (uint64_t r : chain.raws) env.alloc->MarkReachable(PPtr(r));
  for (uint64_t r : census.blocks) env.alloc->MarkReachable(PPtr(r));
  for (uint64_t r : chain.raws)
    if (!env.alloc->IsLive(PPtr(r)))
      return Status::Corruption("pactree: data node " + std::to_string(r) +
                                " is not an allocated block");
  for (uint64_t r : census.blocks)
    if (!env.alloc->IsLive(PPtr(r)))
      return Status::Corruption("pactree: trie node " + std::to_string(r) +
                                " is not an allocated block");
  PMINDEX_RETURN_IF_ERROR(env.alloc->CheckRecoveryBound());
  PMINDEX_RETURN_IF_ERROR(env.pool->MarkInUse());
  // Repairs: the moved pairs of an interrupted split lose their bits, and
  // lock words held at the crash are released.
  for (const auto& [n, stale] : chain.stale) {
    NodeHeader* x = t->N(chain.raws[n]);
    pm::naw(&x->bitmap, x->bitmap & ~stale);
  }
  for (size_t n = 0; n < chain.raws.size(); ++n) {
    NodeHeader* x = t->N(chain.raws[n]);
    if (x->version != 0) pm::store(&x->version, uint64_t{0});
    if (x->merged != 0) pm::store(&x->merged, uint64_t{0});  // only a damaged pool has one
    // A crash between a split's link and its store of `high` leaves the
    // old value; the chain's anchors are the truth. (Not persisted: every
    // open rewrites it.)
    const Key high = n + 1 < chain.raws.size() ? t->N(chain.raws[n + 1])->anchor : 0;
    if (x->high != high) pm::store(&x->high, high);
  }
  t->head_raw_ = chain.raws[0];
  t->size_.Set(chain.pairs);
  if (p.pm_search) {
    // The trie is kept. The anchors it lacks are splits whose update-log
    // entries the crash lost (DRAM): queued as those entries were, they
    // are applied once open_index has finished the allocator's recovery.
    auto trie = std::make_unique<PmTrie>(*env.pool, *env.alloc, census.blocks[0],
                                         census.blocks.size(), census.leaves);
    // Leaves naming nodes merged away (their removal lost): cleared now,
    // before recovery frees those nodes' blocks.
    for (const auto& [anchor, raw] : census.stale) trie->ClearStaleLeaf(anchor, raw);
    t->StartSearchLayer(std::move(trie));
    for (size_t i : census.missing) t->logs_->Defer(chain.anchors[i], chain.raws[i]);
    t->repaired_ = census.missing.size() + census.stale.size();
  } else {
    t->RebuildSearchLayer(chain.raws);
    t->StartSearchLayer(nullptr);
  }
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status PacTree::CheckTrie(const Chain& chain, PmTrie::Census* census) const {
  const uint64_t root = N(chain.raws[0])->search;
  if (root == 0) return Status::Corruption("pactree: the head names no search layer (search=pm)");
  return PmTrie::Check(*env_.pool, root, chain.raws, chain.anchors, census);
}

Status PacTree::close() {
  if (closed_ || !ready_ || abandoned()) return Status::OK();
  closed_ = true;
  logs_->Stop();
  env_.alloc->Reclaim();  // the nodes merged away are freed (no reader is left)
  common::ContentSum content;
  for (uint64_t r = head_raw_; r != 0;) {
    const NodeHeader* x = N(r);
    const Key upper = x->next != 0 ? N(x->next)->anchor : 0;
    for (uint64_t m = x->bitmap & live_mask_; m != 0; m &= m - 1) {
      const KV& kv = Slots(x)[__builtin_ctzll(m)];
      if (x->next == 0 || kv.key < upper) content.Add(kv.key, kv.value);
    }
    r = x->next;
  }
  common::WriteContentRecord(*env_.pool, content);
  return Status::OK();
}

// ------------------------------------------------------- verify and stats

Status PacTree::verify() {
  // The updater thread retries refused entries on its own; none is
  // applied while the search layer is compared with the chain.
  return logs_->Quiesced([this] { return VerifyQuiesced(); });
}

Status PacTree::VerifyQuiesced() {
  Chain chain;
  PMINDEX_RETURN_IF_ERROR(Walk(head_raw_, &chain, nullptr));
  if (!chain.stale.empty())
    return Status::Corruption("pactree: data node " +
                              std::to_string(chain.raws[chain.stale[0].first]) +
                              " keeps pairs at or past its right sibling's anchor");
  for (size_t n = 0; n < chain.raws.size(); ++n) {
    const NodeHeader* x = N(chain.raws[n]);
    if ((x->version & 1) != 0)
      return Status::Corruption("pactree: data node " + std::to_string(chain.raws[n]) +
                                " is locked");
    if (x->merged != 0)
      return Status::Corruption("pactree: data node " + std::to_string(chain.raws[n]) +
                                " is in the chain but marked merged away");
    if (n + 1 < chain.raws.size() && x->high != N(chain.raws[n + 1])->anchor)
      return Status::Corruption("pactree: data node " + std::to_string(chain.raws[n]) +
                                ": high key " + std::to_string(x->high) +
                                " differs from the next node's anchor");
  }
  if (chain.pairs != size_.Sum())
    return Status::Corruption("pactree: " + std::to_string(chain.pairs) +
                              " pairs in the data layer, " + std::to_string(size_.Sum()) +
                              " counted");
  return VerifySearchLayer(chain);
}

Status PacTree::VerifySearchLayer(const Chain& chain) const {
  PMINDEX_RETURN_IF_ERROR(search_->Verify());
  if (trie_ && N(head_raw_)->search != trie_->root_raw())
    return Status::Corruption("pactree: the head does not name the search layer's root");
  // With the logs drained, the search layer maps exactly the chain's
  // anchors, but for the entries still queued because the layer had no
  // space for an insert: each such insert is an anchor missing, each such
  // remove a leaf naming a node merged away.
  std::unordered_map<uint64_t, Key> in_chain;
  for (size_t i = 0; i < chain.raws.size(); ++i) in_chain.emplace(chain.raws[i], chain.anchors[i]);
  Status st = Status::OK();
  size_t matched = 0, extra = 0;
  search_->ForEach([&](uint64_t key, uint64_t raw) {
    auto it = in_chain.find(raw);
    if (it != in_chain.end() && it->second == key) {
      ++matched;
      return;
    }
    ++extra;
    const bool merged_away =
        it == in_chain.end() &&
        pm::CheckPPtr(*env_.pool, raw, node_bytes_, 64) == pm::PPtrFault::kOk &&
        N(raw)->tag == kNodeTag && N(raw)->anchor == key && N(raw)->merged != 0;
    if (st.ok() && !merged_away)
      st = Status::Corruption("pactree: the search layer maps anchor " + std::to_string(key) +
                              " to " + std::to_string(raw) +
                              ", neither a chain node with that anchor nor one merged away");
  });
  PMINDEX_RETURN_IF_ERROR(st);
  const size_t missing = chain.raws.size() - matched;
  if (missing + extra > logs_->pending())
    return Status::Corruption("pactree: the search layer lacks " + std::to_string(missing) +
                              " of the chain's anchors and names " + std::to_string(extra) +
                              " nodes merged away, with " + std::to_string(logs_->pending()) +
                              " update-log entries pending");
  return Status::OK();
}

IndexStats PacTree::stats() {
  IndexStats s;
  alloc::Allocator::EpochGuard eg(*env_.alloc);
  uint64_t nodes = 0;
  for (uint64_t r = head_raw_; r != 0; r = LdAcquire(N(r)->next)) ++nodes;
  s.entries = size_.Sum();
  s.leaves = nodes;
  s.inner_nodes = search_->Nodes();
  s.height = search_->Height() + 1;
  s.pm_bytes = nodes * node_bytes_ + (trie_ ? trie_->Bytes() : 0);
  s.dram_bytes = trie_ ? 0 : dram_.Bytes();
  s.extra.emplace_back("splits", static_cast<double>(splits_.Sum()));
  s.extra.emplace_back("merges", static_cast<double>(merges_.Sum()));
  s.extra.emplace_back("update_logs", static_cast<double>(logs_->logs()));
  s.extra.emplace_back("search_layer_lag", static_cast<double>(logs_->pending()));
  s.extra.emplace_back("search_layer_pm", trie_ ? 1.0 : 0.0);
  s.extra.emplace_back("search_layer_repaired", static_cast<double>(repaired_));
  s.extra.emplace_back(
      "fill",
      nodes == 0 ? 0.0 : static_cast<double>(s.entries) / static_cast<double>(nodes * p_.slots));
  return s;
}

Status PacTree::for_each_block(const std::function<void(PPtr)>& fn) {
  alloc::Allocator::EpochGuard eg(*env_.alloc);
  for (uint64_t r = head_raw_; r != 0; r = LdAcquire(N(r)->next)) fn(PPtr(r));
  if (trie_) trie_->ForEachBlock([&](uint64_t r) { fn(PPtr(r)); });
  return Status::OK();
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    pactree,
    {
        .name = "pactree",
        .persistent = true,
        .options_help =
            "slots=4..64 (pairs per data node, default 64) updater=thread|inline (search-layer "
            "updates from per-NUMA logs by a background thread, default, or at once) "
            "search=pm|dram (the search layer: a persistent trie in the pool, default, or a DRAM "
            "B+-tree rebuilt at open)",
        .validate = [](const Options& o) -> Status { return ParseParams(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return PacTree::Create(env, p.value());
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return PacTree::Open(env, p.value());
        },
        .marks_in_use = true,
    });

}  // namespace pmindex::pactree
