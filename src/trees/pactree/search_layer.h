// PACTree's search layer (docs/layout/pactree.md "Search layer"): anchor
// key -> PPtr raw of the data node that starts there. It is a hint: the
// data layer is the truth, and every operation moves right along the data
// nodes' `next` from the node Floor names. Two implementations:
//   search=pm    PmTrie (pm_trie.h), a persistent trie in the pool, the
//                paper's PDL-ART; kept across opens.
//   search=dram  DramSearch below, this project's DRAM OLC B+-tree,
//                rebuilt from the data layer at every open.
//
// Contract of both: Floor(k) names a data node whose anchor is <= k (or
// 0: none known, start at the head); an entry is only ever added for a
// node that is linked into the chain, and data nodes are never freed
// while the index is open, so a name stays valid. Insert is called by one
// thread at a time (UpdateLogs' apply lock); Floor from any thread,
// concurrently with Insert.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "common/olc_btree.h"
#include "pmindex/status.h"
#include "pmindex/types.h"

namespace pmindex::pactree {

class SearchLayer {
 public:
  virtual ~SearchLayer() = default;
  // The node with the greatest anchor <= k the layer knows, or 0.
  virtual uint64_t Floor(Key k) const = 0;
  // Adds anchor -> node; idempotent. False: out of space, nothing changed.
  virtual bool Insert(Key anchor, uint64_t node) = 0;
  // Every (anchor, node), ascending. REQUIRES: no concurrent Insert.
  virtual void ForEach(const std::function<void(Key, uint64_t)>& fn) const = 0;
  // The layer's own invariants. REQUIRES: no concurrent Insert.
  virtual Status Verify() const = 0;
  virtual size_t Size() const = 0;
  // Blocks (trie nodes or DRAM nodes), their bytes, and the height.
  virtual uint64_t Nodes() const = 0;
  virtual uint64_t Bytes() const = 0;
  virtual uint32_t Height() const = 0;
};

// search=dram: anchor -> node in OlcBTree<30, 30> (512-byte nodes).
class DramSearch final : public SearchLayer {
 public:
  uint64_t Floor(Key k) const override {
    std::optional<std::pair<uint64_t, uint64_t>> f = tree_.floor(k);
    return f.has_value() ? f->second : 0;
  }
  bool Insert(Key anchor, uint64_t node) override {
    tree_.upsert(anchor, node);
    return true;
  }
  void ForEach(const std::function<void(Key, uint64_t)>& fn) const override { tree_.ForEach(fn); }
  Status Verify() const override { return tree_.verify(); }
  size_t Size() const override { return tree_.size(); }
  uint64_t Nodes() const override { return tree_.inner_nodes() + tree_.leaves(); }
  uint64_t Bytes() const override { return tree_.dram_bytes(); }
  uint32_t Height() const override { return static_cast<uint32_t>(tree_.height()); }
  // Replaces the content with `sorted` (anchor, node) pairs.
  void Rebuild(const std::vector<KV>& sorted) {
    tree_.clear();
    tree_.bulk_load(sorted, 1.0);
  }

 private:
  mutable OlcBTree<30, 30> tree_;
};

}  // namespace pmindex::pactree
