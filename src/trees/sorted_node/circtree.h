// Circ-Tree (Wang, Brihadiswarn, Jiang and Chattopadhyay, "Circ-Tree: A
// B+-Tree Variant with Circular Design for Persistent Memory", arXiv 2019,
// IEEE TC 2022) with the Sentinel Array of paper 002 (Ye and Wang, 2021):
// a B+-tree whose nodes of every level are circular sorted arrays in PM.
// A node's records live in a ring of slots; the node header keeps where
// the ring's first record is (`start`) and how many there are (`count`)
// in ONE 8-byte word, so a change of both (an insert or delete at the
// left end moves `start`) is a single failure-atomic store. An insert or
// delete shifts only the records on its shorter side: those left of the
// position move one slot left (around the ring), or those right of it
// one slot right.
//
// Crash consistency (docs/layout/circtree.md). Values are inline and any
// uint64_t is a valid value, and a shift in place overwrites slots the
// old (start, count) still names, so "shift, then store the metadata
// word" alone cannot be the commit: a crash in the middle would lose the
// record pushed out of the old range. pmindex therefore keeps FAST's
// ordering rule on the ring: the metadata word first takes in the free
// slot the shift needs (holding a copy of its neighbour), each moved
// record's two words are stored in an order that makes a half-moved slot
// show the KEY of its complete neighbour, and a third field of the
// metadata word, `side`, says which of two equal adjacent keys is the
// valid one (right when the records right of the position move, left
// otherwise). An insert is committed by the new key's store, a delete by
// the first key store of its shift. Splits are FAIR's: the new right node
// is made durable, then the old node's sibling pointer and metadata word
// (one line, stored in that order) commit the split; a new root is made
// durable before root slot 0 names it.
// Recovery (every open) validates read-only first, then: cuts off the
// records a cut-short split left in the old node (keys at or above the
// sibling's low key), removes the invalid record of an equal-key pair
// (by a delete shift on the same side, itself crash-safe), clears the
// version words and rebuilds the sentinels or fingerprints.
//
// Sentinel Array (sentinel=on): one key per LOGICAL line of the ring (the
// key of logical record 4l, l = 0, 1, ...), never flushed and rebuilt by
// recovery. Logical lines keep the array sorted whatever `start` is; the
// records of one logical line lie in at most two physical lines.
// Fingerprints (fingerprints=on): one byte per PHYSICAL slot, compared 16
// at a time (SSE2); a match counts only if its slot is in the ring's range.
//
// Concurrency: no concurrency scheme of the Circ-Tree paper was available
// (only its abstract and summaries could be read), so pmindex uses the
// scheme fastfair was built with: lookups and scans take no lock (each
// node carries a version word, odd while a writer is inside; a reader
// copies what it needs and retries when the version moved; a node reached
// through a parent that has not been told of its split yet is left by the
// sibling pointer, the B-link rule). Writers are serialized by one mutex.
//
// Merges (fastfair's, on the ring): a delete that leaves a node with fewer
// than a quarter of its slots merges it with its neighbour under the same
// parent (into the LEFT one of the pair) when both fit in three quarters
// of a node. R's records are stored into L's free slots past L's ring
// range (invisible), the parent deletes R's separator (its own delete
// shift), then L's metadata word and L's sibling pointer (= R's sibling),
// one line, commit. R's version becomes kDead (a reader that meets it
// starts again from the root) and R is retired through the allocator's
// epochs; readers run inside alloc::Allocator::EpochGuard. An inner root
// left with no record hands root slot 0 to its only child.
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

namespace pmindex::circtree {

// Records, node layout and search modes: common/sorted_node.h (shared
// with fastfair).
using sorted_node::Layout;
using sorted_node::Rec;
using sorted_node::Search;

// The metadata word: bits 0-15 start (physical slot of logical record 0),
// bits 16-31 count, bit 32 side (1: of two equal adjacent keys the LEFT one
// is valid; 0: the right one). Bits 33-63 are zero.
struct Meta {
  uint32_t start = 0;
  uint32_t count = 0;
  bool left = false;
  static Meta Unpack(uint64_t w) {
    return Meta{static_cast<uint32_t>(w & 0xFFFF), static_cast<uint32_t>((w >> 16) & 0xFFFF), ((w >> 32) & 1) != 0};
  }
  uint64_t Pack() const { return uint64_t{start} | (uint64_t{count} << 16) | (uint64_t{left ? 1u : 0u} << 32); }
};

// Line 0 of every node:
//   version u64 | tag u64 | meta u64 | level u32, pad u32 | sibling PPtr |
//   leftmost PPtr | low u64 | has_low u64
// The records start at a line boundary after the auxiliary lines (Layout).
struct alignas(64) Header {
  uint64_t version;   // even: no writer inside; odd: a writer is changing the node
  uint64_t tag;       // kNodeTag
  uint64_t meta;      // Meta, packed
  uint32_t level;     // 0 = leaf
  uint32_t pad;
  uint64_t sibling;   // PPtr raw of the right neighbour on this level, or 0
  uint64_t leftmost;  // inner: child for keys below logical record 0's key
  uint64_t low;       // every key of this node is >= low (valid iff has_low)
  uint64_t has_low;   // 1 for a node made by a split, 0 for a level's first node
};
static_assert(sizeof(Header) == 64);
static_assert(offsetof(Header, meta) == 16 && offsetof(Header, sibling) == 32);

// Between the header and the records a node holds at most one auxiliary
// array, never flushed and rebuilt by recovery: the sentinels (one u64
// per logical record line) or the fingerprints (one byte per slot).
// Layout: common/sorted_node.h.


// Circ-Tree's slot policy for the sorted-node engine (engine.h): the
// records are a ring of the node's slots from `start`, and the metadata
// word's side bit says which of two equal adjacent keys is valid.
struct RingSlots {
  using Header = circtree::Header;
  static constexpr std::string_view kName = "circtree";
  static constexpr uint64_t kNodeTag = 0x4545525443524943;  // "CIRCTREE"
  static sorted_node::Ring Read(const Header* x) {
    const Meta m = Meta::Unpack(x->meta);
    return {m.start, m.count, m.left};
  }
  static sorted_node::Ring Load(const Header* x, uint32_t cap) {
    const Meta m = Meta::Unpack(sorted_node::Ld(x->meta));
    return {m.start < cap ? m.start : 0, std::min(m.count, cap), m.left};
  }
  static const char* BadSlots(const Header* x, uint32_t cap) {
    const Meta m = Meta::Unpack(x->meta);
    return ((x->meta >> 33) != 0 || m.start >= cap || m.count > cap) ? " has a bad metadata word" : nullptr;
  }
  static uint32_t Phys(uint32_t start, uint32_t i, uint32_t cap) {
    const uint32_t s = start + i;
    return s >= cap ? s - cap : s;
  }
  static void Init(Header* x, uint32_t level, uint64_t leftmost, uint64_t sibling, bool has_low, Key low);
  static void StoreFilled(Header* x, uint32_t count) { pm::store(&x->meta, Meta{0, count, false}.Pack()); }
};

class CircTree final : public sorted_node::Engine<CircTree, RingSlots> {
 public:
  using Slots = RingSlots;

  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, const Layout& lay, Search s) {
    return CreateTree(env, lay, s);
  }
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, const Layout& lay, Search s) {
    return OpenTree(env, lay, s);
  }

 private:
  friend class sorted_node::Engine<CircTree, RingSlots>;
  CircTree(const IndexEnv& env, const Layout& lay, Search s) : Engine(env, lay, s) {}

  // Physical slot of logical record i (i may be -1 or up to cap - 1).
  uint32_t Phys(uint32_t start, int64_t i) const {
    int64_t s = static_cast<int64_t>(start) + i;
    if (s < 0) s += lay_.cap;
    if (s >= static_cast<int64_t>(lay_.cap)) s -= lay_.cap;
    return static_cast<uint32_t>(s);
  }

  // First logical index in [0, m.count) whose key is >= k (m.count if
  // none), by the configured search. Reads with relaxed atomic loads.
  uint32_t LowerBound(Header* x, Meta m, Key k) const;
  // The logical index of k in leaf x by its fingerprints (m.count if absent).
  uint32_t FingerprintFind(Header* x, Meta m, Key k) const;
  uint64_t ChildAt(Header* x, Meta m, uint32_t p, Key k) const;
  uint64_t MoveRight(Header* x, Meta m, uint32_t p, Key k) const;
  // The reader's view of x for the engine's lock-free descent and lookup
  // (engine.h): the metadata word, loaded relaxed and clamped into the node.
  Meta ReaderView(const Header* x) const {
    const sorted_node::Ring r = RingSlots::Load(x, lay_.cap);
    return Meta{r.start, r.count, r.left};
  }
  uint32_t ViewCount(Meta m) const { return m.count; }
  uint32_t ViewSlot(Meta m, uint32_t p) const { return Phys(m.start, p); }

  // Writers (under mu_).
  Status Write(Op op, Key k, Value v) PMINDEX_EXCLUDES(mu_);
  // Write's steps. DescendToLeaf: the leaf for k, the inner nodes above it
  // in path[0, *depth) (root first). SplitInsert: inserts k into the full
  // leaf at raw, splitting it and each full ancestor on path (a new root
  // if they all are), every node allocated first.
  uint64_t DescendToLeaf(Key k, uint64_t* path, uint32_t* depth) PMINDEX_REQUIRES(mu_);
  Status SplitInsert(uint64_t raw, const uint64_t* path, uint32_t depth, Key k, Value v)
      PMINDEX_REQUIRES(mu_);
  void BeginWrite(Header* x) PMINDEX_REQUIRES(mu_);
  void EndWrite(Header* x) PMINDEX_REQUIRES(mu_);
  // Stores, flushes and fences the metadata word. Each caller is its own
  // flush and fence site for pmcrash --mutate (site = the call).
  void StoreMeta(Header* x, Meta m, pm::Site site = pm::Site::current());
  // Inserts (k, v) at logical position p of the non-full node x, shifting
  // the shorter side.
  void ShiftInsert(Header* x, uint32_t p, Key k, uint64_t v) PMINDEX_REQUIRES(mu_);
  // ShiftInsert's shifting cases (0 < p < count; m is x's metadata word):
  // the records right of p move one slot right, or those left of p one
  // slot left (the ring's start with them); then the new record's key
  // store commits the insert.
  void ShiftRightAndInsert(Header* x, Meta m, uint32_t p, Key k, uint64_t v) PMINDEX_REQUIRES(mu_);
  void ShiftLeftAndInsert(Header* x, Meta m, uint32_t p, Key k, uint64_t v) PMINDEX_REQUIRES(mu_);
  // Removes logical record p, shifting the left side right (left) or the
  // right side left.
  void ShiftDelete(Header* x, uint32_t p, bool left) PMINDEX_REQUIRES(mu_);
  Key Split(uint64_t x_raw, uint64_t fresh) PMINDEX_REQUIRES(mu_);
  void NewRoot(uint64_t left, Key sep, uint64_t right, uint64_t fresh) PMINDEX_REQUIRES(mu_);
  void InitNode(Header* x, uint32_t level, uint64_t leftmost, uint64_t sibling, bool has_low, Key low) {
    RingSlots::Init(x, level, leftmost, sibling, has_low, low);
  }
  // Flushes the slots of logical records [a, b) of a ring starting at
  // `start` (two runs when they wrap); one flush site for --mutate.
  void FlushRing(Header* x, uint32_t start, uint32_t a, uint32_t b, pm::Site site = pm::Site::current());

  // Merges (under mu_; the engine's MergeUpward walks the levels).
  bool Underfull(const Header* x) const { return Meta::Unpack(x->meta).count * 4 < lay_.cap; }
  // The engine's merge step: merges l and r (named by parent, adjacent)
  // iff node is still underfull and the two fit; true iff merged.
  bool MergeIfRoom(uint64_t node, uint64_t l_raw, uint64_t r_raw, uint64_t parent, uint32_t sep_idx)
      PMINDEX_REQUIRES(mu_);
  void Merge(uint64_t l_raw, uint64_t r_raw, uint64_t p_raw, uint32_t sep_idx)
      PMINDEX_REQUIRES(mu_);
  // The engine's CollapseRoot: the root it hands down stays odd for good.
  void WriteLock(Header* x) PMINDEX_REQUIRES(mu_) { BeginWrite(x); }
  // The side a delete of logical p of x shifts (the shorter; on a tie the
  // one the metadata word names).
  static bool DeleteSide(Meta m, uint32_t p) {
    const uint32_t lmoves = p, rmoves = m.count - 1 - p;
    return lmoves < rmoves || (lmoves == rmoves && m.left);
  }

  // Open's repair of one node (after the read-only validation).
  void Repair(uint64_t raw) PMINDEX_REQUIRES(mu_);
};

}  // namespace pmindex::circtree
