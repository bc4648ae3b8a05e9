// FAST-FAIR (Hwang et al., FAST 2018) with the Sentinel Array of paper 002
// (Ye and Wang, 2021): a B+-tree whose nodes of every level are sorted
// arrays in PM, changed by failure-atomic shifts of 8-byte stores (FAST)
// and split in place through the sibling pointer (FAIR), without a log.
//
// Values are stored inline and every uint64_t is a valid value, so the
// paper's "a pointer equal to its neighbour's marks a half-done shift" and
// its null terminator cannot be used. Instead (docs/layout/fastfair.md):
//   - a node has a count in its header; slots past it are unused;
//   - a shift stores each moved record's words in an order that makes the
//     half-done state show two adjacent records with EQUAL KEYS, of which
//     the right one is the valid one (keys are unique, so equal adjacent
//     keys only occur mid-shift). Insert (shift right): value first, then
//     key; delete (shift left): key first, then value;
//   - stores to one cache line reach PM in program order; a shift that
//     crosses into the next line flushes and fences the line it leaves.
// Recovery (every open) drops the left record of an equal-key pair,
// truncates a node whose sibling holds keys it still lists (a split cut
// short), clears the writers' version words and rebuilds the sentinels.
//
// Sentinel Array (sentinel=on): one key per cache line of records, the
// line's first key, kept in lines of the node between the header and the
// records. It is stored but never flushed: recovery rebuilds it from the
// records (paper 002, section III). A search scans the sentinels for the
// last line whose sentinel is <= the key and then that one line.
//
// Merges (FAIR rebalancing on delete): a node left with fewer than a
// quarter of its slots is merged with its neighbour under the same parent
// when the two fit in three quarters of a node: the right node's records
// are copied past the left node's count (invisible), the parent forgets
// the right node (keys reach it through the sibling pointer), and one
// line commits the merge: the left node's count, then its sibling pointer
// past the right node. A crash before the sibling store is undone by the
// split rule (records at or above the sibling's low key are cut off).
//
// Concurrency: lookups and scans take no lock: each node carries a version
// word, which is also its write lock (even: free; odd: held by a writer;
// kDead: merged away). A reader copies what it needs and retries the node
// when the version moved; a node reached through a parent that has not
// been told of its split yet is left by the sibling pointer (the B-link
// rule, k >= sibling's low key). A writer finds its leaf the same way and
// takes the leaf's lock by one compare-and-swap from the version it read;
// inserts, deletes and updates that neither split nor merge hold that one
// lock. Splits and merges also take a tree-wide mutex (one structure
// change at a time), so inner nodes change only under it. A merged-away
// node is retired to the allocator's epochs: readers run inside an
// EpochGuard, so it is not reused while one may still read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "alloc/allocator.h"
#include "common/sorted_node.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "trees/sorted_node/engine.h"

namespace pmindex::fastfair {

// Records, node layout and search modes: common/sorted_node.h (shared
// with circtree).
using sorted_node::Layout;
using sorted_node::Rec;
using sorted_node::Search;

// Line 0 of every node. The records start at a line boundary after the
// sentinel lines (Layout).
struct alignas(64) Header {
  uint64_t version;   // even: no writer inside; odd: a writer is changing the node
  uint64_t tag;       // kNodeTag
  uint32_t count;     // records in use
  uint32_t level;     // 0 = leaf
  uint64_t sibling;   // PPtr raw of the right neighbour on this level, or 0
  uint64_t leftmost;  // inner: child for keys below record 0's key
  uint64_t low;       // every key of this node is >= low (valid iff has_low)
  uint64_t has_low;   // 1 for a node made by a split, 0 for a level's first node
  uint64_t pad;
};
static_assert(sizeof(Header) == 64);

// Between the header and the records a node holds at most one auxiliary
// array, never flushed and rebuilt by recovery: the sentinels (one u64
// per record line) or the fingerprints (one byte per record slot, the
// variant paper 002 compares against). Layout: common/sorted_node.h.


// Deliberately broken variants, one per crash bug published against
// FAST-FAIR, for the regression tests in tests/crash/fastfair_bugs_test.cc
// (crashsim/fixtures/fastfair_bugs.cc registers them as test-only kinds).
// All false in the registered index.
struct Faults {
  bool keep_duplicates = false;    // recovery leaves a half-done shift's equal-key pair
  bool keep_split_copies = false;  // recovery leaves the records a cut-short split copied
  bool root_before_node = false;   // root slot 0 names a new root before the root is durable
  bool delete_skips_last_flush = false;  // a delete does not flush the last line it shifted
  bool merge_links_first = false;  // a merge unlinks the right node before the left holds its records
};

// FAST-FAIR's slot policy for the sorted-node engine (engine.h): logical
// record i is slot i, the header's count says how many are in use, and of
// two equal adjacent keys the right one is valid.
struct FlatSlots {
  using Header = fastfair::Header;
  static constexpr std::string_view kName = "fastfair";
  static constexpr uint64_t kNodeTag = 0x5249414654534146;  // "FASTFAIR"
  static sorted_node::Ring Read(const Header* x) { return {0, x->count, false}; }
  static sorted_node::Ring Load(const Header* x, uint32_t cap) {
    return {0, std::min(sorted_node::Ld32(x->count), cap), false};
  }
  static const char* BadSlots(const Header* x, uint32_t cap) {
    return x->count > cap ? " has a count above its capacity" : nullptr;
  }
  static uint32_t Phys(uint32_t, uint32_t i, uint32_t) { return i; }
  static void Init(Header* x, uint32_t level, uint64_t leftmost, uint64_t sibling, bool has_low, Key low);
  static void StoreFilled(Header* x, uint32_t count) { pm::store(&x->count, count); }
};

class FastFair final : public sorted_node::Engine<FastFair, FlatSlots> {
 public:
  using Slots = FlatSlots;

  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, const Layout& lay, Search s,
                                               const Faults& f = {}) {
    return CreateTree(env, lay, s, f);
  }
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, const Layout& lay, Search s,
                                             const Faults& f = {}) {
    return OpenTree(env, lay, s, f);
  }

 private:
  friend class sorted_node::Engine<FastFair, FlatSlots>;
  FastFair(const IndexEnv& env, const Layout& lay, Search s, const Faults& f)
      : Engine(env, lay, s), faults_(f) {}

  // The slot of k in leaf x by its fingerprints (n if absent).
  uint32_t FingerprintFind(Header* x, uint32_t n, Key k) const;

  // First index in [0, n) whose key is >= k (n if none), by the
  // configured search. Reads with relaxed atomic loads (readers run
  // concurrently with a writer and validate the version afterwards).
  uint32_t LowerBound(Header* x, uint32_t n, Key k) const;
  // The child of inner node x for k, given p = LowerBound(x, n, k).
  uint64_t ChildAt(Header* x, uint32_t n, uint32_t p, Key k) const;
  // If k belongs to x's right neighbour (the B-link rule), its raw; else
  // 0. p = LowerBound(x, n, k).
  uint64_t MoveRight(Header* x, uint32_t n, uint32_t p, Key k) const;
  // The reader's view of x for the engine's lock-free descent and lookup
  // (engine.h): the count, loaded relaxed and clamped into the node.
  uint32_t ReaderView(const Header* x) const { return FlatSlots::Load(x, lay_.cap).count; }
  uint32_t ViewCount(uint32_t n) const { return n; }
  uint32_t ViewSlot(uint32_t, uint32_t p) const { return p; }

  // Node locks (the version word). TryLock takes x's lock iff its version
  // is still v; Lock waits for it. Unlock releases it: a new version if
  // the node changed, the one it had if not.
  bool TryLock(Header* x, uint64_t v);
  void Lock(Header* x);
  void Unlock(Header* x, bool changed);

  // Writers.
  Status Write(Op op, Key k, Value v);
  // Under leaf's lock: applies op to the leaf. *changed: it wrote; *full:
  // an insert found the leaf full and did nothing.
  Status LeafOp(Header* leaf, Op op, Key k, Value v, bool* changed, bool* full);
  // Under mu_: the leaf for k (locked iff lock_leaf) and the inner
  // nodes above it, root first, in path[0, *depth).
  uint64_t Descend(Key k, bool lock_leaf, uint64_t* path, uint32_t* depth) PMINDEX_REQUIRES(mu_);
  // Under mu_ (taken here): an insert whose leaf is full.
  Status SplitInsert(Op op, Key k, Value v) PMINDEX_EXCLUDES(mu_);
  // Under mu_ (taken here): merges the underfull nodes on k's path
  // with their neighbours, bottom up, then shrinks the root.
  void Rebalance(Key k) PMINDEX_EXCLUDES(mu_);
  // The engine's merge step (MergeUpward): locks l and r, and merges them
  // iff node is still underfull and the two fit; true iff merged.
  bool MergeIfRoom(uint64_t node, uint64_t l_raw, uint64_t r_raw, uint64_t parent, uint32_t sep_idx)
      PMINDEX_REQUIRES(mu_);
  void Merge(uint64_t l_raw, uint64_t r_raw, uint64_t p_raw, uint32_t sep_idx);
  // The engine's CollapseRoot: the root it hands down is locked for good.
  void WriteLock(Header* x) { Lock(x); }
  bool Underfull(const Header* x) const { return x->count * 4 < lay_.cap; }
  void ShiftInsert(Header* x, uint32_t p, Key k, uint64_t v);
  void ShiftDelete(Header* x, uint32_t p);
  // Rewrites the auxiliary array (sentinels or fingerprints) from the
  // records, from slot `from` on.
  void SetAux(Header* x, uint32_t from) { Engine::SetAux(x, from, from, lay_.cap); }
  // Splits the full node x (locked) into x and the new node `fresh` (its
  // raw, returned locked); returns the separator.
  Key Split(uint64_t x_raw, uint64_t fresh);
  void NewRoot(uint64_t left, Key sep, uint64_t right, uint64_t fresh);
  void InitNode(Header* x, uint32_t level, uint64_t leftmost, uint64_t sibling, bool has_low, Key low) {
    FlatSlots::Init(x, level, leftmost, sibling, has_low, low);
  }

  // Open's repair of one node (after the read-only validation).
  void Repair(uint64_t raw) PMINDEX_REQUIRES(mu_);

  Faults faults_;
};

}  // namespace pmindex::fastfair
