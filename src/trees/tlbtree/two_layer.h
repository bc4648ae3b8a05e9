// The two-layer tree of TLBtree (paper 003; docs/layout/tlbtree.md), kept
// apart from the tlbtree registration so that NOBtree (issue 10) can reuse
// it: TwoLayerConfig holds the seams NOBtree will fill (replicas of the top
// layer, placement of new bottom nodes); only the TLBtree setting (one
// replica, the allocator's default placement) is implemented here.
//
// Bottom layer: a forest of subindexes, each a B-link tree of exactly
// `height` levels of write-optimized 256-byte nodes (wo_node.h). The whole
// forest is one level-linked structure: every level is a chain of nodes
// linked by their live sibling records, from the first root (pool root
// slot 0) down its leftmost children. The roots are the nodes of the top
// level; a root has no parent, so a root split adds a new subindex to the
// chain of roots, which is the source of truth for which subindexes exist.
//
// Top layer: top_layer.h, a DRAM cache over the chain of roots, rebuilt
// from the chain at every open and whenever one operation walks more than
// `rebuild` roots along the chain past the entry the top layer gave it.
//
// Concurrency: readers take no lock: they read a node's state word, what
// they need, then the state word again (equal: the read was consistent).
// Writers latch a node by setting the latch bit in its state word (CAS),
// one node at a time, bottom up (a split releases the child before it
// latches the parent, as in Lehman and Yao's B-link tree). Nothing is ever
// freed in the bottom layer (no merges), so no node a reader holds can be
// reused. Replaced top layers are freed through an epoch domain.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/epoch.h"
#include "common/content_record.h"
#include "index/index.h"
#include "index/registry.h"
#include "trees/tlbtree/top_layer.h"
#include "trees/tlbtree/wo_node.h"

namespace pmindex::tlbtree {

// Where a new bottom-layer node is allocated. TLBtree: the allocator's
// own choice. (NOBtree, later: the NUMA node of the subindex.)
enum class Placement : uint8_t { kAllocatorDefault };

struct TwoLayerConfig {
  uint32_t height = 3;    // levels of every subindex (2..8)
  uint32_t rebuild = 8;   // rebuild the top layer when an operation walks this many roots
  uint32_t top_replicas = 1;  // copies of the top layer (NOBtree: one per NUMA node); only 1 now
  Placement placement = Placement::kAllocatorDefault;
};

class TwoLayerTree : public Index {
 public:
  static constexpr uint32_t kMaxHeight = 8;

  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, const TwoLayerConfig& c, std::string name);
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, const TwoLayerConfig& c, std::string name);

  std::string_view kind() const override { return name_; }
  bool persistent() const override { return true; }
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
  Status close() override;
  ~TwoLayerTree() override;

  // Counters (also in stats().extra).
  uint64_t top_rebuilds() const { return rebuilds_.load(std::memory_order_relaxed); }
  uint64_t top_skipped() const { return skipped_.load(std::memory_order_relaxed); }
  uint64_t root_splits() const { return root_splits_.load(std::memory_order_relaxed); }

 protected:
  TwoLayerTree(const IndexEnv& env, const TwoLayerConfig& c, std::string name);

  // Seams for NOBtree. The top layer a thread searches (one replica now).
  virtual const TopLayer* TopFor() const { return top_.load(std::memory_order_acquire); }
  // A new bottom node; `near` is the node it splits from (0: none).
  virtual Result<PPtr> AllocNode(uint64_t near);

 private:
  enum class Op : uint8_t { kInsert, kUpdate, kUpsert, kRemove };
  // A node's contents as recovery and verify see them (read-only).
  struct View {
    uint64_t state = 0;
    uint32_t level = 0;
    uint64_t leftmost = 0;
    SibRec sib{};  // the live one
    std::vector<Rec> recs;  // in key order
  };

  Node* N(uint64_t raw) const { return env_.pool->to_ptr<Node>(PPtr(raw)); }
  std::string Where(uint64_t raw) const;

  // Readers. Descends to the leaf for k without locks; path[l] = the node
  // used on level l (after moving right); *hops = roots walked.
  uint64_t Descend(Key k, uint64_t* path, uint32_t* hops) const;
  // Latches the node of `raw`'s level whose range holds k, moving right
  // from raw; returns it and its latched state in *s.
  uint64_t LatchFor(uint64_t raw, Key k, uint64_t* s);
  void Unlatch(Node* x, uint64_t s_latched) const;
  // Position of the first key >= k in x under state s (count if none).
  static uint32_t LowerBound(const Node* x, uint64_t s, Key k);

  Status Write(Op op, Key k, Value v);
  // Under x's latch (state s): adds (k, v) to x, which has a free slot;
  // commits and releases the latch with one persisted state store.
  void AddRecord(Node* x, uint64_t s, Key k, uint64_t v);
  // Under x's latch (state s, x full): splits x, adds (k, v) and hands the
  // separator to the level above (releases every latch). The first split
  // fails with OutOfSpace and changes nothing if no node can be allocated.
  Status SplitInsert(uint64_t raw, uint64_t s, Key k, uint64_t v, uint32_t level, const uint64_t* path);
  void TopAdd(Key k, uint64_t root);
  void MaybeRebuild(uint32_t hops);
  void RebuildTop();

  void InitNode(Node* x, uint32_t level, uint64_t leftmost, SibRec sib, std::span<const Rec> recs) const;

  // Walks (read-only, no writer running). ViewNode checks one node.
  Status ViewNode(uint64_t raw, uint32_t level, View* v) const;
  // Every level from the top, each along its chain; checks the structure
  // (strict: also no latch bits and the top layer), collects the nodes
  // and the live pairs' content sum.
  Status Walk(bool strict, std::vector<uint64_t>* nodes, common::ContentSum* content, IndexStats* st) const;
  std::vector<std::pair<Key, uint64_t>> Chain() const;

  IndexEnv env_;
  TwoLayerConfig cfg_;
  std::string name_;
  bool ready_ = false;
  bool closed_ = false;
  std::atomic<TopLayer*> top_{nullptr};
  std::mutex top_mu_;  // top-layer inserts and rebuilds
  alloc::EpochDomain top_epochs_;
  std::atomic<uint64_t> rebuilds_{0};
  std::atomic<uint64_t> skipped_{0};
  std::atomic<uint64_t> root_splits_{0};
};

}  // namespace pmindex::tlbtree
