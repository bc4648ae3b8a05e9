// The two-layer tree of TLBtree and NOBtree (paper 003;
// docs/layout/tlbtree.md, docs/layout/nobtree.md). TwoLayerConfig selects
// the tree: TLBtree is one DRAM top layer and the allocator's placement;
// NOBtree adds a top-layer replica per NUMA node, round-robin placement of
// bottom nodes, the average-walk rebuild trigger and leaf migration.
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
// from the chain at every open and when walks along the chain grow long
// (TLBtree: one operation walks `rebuild` roots; NOBtree: a thread's
// operations walk more than `rebuild_avg` roots on average).
//
// Concurrency: readers take no lock: they read a node's state word, what
// they need, then the state word again (equal: the read was consistent).
// Writers latch a node by setting the latch bit in its state word (CAS),
// one node at a time, bottom up (a split releases the child before it
// latches the parent, as in Lehman and Yao's B-link tree). Only NOBtree's
// migration frees bottom nodes: it try-latches the leaf, its parent and
// its left neighbour (never waiting, so it cannot deadlock with writers),
// and retires the old leaf through the allocator's epochs. The log-free
// merge (NOBtree by default, TLBtree on request) frees bottom leaves too:
// after a delete leaves a leaf underfull, it try-latches the parent and
// two neighbouring leaves under it, drops the right one's separator from
// the parent, then moves the right one's records into the left one with
// one shadow-sibling commit, and retires the right one (see MergeLeaf).
// Every operation of a tree that moves or merges nodes runs inside an
// allocator epoch guard. Replaced top layers are freed through an epoch
// domain of their own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/epoch.h"
#include "common/content_record.h"
#include "index/index.h"
#include "index/registry.h"
#include "sync/mutex.h"
#include "sync/thread_annotations.h"
#include "trees/two_layer/access_stats.h"
#include "trees/two_layer/top_layer.h"
#include "trees/two_layer/wo_node.h"

namespace pmindex::tlbtree {

// Where a new bottom-layer node is allocated: TLBtree, the allocator's
// own choice; NOBtree, the NUMA nodes in turn (each thread keeps its own
// turn, so no shared counter sits on the insert path).
enum class Placement : uint8_t { kAllocatorDefault, kRoundRobin };
// NOBtree's leaf migration: off; a background coordinator thread draining
// a queue (the paper's); or inline, the operation that judges a leaf moves
// it before it returns (deterministic: tests and pmcrash).
enum class Migration : uint8_t { kOff, kBackground, kInline };

struct TwoLayerConfig {
  uint32_t height = 2;        // levels of every subindex (2..8); Open takes the pool's
  bool height_given = false;  // the options named it (Open then checks it against the pool)
  uint32_t rebuild = 3;       // TLBtree: rebuild the top layer after a walk of this many roots
  // NOBtree (> 0, then `rebuild` is unused): rebuild when a thread's last
  // kAvgWindow operations walked more than this many roots on average.
  double rebuild_avg = 0;
  bool replicate_top = false;  // one top layer per NUMA node of the allocator's topology
  Placement placement = Placement::kAllocatorDefault;
  Migration migration = Migration::kOff;
  uint32_t sample = 10;  // every sample-th operation of a thread feeds the access statistics
  uint32_t hot = 8;      // sampled accesses of a node after which it is judged
  // The bottom layer's log-free merge of underfull leaves (NOBtree's; the
  // original TLBtree never merges).
  bool merge = false;
};

class TwoLayerTree : public Index {
 public:
  static constexpr uint32_t kMaxHeight = 8;

  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, const TwoLayerConfig& c, std::string name);
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, const TwoLayerConfig& c, std::string name);

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
  void quiesce() override;  // DrainMigrations, then the moved nodes are freed
  ~TwoLayerTree() override;

  // Counters (also in stats().extra).
  uint64_t top_rebuilds() const { return rebuilds_.load(std::memory_order_relaxed); }
  uint64_t top_skipped() const { return skipped_.load(std::memory_order_relaxed); }
  uint64_t root_splits() const { return root_splits_.load(std::memory_order_relaxed); }
  uint64_t migrations() const { return migrations_.load(std::memory_order_relaxed); }
  uint64_t migration_aborts() const { return migration_aborts_.load(std::memory_order_relaxed); }
  uint64_t merges() const { return merges_.load(std::memory_order_relaxed); }
  uint64_t merge_aborts() const { return merge_aborts_.load(std::memory_order_relaxed); }
  // A delete that leaves a leaf with fewer than kMergeBelow records tries
  // to merge it with a neighbour under the same parent; the two merge only
  // if they hold at most kMergeMax records together (a third of the node
  // stays free, so the next inserts do not split it again at once).
  static constexpr uint32_t kMergeBelow = kSlots / 3;
  static constexpr uint32_t kMergeMax = kSlots * 2 / 3;
  static constexpr uint32_t kAvgWindow = 256;  // operations per rebuild_avg check

  // Waits until the coordinator's queue is empty and no move runs (tests,
  // pmbench phases); returns at once without a coordinator.
  void DrainMigrations();
  // Moves the node of `level` (below the roots) on k's path to NUMA node
  // `node` now (tests). False if the move was given up (see MigrateNode).
  bool MigrateNodeOf(Key k, uint32_t level, int node);
  // Merges the leaf holding k with a neighbour under its parent now, if
  // they fit in kMergeMax records (tests; merge on). True if it merged.
  bool MergeLeafOf(Key k);

 private:
  TwoLayerTree(const IndexEnv& env, const TwoLayerConfig& c, std::string name);

  // The replica of the top layer this thread searches (its NUMA node's).
  uint32_t TopIndex() const {
    if (ntops_ == 1) return 0;
    return static_cast<uint32_t>(env_.alloc->topology().node_of_this_thread()) % ntops_;
  }
  // A new bottom node of `level` (placement as configured; node >= 0
  // forces one). Inner nodes take blocks of kInnerBlockBytes, a size class
  // of their own, so that they share allocator pages with no leaf: the
  // ~10% of nodes that every descent reads sit on few 4 KiB pages.
  Result<PPtr> AllocNode(uint32_t level, int node = -1);

  enum class Op : uint8_t { kInsert, kUpdate, kUpsert, kRemove };
  // A node's contents as recovery and verify see them (read-only).
  // A node's lower bound as a descent derives it (has: the node is not
  // the first of its level).
  struct Low {
    bool has = false;
    Key key = 0;
    bool operator==(const Low&) const = default;
  };
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
  // lows, if given, gets each path node's lower bound.
  uint64_t Descend(Key k, uint64_t* path, uint32_t* hops, Low* lows = nullptr) const;
  // Latches the node of `raw`'s level whose range holds k, moving right
  // from raw; returns it and its latched state in *s.
  uint64_t LatchFor(uint64_t raw, Key k, uint64_t* s);
  void Unlatch(Node* x, uint64_t s_latched) const;
  // Latches x if it is not latched now (never waits); *s = latched state.
  bool TryLatch(Node* x, uint64_t* s) const;
  // Position of the first key >= k in x under state s (count if none).
  static uint32_t LowerBound(const Node* x, uint64_t s, Key k);

  Status Write(Op op, Key k, Value v);
  // Under x's latch (state s): adds (k, v) at logical position pos of x,
  // which has a free slot; commits and releases the latch with one flushed
  // state store, fenced if durable. A separator need not be durable on
  // return (durable = false): the child it names is reachable by its left
  // neighbour's sibling record, whose commit was fenced before; the
  // record is fenced before the state, so the state that lists it never
  // reaches PM first; and any later commit of x is a store to the same
  // word whose fence persists it (later inserts take slots free in both
  // the old and the new state). The next fence of this thread persists it
  // too; a crash before that leaves the separator out, as a crash between
  // a split's commit and its parent's insert does.
  void AddRecord(Node* x, uint64_t s, uint32_t pos, Key k, uint64_t v, bool durable);
  // The log-free merge (two_layer_merge.cc). Leaf `raw` was reached for k
  // by a descent whose level-1 node was parent; no latch is held. Merges
  // a pair of neighbouring leaves of that parent, one of them raw: its
  // left neighbour and raw, else raw and its right neighbour, the first
  // pair that fits in kMergeMax records (underfull: only when raw holds
  // fewer than kMergeBelow). Gives up (false, nothing changed) when a
  // latch is taken or the parent no longer names the pair.
  bool MergeLeaf(uint64_t raw, uint64_t parent, bool underfull);
  // MergeLeaf's steps, under the latch of parent p (state ps). MergePair:
  // tries the leaves at p's child positions li and li + 1 (latches both
  // if free, checks they still fit and qualify); merges and retires the
  // right one (true, p released) or changes nothing (false, p latched).
  // CommitMerge: the merge's two commits, under the three latches, which
  // it releases but r's (r is frozen instead).
  bool MergePair(Node* p, uint64_t ps, uint32_t li, uint64_t raw, bool underfull);
  void CommitMerge(Node* p, uint64_t ps, uint32_t li, Node* l, uint64_t ls, Node* r, uint64_t rs);
  // Under x's latch (state s, x full): splits x, adds (k, v) and hands the
  // separator to the level above (releases every latch). The first split
  // fails with OutOfSpace and changes nothing if no node can be allocated.
  Status SplitInsert(uint64_t raw, uint64_t s, Key k, uint64_t v, uint32_t level, const uint64_t* path);
  // SplitInsert's steps. PlanSplit: which records of full node x (state
  // s) move to the new node, with (k, v) among them if it belongs right
  // (DRAM only). CommitSplit: steps 1-2, the new node `yraw` written and
  // made durable, then x's inactive sibling record and its state committed
  // with one persist; returns x's new state (still latched). LatchParent:
  // step 4's latch of the node of level + 1 that takes separator sep,
  // moving right from path[level + 1] (descending again if NOBtree moved it).
  struct SplitPlan;
  static void PlanSplit(const Node* x, uint64_t s, Key k, uint64_t v, bool inner, SplitPlan* plan);
  uint64_t CommitSplit(Node* x, uint64_t s, uint64_t yraw, uint32_t level, const SplitPlan& plan);
  uint64_t LatchParent(uint32_t level, Key sep, uint64_t* path, uint64_t* ps);
  void TopAdd(Key k, uint64_t root);
  // Replaces every replica by one built from chain (old ones retired).
  void Install(const std::vector<std::pair<Key, uint64_t>>& chain);
  void MaybeRebuild(uint32_t hops);
  // RebuildTop: a new layer from the chain of roots (walks every root in
  // PM). MergeTop: TLBtree (no migration), the layer's entries merged with
  // the pending ones in DRAM; with migration, RebuildTop.
  void RebuildTop() PMINDEX_REQUIRES(top_mu_);
  void MergeTop() PMINDEX_REQUIRES(top_mu_);

  void InitNode(Node* x, uint32_t level, uint64_t leftmost, SibRec sib, std::span<const Rec> recs) const;

  // Walks (read-only, no writer running). ViewNode checks one node.
  Status ViewNode(uint64_t raw, uint32_t level, View* v) const;
  // Every level from the top, each along its chain; checks the structure
  // (strict: also no latch bits and the top layer), collects the nodes
  // and the live pairs' content sum.
  Status Walk(bool strict, std::vector<uint64_t>* nodes, common::ContentSum* content, IndexStats* st) const;
  // Walk's steps: one level along its chain from `first` (checks each node
  // against what the level above named, collects the names for the level
  // below into *w); a node's share of the stats; the top layers against
  // the chain of roots the walk saw (strict).
  struct WalkState;
  Status WalkLevel(WalkState* w, uint64_t first, uint32_t level, bool strict,
                   std::vector<uint64_t>* nodes, common::ContentSum* content,
                   IndexStats* stats) const;
  static void CountNode(const View& v, IndexStats* stats);
  Status CheckTopLayers(const WalkState& w, uint64_t first) const;
  std::vector<std::pair<Key, uint64_t>> Chain() const;

  // NOBtree's migration (two_layer_migrate.cc). After an operation whose
  // descent for key k took `path`: samples every node below the roots
  // into the access statistics and moves (inline) or queues (background)
  // the ones judged.
  void NotePath(const uint64_t* path, Key k);
  // Moves node `raw` (level `level` < height - 1, on k's path) to NUMA
  // node `node`: copies it, logs the move, repoints its parent and left
  // neighbour, marks it moved and retires it. Gives up (false, nothing
  // changed) when a latch is taken, the node is not where k leads, or it
  // is an empty leaf.
  bool MigrateNode(uint64_t raw, uint32_t level, Key k, int node);
  // MigrateNode's body once its locks are held (top_mu_ for a root).
  struct MoveSite;
  bool MoveLocked(MoveSite* m, Key k, int node);
  // MigrateNode's steps, on the site of one move. LocateMove: the descents
  // that find the node's parent and left neighbour (false: the node is not
  // where k leads). LatchMove: their latches and the node's, each only if
  // free (false: none held). CheckMove: under the latches, the links the
  // descents saw still hold and the node may move. ReleaseMove: the three
  // latches (versions bumped if it moved). CommitMove: steps 1-4, the copy
  // `yraw` durable, the log armed, both pointers repointed, the log
  // disarmed.
  bool LocateMove(MoveSite* m, Key k) const;
  bool LatchMove(MoveSite* m) const;
  bool CheckMove(MoveSite* m) const;
  void ReleaseMove(const MoveSite& m, bool moved) const;
  void CommitMove(const MoveSite& m, uint64_t yraw);
  void CoordinatorLoop();
  void StartCoordinator();
  void StopCoordinator();
  // Open: reads the migration log (root slot 1); an armed one sets the
  // remap for Walk and is redone by FinishLog once the nodes are adopted.
  Status ReadLog();
  // Writes an idle migration log and names it in root slot 1.
  Status MakeLog();
  void FinishLog();
  uint64_t Fix(uint64_t p) const { return p != 0 && p == remap_from_ ? remap_to_ : p; }
  // Per-thread, per-tree tallies (no shared counter on the hot path).
  struct Tally {
    uint64_t owner = 0;  // instance_ of the tree they count for
    uint64_t ops = 0;    // operations (sampling)
    uint64_t hops = 0;   // roots walked in the current rebuild_avg window
    uint32_t window = 0;
    uint32_t turn = 0;   // round-robin placement
  };
  Tally& Mine() const;

  IndexEnv env_;
  TwoLayerConfig cfg_;
  std::string name_;
  bool ready_ = false;
  bool closed_ = false;
  uint64_t instance_ = 0;
  uint32_t ntops_ = 1;
  std::unique_ptr<std::atomic<TopLayer*>[]> tops_;  // one per replica
  sync::Mutex top_mu_;                              // top-layer inserts and rebuilds
  alloc::EpochDomain top_epochs_;
  // What every operation holds: an allocator epoch while nodes relocate
  // (a moved or merged node stays readable), then the top layers' epoch.
  struct OpGuards {
    explicit OpGuards(TwoLayerTree& t) {
      if (t.relocates_) moved.emplace(*t.env_.alloc);
      top.emplace(t.top_epochs_);
    }
    std::optional<alloc::Allocator::EpochGuard> moved;
    std::optional<alloc::EpochDomain::Guard> top;
  };
  std::atomic<uint64_t> rebuilds_{0};
  std::atomic<uint64_t> skipped_{0};
  // Roots a full top-layer leaf left out since the last rebuild (no
  // migration only; under top_mu_); merged in once they reach
  // 1/kPendingShare of the layer's entries and kPendingMin.
  std::vector<std::pair<Key, uint64_t>> pending_ PMINDEX_GUARDED_BY(top_mu_);
  static constexpr uint64_t kPendingShare = 32;
  static constexpr uint64_t kPendingMin = 8;
  std::atomic<uint64_t> root_splits_{0};
  // Migration (NOBtree).
  uint64_t log_ = 0;  // the MigrationLog block (root slot 1)
  uint64_t remap_from_ = 0, remap_to_ = 0;  // Open only: an armed log's move
  std::unique_ptr<AccessStats> access_;
  // Nodes leave the structure while operations run (migration or merge):
  // every operation holds an allocator epoch guard, and a writer that
  // latches a node that left starts over.
  bool relocates_ = false;
  std::atomic<uint64_t> merges_{0};
  std::atomic<uint64_t> merge_aborts_{0};
  sync::Mutex migrate_mu_;  // one move at a time; walks exclude moves
  struct Task {
    uint64_t raw;
    Key key;
    uint32_t level;
    int node;
  };
  // The coordinator's queue and flags; queue_cv_ waits on queue_mu_ (a
  // MutexLock's Native()).
  sync::Mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Task> queue_ PMINDEX_GUARDED_BY(queue_mu_);
  bool stop_ PMINDEX_GUARDED_BY(queue_mu_) = false;
  bool busy_ PMINDEX_GUARDED_BY(queue_mu_) = false;  // the coordinator is moving a leaf
  std::thread coordinator_;
  std::atomic<uint64_t> migrations_{0};
  std::atomic<uint64_t> migration_aborts_{0};
  std::atomic<uint64_t> migrations_queued_{0};
};

}  // namespace pmindex::tlbtree
