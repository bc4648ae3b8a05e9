// CDDS-Tree (Venkataraman et al., FAST 2011), the second baseline of the
// NV-Tree paper: a B+-tree of sorted PM nodes whose entries carry
// [start, end) versions. The tree as of version V holds every entry with
// start <= V < end. An operation writes version gv+1 and commits by one
// NAW of the global version gv.
//
// Persistent fields:
//   root(0)  PPtr of the Meta block {tag, root, gv, node bytes}.
//   Node          {n, leaf} + entries {key, value|child, start, end} sorted
//                 by key (ties: older first); docs/layout/cddstree.md.
// Persist order (only 8-byte stores are failure-atomic; a wider store may
// persist as any prefix of its 8-byte pieces, so no slot inside n is ever
// overwritten unless the node's `torn` marker names it):
//   insert        if the slot is not the last: copy the last entry into the
//                 free slot (outside n), flush, fence; n+1 (line 0, made
//                 durable by the marker's flush and fence, which follow it
//                 in the same line); then for each slot j from n-1 down to
//                 the insert position p: torn = j+1, flush, fence; copy
//                 e[j-1] (or the new
//                 entry {start = gv+1} at j = p) into e[j], flush, fence;
//                 finally torn = 0, flush. Appending: entry, flush, fence,
//                 n+1, flush. Then NAW gv = gv+1 (commit, fence first).
//   delete        end = gv+1 on the live entry, flush, fence; NAW gv.
//   update        insert the new entry, then end the old one; one commit.
//   split/replace new node(s) with the live entries, flushed (fenced by the
//                 shift's first fence, long before the commit); the
//                 parent's entry for the old node ended and entries for the
//                 new node(s) inserted (shifting as above); NAW gv.
//   root growth   new root with one committed entry for the old root,
//                 flushed, fenced; NAW meta.root (valid at any moment).
// Recovery (garbage collection of versions): first the slot named by a
// node's torn marker is neutralized (end = 0): it may hold a mix of its
// two neighbours' words, and both neighbours are intact copies; then every
// entry with start > gv is neutralized, every end > gv is reset to
// infinity, and of two identical adjacent live entries (an interrupted
// shift between marker writes) the first is neutralized; each is one
// idempotent 8-byte write (the marker is left, it names a dead slot).
// Dead entries are dropped physically when their node is next split or
// replaced; dead nodes become unreachable and are freed (at once when
// committed, by the allocator's GC after a crash).
// Locks: one reader-writer lock for the whole tree.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "alloc/allocator.h"
#include "common/content_record.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "sync/mutex.h"

namespace pmindex::cddstree {

struct Entry {
  Key key;
  uint64_t val;    // value (leaf) or child PPtr raw (inner)
  uint64_t start;  // version that created it
  uint64_t end;    // version that ended it; kInf = live
  static constexpr uint64_t kInf = UINT64_MAX;
  bool live(uint64_t v) const { return start <= v && v < end; }
};
static_assert(sizeof(Entry) == 32);

// Node layout (bytes = node size):
//   line 0   n u32 | leaf u32 | torn u64 | reserved (48 B)
//   64 + 32i entry i {key, val, start, end}; an entry never straddles a line
// torn: 0, or j+1 while slot j is being overwritten by a shift (slot j is
// then dead or about to be made dead by recovery).
struct alignas(64) Node {
  uint32_t n;
  uint32_t leaf;
  uint64_t torn;
  uint64_t pad[6];
  Entry e[1];
  static constexpr uint32_t kHeader = 64;
  static constexpr uint32_t CapacityFor(uint32_t bytes) { return (bytes - kHeader) / 32; }
};
static_assert(offsetof(Node, n) == 0);
static_assert(offsetof(Node, torn) == 8);
static_assert(offsetof(Node, e) == Node::kHeader);
static_assert(Node::kHeader % sizeof(Entry) == 0 && 64 % sizeof(Entry) == 0);

struct alignas(64) Meta {
  uint64_t tag;
  uint64_t root;
  uint64_t gv;  // last committed version
  uint64_t node_bytes;
};
static_assert(sizeof(Meta) == 64);
static_assert(offsetof(Meta, gv) == 16);

class CddsTree final : public Index {
 public:
  static constexpr uint64_t kTag = 0x4344445354524531;  // "CDDSTRE1"
  static constexpr uint32_t kMaxHeight = 32;

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
  // Writes the clean-close record (pm::kCleanCloseSlot: live entries and
  // leaves), which an open of the cleanly closed pool compares with what
  // its validation counts (common/content_record.h).
  Status close() override;

 private:
  enum class Op : uint8_t { kInsert, kUpdate, kUpsert, kRemove };
  CddsTree(const IndexEnv& env, uint32_t node_bytes);
  Node* N(uint64_t raw) const { return env_.pool->to_ptr<Node>(PPtr(raw)); }
  uint64_t gv() const { return meta_->gv; }
  // Index of the live entry routing k in an inner node (-1 if none).
  int Route(Node* x, Key k) const;
  // Index of the live entry of k in a leaf (-1 if none).
  int FindLive(Node* x, Key k) const;
  Status Write(Op op, Key k, Value v);
  // Makes room on the path to k; returns true if it changed the tree
  // (the caller descends again).
  Result<bool> MakeRoom(Key k) PMINDEX_REQUIRES(mu_);
  Status Restructure(uint64_t parent, int parent_idx, uint64_t x_raw) PMINDEX_REQUIRES(mu_);
  // Inserts e into x at its sorted position by shifting (x has room).
  void ShiftInsert(Node* x, const Entry& e) PMINDEX_REQUIRES(mu_);
  void Commit(uint64_t nv) PMINDEX_REQUIRES(mu_);
  // Open: Validate (reads only; collects every node, checks each node's
  // repaired copy as verify() would, counts the live leaf entries) before
  // Recover (repairs) so a refused open writes nothing.
  Status Validate(uint64_t raw, uint32_t depth, Key lo, bool has_hi, Key hi, uint32_t* leaf_depth,
                  uint64_t* entries, common::ContentSum* content, std::vector<uint64_t>* nodes) const;
  Status Recover(uint64_t raw, uint32_t depth);
  // Salvage copies only: repairs the node at raw in the copy and cuts
  // (end = 0) each live entry whose subtree fails the node checks; false if
  // the node itself is unusable. *cut counts the entries cut.
  bool SalvageCut(uint64_t raw, uint32_t depth, std::unordered_set<uint64_t>* seen, uint64_t* cut);
  Status CheckNode(uint64_t raw) const;
  Status VerifyNode(uint64_t raw, uint32_t depth, Key lo, bool has_hi, Key hi, uint32_t* leaf_depth,
                    uint64_t* entries);
  void Walk(uint64_t raw, const std::function<void(uint64_t, Node*)>& fn) const;

  IndexEnv env_;
  uint32_t bytes_;
  uint32_t cap_;
  Meta* meta_ = nullptr;
  // True until Create or Open succeeds (a refused open writes nothing),
  // and after close().
  bool closed_ = true;
  uint64_t salvage_cuts_ = 0;  // subtrees SalvageCut cut off (stats().extra)
  // Readers share it, every write holds it alone (the tree's one lock).
  mutable sync::SharedMutex mu_;
};

}  // namespace pmindex::cddstree
