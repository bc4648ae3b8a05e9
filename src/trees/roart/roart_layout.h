// roart's PM layout (docs/layout/roart.md): an adaptive radix tree over
// the eight big-endian bytes of a key, whose inner nodes (N4, N16, N48,
// N256) hold compressed entries and whose bottom nodes are leaf arrays of
// compressed leaf pointers. Every node is a block of the index's pool;
// nothing of the tree lives in DRAM but the pool's base and the counters.
//
// Words shared by every block: word 0 is the block's meta word (a magic,
// the block's type and, for inner nodes, its depth; for leaf arrays their
// capacity). The meta word and an inner node's prefix bytes are written
// once, before the block is linked, and never change; only the prefix
// word's count byte (below) does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pmindex/types.h"

namespace pmindex::roart {

constexpr uint64_t kMagic = 0x524F415254;  // "ROART"

// Block types; also the type field of an inner node's entry.
enum Type : unsigned { kN4 = 1, kN16 = 2, kN48 = 3, kN256 = 4, kLeafArray = 5, kLeaf = 6 };

constexpr uint64_t Meta(unsigned type, unsigned arg) {
  return (kMagic << 16) | (uint64_t{arg} << 8) | type;
}
constexpr unsigned MetaType(uint64_t m) { return static_cast<unsigned>(m & 0xff); }
constexpr unsigned MetaArg(uint64_t m) { return static_cast<unsigned>((m >> 8) & 0xff); }
constexpr bool MetaMagicOk(uint64_t m) { return (m >> 16) == kMagic; }

// Key bytes: byte d (0..7) is the d-th most significant, so the byte
// order of the tree is the numeric order of the keys.
constexpr unsigned KeyByte(Key k, unsigned d) {
  return static_cast<unsigned>((k >> (56 - 8 * d)) & 0xff);
}
// The bits of bytes 0..d-1 (d in 0..8).
constexpr uint64_t PrefixMask(unsigned d) { return d == 0 ? 0 : ~uint64_t{0} << (64 - 8 * d); }

constexpr uint64_t kOffsetMask = (uint64_t{1} << 48) - 1;

// An inner node's entry (ROART's entry compression: one 8-byte word, so
// adding, replacing or removing a child is one NVM atomic write): bits
// 0..47 the child's pool offset, 48..55 the key byte it is reached by,
// 56..59 the child's type (kN4..kLeafArray). 0 is an empty entry.
constexpr uint64_t Entry(uint64_t offset, unsigned byte, unsigned type) {
  return offset | (uint64_t{byte} << 48) | (uint64_t{type} << 56);
}
constexpr unsigned EntryByte(uint64_t e) { return static_cast<unsigned>((e >> 48) & 0xff); }
constexpr unsigned EntryType(uint64_t e) { return static_cast<unsigned>(e >> 56); }
constexpr uint64_t EntryOffset(uint64_t e) { return e & kOffsetMask; }

// A leaf array's slot: bits 0..47 the leaf's pool offset, 48..63 the
// key's 16-bit fingerprint. 0 is an empty slot.
constexpr unsigned Fingerprint(Key k) {
  return static_cast<unsigned>((k * 0x9E3779B97F4A7C15ULL) >> 48);
}
constexpr uint64_t Slot(uint64_t offset, Key k) {
  return offset | (uint64_t{Fingerprint(k)} << 48);
}
constexpr unsigned SlotFingerprint(uint64_t s) { return static_cast<unsigned>(s >> 48); }

// Inner nodes: meta (type, depth: the key byte the node branches on),
// the prefix word, then the entries. The prefix word holds the key bytes
// 0..depth-1 every key below shares in its high bytes; its lowest byte
// (the key's byte 7, which no prefix holds, a node's depth being at most
// 7) is the node's child count modulo 256 (ROART's count field): metadata
// that open rebuilds from the entries, so the write paths store it
// without a flush; bytes depth..6 are 0. N48 keeps after its 48 entries a 256-byte child index
// (index[b] = slot + 1 of byte b's entry, 0 if none): metadata that open
// rebuilds from the entries, so the write path stores it without a flush.
constexpr unsigned kHeaderWords = 2;
constexpr uint64_t kCountMask = 0xff;
constexpr uint64_t PrefixWord(uint64_t prefix, unsigned depth, unsigned children) {
  return (prefix & PrefixMask(depth)) | (children & kCountMask);
}
// The children of an inner node of this type by its prefix word's count.
// An N256 below the root holds 1..256 children (its count byte 0 means
// 256); the root's count (0..256) is kept as well but never asked for.
constexpr unsigned Children(uint64_t prefix_word, unsigned type) {
  const unsigned c = static_cast<unsigned>(prefix_word & kCountMask);
  return c == 0 && type == kN256 ? 256 : c;
}
constexpr unsigned Capacity(unsigned type) {
  return type == kN4 ? 4 : type == kN16 ? 16 : type == kN48 ? 48 : 256;
}
constexpr size_t RoundLine(size_t n) { return (n + 63) / 64 * 64; }
constexpr size_t InnerBytes(unsigned type) {
  return RoundLine(8 * (kHeaderWords + Capacity(type)) + (type == kN48 ? 256 : 0));
}
// A node of this type (not the root) left with at most this many children
// by a remove is replaced by a copy of the smaller type TypeFor(n)
// (ART's thresholds: below the next smaller type's capacity, so that a
// node does not grow and shrink on alternate writes; an N4 collapses at
// one child instead).
constexpr unsigned ShrinkAt(unsigned type) {
  return type == kN16 ? 3 : type == kN48 ? 12 : type == kN256 ? 37 : 0;
}
// The smallest inner type holding n children.
constexpr unsigned TypeFor(unsigned n) {
  return n <= 4 ? kN4 : n <= 16 ? kN16 : n <= 48 ? kN48 : kN256;
}

// Leaf arrays: meta (type, capacity), a bitmap (bit i set iff slot i is
// used: metadata that open rebuilds from the slots, so the write paths
// store it without a flush), then `capacity` slots, unordered (ROART's
// leaf compaction: the leaves of a subtree gathered in one node, so a
// scan reads one node's used slots and sorts them).
constexpr size_t LeafArrayBytes(unsigned capacity) {
  return RoundLine(8 * (kHeaderWords + capacity));
}

// Leaves: meta, key, value (a whole line).
struct Leaf {
  uint64_t meta;
  Key key;
  Value value;
};
constexpr size_t kLeafBytes = 64;

}  // namespace pmindex::roart
