// PACTree's persistent search layer (pm_trie.h).
#include "trees/pactree/pm_trie.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>

#include "alloc/numa_meter.h"
#include "pm/persist.h"
#include "pm/pptr_decode.h"
#include "trees/pactree/data_node.h"

namespace pmindex::pactree {
namespace {

// Key bits at and above bit s (0 for s >= 64).
inline uint64_t HighMask(uint32_t s) { return s >= 64 ? 0 : ~((uint64_t{1} << s) - 1); }
inline uint64_t TrieNodeBytes(uint32_t bits) { return sizeof(TrieHeader) + (uint64_t{8} << bits); }
inline uint32_t Digit(const TrieHeader* n, Key k) {
  return static_cast<uint32_t>(k >> n->shift) & ((1u << n->bits) - 1);
}
inline uint64_t* Children(TrieHeader* n) { return reinterpret_cast<uint64_t*>(n + 1); }
inline const uint64_t* Children(const TrieHeader* n) {
  return reinterpret_cast<const uint64_t*>(n + 1);
}
// Child words change after the node is published: acquire loads (a new
// node's content was stored before the release store that names it).
inline uint64_t LoadChild(const TrieHeader* n, uint32_t c) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(Children(n)[c]))
      .load(std::memory_order_acquire);
}
inline bool IsLeaf(uint64_t w) { return (w & 1) != 0; }
inline uint64_t LeafRaw(uint64_t w) { return w & ~uint64_t{1}; }

std::string Hex(uint64_t raw) { return std::to_string(raw); }

// Open's and verify()'s walk over the whole trie. With a chain (open),
// leaves are matched against it in order; without (verify), a leaf's
// anchor is read from its data node.
struct Checker {
  const Pool& pool;
  const std::vector<uint64_t>* raws = nullptr;
  const std::vector<Key>* anchors = nullptr;
  PmTrie::Census* census = nullptr;
  uint64_t limit = 0;
  size_t cursor = 0;
  uint64_t nodes = 0;
  uint64_t leaves = 0;
  bool have_prev = false;
  Key prev = 0;

  Status Node(uint64_t raw, uint32_t parent_shift, Key path, uint32_t depth);
  Status Leaf(uint64_t raw, Key path, uint32_t shift);
};

Status Checker::Node(uint64_t raw, uint32_t parent_shift, Key path, uint32_t depth) {
  auto h = pm::Decode<const TrieHeader>(pool, raw, sizeof(TrieHeader), 64, "pactree: trie node");
  if (!h.ok()) return h.status();
  const TrieHeader* n = h.value();
  auto where = [raw] { return "pactree: trie node " + Hex(raw); };
  if (n->tag != kTrieTag) return Status::Corruption(where() + " has no trie tag");
  const bool root = depth == 0;
  const bool shape = root ? PmTrie::IsRootShape(n->bits, n->shift)
                          : n->bits == PmTrie::kDigitBits && n->shift % PmTrie::kDigitBits == 0 &&
                                n->shift + n->bits <= parent_shift;
  if (!shape)
    return Status::Corruption(where() + ": digit of " + std::to_string(n->bits) + " bits at bit " +
                              std::to_string(n->shift) + " does not fit under its parent");
  const uint64_t own = HighMask(n->shift + n->bits);
  if ((n->prefix & ~own) != 0 || (n->prefix & HighMask(parent_shift)) != path)
    return Status::Corruption(where() + ": prefix " + Hex(n->prefix) + " is not its path's");
  if (!pm::Decode<const TrieHeader>(pool, raw, TrieNodeBytes(n->bits), 64, "pactree: trie node")
           .ok() ||
      ++nodes > limit)
    return Status::Corruption(where() + ": past the pool's end, or the trie has a cycle");
  if (census != nullptr) census->blocks.push_back(raw);
  for (uint32_t c = 0; c < (1u << n->bits); ++c) {
    const uint64_t w = Children(n)[c];
    const Key sub = n->prefix | (Key{c} << n->shift);
    if (w == 0) continue;
    PMINDEX_RETURN_IF_ERROR(IsLeaf(w) ? Leaf(LeafRaw(w), sub, n->shift)
                                      : Node(w, n->shift, sub, depth + 1));
  }
  return Status::OK();
}

Status Checker::Leaf(uint64_t raw, Key path, uint32_t shift) {
  auto d = pm::Decode<const NodeHeader>(pool, raw, sizeof(NodeHeader), 64, "pactree: trie leaf");
  if (!d.ok()) return d.status();
  if (d.value()->tag != kNodeTag)
    return Status::Corruption("pactree: the trie names " + Hex(raw) + ", not a data node");
  const Key anchor = Ld(d.value()->anchor);
  if (raws != nullptr) {
    // Leaves ascend, so the chain is consumed in order; the nodes passed
    // over are the anchors the trie lacks. A leaf naming a data node the
    // chain does not hold is a node merged away whose removal the crash
    // lost (its block is not reused before the removal is durable).
    while (cursor < raws->size() && (*anchors)[cursor] < anchor)
      census->missing.push_back(cursor++);
    if (cursor < raws->size() && (*raws)[cursor] == raw) {
      ++cursor;
    } else {
      census->stale.emplace_back(anchor, raw);
    }
  }
  if ((anchor & HighMask(shift)) != path || (have_prev && anchor <= prev))
    return Status::Corruption("pactree: the trie holds anchor " + std::to_string(anchor) +
                              " out of place");
  have_prev = true;
  prev = anchor;
  ++leaves;
  return Status::OK();
}

}  // namespace

PmTrie::PmTrie(Pool& pool, alloc::Allocator& alloc, uint64_t root_raw, uint64_t nodes,
               uint64_t leaves)
    : pool_(pool),
      alloc_(alloc),
      root_raw_(root_raw),
      root_(pool.to_ptr<const TrieHeader>(PPtr(root_raw))),
      size_(leaves),
      nodes_(nodes) {}

uint32_t PmTrie::RootBitsFor(uint64_t pool_bytes) {
  return pool_bytes >= kWideRootPoolBytes ? kRootBits : kSmallRootBits;
}

Result<uint64_t> PmTrie::MakeRoot(Pool& pool, alloc::Allocator& alloc, uint32_t bits,
                                  uint64_t head) {
  const uint64_t bytes = TrieNodeBytes(bits);
  Result<PPtr> a = alloc.Alloc(bytes);
  if (!a.ok()) return a.status();
  auto* n = pool.to_ptr<TrieHeader>(a.value());
  pm::fill(n, 0, bytes);
  pm::store(&n->tag, kTrieTag);
  pm::store(&n->shift, 64 - bits);
  pm::store(&n->bits, bits);
  if (head != 0) pm::store(&Children(n)[0], head | 1);  // anchor 0: top digit 0
  pm::flush(n, bytes);  // the caller's fence makes it durable before it is named
  return a.value().raw();
}

Status PmTrie::Check(const Pool& pool, uint64_t root_raw, const std::vector<uint64_t>& raws,
                     const std::vector<Key>& anchors, Census* census) {
  Checker ck{.pool = pool, .raws = &raws, .anchors = &anchors, .census = census};
  ck.limit = pool.size() / TrieNodeBytes(kDigitBits) + 1;
  PMINDEX_RETURN_IF_ERROR(ck.Node(root_raw, 64, 0, 0));
  while (ck.cursor < raws.size()) census->missing.push_back(ck.cursor++);
  census->root_bits = pool.to_ptr<const TrieHeader>(PPtr(root_raw))->bits;
  census->leaves = ck.leaves;
  return Status::OK();
}

Status PmTrie::Verify() const {
  Checker ck{.pool = pool_};
  ck.limit = pool_.size() / TrieNodeBytes(kDigitBits) + 1;
  PMINDEX_RETURN_IF_ERROR(ck.Node(root_raw_, 64, 0, 0));
  if (ck.leaves != Size() || ck.nodes != Nodes())
    return Status::Corruption("pactree: the trie has " + std::to_string(ck.nodes) + " nodes and " +
                              std::to_string(ck.leaves) + " leaves, counted " +
                              std::to_string(Nodes()) + " and " + std::to_string(Size()));
  return Status::OK();
}

// ---------------------------------------------------------------- readers

const TrieHeader* PmTrie::NodeAt(uint64_t raw) const {
  if (pm::CheckPPtr(pool_, raw, sizeof(TrieHeader), 64) != pm::PPtrFault::kOk) return nullptr;
  const auto* n = pool_.to_ptr<const TrieHeader>(PPtr(raw));
  if (n->tag != kTrieTag ||
      (n->bits != kDigitBits && n->bits != kRootBits && n->bits != kSmallRootBits))
    return nullptr;
  if (pm::CheckPPtr(pool_, raw, TrieNodeBytes(n->bits), 64) != pm::PPtrFault::kOk) return nullptr;
  return n;
}

Key PmTrie::AnchorOf(uint64_t leaf) const {
  const uint64_t raw = LeafRaw(leaf);
  if (pm::CheckPPtr(pool_, raw, sizeof(NodeHeader), 64) != pm::PPtrFault::kOk) return ~Key{0};
  return Ld(pool_.to_ptr<const NodeHeader>(PPtr(raw))->anchor);
}

void PmTrie::Visit(const TrieHeader* n) const {
  alloc::MeterVisit(alloc_, n);
  pm::ModelRead(n, pm::kCacheLine);
}

uint64_t PmTrie::Max(const TrieHeader* n) const {
  // Subtrees emptied by removes are passed over. Shifts strictly decrease
  // downwards, so a damaged trie cannot loop.
  Visit(n);
  for (uint32_t c = 1u << n->bits; c-- > 0;) {
    const uint64_t w = LoadChild(n, c);
    if (w == 0) continue;
    if (IsLeaf(w)) return LeafRaw(w);
    const TrieHeader* m = NodeAt(w);
    if (m == nullptr || m->shift >= n->shift) return 0;
    if (const uint64_t r = Max(m); r != 0) return r;
  }
  return 0;
}

uint64_t PmTrie::LeftOf(const TrieHeader* n, uint32_t c) const {
  while (c-- > 0) {
    const uint64_t w = LoadChild(n, c);
    if (w == 0) continue;
    if (IsLeaf(w)) return LeafRaw(w);
    const TrieHeader* m = NodeAt(w);
    if (m == nullptr || m->shift >= n->shift) return 0;
    if (const uint64_t r = Max(m); r != 0) return r;
  }
  return 0;
}

uint64_t PmTrie::Floor(Key k) const {
  struct Frame {
    const TrieHeader* n;
    uint32_t c;
  };
  Frame path[64 / kDigitBits + 1];
  uint32_t depth = 0;
  const TrieHeader* n = root_;
  for (;;) {
    Visit(n);
    const uint32_t c = Digit(n, k);
    const uint64_t w = LoadChild(n, c);
    if (IsLeaf(w)) {
      if (AnchorOf(w) <= k) return LeafRaw(w);
    } else if (w != 0) {
      const TrieHeader* m = NodeAt(w);
      if (m != nullptr && m->shift < n->shift && depth < 64 / kDigitBits) {
        const Key kp = k & HighMask(m->shift + m->bits);
        if (kp == m->prefix) {
          path[depth++] = {n, c};
          n = m;
          continue;
        }
        if (m->prefix < kp) {  // every key under m is below k
          if (const uint64_t r = Max(m); r != 0) return r;
        }
      }
    }
    // Nothing <= k at or right of digit c under n: the greatest leaf left
    // of it, under n or under an ancestor.
    for (uint32_t cc = c;;) {
      const uint64_t r = LeftOf(n, cc);
      if (r != 0) return r;
      if (depth == 0) return 0;
      --depth;
      n = path[depth].n;
      cc = path[depth].c;
    }
  }
}

void PmTrie::Walk(const TrieHeader* n, uint32_t depth,
                  const std::function<void(const TrieHeader*, uint32_t)>& fn,
                  const std::function<void(uint64_t)>& leaf) const {
  if (fn) fn(n, depth);
  for (uint32_t c = 0; c < (1u << n->bits); ++c) {
    const uint64_t w = LoadChild(n, c);
    if (w == 0) continue;
    if (IsLeaf(w)) {
      if (leaf) leaf(w);
    } else {
      Walk(pool_.to_ptr<const TrieHeader>(PPtr(w)), depth + 1, fn, leaf);
    }
  }
}

void PmTrie::ForEach(const std::function<void(Key, uint64_t)>& fn) const {
  Walk(root_, 0, nullptr, [&](uint64_t w) { fn(AnchorOf(w), LeafRaw(w)); });
}

void PmTrie::ForEachBlock(const std::function<void(uint64_t)>& fn) const {
  Walk(
      root_, 0, [&](const TrieHeader* n, uint32_t) { fn(pool_.to_pptr(n).raw()); }, nullptr);
}

uint64_t PmTrie::Bytes() const {
  return TrieNodeBytes(root_->bits) + (Nodes() - 1) * TrieNodeBytes(kDigitBits);
}

uint32_t PmTrie::Height() const {
  uint32_t h = 0;
  Walk(
      root_, 0, [&](const TrieHeader*, uint32_t d) { h = std::max(h, d + 1); }, nullptr);
  return h;
}

// ---------------------------------------------------------------- mutator

void PmTrie::Store(uint64_t* word, uint64_t v) {
  pm::store(word, v, std::memory_order_release);  // publishes a new node's content
  // No fence: the word is durable at the next one (any later insert's, a
  // split's, close's). A word lost in a crash is anchors the trie lacks,
  // and open finds every one (it compares the leaves with the chain it
  // walks anyway) and queues it; what keeps the trie sound is that the
  // node a word names was durable before the word was stored.
  // pmcrash-redundant(drop-flush,flush-late): the flush only keeps open's
  // repair small, as said above.
  pm::flush(word, sizeof(uint64_t));
}

uint64_t PmTrie::Fork(Key a, uint64_t a_word, Key other_key, uint64_t other) {
  // The highest bit where a and the other keys differ picks the digit.
  const uint32_t d = 63 - static_cast<uint32_t>(__builtin_clzll(a ^ other_key));
  const uint32_t shift = d / kDigitBits * kDigitBits;
  const uint64_t bytes = TrieNodeBytes(kDigitBits);
  Result<PPtr> r = alloc_.Alloc(bytes);
  if (!r.ok()) return 0;
  auto* n = pool_.to_ptr<TrieHeader>(r.value());
  pm::fill(n, 0, bytes);
  pm::store(&n->tag, kTrieTag);
  pm::store(&n->prefix, a & HighMask(shift + kDigitBits));
  pm::store(&n->shift, shift);
  pm::store(&n->bits, kDigitBits);
  pm::store(&Children(n)[Digit(n, a)], a_word);
  pm::store(&Children(n)[Digit(n, other_key)], other);
  pm::persist(n, bytes);  // durable while unreachable
  nodes_.fetch_add(1, std::memory_order_relaxed);
  return r.value().raw();
}

bool PmTrie::Insert(Key a, uint64_t node) {
  const uint64_t leaf = node | 1;
  auto* n = const_cast<TrieHeader*>(root_);
  for (;;) {
    uint64_t* slot = &Children(n)[Digit(n, a)];
    const uint64_t w = *slot;
    uint64_t fork;
    if (w == 0) {
      fork = leaf;
    } else if (IsLeaf(w)) {
      const Key b = AnchorOf(w);
      if (b == a) {
        if (w != leaf) Store(slot, leaf);
        return true;
      }
      if ((fork = Fork(a, leaf, b, w)) == 0) return false;
    } else {
      auto* m = pool_.to_ptr<TrieHeader>(PPtr(w));
      if ((a & HighMask(m->shift + m->bits)) == m->prefix) {
        n = m;
        continue;
      }
      // a leaves m's prefix above m's digit: a new node above m.
      if ((fork = Fork(a, leaf, m->prefix, w)) == 0) return false;
    }
    Store(slot, fork);  // commits
    size_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
}

void PmTrie::Remove(Key a, uint64_t node) { RemoveLeaf(a, node, true); }
void PmTrie::ClearStaleLeaf(Key a, uint64_t node) { RemoveLeaf(a, node, false); }

void PmTrie::RemoveLeaf(Key a, uint64_t node, bool collapse) {
  const uint64_t leaf = node | 1;
  auto* n = const_cast<TrieHeader*>(root_);
  uint64_t* parent_slot = nullptr;  // the word naming n (none for the root)
  uint64_t* slot = &Children(n)[Digit(n, a)];
  while (*slot != leaf) {
    const uint64_t w = *slot;
    if (w == 0 || IsLeaf(w)) return;  // a's leaf names another node, or there is none
    auto* m = pool_.to_ptr<TrieHeader>(PPtr(w));
    if ((a & HighMask(m->shift + m->bits)) != m->prefix) return;
    parent_slot = slot;
    n = m;
    slot = &Children(n)[Digit(n, a)];
  }
  // Durable before the caller retires the node it named: a crash image
  // may keep the leaf only while the node's block is not reused.
  pm::store(slot, uint64_t{0}, std::memory_order_release);
  // pmcrash-redundant(drop-fence,flush-late): the allocation that reuses
  // the block fences before the block is named, and the simulator counts
  // that fence (of any thread) for this flushed line; on hardware the
  // reusing thread may be another, whose fence does not order this one.
  pm::persist(slot, sizeof(uint64_t));
  size_.fetch_sub(1, std::memory_order_relaxed);
  if (parent_slot == nullptr || !collapse) return;
  for (uint32_t c = 0; c < (1u << n->bits); ++c)
    if (Children(n)[c] != 0) return;
  // n is empty: unlinked (durably, before its block can be reused) and
  // retired; readers inside an epoch guard may still pass through it. A
  // crash before the unlink leaves an empty node, which readers pass over.
  pm::store(parent_slot, uint64_t{0}, std::memory_order_release);
  // pmcrash-redundant(drop-fence,flush-late): as the leaf's persist above.
  pm::persist(parent_slot, sizeof(uint64_t));
  nodes_.fetch_sub(1, std::memory_order_relaxed);
  alloc_.Retire(pool_.to_pptr(n));
}

void PmTrie::FreeAll() {
  std::vector<uint64_t> blocks;
  ForEachBlock([&](uint64_t r) { blocks.push_back(r); });
  for (uint64_t r : blocks) alloc_.Free(PPtr(r));
}

void PmTrie::Adopt(const PmTrie& built) {
  FreeAll();
  root_raw_ = built.root_raw_;
  root_ = built.root_;
  size_.store(built.Size(), std::memory_order_relaxed);
  nodes_.store(built.Nodes(), std::memory_order_relaxed);
}

}  // namespace pmindex::pactree
