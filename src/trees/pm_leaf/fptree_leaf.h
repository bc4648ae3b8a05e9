// FP-Tree leaf (Oukid et al., SIGMOD 2016, as the LB+-Tree paper describes
// it): unsorted entries, a bitmap, one-byte fingerprints, a sibling pointer,
// all in one node of kBytes (256/512/768/1024) with a CENTRALIZED header.
//
// Contract
// - Persistent: word 0 = bitmap (bit i = slot i valid) + lock bit 63;
//   word 1 = next leaf (PPtr); then the fingerprint array (one byte per
//   slot, padded to 16 B); then kSlots (key, value) entries.
// - A slot is valid iff its bit is set; its fingerprint is then
//   Fingerprint(key). Invalid slots and their fingerprints are unused space.
// - Insert ("traditional" design of the paper's section 3.5): write the
//   entry and its fingerprint into unused space; flush the lines other than
//   line 0 that changed and fence; NAW of word 0 setting the bit. 1 line if
//   the slot and its fingerprint are in line 0, else 2 (or 3).
// - Delete: NAW of word 0. Update: NAW of the value word.
// - Split: persistent micro-log (trees/pm_leaf/split_log.h): log {cur, new},
//   copy the upper half into the new leaf and persist it, NAW cur.next =
//   new, NAW cur's bitmap without the moved bits, clear the log; then the
//   new key is inserted by a normal insert. Recovery replays a logged split
//   whose new leaf is linked (clears the moved bits) and rolls back one
//   whose new leaf is not (the allocator reclaims it).
// - Locks: as lbtree (pm_leaf_tree.h); readers read with relaxed atomics.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/fingerprint.h"
#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pmindex/status.h"
#include "trees/pm_leaf/central_leaf.h"
#include "trees/pm_leaf/small_sort.h"
#include "trees/pm_leaf/split_log.h"
#include "util/bits.h"
#include "util/prefetch.h"

namespace pmindex::fptree {

using common::LoadRelaxed;

// Slots per node of `bytes`: 16 B of words + n fingerprint bytes padded to
// 16 + 16 n bytes of entries must fit exactly.
constexpr int SlotsFor(size_t bytes) {
  int n = static_cast<int>((bytes - 16) / 17);
  while (16 + ((n + 15) / 16) * 16 + 16 * n > static_cast<int>(bytes)) --n;
  return n;
}

template <size_t kNodeBytes>
class Leaf : public common::CentralLeafOps<Leaf<kNodeBytes>> {
  using Ops = common::CentralLeafOps<Leaf<kNodeBytes>>;

 public:
  using Ops::Bitmap;
  using Ops::Collect;
  using Ops::Count;
  using Ops::FilledBytes;
  static constexpr size_t kBytes = kNodeBytes;
  static constexpr int kSlots = SlotsFor(kNodeBytes);
  static constexpr int kFpBytes = ((kSlots + 15) / 16) * 16;
  static_assert(kSlots <= 63, "bit 63 is the lock bit");
  static constexpr uint64_t kLockBit = uint64_t{1} << 63;
  static constexpr uint64_t kAllSlots = (uint64_t{1} << kSlots) - 1;

  using Entry = common::LeafEntry;

  // [0]  bits: bitmap (bits 0..kSlots-1) | lock (bit 63)
  // [8]  next: PPtr of the next leaf
  // [16] fp[kFpBytes] (as 8-byte words, so readers and writers use 8-byte
  //      atomics)
  // [16 + kFpBytes] entries
  uint64_t bits;
  uint64_t next_;
  uint64_t fpw[kFpBytes / 8];
  Entry e[kSlots];

  static constexpr size_t kEntryOff = 16 + kFpBytes;

  // ------------------------------------------------------------ reading
  uint8_t Fp(int s) const { return static_cast<uint8_t>(LoadRelaxed(&fpw[s / 8]) >> (8 * (s % 8))); }

  [[gnu::always_inline]] int Locate(uint64_t k) const {
    uint64_t bm = Bitmap();
    uint64_t words[kFpBytes / 8];
    for (int i = 0; i < kFpBytes / 8; ++i) words[i] = LoadRelaxed(&fpw[i]);
    uint8_t bytes[kFpBytes];
    std::memcpy(bytes, words, kFpBytes);
    for (int s : SetBits(common::MatchMask(bytes, kSlots, common::Fingerprint(k)) & bm)) {
      if (LoadRelaxed(&e[s].key) == k) return s;
    }
    return -1;
  }
  // ------------------------------------------------------------ writing
  // New empty leaf with sibling `next`, durable on return (FormatLine0).
  static void Format(Leaf* l, PPtr next) { Ops::FormatLine0(l, 0, next); }

  // Insert, UpdateSlot and RemoveSlot take `release`: when true, the
  // commit store also clears the lock bit (see lbtree_leaf.h: no store to
  // the line after its write-back has started).

  // REQUIRES: lock held, k absent, !Full().
  [[gnu::always_inline]] void Insert(uint64_t k, uint64_t v, bool release = false) {
    const int s = __builtin_ctzll(~Bitmap() & kAllSlots);
    pm::store(&e[s].key, k);
    pm::store(&e[s].value, v);
    SetFp(s, common::Fingerprint(k));
    const uintptr_t base = reinterpret_cast<uintptr_t>(this);
    const uintptr_t eline = (reinterpret_cast<uintptr_t>(&e[s]) - base) / 64;
    const uintptr_t fline = (16 + s) / 64;
    bool fenced = false;
    // The entry and fingerprint lines other than line 0 durable before the
    // bitmap validates them (line 0 persists in order with the NAW).
    if (eline != 0) {
      pm::flush(&e[s], sizeof(Entry));
      fenced = true;
    }
    if (fline != 0 && fline != eline) {
      pm::flush(reinterpret_cast<const char*>(this) + 16 + s, 1);
      fenced = true;
    }
    if (fenced) pm::fence();
    pm::naw(&bits, (bits | (uint64_t{1} << s)) & ~(release ? kLockBit : 0));
  }

  [[gnu::always_inline]] void RemoveSlot(int s, bool release = false) {
    pm::naw(&bits, bits & ~(uint64_t{1} << s) & ~(release ? kLockBit : 0));
  }

  // The FP-Tree split (see the header comment). Returns the split key; the
  // new key goes to nl iff k >= split key. REQUIRES: lock held, Full().
  uint64_t SplitInsert(uint64_t k, uint64_t v, Leaf* nl, PPtr self, PPtr nl_ptr,
                       common::SplitLogArea& logs, void* log_area) {
    struct Item {
      uint64_t key;
      int s;
    };
    Item items[kSlots];
    for (int s = 0; s < kSlots; ++s) items[s] = {e[s].key, s};
    common::SmallSort(items, kSlots, [](const Item& x) { return x.key; });
    const int keep = kSlots - kSlots / 2;
    const uint64_t split_key = items[keep].key;
    const int log = logs.Begin(log_area, self, nl_ptr);
    // Copy (unused space: nl is not linked).
    uint64_t nbits = 0, moved = 0;
    pm::fill(nl->fpw, 0, kFpBytes);
    for (int i = keep; i < kSlots; ++i) {
      const int j = i - keep, s = items[i].s;
      pm::store(&nl->e[j].key, e[s].key);
      pm::store(&nl->e[j].value, e[s].value);
      nl->SetFp(j, Fp(s));
      nbits |= uint64_t{1} << j;
      moved |= uint64_t{1} << s;
    }
    pm::store(&nl->bits, nbits);
    pm::store(&nl->next_, next_);
    // New leaf durable before the link: only the lines written (header,
    // fingerprints, entries 0..kSlots-keep-1); the rest is unused space
    // (pmcrash --mutate showed flushing the last line redundant).
    pm::persist(nl, kEntryOff + (kSlots - keep) * sizeof(Entry));
    // Link: the new leaf now duplicates the moved keys; the log lets
    // recovery finish the next step.
    // The link needs no flush or fence of its own: next_ and bits share
    // line 0, whose stores persist in program order, so any crash state
    // that has the new bitmap also has the link; the bitmap's NAW persists
    // both before the log is cleared (pmcrash --mutate showed a fence after
    // the link to be redundant).
    pm::store(&next_, nl_ptr.raw(), std::memory_order_release);
    pm::naw(&bits, bits & ~moved);
    logs.Clear(log_area, log);
    if (k >= split_key) nl->Insert(k, v);
    else Insert(k, v);
    return split_key;
  }

  // Recovery of a logged split whose new leaf `nl` is linked after this
  // leaf: clears the bits of keys >= nl's smallest key.
  void ReplaySplit(const Leaf* nl) {
    const uint64_t b = this->BitsWithoutMovedKeys(nl);
    if (b != bits) pm::naw(&bits, b);
  }

  // Recovery: a stale lock bit is all a crash leaves to repair.
  void RecoverLeaf() { this->ClearStaleLock(); }

  // Fill(n) writes FilledBytes(n) (central_leaf.h).
  static void Fill(Leaf* l, const KV* kv, int n, PPtr next) {
    const uint64_t b = Ops::FillEntries(l, kv, n);
    for (int i = 0; i < n; ++i) l->SetFp(i, common::Fingerprint(kv[i].key));
    pm::store(&l->bits, b);
    pm::store(&l->next_, next.raw());
  }

  std::string Check() const {
    if (bits & kLockBit) return "lock bit set";
    return CheckBeforeRecovery();
  }
  // Check() as recovery sees the leaf before repairing it (open validates first): a
  // crash leaves at most a stale lock bit (RecoverLeaf clears it); a
  // slot's fingerprint persists before the bitmap store that makes it
  // valid. Read-only.
  std::string CheckBeforeRecovery() const {
    if (bits & ~(kAllSlots | kLockBit)) return "bits beyond the slots set";
    KV buf[kSlots];
    int n = 0;
    for (int s : SetBits(Bitmap())) {
      if (Fp(s) != common::Fingerprint(e[s].key)) return "fingerprint mismatch in slot " + std::to_string(s);
      buf[n++] = {e[s].key, e[s].value};
    }
    common::SmallSort(buf, n, [](const KV& x) { return x.key; });
    for (int i = 1; i < n; ++i)
      if (buf[i].key == buf[i - 1].key) return "duplicate key " + std::to_string(buf[i].key);
    return {};
  }

 private:
  void SetFp(int s, uint8_t f) {
    uint64_t w = fpw[s / 8];
    const int sh = 8 * (s % 8);
    w = (w & ~(uint64_t{0xff} << sh)) | (uint64_t{f} << sh);
    pm::store(&fpw[s / 8], w);
  }
};

template <size_t B>
constexpr bool LayoutOk() {
  return sizeof(Leaf<B>) == B && offsetof(Leaf<B>, bits) == 0 && offsetof(Leaf<B>, next_) == 8 &&
         offsetof(Leaf<B>, fpw) == 16 && offsetof(Leaf<B>, e) == Leaf<B>::kEntryOff;
}
static_assert(LayoutOk<256>() && Leaf<256>::kSlots == 14);
static_assert(LayoutOk<512>() && Leaf<512>::kSlots == 29);
static_assert(LayoutOk<768>() && Leaf<768>::kSlots == 44);
static_assert(LayoutOk<1024>() && Leaf<1024>::kSlots == 59);

}  // namespace pmindex::fptree
