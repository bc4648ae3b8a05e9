// The write-optimized node of TLBtree's bottom layer (paper 003, section
// III.B "Write-Optimized Bottom Layer"; docs/layout/tlbtree.md).
//
// A node is 256 bytes (four lines). Line 0 holds everything a commit
// changes: the state word, the leftmost child, the two shadow sibling
// records and the node's tag and level. Lines 1-3 hold 12 record slots
// that are never shifted: the state word's slot array lists, in key order,
// which physical slots are live.
//
// State word (one failure-atomic 8-byte store commits every change):
//   bits  0..47  slot array: 12 entries of 4 bits, entry i = the physical
//                slot of the i-th smallest key (entries past count unused)
//   bits 48..51  count (0..12)
//   bit  52      sibling-version bit: sib[bit] is the live sibling record
//   bit  53      latch (a writer holds the node); cleared by recovery
//   bits 54..63  version counter, bumped by every commit
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pmindex/types.h"

namespace pmindex::tlbtree {

inline constexpr uint32_t kNodeBytes = 256;
// The block an inner node is allocated in: a node and one unused line, the
// allocator's 320-byte class, whose pages then hold inner nodes only (a
// block of this class is 64-byte aligned, all a node needs).
inline constexpr uint32_t kInnerBlockBytes = kNodeBytes + 64;
inline constexpr uint32_t kSlots = 12;
inline constexpr uint64_t kNodeTag = 0x45455254424C5400;  // "\0TLBTREE", low byte 0
// The tag of a leaf NOBtree's migration copied to another node: no longer
// linked (a writer that latches it starts over), freed through epochs.
inline constexpr uint64_t kMovedTag = 0x444556004F4D4E00;
// The tag of a leaf whose records a merge moved into its left neighbour:
// unlinked, frozen, freed through epochs (a writer that latches it starts
// over, as for kMovedTag).
inline constexpr uint64_t kMergedTag = 0x44454752454D4E00;

struct Rec {
  uint64_t key;
  uint64_t val;  // the value (leaf) or a child's PPtr raw (inner)
};
static_assert(sizeof(Rec) == 16);

// {split key, right neighbour}: every key of the node is below key when ptr != 0.
struct SibRec {
  uint64_t key;
  uint64_t ptr;  // PPtr raw of the right neighbour on this level, 0 = none
};
static_assert(sizeof(SibRec) == 16);

struct alignas(64) Node {
  uint64_t state;     // 0
  uint64_t leftmost;  // 8: inner nodes: child for keys below the first key
  SibRec sib[2];      // 16: shadow sibling records, the state's bit picks the live one
  uint64_t tag;       // 48: kNodeTag
  uint32_t level;     // 56: 0 = leaf
  uint32_t pad;       // 60
  Rec rec[kSlots];    // 64: record slots, lines 1-3
};
static_assert(sizeof(Node) == kNodeBytes);
static_assert(offsetof(Node, state) == 0 && offsetof(Node, leftmost) == 8 && offsetof(Node, sib) == 16);
static_assert(offsetof(Node, tag) == 48 && offsetof(Node, level) == 56 && offsetof(Node, rec) == 64);

// NOBtree's migration log (one 64-byte block, pool root slot 1): a leaf
// move changes two pointers (its parent's and its left neighbour's), which
// no single store can do, so they are redone from here after a crash.
struct alignas(64) MigrationLog {
  uint64_t armed;   // 0: idle; kLogArmed: from/to/... are a move to redo
  uint64_t from;    // the leaf moved (PPtr raw)
  uint64_t to;      // its copy, complete and durable before arming
  uint64_t parent;  // the node one level up naming `from` (0: a root)
  uint64_t slot;    // where: kLeftmostSlot, the physical record slot, or kNoParentSlot (a root)
  uint64_t prev;    // the leaf whose live sibling record names `from` (0: none)
  uint64_t tag;     // kLogTag
  uint64_t pad;
};
static_assert(sizeof(MigrationLog) == 64);
inline constexpr uint64_t kLogTag = 0x474F4C4554424F4E;  // "NOBTELOG"
inline constexpr uint64_t kLogArmed = 0x44454D5241;       // "ARMED"
inline constexpr uint64_t kLeftmostSlot = 0xFF;
inline constexpr uint64_t kNoParentSlot = 0xFE;  // a subindex root: no parent names it

// State word helpers (pure functions on the 64-bit value).
namespace st {
inline constexpr int kCountShift = 48;
inline constexpr uint64_t kSibBit = uint64_t{1} << 52;
inline constexpr uint64_t kLatch = uint64_t{1} << 53;
inline constexpr int kVerShift = 54;
inline constexpr uint64_t kVerMask = ~uint64_t{0} << kVerShift;

inline uint32_t Count(uint64_t s) { return static_cast<uint32_t>((s >> kCountShift) & 0xF); }
inline uint32_t Slot(uint64_t s, uint32_t i) { return static_cast<uint32_t>((s >> (4 * i)) & 0xF); }
inline uint32_t Sib(uint64_t s) { return (s & kSibBit) ? 1u : 0u; }
inline bool Latched(uint64_t s) { return (s & kLatch) != 0; }
// The version counter advanced by one (wraps), everything else kept.
inline uint64_t Bump(uint64_t s) { return (s & ~kVerMask) | ((s + (uint64_t{1} << kVerShift)) & kVerMask); }
inline uint64_t WithCount(uint64_t s, uint32_t n) {
  return (s & ~(uint64_t{0xF} << kCountShift)) | (uint64_t{n} << kCountShift);
}
// Slot array with physical slot `slot` inserted at logical position pos.
inline uint64_t Insert(uint64_t s, uint32_t pos, uint32_t slot) {
  const uint32_t n = Count(s);
  const uint64_t arr = s & ((uint64_t{1} << 48) - 1);
  const uint64_t low_mask = (uint64_t{1} << (4 * pos)) - 1;
  uint64_t na = (arr & low_mask) | (uint64_t{slot} << (4 * pos)) | ((arr & ~low_mask) << 4);
  na &= (uint64_t{1} << 48) - 1;
  return WithCount((s & ~((uint64_t{1} << 48) - 1)) | na, n + 1);
}
// Slot array without logical position pos.
inline uint64_t Remove(uint64_t s, uint32_t pos) {
  const uint32_t n = Count(s);
  const uint64_t arr = s & ((uint64_t{1} << 48) - 1);
  const uint64_t low_mask = (uint64_t{1} << (4 * pos)) - 1;
  const uint64_t na = (arr & low_mask) | ((arr >> 4) & ~low_mask);
  return WithCount((s & ~((uint64_t{1} << 48) - 1)) | na, n - 1);
}
// The first n logical positions kept (a split's left half).
inline uint64_t Truncate(uint64_t s, uint32_t n) { return WithCount(s, n); }
// A bitmask of the physical slots in use.
inline uint32_t UsedMask(uint64_t s) {
  uint32_t m = 0;
  for (uint32_t i = 0, n = Count(s); i < n; ++i) m |= 1u << Slot(s, i);
  return m;
}
// A state listing physical slots 0..n-1 in order, bit 0, unlatched, version 0.
inline uint64_t Identity(uint32_t n) {
  uint64_t s = 0;
  for (uint32_t i = 0; i < n; ++i) s |= uint64_t{i} << (4 * i);
  return WithCount(s, n);
}
}  // namespace st

}  // namespace pmindex::tlbtree
