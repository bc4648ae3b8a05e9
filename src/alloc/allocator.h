// The persistent allocator (docs/architecture.md section 4, docs/allocator.md).
//
// - The heap of a Pool is cut into 256 KiB pages. A page is either free,
//   owned by one size class, or part of a multi-page span (large blocks).
//   Page ownership is the ONLY allocator state that is persisted: one NAW
//   of the page's word in Pool::page_table() per page taken or given back.
// - Blocks inside a page are tracked in DRAM (bitmaps). After an open, the
//   index reports every block it can reach (MarkReachable) and
//   FinishRecovery() frees everything else: a block allocated but not yet
//   linked when the crash happened is never leaked, and a reachable block
//   is never handed out twice.
// - Per-thread caches make Alloc/Free cheap and mostly lock-free.
// - NUMA: a Topology (real via libnuma, or simulated with N virtual nodes,
//   threads assigned round-robin) and the modes local / round-robin /
//   given node decide which node's page list a page comes from. With one
//   pool, nodes own disjoint page lists of the same pool; remote accesses
//   are counted.
// - Blocks are 64-byte aligned; a block whose size is a multiple of 256 is
//   256-byte aligned. A pool of fewer than kCoarseBelowPages pages uses
//   only the power-of-two size classes (size_classes.h). When the pool is
//   full, a request may get a block of a larger, equally aligned class.
// - Alloc returns the block uninitialized (previous content or poison).
//   Callers initialize it and persist it before linking it.
// - Epochs: Retire(p) frees p once every thread that may have seen it has
//   left its critical section (EpochGuard).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "pm/pool.h"
#include "pmindex/status.h"

namespace pmindex::alloc {

class Topology {
 public:
  // The machine's NUMA nodes via libnuma (one node if unavailable).
  static std::shared_ptr<Topology> Real();
  // N virtual nodes (clamped to [1, 1024]); thread i (in order of first
  // call of node_of_this_thread on this topology) is on node i % N, unless
  // it placed itself with place_this_thread.
  static std::shared_ptr<Topology> Simulated(int nodes);
  // The topology an allocator attaches with when AllocOptions::topology is
  // null: Real() unless SetDefault gave another (pmbench --numa-nodes, tests).
  // SetDefault(nullptr) restores Real(). Set it while no pool is attaching.
  static std::shared_ptr<Topology> Default();
  static void SetDefault(std::shared_ptr<Topology> t);
  virtual ~Topology() = default;
  virtual int nodes() const = 0;
  virtual int node_of_this_thread() = 0;
  virtual bool simulated() const = 0;
  // Puts the calling thread on `node` from now on: simulated, it records
  // the node; real, it restricts the thread to that node's CPUs (libnuma
  // numa_run_on_node). InvalidArgument for a node outside [0, nodes()).
  virtual Status place_this_thread(int node) = 0;
  // Asks the kernel to place the pages of [addr, addr+len) on `node`
  // (mbind, MPOL_PREFERRED, moving pages already there): a no-op when
  // simulated; real, IOError if the kernel refuses (no libnuma, a node it
  // does not have). The allocator calls it for each node's page runs when
  // the machine has more than one node.
  virtual Status bind(void* addr, size_t len, int node) = 0;
};

enum class NumaMode { kLocal, kRoundRobin, kGivenNode };
// Alloc's node argument for "the node the allocator's mode chooses".
inline constexpr int kAnyNode = -1;

struct AllocOptions {
  std::shared_ptr<Topology> topology;  // null = Topology::Real()
  NumaMode mode = NumaMode::kLocal;
  int given_node = 0;
  size_t thread_cache_blocks = 64;  // per size class per thread
};

// What recovery found (FinishRecovery), for `pmpool verify` and tests.
// "Units" are what recovery would give back although they were allocated:
// class pages none of whose blocks was reported reachable, large blocks
// (spans) not reported reachable, and runs of orphan span tails. Blocks of
// a page that also holds a reachable block cannot be told apart from free
// ones (only page ownership is persisted), so they are not counted.
struct RecoveryReport {
  bool done = false;                 // FinishRecovery ran (refused or not)
  bool refused = false;              // it returned Corruption for the bound
  uint64_t pages_owned = 0;          // pages with a nonzero page word
  uint64_t class_pages = 0;          // of which class pages
  uint64_t reachable_blocks = 0;     // blocks reported reachable (MarkReachable)
  uint64_t reachable_spans = 0;      // large blocks reported reachable
  uint64_t unreachable_pages = 0;    // class pages without a reachable block
  uint64_t unreachable_spans = 0;    // large blocks not reachable
  uint64_t orphan_runs = 0;          // orphan span tails, counted per head
  uint64_t bound = UINT64_MAX;       // units the caller said a crash explains
  uint64_t units() const { return unreachable_pages + unreachable_spans + orphan_runs; }
};

struct AllocStats {
  uint64_t pages_owned = 0;
  uint64_t bytes_in_use = 0;   // sum of live block sizes
  uint64_t blocks_in_use = 0;
  uint64_t remote_allocs = 0;  // refills/spans served from another node's pages
  uint64_t retired_pending = 0;  // Retired blocks not yet freed
  uint64_t bind_failures = 0;    // page runs the kernel would not bind (Topology::bind)
};

class Allocator {
 public:
  // Attaches to the pool. If `fresh`, the page table is all free. Otherwise
  // pages keep their persisted owners and the allocator is in recovery:
  // every block of an owned page counts as free until marked. REQUIRES:
  // before any Alloc after a non-fresh attach, MarkReachable for all
  // reachable blocks, then FinishRecovery().
  static Result<std::unique_ptr<Allocator>> Attach(Pool* pool, bool fresh,
                                                   const AllocOptions& opt = {});
  ~Allocator();

  // Returns a block of at least n bytes, or OutOfSpace (the pool could not
  // grow). Thread-safe. `node`: kAnyNode takes the node the mode chooses;
  // a node in [0, nodes) takes a block of that node's pages (per-thread
  // caches per node; another node's pages only when that node has none
  // free, counted in remote_allocs), else InvalidArgument.
  Result<PPtr> Alloc(size_t n, int node = kAnyNode);
  // Convenience: raw pointer, nullptr when out of space.
  void* AllocRaw(size_t n, PPtr* out = nullptr, int node = kAnyNode);
  // Frees now. REQUIRES: no other thread can still read the block. A
  // pointer that is not an allocated block (double free, misaligned, other
  // pool, free page) stops the process with one clear line.
  void Free(PPtr p);
  // Frees once no thread inside an EpochGuard can still see the block.
  // REQUIRES: p is allocated and retired once (checked like Free).
  void Retire(PPtr p);

  // Recovery by reachability. MarkReachable is thread-safe; marking a block
  // twice is harmless. A p that is not the start of a block of an owned
  // page is not a crash: FinishRecovery then returns Corruption (naming the
  // first such pointer), frees nothing and the allocator stays in recovery.
  void MarkReachable(PPtr p);  // p = the address Alloc returned
  // Frees unmarked blocks, releases empty pages. Before it writes anything
  // it counts the allocated units nothing reachable uses (RecoveryReport);
  // more than the bound set with SetRecoveryBound is Corruption naming the
  // counts, nothing is changed and the allocator stays in recovery
  // (a damaged pointer must not turn into silent loss).
  Status FinishRecovery();
  // The most unreachable units FinishRecovery may reclaim (default: no
  // bound). open_index sets it from the kind's IndexInfo and the clean flag.
  void SetRecoveryBound(uint64_t units);
  // The bound check of FinishRecovery alone, writing nothing: an index's
  // open may call it after marking every reachable block and before its
  // first write (Pool::MarkInUse), so that a refusal changes no byte.
  Status CheckRecoveryBound();
  const RecoveryReport& recovery_report() const;

  // Leak / double-use checks for tests and the crash simulator: calls fn for
  // every block currently handed out.
  void ForEachLiveBlock(const std::function<void(PPtr, size_t)>& fn) const;
  size_t BlockSize(PPtr p) const;  // usable size of an allocated block

  // REQUIRES (both): p is a block handed out by Alloc (else the process
  // stops with a clear message). NodeOf: the NUMA node recorded in the
  // block's page word.
  int NodeOf(PPtr p) const;
  // The node of the owned page holding address p, or -1 (not in this
  // pool's heap, or a free page). No checks beyond that: cheap enough for
  // metering every node visit (numa_meter.h).
  int NodeOfAddress(const void* p) const;
  // Returns true iff p is the start of a block that is currently handed out
  // (or marked, during recovery). Any p is accepted.
  bool IsLive(PPtr p) const;
  bool in_recovery() const;
  // The size classes, ascending; larger requests take whole 256 KiB pages.
  static std::span<const uint32_t> SizeClasses();

  AllocStats stats() const;
  Pool* pool() const;
  Topology& topology() const;

  // RAII critical section for readers of nodes that may be Retired.
  class EpochGuard {
   public:
    explicit EpochGuard(Allocator& a);
    ~EpochGuard();
    EpochGuard(const EpochGuard&) = delete;
    EpochGuard& operator=(const EpochGuard&) = delete;

   private:
    Allocator& a_;
  };
  // Frees every retired block (of any thread) that no thread can still see
  // (also done every 64 Retires of a thread). With no thread inside an
  // EpochGuard, one call frees everything retired so far.
  void Reclaim();

 private:
  Allocator();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pmindex::alloc
