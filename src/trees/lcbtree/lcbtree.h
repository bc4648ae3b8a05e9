// LCB+Tree: the "log-based consistent B+-tree" baseline of the NV-Tree
// paper (section 3.1): a standard B+-tree whose nodes, inner and leaf, are
// all in PM and kept sorted. Before a node is modified its original is
// copied to an undo log; the modified (shifted) entries are then flushed in
// place, and the log is cleared.
//
// Persistent fields:
//   root(0)  PPtr of the Meta block {tag, root, height, log, node bytes}.
//   root(6)  content record of the last clean close (common/content_record.h):
//                 close() sums the leaves' pairs; an open of a cleanly
//                 closed pool compares it with the sum its read-only
//                 validation takes, before the first write.
//   Node          {n, leaf, next, keys[C], vals[C+1]} (docs/layout/lcbtree.md).
//   Log           {count, old_root, old_height} + count records
//                 {target PPtr, original node bytes}.
// Persist order of every modification:
//   1. copy each node to be modified into the log, flush, fence;
//   2. NAW log.count = records (the undo log is valid);
//   3. modify in place; flush every changed range (shifted entries, new
//      nodes, header words, meta root); fence;
//   4. NAW log.count = 0 (commit).
// Recovery: a valid log is undone (originals copied back, root and height
// restored, flushed, fenced, then the log cleared); nodes allocated by the
// undone operation become unreachable and are garbage collected.
// Locks: one reader-writer lock for the whole tree (the paper's baselines
// are single-threaded); deletes do not merge nodes.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "alloc/allocator.h"
#include "common/content_record.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "sync/mutex.h"

namespace pmindex::lcbtree {

struct alignas(64) Node {
  uint32_t n;
  uint32_t leaf;
  uint64_t next;   // leaves: right sibling PPtr raw; inner: unused
  uint64_t w[1];   // keys[cap] then vals[cap+1]
  static constexpr uint32_t kHeader = 16;
  static constexpr uint32_t CapacityFor(uint32_t bytes) { return (bytes - kHeader - 8) / 16; }
};
static_assert(offsetof(Node, n) == 0);
static_assert(offsetof(Node, leaf) == 4);
static_assert(offsetof(Node, next) == 8);
static_assert(offsetof(Node, w) == Node::kHeader);

struct alignas(64) Meta {
  uint64_t tag;
  uint64_t root;
  uint64_t height;  // levels including leaves
  uint64_t log;
  uint64_t node_bytes;
};
static_assert(sizeof(Meta) == 64);

struct alignas(64) LogHeader {
  uint64_t count;  // valid undo records; 0 = nothing to undo
  uint64_t old_root;
  uint64_t old_height;
};
static_assert(sizeof(LogHeader) == 64);

class LcbTree final : public Index {
 public:
  static constexpr uint64_t kTag = 0x4C43425452454531;  // "LCBTREE1"
  static constexpr uint32_t kMaxHeight = 24;

  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, uint32_t node_bytes);
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, uint32_t node_bytes);

  Status insert(Key k, Value v) override;
  Status update(Key k, Value v) override;
  Status upsert(Key k, Value v) override;
  std::optional<Value> lookup(Key k) override;
  Status remove(Key k) override;
  size_t scan(Key from, size_t n, KV* out) override;
  Status bulk_load(std::span<const KV> sorted, double fill) override;
  Status verify() override;
  IndexStats stats() override;
  Status for_each_block(const std::function<void(PPtr)>& fn) override;
  // Writes the content record (root slot 6); nothing else is kept for a
  // clean open. Once; nothing for an open that did not complete.
  Status close() override;

 private:
  LcbTree(const IndexEnv& env, uint32_t node_bytes);
  Node* N(uint64_t raw) const { return env_.pool->to_ptr<Node>(PPtr(raw)); }
  Key* keys(Node* x) const { return reinterpret_cast<Key*>(x->w); }
  uint64_t* vals(Node* x) const { return reinterpret_cast<uint64_t*>(x->w) + cap_; }
  uint64_t LogRecordBytes() const { return 64 + bytes_; }
  std::byte* LogRecord(uint32_t i) const;

  // Descends to the leaf for k; path[i] = node raw at depth i, pos[i] = child index.
  void Descend(Key k, std::vector<uint64_t>* path, std::vector<uint32_t>* pos) const
      PMINDEX_REQUIRES_SHARED(mu_);
  uint32_t LeafPos(Node* leaf, Key k) const;  // first index with key >= k
  // Where k is or would go: the descent's path, the leaf, k's index in it
  // (LeafPos) and whether the key there is k.
  struct Found {
    std::vector<uint64_t> path;
    std::vector<uint32_t> pos;
    Node* leaf;
    uint32_t i;
    bool hit;
  };
  Found Find(Key k) const PMINDEX_REQUIRES_SHARED(mu_);
  // Undo logging.
  void LogNodes(const std::vector<uint64_t>& nodes) PMINDEX_REQUIRES(mu_);
  void Commit() PMINDEX_REQUIRES(mu_);
  Status Undo();
  // Writes v over the entry f found (f.hit), logged and committed.
  Status UpdateAt(const Found& f, Value v) PMINDEX_REQUIRES(mu_);
  Status InsertNew(Key k, Value v, std::vector<uint64_t>& path, std::vector<uint32_t>& pos)
      PMINDEX_REQUIRES(mu_);
  // InsertNew's steps. Reserve: the nodes the insert changes in place (the
  // leaf, every full ancestor and the first ancestor with room) into
  // *logged, and every new node it needs allocated into *fresh, so that
  // OutOfSpace changes nothing. SplitNode: splits the full node x, with
  // (up_key, up_val) inserted at i, into x and the new node r_raw, both
  // flushed; returns the separator. GrowRoot: a new root over left_raw and
  // right_raw, flushed, named by the meta block (flushed, not committed).
  Status ReserveForInsert(const std::vector<uint64_t>& path, std::vector<uint64_t>* logged,
                          std::vector<PPtr>* fresh) PMINDEX_REQUIRES(mu_);
  Key SplitNode(Node* x, uint32_t i, Key up_key, uint64_t up_val, uint64_t r_raw)
      PMINDEX_REQUIRES(mu_);
  void GrowRoot(uint64_t left_raw, Key sep, uint64_t right_raw, uint64_t nr_raw)
      PMINDEX_REQUIRES(mu_);
  // Recovery, read-only: decodes the undo log's records into undo_view_
  // (target node -> its logged original) so the tree can be validated as
  // Undo will leave it before Undo writes anything.
  Status CheckUndo();
  // The node at raw as validation sees it: the logged original while
  // undo_view_ is in use, else the PM node.
  const Node* View(uint64_t raw, const Node* pm) const;
  Status CheckNode(uint64_t raw) const;
  // Open, after VerifyNode (undo_view_ still in use): the leaf chain links
  // `leaves` (VerifyNode's order) and nothing else; the leftmost and the
  // rightmost leaf at the same depth. Reads only.
  Status CheckShape(uint64_t root, const std::vector<uint64_t>& leaves) const;
  // Checks the subtree at raw; `nodes` (optional) collects every node,
  // `content` (optional) adds every leaf pair.
  Status VerifyNode(uint64_t raw, uint32_t depth, bool has_lo, Key lo, bool has_hi, Key hi,
                    std::vector<uint64_t>* leaves, uint64_t* entries,
                    std::vector<uint64_t>* nodes = nullptr,
                    common::ContentSum* content = nullptr);

  IndexEnv env_;
  uint32_t bytes_;
  uint32_t cap_;
  Meta* meta_ = nullptr;
  LogHeader* log_ = nullptr;
  std::vector<std::pair<uint64_t, const Node*>> undo_view_;  // open only
  // Readers share it, every write holds it alone (the tree's one lock).
  mutable sync::SharedMutex mu_;
  bool closed_ = true;  // until Create or Open succeeds
};

}  // namespace pmindex::lcbtree
