// NV-Tree (Yang et al., FAST 2015 / TC journal version): a B+-tree whose
// leaves (LNs) alone are persistent and crash-consistent; the internal
// nodes (INs) and parent-of-leaf nodes (PLNs) are DRAM arrays rebuilt from
// the leaves. docs/layout/nvtree.md has the full picture.
//
// Persistent fields:
//   root(0)  PPtr of the head (leftmost) LN; never 0 once created.
//   root(1)  PPtr of the IN/PLN copy written at clean shutdown, with
//                 bit 0 set = clean. One NAW sets it; open clears it.
//   root(2)  kFormatTag.
//   root(6)  content record of the last clean close (common/content_record.h);
//                 an open of a cleanly closed pool compares it with the sum
//                 its read-only checks take, before the first write.
//   LNs           see leaf.h: append-only elements, nElement, next, low.
//   snapshot      the clean-shutdown copy of the PLN entries (low, LN).
//
// Persist order:
//   append        element(s) flush, fence; nElement store, flush, fence.
//   split/replace/merge
//                 new LN(s) fully written, flushed, fenced; then ONE NAW of
//                 the left sibling's next (or root(0) for the head).
//                 Before it: the old LNs are the tree; after it: the new.
//   close         content record (root slot 6, pm::kContentSlot: the sum
//                 over the live pairs); snapshot flushed + fenced;
//                 WriteRoot(1, copy|1).
//
// Locks:
//   - structure_mu_: one writer at a time runs split/replace/merge/rebuild
//     (and scan, which walks the LN list).
//   - LN stripe locks (DRAM, hashed by LN offset): an append holds the
//     stripe of its LN; a structural op holds the stripes of the LNs it
//     replaces, so no append races with a copy.
//   - PLN version locks (sync::VersionLock): lookups read PLN entries
//     optimistically and validate after reading the LN, so they never
//     block on LN writers; appenders validate after taking the stripe
//     lock, which proves their LN is still linked. A rebuild publishes new
//     arrays and marks every old PLN obsolete; readers still inside the old
//     arrays finish there or restart on the new ones.
//   - Retired LNs are freed through the allocator's epochs.
//
// Recovery: with the clean bit, the PLN entries are loaded from the
// snapshot (no LN is scanned); otherwise rebuild-from-LN walks the list
// from the head, checks every LN and rebuilds IN/PLN arrays from the LN
// low keys. Either way every LN (and nothing else) is reported reachable.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/epoch.h"
#include "common/content_record.h"
#include "index/index.h"
#include "index/registry.h"
#include "sync/mutex.h"
#include "sync/version_lock.h"
#include "trees/nvtree/adaptive.h"
#include "trees/nvtree/leaf.h"

namespace pmindex::nvtree {

struct Config {
  uint32_t leaf_bytes = 1024;     // default LN size (node=)
  uint32_t pln_unit = 256;        // bytes of a PLN (and the unit enlarged PLNs grow by)
  uint32_t in_fanout = 32;        // children of an IN (IN = fanout-1 keys + count)
  Strategy strategy = Strategy::kOff;  // measured: docs/RESULTS.md, "NV-Tree's adaptivity: the
                                       // default chosen by measurement"
  uint32_t min_leaf = 256;        // adaptive lower bound
  uint32_t max_leaf = Ln::kMaxBytes;
};

// DRAM PLN: a version lock, a count and `cap` entries sorted by low key.
// entry[0].low is the PLN's own lower bound; entry i routes keys in
// [entry[i].low, entry[i+1].low).
struct PlnEntry {
  Key low;
  uint64_t ln;      // PPtr raw
  uint32_t reads;   // nReads_LN (adaptivity)
  uint32_t writes;  // nWrites_LN
};
static_assert(sizeof(PlnEntry) == 24);

struct alignas(64) Pln {
  sync::VersionLock lock;
  uint32_t n;    // entries in use (>= 1)
  uint32_t cap;  // entries that fit
  PlnEntry e[1];
  static constexpr uint32_t kHeader = 16;
  static uint32_t CapacityFor(uint32_t bytes) { return (bytes - kHeader) / sizeof(PlnEntry); }
};
static_assert(offsetof(Pln, e) == Pln::kHeader);

// One generation of IN/PLN arrays. Immutable shape; PLN entries change
// under their version locks.
struct Layout {
  uint32_t fanout = 0;
  uint32_t height = 0;          // IN levels above the PLNs
  uint64_t in_nodes = 0;        // INs in the array (ids 0 .. in_nodes-1)
  std::vector<uint64_t> level_first;  // id of the first node of each level
  // INs: node id i at [i * fanout, (i+1) * fanout): word 0 = key count,
  // words 1.. = keys (key j = low of child j+1). Child id of node i at
  // position pos = i * fanout + 1 + pos (Algorithm 1).
  std::unique_ptr<uint64_t[]> in;
  // PLNs in one arena; pln_off[o] = byte offset of PLN o (variable size).
  std::unique_ptr<std::byte[], void (*)(std::byte*)> arena{nullptr, nullptr};
  std::vector<uint64_t> pln_off;
  uint64_t arena_bytes = 0;

  uint64_t plns() const { return pln_off.size(); }
  Pln* pln(uint64_t o) const { return reinterpret_cast<Pln*>(arena.get() + pln_off[o]); }
  // Descends the INs to the PLN whose range holds k.
  uint64_t FindPln(Key k) const;
  uint64_t dram_bytes() const;
};

class NvTree final : public Index {
 public:
  static constexpr size_t kStripes = 1024;  // LN lock stripes
  static constexpr uint64_t kFormatTag = 0x4E56545245453031;  // "NVTREE01"

  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, const Config& cfg);
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, const Config& cfg);
  ~NvTree() override;

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

  // Introspection for tests and benchmarks.
  uint64_t rebuilds() const { return rebuilds_.load(std::memory_order_relaxed); }
  double rebuild_seconds() const { return rebuild_ns_.load(std::memory_order_relaxed) * 1e-9; }
  uint64_t splits() const { return splits_.load(std::memory_order_relaxed); }
  uint64_t replaces() const { return replaces_.load(std::memory_order_relaxed); }
  uint64_t merges() const { return merges_.load(std::memory_order_relaxed); }
  bool recovered_clean() const { return recovered_clean_; }
  const Config& config() const { return cfg_; }

 private:
  enum class Op : uint8_t { kInsert, kUpdate, kUpsert, kRemove };
  struct Where {
    Layout* layout;
    uint64_t pln;   // PLN ordinal
    uint32_t pos;   // entry in the PLN
    uint64_t version;
    Ln* ln;
    uint64_t ln_raw;
  };
  class StripeLock;

  NvTree(const IndexEnv& env, const Config& cfg);
  Ln* ToLn(uint64_t raw) const { return env_.pool->to_ptr<Ln>(PPtr(raw)); }
  std::atomic<uint32_t>& Stripe(uint64_t raw) const;
  void LockStripe(uint64_t raw) const;
  void UnlockStripe(uint64_t raw) const;

  // Finds the LN for k with a validated PLN version (optimistic).
  Where Locate(Key k) const;
  Status Write(Op op, Key k, Value v);
  // Under structure_mu_: retry the op; split/replace/merge if the LN is full.
  Status WriteFull(Op op, Key k, Value v);
  // WriteFull's steps, under structure_mu_ and the LN's stripe lock.
  // LiveAfter: the LN's valid elements with op applied (sorted); returns
  // whether k was present. MakeNewLeaves: allocates and fills (flushed, not
  // fenced) the LN(s) replacing the full one, per rb->kind; for a merge it
  // takes the right sibling's stripe lock (released on error). The new LNs
  // go to rb->fresh (freed by the caller on error), their PLN entries to
  // rb->repl. ReplaceInPln: under the PLN's write lock (released here),
  // puts rb->repl in place of the old entries, or rebuilds the PLN layer
  // if they do not fit.
  enum class Restructure { kSplit, kReplace, kMerge };
  struct Rebuild {
    Restructure kind = Restructure::kReplace;
    uint64_t r_raw = 0;  // kMerge: the right sibling merged in
    std::vector<PPtr> fresh;
    std::vector<PlnEntry> repl;
    uint64_t first_raw = 0;  // the first new LN, linked from the left sibling
  };
  bool LiveAfter(Ln* x, uint64_t n, Op op, Key k, Value v, std::vector<KV>* live) const;
  Status MakeNewLeaves(const Where& w, std::vector<KV>* live, Rebuild* rb)
      PMINDEX_REQUIRES(structure_mu_);
  void ReplaceInPln(const Where& w, uint32_t pn, const Rebuild& rb) PMINDEX_REQUIRES(structure_mu_);
  void CountRestructure(Restructure kind);
  // What op needs appended, given the current value. Sets *st to the
  // result if nothing must be appended.
  static int Plan(Op op, Key k, Value v, const std::optional<Value>& cur, LnElement* e, bool* neg,
                  Status* st);
  // The common write, with w.ln's stripe held and n its element count:
  // appends what Plan asks for if it fits and returns the result, the
  // stripe released; nullopt if the LN is full, the stripe still held.
  std::optional<Status> TryAppend(Op op, Key k, Value v, const Where& w, uint64_t n);
  void CountRead(const Where& w);
  void CountWrite(const Where& w, int elements);

  // Builds a layout from the ordered entries; one entry per PLN (paper),
  // hot-write PLNs get two units when adaptive (section 5.5).
  // `groups` = entries per PLN (empty: one each).
  std::unique_ptr<Layout> BuildLayout(const std::vector<PlnEntry>& entries,
                                      const std::vector<uint32_t>& groups) const;
  // Installs `next`; marks every PLN of the previous layout obsolete (the
  // caller already write-locked `locked_pln` of it) and retires it. Open
  // and Create take structure_mu_ for it too (uncontended).
  void Publish(std::unique_ptr<Layout> next, uint64_t locked_pln) PMINDEX_REQUIRES(structure_mu_);
  std::vector<PlnEntry> CollectEntries(const Layout& l) const;
  Status RebuildFromLn();
  Status LoadSnapshot(uint64_t raw);
  // Bounds/header checks of an LN pointer read from PM.
  Status CheckLn(uint64_t raw, Ln** out) const;
  // Open: every live key of every LN within the LN's fences (verify's
  // check), reads only. Adds every live pair (the newest element of each
  // key, if POSITIVE: what a lookup returns) to *content (common/content_record.h).
  Status CheckLnFences(common::ContentSum* content) const;
  // The live pairs of the LN list, as CheckLnFences adds them (close()).
  common::ContentSum SumLivePairs() const;
  void Reclaim(uint64_t item);  // epoch reclaimer: LN PPtr, or Layout* | 1
  Result<PPtr> AllocLn(uint32_t bytes, Ln** out);
  uint64_t LeftSibling(const Layout& l, uint64_t pln, uint32_t pos) const;
  void LinkFrom(uint64_t left_raw, uint64_t new_raw);

  IndexEnv env_;
  Config cfg_;
  const CostModel* model_;
  std::atomic<Layout*> layout_{nullptr};
  sync::Mutex layouts_mu_;
  // Live + retired-not-yet-reclaimed.
  std::vector<std::unique_ptr<Layout>> layouts_ PMINDEX_GUARDED_BY(layouts_mu_);
  mutable sync::Mutex structure_mu_;
  std::unique_ptr<std::atomic<uint32_t>[]> stripes_;
  std::atomic<uint64_t> n_reads_{0}, n_writes_{0}, n_leaves_{0};
  std::atomic<uint64_t> rebuilds_{0}, rebuild_ns_{0}, splits_{0}, replaces_{0}, merges_{0};
  bool closed_ = false;
  bool recovered_clean_ = false;
  // Retired LNs and layouts; declared last so it is destroyed first.
  alloc::EpochDomain epoch_;
};

}  // namespace pmindex::nvtree
