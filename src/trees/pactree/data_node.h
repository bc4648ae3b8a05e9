// PACTree's data layer node (docs/layout/pactree.md): one PM block per node
// of a singly linked list sorted by anchor key. A node holds up to `slots`
// (4..64) unsorted key-value slots, a validity bitmap and one fingerprint
// byte per slot; the node owns the keys in [anchor, next node's anchor).
//
//   line 0   version   lock word (odd: a writer holds the node); meaningless
//                      after a crash, open resets it to 0
//            tag       kNodeTag
//            anchor    the lowest key the node owns; fixed once linked
//            next      PPtr raw of the right sibling, 0 for the last node
//            bitmap    bit i set iff slot i holds a live pair
//            high      the next node's anchor (when next != 0), kept here so
//                      that a search does not read the next node; open
//                      rewrites it from the chain
//            search    in the head only, with search=pm: PPtr raw of the
//                      persistent search layer's root (pm_trie.h); 0 else
//            merged    0 while the node is in the chain; once it has been
//                      merged away, PPtr raw of its left sibling that took
//                      its pairs (a reader that meets it goes there); open
//                      resets it to 0 on every chain node
//   line 1   fpw[8]    fingerprint bytes, slot i in byte i % 8 of word i / 8
//   line 2.. slots     KV {key, value}, 16 bytes each, four per line
//
// Persistence contract: a slot's pair and fingerprint are durable before
// its bitmap bit is set (the bitmap NAW commits an insert or a remove); a
// new sibling is durable before the `next` NAW that links it (which commits
// a split). A pair whose key is >= the next node's anchor is dead whatever
// its bit says: a crash between a split's link and the bitmap NAW that
// clears the moved slots leaves such pairs, and so does a crash between a
// merge's bitmap store (the right sibling's pairs copied in) and its
// `next` store that unlinks the sibling; open clears their bits.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/fingerprint.h"
#include "pmindex/types.h"
#include "sync/version_lock.h"

namespace pmindex::pactree {

inline constexpr uint64_t kNodeTag = 0x45444f4e43415450;  // "PTACNODE"
inline constexpr uint32_t kMaxSlots = 64;
inline constexpr uint32_t kMinSlots = 4;

struct alignas(64) NodeHeader {
  uint64_t version;
  uint64_t tag;
  Key anchor;
  uint64_t next;
  uint64_t bitmap;
  Key high;
  uint64_t search;
  uint64_t merged;
  uint64_t fpw[kMaxSlots / 8];
};
static_assert(sizeof(NodeHeader) == 128);
static_assert(alignof(NodeHeader) == 64);
static_assert(offsetof(NodeHeader, next) % 8 == 0 && offsetof(NodeHeader, bitmap) % 8 == 0);
static_assert(offsetof(NodeHeader, next) < 64 && offsetof(NodeHeader, high) < 64 &&
                  offsetof(NodeHeader, bitmap) < 64,
              "next, high, bitmap and the lock word share line 0 (a split's stores to them "
              "become durable in program order)");
static_assert(offsetof(NodeHeader, fpw) == 64, "fingerprints fill line 1");
static_assert(sizeof(KV) == 16);

// Bytes of a node with `slots` slots, whole lines.
inline constexpr uint32_t NodeBytes(uint32_t slots) {
  return (static_cast<uint32_t>(sizeof(NodeHeader)) + slots * 16 + 63) / 64 * 64;
}

inline KV* Slots(NodeHeader* x) { return reinterpret_cast<KV*>(x + 1); }
inline const KV* Slots(const NodeHeader* x) { return reinterpret_cast<const KV*>(x + 1); }

// Relaxed loads of words optimistic readers share with writers.
inline uint64_t Ld(const uint64_t& w) { return sync::OlcLoad(w); }
inline uint64_t LdAcquire(const uint64_t& w) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(std::memory_order_acquire);
}

// The fingerprint word i/8 with byte i%8 replaced by fp.
inline uint64_t WithFingerprint(uint64_t word, uint32_t i, uint8_t fp) {
  const uint32_t shift = (i % 8) * 8;
  return (word & ~(uint64_t{0xff} << shift)) | (uint64_t{fp} << shift);
}
inline uint8_t FingerprintAt(const NodeHeader* x, uint32_t i) {
  return static_cast<uint8_t>(Ld(x->fpw[i / 8]) >> ((i % 8) * 8));
}

// The slots among `live` whose fingerprint equals k's. Reads the
// fingerprint words with relaxed loads (a reader validates afterwards).
inline uint64_t FingerprintMatches(const NodeHeader* x, uint32_t slots, uint64_t live, Key k) {
  uint64_t words[kMaxSlots / 8];
  const uint32_t nw = (slots + 7) / 8;
  for (uint32_t w = 0; w < nw; ++w) words[w] = Ld(x->fpw[w]);
  uint8_t bytes[kMaxSlots];
  std::memcpy(bytes, words, nw * 8);
  return common::MatchMask(bytes, static_cast<int>(slots), common::Fingerprint(k)) & live;
}

// The slot among `live` holding key k, or -1.
inline int FindSlot(const NodeHeader* x, uint32_t slots, uint64_t live, Key k) {
  const KV* s = Slots(x);
  for (uint64_t m = FingerprintMatches(x, slots, live, k); m != 0; m &= m - 1) {
    const int i = __builtin_ctzll(m);
    if (Ld(s[i].key) == k) return i;
  }
  return -1;
}

}  // namespace pmindex::pactree
