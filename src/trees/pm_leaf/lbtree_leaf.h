// LB+-Tree leaf (paper 000_eb283a9b9c5be096, section 3): a PM node of
// kBlocks x 256 B with distributed headers and alternative headers.
//
// Contract
// - Persistent fields: per block a 16 B header (14-bit bitmap, then in
//   block 0 the lock bit and the alt bit, then 14 one-byte fingerprints) and
//   14 (key, value) slots; block 0 ends with two sibling pointers, blocks
//   1..m-1 end with an alternative header. alt selects the sibling pointer
//   in use and, for blocks 1..m-1, whether the front (alt=0) or the back
//   (alt=1) header is active.
// - A slot is valid iff its bit is set in its block's ACTIVE header; its
//   fingerprint is then Fingerprint(key). Invalid slots, inactive headers
//   and the unused sibling pointer are "unused space": they may hold
//   anything, and writing them never changes the tree's state.
// - Every state change ends with one NAW of an active header's first word
//   (an "NAW section", paper section 2): all writes before it go to unused
//   space and are persisted (flush + fence) before the NAW, except writes to
//   the NAW's own line, which persist in program order with it.
//     insert   Algorithm 2 (entry moving toward the line written)
//     delete   one NAW clearing the bit
//     split    Algorithm 3 (logless: new leaf + unused sibling + inactive
//              headers, then one NAW of block 0's word 0 flipping alt)
//     update   one NAW of the value word (8 B, atomic)
// - Locks: the caller holds the leaf's DRAM version lock for every mutating
//   call (pm_leaf_tree.h); SetLockBit mirrors it in the paper's persistent
//   lock bit, which recovery clears. Readers call Find/Collect without locks
//   and validate the version afterwards, so every field they read is read
//   with a relaxed atomic load and every field a writer changes in a
//   visible leaf is written with pm::store of 8 bytes.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/fingerprint.h"
#include "trees/pm_leaf/small_sort.h"
#include "pm/persist.h"
#include "index/index.h"
#include "pm/pool.h"
#include "pmindex/status.h"
#include "util/prefetch.h"

namespace pmindex::lbtree {

inline uint64_t LoadRelaxed(const uint64_t* p) {
  return std::atomic_ref<const uint64_t>(*p).load(std::memory_order_relaxed);
}

// A DRAM copy of a 16-byte header ("dword" in the paper).
//   word 0: bits 0..13 bitmap, bit 14 lock, bit 15 alt, bytes 2..7 fp[0..5]
//   word 1: bytes 0..7 fp[6..13]
struct Header {
  static constexpr uint64_t kBitmapMask = 0x3fff;
  static constexpr uint64_t kLockBit = uint64_t{1} << 14;
  static constexpr uint64_t kAltBit = uint64_t{1} << 15;
  uint64_t w[2] = {0, 0};

  uint32_t bitmap() const { return static_cast<uint32_t>(w[0] & kBitmapMask); }
  void set_bit(int s) { w[0] |= uint64_t{1} << s; }
  void clear_bit(int s) { w[0] &= ~(uint64_t{1} << s); }
  // Fingerprint of slot s: byte s + 2 of the two words. Written without
  // indexing w by a computed position, which would keep a header copy in
  // memory instead of registers (stores on the insert path).
  uint8_t fp(int s) const {
    const int byte = s + 2;
    const uint64_t word = byte < 8 ? w[0] : w[1];
    return static_cast<uint8_t>(word >> (8 * (byte % 8)));
  }
  void set_fp(int s, uint8_t f) {
    const int byte = s + 2;
    const int sh = 8 * (byte % 8);
    const uint64_t keep = ~(uint64_t{0xff} << sh), bits = uint64_t{f} << sh;
    if (byte < 8) {
      w[0] = (w[0] & keep) | bits;
    } else {
      w[1] = (w[1] & keep) | bits;
    }
  }
  bool alt() const { return (w[0] & kAltBit) != 0; }
  bool locked() const { return (w[0] & kLockBit) != 0; }
};

template <int kBlocks>
class Leaf {
 public:
  static_assert(kBlocks >= 1 && kBlocks <= 4);
  static constexpr int kSlotsPerBlock = 14;
  static constexpr int kSlots = kSlotsPerBlock * kBlocks;
  static constexpr size_t kBytes = 256 * kBlocks;
  static constexpr uint32_t kFullBlock = 0x3fff;

  struct Entry {
    uint64_t key;
    uint64_t value;
  };

  // One 256 B block, four 64 B lines:
  //   line 0: [front header 16 B][slot 0][slot 1][slot 2]
  //   line 1: [slot 3][slot 4][slot 5][slot 6]
  //   line 2: [slot 7][slot 8][slot 9][slot 10]
  //   line 3: [slot 11][slot 12][slot 13][tail 16 B]
  // tail: block 0 = sibling[0], sibling[1]; block b>0 = back header.
  struct alignas(256) Block {
    uint64_t hdr[2];
    Entry slot[kSlotsPerBlock];
    uint64_t tail[2];
  };
  static_assert(sizeof(Block) == 256 && alignof(Block) == 256);
  static_assert(offsetof(Block, hdr) == 0);
  static_assert(offsetof(Block, slot) == 16);
  static_assert(offsetof(Block, tail) == 240);

  Block blk[kBlocks];

  static constexpr int LineOfSlot(int s) { return (s + 1) / 4; }
  static constexpr uint32_t LineMask(int line) {
    // Slots of a line: line 0 = 0..2, 1 = 3..6, 2 = 7..10, 3 = 11..13.
    return line == 0 ? 0x7u : line == 1 ? 0x78u : line == 2 ? 0x780u : 0x3800u;
  }

  // ------------------------------------------------------------ reading
  bool alt() const { return (LoadRelaxed(&blk[0].hdr[0]) & Header::kAltBit) != 0; }
  // True iff block b's active header is its back header.
  static bool UsesBack(int b, bool alt) { return b > 0 && alt; }
  const uint64_t* active_hdr(int b, bool alt) const {
    return UsesBack(b, alt) ? blk[b].tail : blk[b].hdr;
  }
  uint64_t* active_hdr(int b, bool alt) { return UsesBack(b, alt) ? blk[b].tail : blk[b].hdr; }
  uint64_t* inactive_hdr(int b, bool alt) { return UsesBack(b, alt) ? blk[b].hdr : blk[b].tail; }
  Header LoadHeader(int b, bool alt) const {
    const uint64_t* h = active_hdr(b, alt);
    return Header{{LoadRelaxed(&h[0]), LoadRelaxed(&h[1])}};
  }
  PPtr next() const { return PPtr(LoadRelaxed(&blk[0].tail[alt() ? 1 : 0])); }
  // The writers' lock (pm_leaf_tree.h): the lock bit, read with acquire so
  // that a reader seeing it clear sees the last writer's stores.
  bool IsLocked() const {
    return (std::atomic_ref<const uint64_t>(blk[0].hdr[0]).load(std::memory_order_acquire) &
            Header::kLockBit) != 0;
  }
  // Starts loading what a search reads first: the whole leaf at 256 B (as
  // the original does), else every block's front line (its header, or the
  // line before its back header) and last line.
  void Prefetch() const {
    for (int b = 0; b < kBlocks; ++b) {
      PrefetchLine(&blk[b].hdr[0]);
      if (kBlocks == 1) {
        PrefetchLine(&blk[b].slot[3]);
        PrefetchLine(&blk[b].slot[7]);
      }
      PrefetchLine(&blk[b].slot[11]);
    }
  }

  // Slot id = b * 14 + s. Returns -1 if k is absent. Safe without the lock
  // (result validated by the caller's version check).
  [[gnu::always_inline]] int Locate(uint64_t k) const {
    const uint8_t fp = common::Fingerprint(k);
    const bool a = alt();
    for (int b = 0; b < kBlocks; ++b) {
      const int s = MatchInBlock(b, LoadHeader(b, a), fp, k);
      if (s >= 0) return b * kSlotsPerBlock + s;
    }
    return -1;
  }
  // The slot of block b (header copy h) that holds k, or -1.
  int MatchInBlock(int b, const Header& h, uint8_t fp, uint64_t k) const {
    uint8_t bytes[16];
    std::memcpy(bytes, h.w, 16);
    uint32_t m = (common::MatchMask16(bytes, fp) >> 2) & h.bitmap();
    while (m != 0) {
      const int s = __builtin_ctz(m);
      m &= m - 1;
      if (LoadRelaxed(&blk[b].slot[s].key) == k) return s;
    }
    return -1;
  }
  uint64_t ValueAt(int id) const {
    return LoadRelaxed(&blk[id / kSlotsPerBlock].slot[id % kSlotsPerBlock].value);
  }
  [[gnu::always_inline]] bool Find(uint64_t k, uint64_t* v) const {
    int id = Locate(k);
    if (id < 0) return false;
    *v = ValueAt(id);
    return true;
  }
  int Count() const {
    const bool a = alt();
    int n = 0;
    for (int b = 0; b < kBlocks; ++b) n += __builtin_popcount(LoadHeader(b, a).bitmap());
    return n;
  }
  bool Full() const { return Count() == kSlots; }
  // Unsorted valid entries; returns the count (<= kSlots).
  int Collect(KV* out) const {
    const bool a = alt();
    int n = 0;
    for (int b = 0; b < kBlocks; ++b) {
      uint32_t m = LoadHeader(b, a).bitmap();
      while (m != 0) {
        int s = __builtin_ctz(m);
        m &= m - 1;
        out[n].key = LoadRelaxed(&blk[b].slot[s].key);
        out[n].value = LoadRelaxed(&blk[b].slot[s].value);
        ++n;
      }
    }
    return n;
  }

  // ------------------------------------------------------------ writing
  // New empty leaf with sibling `next`, durable on return (flush + fence).
  // Only create_index formats a leaf, right before the NAW of root slot 0
  // that links it; that NAW's store must not reach PM before the leaf, so
  // the fence here is needed (pmcrash --mutate kills dropping it and
  // flushing after the slot-0 store).
  static void Format(Leaf* l, PPtr next) {
    pm::fill(l, 0, kBytes);
    pm::store(&l->blk[0].tail[0], next.raw());
    pm::persist(l, kBytes);  // the whole leaf durable before anything links it
  }

  // The paper's lock bit (block 0, word 0). Written without flush: it only
  // reaches PM together with a later NAW of the same word or by eviction,
  // and recovery clears it either way.
  [[gnu::always_inline]] void SetLockBit(bool on) {
    uint64_t w = blk[0].hdr[0];
    w = on ? (w | Header::kLockBit) : (w & ~Header::kLockBit);
    pm::store(&blk[0].hdr[0], w, std::memory_order_release);
  }

  // Insert, UpdateSlot and RemoveSlot take `release`: when true, the
  // operation's commit store also clears the lock bit (as the original
  // code does), so that nothing is stored to the header's line after its
  // write-back has started (such a store waits for the write-back).
  // Readers may then see the change before its write-back completes; the
  // writer returns only after it (pm_leaf_tree.h, "Locks").

  // Insert's path in one pass over the headers: looks for k and picks the
  // block Algorithm 2 writes. Returns k's slot id if k is present (nothing
  // written), kInserted after inserting (k, v), or kFull (nothing written).
  // REQUIRES: lock held.
  static constexpr int kInserted = -1, kFull = -2;
  [[gnu::always_inline]] int InsertIfAbsent(uint64_t k, uint64_t v, bool release) {
    const uint8_t fp = common::Fingerprint(k);
    const bool a = alt();
    int free_b = -1;
    Header free_d;
    for (int b = 0; b < kBlocks; ++b) {
      const Header h = LoadHeader(b, a);
      const int s = MatchInBlock(b, h, fp, k);
      if (s >= 0) return b * kSlotsPerBlock + s;
      if (free_b < 0 && h.bitmap() != kFullBlock) {
        free_b = b;
        free_d = h;
      }
    }
    if (free_b < 0) return kFull;
    InsertInBlock(free_b, a, free_d, k, v, release);
    return kInserted;
  }

  // Algorithm 2. REQUIRES: lock held, k absent, !Full().
  [[gnu::always_inline]] void Insert(uint64_t k, uint64_t v, bool release = false) {
    const bool a = alt();
    int b = 0;
    Header d;
    for (; b < kBlocks; ++b) {
      d = LoadHeader(b, a);
      if (d.bitmap() != kFullBlock) break;
    }
    InsertInBlock(b, a, d, k, v, release);
  }

  // In-place value update: one NAW of the 8-byte value word.
  [[gnu::always_inline]] void UpdateSlot(int id, uint64_t v, bool release = false) {
    pm::naw(&blk[id / kSlotsPerBlock].slot[id % kSlotsPerBlock].value, v,
            release ? &blk[0].hdr[0] : nullptr, blk[0].hdr[0] & ~Header::kLockBit);
  }

  // Delete: one NAW of word 0 of the active header clearing the bit.
  [[gnu::always_inline]] void RemoveSlot(int id, bool release = false) {
    const int b = id / kSlotsPerBlock, s = id % kSlotsPerBlock;
    uint64_t* h = active_hdr(b, alt());
    const uint64_t w = h[0] & ~(uint64_t{1} << s);
    if (!release) {
      pm::naw(&h[0], w);
    } else if (h == &blk[0].hdr[0]) {
      pm::naw(&h[0], w & ~Header::kLockBit);
    } else {
      pm::naw(&h[0], w, &blk[0].hdr[0], blk[0].hdr[0] & ~Header::kLockBit);
    }
  }

  // Algorithm 3 (logless split) followed, when k stays in this leaf, by
  // Algorithm 2. nl is a fresh, unlinked block of kBytes at PM address
  // nl_ptr. Returns the split key: the smallest key of nl; keys below it
  // stay here. REQUIRES: lock held, Full(), k absent.
  //
  // route(split_key) is called once, when nl holds its entries and its
  // lock bit is set and before anything is flushed: the caller makes nl
  // reachable in DRAM there (readers and writers routed to nl wait on its
  // bit), so that its stores are not issued after this split's fences, when
  // they would wait for the write-backs (docs/architecture.md section 3.1).
  // Returns with both leaves unlocked: l's bit is cleared by the last NAW
  // on l, nl's by a store after that NAW (nl's header persists with the bit
  // set; recovery clears it).
  //
  // Deviation from the paper's Algorithm 3 (lines 20-23): there the new
  // entry for the old leaf is written inside the split's NAW section, into
  // a slot the split frees. In the state before the NAW that slot still
  // holds a live entry (the moved one, whose new copy is not linked yet),
  // so a crash could lose it. Here the entry is written after the split's
  // NAW store: into a freed slot of block 0's header line, in the same
  // write-back as the NAW (same-line stores persist in order), else by
  // Algorithm 2 after the NAW completes (one more NAW section).
  template <typename Route>
  uint64_t SplitInsert(uint64_t k, uint64_t v, Leaf* nl, PPtr nl_ptr, Route&& route) {
    const bool a = alt();
    SlotId items[kSlots];
    SortedSlots(items);
    const int keep = kSlots / 2;  // the largest kSlots/2 move (7 per block)
    const uint64_t split_key = items[keep].key;
    const bool to_new = k > split_key;
    const uint64_t nl_word0 = FillNewLeaf(items, keep, nl, to_new, k, v, a);
    route(split_key);
    FlushNewLeaf(nl, to_new);
    Header oh[kBlocks];
    StageOldLeafHeaders(items, keep, a, nl_ptr, oh);
    CommitSplit(oh[0], to_new, k, v);
    // nl is linked durably: release it (the word's value is known; a load
    // of the line would wait for its write-back).
    pm::store(&nl->blk[0].hdr[0], nl_word0 & ~Header::kLockBit, std::memory_order_release);
    return split_key;
  }

  // A slot of the leaf (block * kSlotsPerBlock + slot) and its key.
  struct SlotId {
    uint64_t key;
    int id;
  };
  // Every slot of the (full) leaf, in key order.
  void SortedSlots(SlotId* items) const {
    for (int id = 0; id < kSlots; ++id) {
      items[id] = {blk[id / kSlotsPerBlock].slot[id % kSlotsPerBlock].key, id};
    }
    common::SmallSort(items, kSlots, [](const SlotId& x) { return x.key; });
  }

  // Split step 1: the new leaf nl gets items[keep..] (and k if to_new), in
  // slots 7..13 of every block, so its line 0 and line 1 stay free for the
  // next inserts; its lock bit is set. nl is unused space until linked.
  // Returns nl's block-0 word 0 as stored (lock bit set).
  uint64_t FillNewLeaf(const SlotId* items, int keep, Leaf* nl, bool to_new, uint64_t k, uint64_t v,
                       bool a) const {
    Header nh[kBlocks];
    for (int i = keep; i < kSlots; ++i) {
      const int j = i - keep;
      const int nb = j / 7, ns = 7 + j % 7;
      const Entry& e = blk[items[i].id / kSlotsPerBlock].slot[items[i].id % kSlotsPerBlock];
      pm::store(&nl->blk[nb].slot[ns].key, e.key);
      pm::store(&nl->blk[nb].slot[ns].value, e.value);
      nh[nb].set_bit(ns);
      nh[nb].set_fp(ns, common::Fingerprint(e.key));
    }
    if (to_new) {
      pm::store(&nl->blk[0].slot[6].key, k);
      pm::store(&nl->blk[0].slot[6].value, v);
      nh[0].set_bit(6);
      nh[0].set_fp(6, common::Fingerprint(k));
    }
    nh[0].w[0] |= Header::kLockBit;  // nl stays locked until l's NAW is durable
    for (int b = 0; b < kBlocks; ++b) {
      pm::store(&nl->blk[b].hdr[1], nh[b].w[1]);
      pm::store(&nl->blk[b].hdr[0], nh[b].w[0]);
      if (b > 0) {
        pm::store(&nl->blk[b].tail[0], uint64_t{0});
        pm::store(&nl->blk[b].tail[1], uint64_t{0});
      }
    }
    pm::store(&nl->blk[0].tail[0], blk[0].tail[a ? 1 : 0]);
    pm::store(&nl->blk[0].tail[1], uint64_t{0});
    return nh[0].w[0];
  }

  // Split step 2: the new leaf durable before the NAW links it: only the
  // lines written, i.e. line 0 (header) and lines 2-3 (slots 7..13, tail)
  // of every block, and line 1 of block 0 if the new key took slot 6. Line
  // 1 of the other blocks is unused space; flushing it would count a line
  // write that the theorem's analysis (and the hardware) does not pay.
  static void FlushNewLeaf(Leaf* nl, bool to_new) {
    for (int b = 0; b < kBlocks; ++b) {
      pm::flush(&nl->blk[b].hdr[0], 64);
      if (b == 0 && to_new) pm::flush(&nl->blk[0].slot[3], 64);
      pm::flush(&nl->blk[b].slot[7], 128);
    }
  }

  // Split step 3: the old leaf's post-split headers in oh (items[keep..]
  // cleared). Block 0's goes into the NAW (CommitSplit); blocks 1.. get
  // theirs in the inactive header, which the alt flip activates. The
  // inactive headers and the unused sibling pointer (-> nl) are durable
  // on return, before the NAW.
  void StageOldLeafHeaders(const SlotId* items, int keep, bool a, PPtr nl_ptr, Header* oh) {
    for (int b = 0; b < kBlocks; ++b) oh[b] = LoadHeader(b, a);
    for (int i = keep; i < kSlots; ++i) {
      oh[items[i].id / kSlotsPerBlock].clear_bit(items[i].id % kSlotsPerBlock);
    }
    for (int b = 1; b < kBlocks; ++b) {
      uint64_t* ih = inactive_hdr(b, a);
      pm::store(&ih[1], oh[b].w[1]);
      pm::store(&ih[0], oh[b].w[0]);
      // Inactive header durable before the NAW activates it.
      pm::flush(ih, 16);
    }
    pm::store(&blk[0].tail[a ? 0 : 1], nl_ptr.raw());
    pm::flush(&blk[0].tail[0], 16);  // unused sibling -> nl, durable before the NAW
    pm::fence();
  }

  // Split step 4, the NAW: flips alt (sibling + headers of blocks 1..) and
  // clears the moved bits of block 0 (oh0: its post-split header). Its
  // fingerprints (word 1) are unchanged. It releases the leaf if k went to
  // nl; else the insert of k here does.
  void CommitSplit(const Header& oh0, bool to_new, uint64_t k, uint64_t v) {
    const uint64_t w0 = oh0.w[0] ^ Header::kAltBit;
    const uint32_t free_line0 = ~oh0.bitmap() & LineMask(0) & kFullBlock;
    if (to_new) {
      pm::naw(&blk[0].hdr[0], w0 & ~Header::kLockBit);
    } else if (free_line0 != 0) {
      // k stays here and the split freed a slot in block 0's header line:
      // the split's commit and the insert's share that line, so they share
      // one write-back. The line's stores persist in program order, and
      // each prefix is a state of the tree: the split's word 0 first (the
      // freed slot becomes unused space only here, so nothing writes it
      // before), then the entry and its fingerprint word (unused space),
      // then word 0 with the slot's bit, which commits the insert and
      // releases l. One flush + fence instead of two (a store to a line
      // whose write-back is in flight waits for it: docs/layout/lbtree.md,
      // "Split").
      const int s = __builtin_ctz(free_line0);
      pm::store(&blk[0].hdr[0], w0);
      pm::store(&blk[0].slot[s].key, k);
      pm::store(&blk[0].slot[s].value, v);
      Header d{{w0, oh0.w[1]}};
      d.set_bit(s);
      d.set_fp(s, common::Fingerprint(k));
      pm::store(&blk[0].hdr[1], d.w[1]);
      pm::store(&blk[0].hdr[0], d.w[0] & ~Header::kLockBit, std::memory_order_release);
      pm::flush(&blk[0].hdr[0], 8);
      pm::fence();
    } else {
      pm::naw(&blk[0].hdr[0], w0);
      Insert(k, v, /*release=*/true);
    }
  }

  // A split with nothing to route (unit tests of the leaf alone).
  uint64_t SplitInsert(uint64_t k, uint64_t v, Leaf* nl, PPtr nl_ptr) {
    return SplitInsert(k, v, nl, nl_ptr, [](uint64_t) {});
  }

  // Crash-safe change of the sibling pointer (recovery unlinking empty
  // leaves): the same NAW section as a split without moved entries.
  void Relink(PPtr next) {
    const bool a = alt();
    for (int b = 1; b < kBlocks; ++b) {
      const uint64_t* h = active_hdr(b, a);
      uint64_t* ih = inactive_hdr(b, a);
      pm::store(&ih[1], h[1]);
      pm::store(&ih[0], h[0]);
      pm::flush(ih, 16);  // copy durable before the alt flip activates it
    }
    pm::store(&blk[0].tail[a ? 0 : 1], next.raw());
    pm::flush(&blk[0].tail[0], 16);  // sibling durable before the alt flip
    pm::fence();
    pm::naw(&blk[0].hdr[0], blk[0].hdr[0] ^ Header::kAltBit);
  }

  // Recovery: clears a lock bit left by a crash. Not flushed: if it does
  // not reach PM, the next recovery clears it again.
  void RecoverLeaf() {
    if ((blk[0].hdr[0] & Header::kLockBit) == 0) return;
    pm::store(&blk[0].hdr[0], blk[0].hdr[0] & ~Header::kLockBit);
  }

  // Bulk load: n <= kSlots sorted entries, dealt round-robin over the
  // blocks and packed at the END of each block (line 0 left free for
  // inserts, as after a split), each block's entries in DESCENDING key
  // order from its first packed slot, sibling `next`. The order is for the
  // leaf's first split: it moves the larger half, so in a full leaf it
  // frees block 0's header line (and the larger half of every block), and
  // a new key that stays in this leaf commits in the split's own
  // write-back (SplitInsert), as do the inserts after it (Algorithm 2
  // prefers the header line). In ascending order the split frees lines 2-3
  // and every insert into the old leaf moves entries first (2 NAW
  // sections). Not persisted: the caller flushes.
  // Bytes Fill(n) writes: every block (headers, tails, packed entries).
  static constexpr size_t FilledBytes(int) { return kBytes; }
  static void Fill(Leaf* l, const KV* e, int n, PPtr next) {
    pm::fill(l, 0, kBytes);
    for (int b = 0; b < kBlocks; ++b) {
      const int cnt = n / kBlocks + (b < n % kBlocks ? 1 : 0);
      Header h;
      for (int i = 0; i < cnt; ++i) {
        const int pos = b + i * kBlocks;         // the block's i-th smallest entry
        const int s = kSlotsPerBlock - 1 - i;    // smallest in the last slot
        pm::store(&l->blk[b].slot[s].key, e[pos].key);
        pm::store(&l->blk[b].slot[s].value, e[pos].value);
        h.set_bit(s);
        h.set_fp(s, common::Fingerprint(e[pos].key));
      }
      pm::store(&l->blk[b].hdr[0], h.w[0]);
      pm::store(&l->blk[b].hdr[1], h.w[1]);
    }
    pm::store(&l->blk[0].tail[0], next.raw());
  }

  // Checks the leaf's own invariants (quiescent leaf). Empty string = ok.
  std::string Check() const {
    if (blk[0].hdr[0] & Header::kLockBit) return "lock bit set";
    return CheckBeforeRecovery();
  }
  // Check() as recovery sees the leaf before repairing it (open validates first): a
  // crash leaves at most a stale lock bit, which RecoverLeaf clears, so
  // everything else Check() requires already holds in every crash state
  // (the fingerprint of a valid slot persists with or before its bit,
  // and no operation makes one key valid in two slots). Read-only.
  std::string CheckBeforeRecovery() const {
    const bool a = alt();
    for (int b = 0; b < kBlocks; ++b) {
      Header h = LoadHeader(b, a);
      if (b > 0 && (h.w[0] & (Header::kLockBit | Header::kAltBit)))
        return "block " + std::to_string(b) + " header has lock/alt bits";
      uint32_t m = h.bitmap();
      while (m != 0) {
        int s = __builtin_ctz(m);
        m &= m - 1;
        if (h.fp(s) != common::Fingerprint(blk[b].slot[s].key))
          return "fingerprint mismatch in block " + std::to_string(b) + " slot " +
                 std::to_string(s);
      }
    }
    KV buf[kSlots];
    int n = Collect(buf);
    common::SmallSort(buf, n, [](const KV& x) { return x.key; });
    for (int i = 1; i < n; ++i)
      if (buf[i].key == buf[i - 1].key) return "duplicate key " + std::to_string(buf[i].key);
    return {};
  }

 private:
  // Algorithm 2 in block b with header copy d (the paper's dword).
  [[gnu::always_inline]] void InsertInBlock(int b, bool a, Header d, uint64_t k, uint64_t v,
                                            bool release) {
    const bool back = UsesBack(b, a);
    const int hline = back ? 3 : 0;  // the line holding the active header
    const uint32_t free = ~d.bitmap() & kFullBlock;
    const uint32_t free_h = free & LineMask(hline);
    const int s = __builtin_ctz(free_h != 0 ? free_h : free);
    Entry& e = blk[b].slot[s];
    pm::store(&e.key, k);
    pm::store(&e.value, v);
    d.set_bit(s);
    d.set_fp(s, common::Fingerprint(k));
    uint64_t* h = active_hdr(b, a);
    const int line = LineOfSlot(s);
    if (line != hline) {
      // Entry moving: fill the other free slots of the line being written
      // with entries from the header's line, freeing slots there.
      uint32_t to_set = free & LineMask(line) & ~(uint32_t{1} << s);
      uint32_t from_set = d.bitmap() & LineMask(hline);
      while (to_set != 0 && from_set != 0) {
        const int to = __builtin_ctz(to_set), from = __builtin_ctz(from_set);
        to_set &= to_set - 1;
        from_set &= from_set - 1;
        pm::store(&blk[b].slot[to].key, blk[b].slot[from].key);
        pm::store(&blk[b].slot[to].value, blk[b].slot[from].value);
        d.set_fp(to, d.fp(from));
        d.set_bit(to);
        d.clear_bit(from);
      }
      // The written line (unused space only) durable before the header
      // makes it valid.
      pm::flush(&blk[b].slot[s], sizeof(Entry));
      pm::fence();
    }
    // Word 1 (fingerprints of slots that are unused in the current state)
    // first, then word 0 (bitmap); same line, so they persist in order and
    // word 0 is the commit. A release clears the lock bit with the commit
    // (block 0) or right after it (the lock lives in block 0's word 0).
    pm::store(&h[1], d.w[1]);
    const bool lock_here = h == &blk[0].hdr[0];
    pm::store(&h[0], release && lock_here ? d.w[0] & ~Header::kLockBit : d.w[0],
              std::memory_order_release);
    if (release && !lock_here) {
      pm::store(&blk[0].hdr[0], blk[0].hdr[0] & ~Header::kLockBit, std::memory_order_release);
    }
    // The NAW's flush + fence (the entry in the header line, if any,
    // persists in program order with it).
    pm::flush(&h[0], 8);
    pm::fence();
  }
};

}  // namespace pmindex::lbtree
