// search=pm: PACTree's persistent search layer (the paper's PDL-ART), a
// trie over the data nodes' anchor keys, in the pool
// (docs/layout/pactree.md "The trie (search=pm)").
//
// A trie node branches on `bits` bits of the key starting at bit `shift`:
// the root on the top 12 bits (4096 children, never replaced: the top
// levels of a radix tree are dense, and one wide node saves one or two
// node visits per lookup), every other node on one 4-bit digit (16
// children). A node stores the key bits above its digit in full
// (`prefix`), so a chain of one-child nodes is never built (path
// compression), and a child word is either 0, an inner node's PPtr raw,
// or a data node's PPtr raw | 1 (a leaf: the data node itself, whose
// `anchor` is the key; the only anchor under that child, as ART's lazy
// expansion).
//
//   line 0     tag kTrieTag, prefix, shift (u32), bits (u32), pad
//   line 1..   child[1 << bits], 8 bytes each
//
// Persistence: nodes are changed only by single 8-byte stores of child
// words (0 -> leaf, leaf -> new node holding it and the new leaf, node ->
// new node above it holding it and the new leaf, leaf -> 0, empty node ->
// 0); a new node is written and persisted while unreachable, then the
// child word is stored and flushed (durable at the next fence: a lost word
// is only anchors the trie lacks, which open restores). A removal is
// persisted before the data node it named (or the digit node it emptied)
// is retired, so a crash image never names a reused block. A crash leaves
// the old or the new word, and at most one unreachable node, which
// recovery reclaims. Readers run inside the index's epoch guard: a digit
// node emptied by removes is retired, not freed.
//
// Thread safety: one mutator at a time (Insert, Remove); Floor and ForEach
// from any thread, lock-free: child words are read with acquire loads and
// a new node is published by a release store after its content.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "alloc/allocator.h"
#include "pm/pool.h"
#include "pmindex/status.h"
#include "trees/pactree/search_layer.h"

namespace pmindex::pactree {

inline constexpr uint64_t kTrieTag = 0x4549525443415450;  // "PTACTRIE"

struct alignas(64) TrieHeader {
  uint64_t tag;
  Key prefix;      // the key bits at and above shift + bits; the rest 0
  uint32_t shift;  // the node branches on key bits [shift, shift + bits)
  uint32_t bits;   // kRootBits for the root, kDigitBits below
  uint64_t pad[5];
};
static_assert(sizeof(TrieHeader) == 64);

class PmTrie final : public SearchLayer {
 public:
  // The root's digit: 12 bits (4096 children, 32 KiB, which takes a
  // 256 KiB allocator page of its own) in pools of kWideRootPoolBytes or
  // more; in smaller pools (tests, crash runs: a 4 MiB pool has 15 pages
  // for every size class) 4 bits, a digit node's shape (192 bytes, the
  // digit nodes' size class), deeper but taking no page. Chosen from the
  // pool's size when the index is created (the default first segment is
  // 64 MiB) and kept as the pool grows; open accepts either (the root's
  // bits are in its header).
  static constexpr uint32_t kRootBits = 12;
  static constexpr uint32_t kSmallRootBits = 4;
  static constexpr uint64_t kWideRootPoolBytes = uint64_t{64} << 20;
  static constexpr uint32_t kDigitBits = 4;
  static uint32_t RootBitsFor(uint64_t pool_bytes);
  static constexpr bool IsRootShape(uint32_t bits, uint32_t shift) {
    return (bits == kRootBits || bits == kSmallRootBits) && shift == 64 - bits;
  }

  // root_raw: a root made by MakeRoot (nodes 1, leaves 0) or one Check
  // accepted (its counts).
  PmTrie(Pool& pool, alloc::Allocator& alloc, uint64_t root_raw, uint64_t nodes, uint64_t leaves);

  // Allocates a root of `bits` bits (RootBitsFor), empty or holding the
  // leaf of data node `head` (anchor 0), and flushes it; the caller fences
  // before anything durable names it. OutOfSpace changes nothing.
  static Result<uint64_t> MakeRoot(Pool& pool, alloc::Allocator& alloc, uint32_t bits,
                                   uint64_t head = 0);

  // Open's read-only check of the trie at root_raw against the data
  // layer's chain (raws in chain order, anchors ascending): every node
  // decodes, is tagged and consistent with its path; every leaf is a
  // tagged data node whose anchor has the leaf's path, leaves ascend.
  // Appends every trie node to *blocks, the chain indexes no leaf names
  // to *missing, and the leaves naming data nodes outside the chain (nodes
  // merged away whose removal a crash lost) to *stale.
  struct Census {
    std::vector<uint64_t> blocks;                 // every trie node, root first
    std::vector<size_t> missing;                  // chain indexes no leaf names
    std::vector<std::pair<Key, uint64_t>> stale;  // (anchor, node) outside the chain
    uint64_t leaves = 0;
    uint32_t root_bits = 0;
  };
  static Status Check(const Pool& pool, uint64_t root_raw, const std::vector<uint64_t>& raws,
                      const std::vector<Key>& anchors, Census* census);

  uint64_t Floor(Key k) const override;
  bool Insert(Key anchor, uint64_t node) override;
  // Clears anchor's leaf if it names `node`, persisted; a digit node left
  // empty is unlinked (persisted) and retired to the allocator's epochs.
  void Remove(Key anchor, uint64_t node) override;
  // Open's repair of a leaf naming a node merged away (Census::stale),
  // while the allocator is in recovery: the leaf cleared and persisted; a
  // node it leaves empty stays (nothing is retired).
  void ClearStaleLeaf(Key anchor, uint64_t node);
  void ForEach(const std::function<void(Key, uint64_t)>& fn) const override;
  Status Verify() const override;
  size_t Size() const override { return size_.load(std::memory_order_relaxed); }
  uint64_t Nodes() const override { return nodes_.load(std::memory_order_relaxed); }
  uint64_t Bytes() const override;
  uint32_t Height() const override;

  uint64_t root_raw() const { return root_raw_; }
  uint32_t root_bits() const { return root_->bits; }
  // Every trie node's raw, root first. REQUIRES: no concurrent Insert.
  void ForEachBlock(const std::function<void(uint64_t)>& fn) const;
  // Frees every node of this trie and takes over `built` (bulk load;
  // REQUIRES: no other operation on the index; `built` is dropped after).
  void Adopt(const PmTrie& built);
  // Frees every node (bulk load's failure path, on a trie nothing links).
  void FreeAll();

 private:
  const TrieHeader* NodeAt(uint64_t raw) const;  // nullptr if raw is not a sane node
  Key AnchorOf(uint64_t leaf) const;
  void Visit(const TrieHeader* n) const;
  uint64_t Max(const TrieHeader* n) const;
  uint64_t LeftOf(const TrieHeader* n, uint32_t c) const;
  // A new digit node holding leaf `a_word` (for key a) and child `other`
  // (whose keys share prefix `other_key`'s bits above the first bit they
  // differ from a), durable; 0 when out of space.
  uint64_t Fork(Key a, uint64_t a_word, Key other_key, uint64_t other);
  void Store(uint64_t* word, uint64_t v);
  void RemoveLeaf(Key a, uint64_t node, bool collapse);
  // Depth-first, children in ascending order: fn(node, depth) for every
  // node, leaf(word) for every leaf word.
  void Walk(const TrieHeader* n, uint32_t depth,
            const std::function<void(const TrieHeader*, uint32_t)>& fn,
            const std::function<void(uint64_t)>& leaf) const;

  Pool& pool_;
  alloc::Allocator& alloc_;
  uint64_t root_raw_;
  const TrieHeader* root_;
  std::atomic<uint64_t> size_{0};
  std::atomic<uint64_t> nodes_{1};
};

}  // namespace pmindex::pactree
