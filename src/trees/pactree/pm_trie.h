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
// Persistence: nodes are only added, never changed except by single
// 8-byte stores of child words (0 -> leaf, leaf -> new node holding it and
// the new leaf, node -> new node above it holding it and the new leaf); a
// new node is written and persisted while unreachable, then the child
// word is stored and flushed (durable at the next fence: a lost word is
// only anchors the trie lacks, which open restores). A crash leaves the
// old or the new word, and at most one unreachable node, which recovery
// reclaims. Nothing is ever freed while the index is open, so readers
// need no epoch.
//
// Thread safety: one mutator at a time (Insert); Floor and ForEach from
// any thread, lock-free: child words are read with acquire loads and a new
// node is published by a release store after its content.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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
  static constexpr uint32_t kRootBits = 12;
  static constexpr uint32_t kRootShift = 64 - kRootBits;
  static constexpr uint32_t kDigitBits = 4;

  // root_raw: a root made by MakeRoot (nodes 1, leaves 0) or one Check
  // accepted (its counts).
  PmTrie(Pool& pool, alloc::Allocator& alloc, uint64_t root_raw, uint64_t nodes, uint64_t leaves);

  // Allocates a root, empty or holding the leaf of data node `head`
  // (anchor 0), and flushes it; the caller fences before anything durable
  // names it. OutOfSpace changes nothing.
  static Result<uint64_t> MakeRoot(Pool& pool, alloc::Allocator& alloc, uint64_t head = 0);

  // Open's read-only check of the trie at root_raw against the data
  // layer's chain (raws in chain order, anchors ascending): every node
  // decodes, is tagged and consistent with its path; every leaf is a
  // chain node whose anchor has the leaf's path, leaves ascend. Appends
  // every trie node to *blocks and the chain indexes no leaf names to
  // *missing.
  struct Census {
    std::vector<uint64_t> blocks;  // every trie node, root first
    std::vector<size_t> missing;   // chain indexes no leaf names
    uint64_t leaves = 0;
  };
  static Status Check(const Pool& pool, uint64_t root_raw, const std::vector<uint64_t>& raws,
                      const std::vector<Key>& anchors, Census* census);

  uint64_t Floor(Key k) const override;
  bool Insert(Key anchor, uint64_t node) override;
  void ForEach(const std::function<void(Key, uint64_t)>& fn) const override;
  Status Verify() const override;
  size_t Size() const override { return size_.load(std::memory_order_relaxed); }
  uint64_t Nodes() const override { return nodes_.load(std::memory_order_relaxed); }
  uint64_t Bytes() const override;
  uint32_t Height() const override;

  uint64_t root_raw() const { return root_raw_; }
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
