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
// 0: none known, start at the head); an entry is added for a node linked
// into the chain by a split, and removed after that node is merged away
// (update_log.h). A name Floor returns may therefore be a node merged
// away: it stays readable while the caller is inside an epoch guard (a
// node is retired only after its entry is removed) and names the node
// that took its pairs. Insert and Remove are called by one thread at a
// time (UpdateLogs' apply lock); Floor from any thread, concurrently.
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
  // Removes anchor's entry if it names `node` (else nothing); durable
  // when it returns (search=pm). Never fails.
  virtual void Remove(Key anchor, uint64_t node) = 0;
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
  void Remove(Key anchor, uint64_t node) override {
    const std::optional<uint64_t> v = tree_.lookup(anchor);
    if (v.has_value() && *v == node) tree_.remove(anchor);
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
