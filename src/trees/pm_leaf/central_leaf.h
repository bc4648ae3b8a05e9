// What the FP-Tree and WB+-Tree leaves share (fptree_leaf.h,
// wbtree_leaf.h). Both lay a leaf out as
//   word 0   bits: bitmap (bit i = slot i valid), lock bit 63, and bits of
//            the leaf's own above the slots
//   word 1   next: PPtr of the next leaf
//   then     a per-slot array of the leaf's own (fingerprints, or the
//            sorted indirection array), padded to 16 B
//   then     kSlots entries {key, value}, at kEntryOff
// and differ in that array, hence in search, insert, delete and split.
//
// CentralLeafOps<L> holds the operations that read or write only the
// shared words and entries. It is an empty base mixed into L (CRTP): the
// leaf stays one standard-layout struct, so its offsetof static_asserts
// still check the layout the persistence argument depends on. L provides
// the members bits, next_, e[], the constants kBytes, kSlots, kAllSlots,
// kLockBit, kEntryOff, and Locate(k) (the slot of k, or -1).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "util/bits.h"
#include "util/prefetch.h"

namespace pmindex::common {

// Readers run without the leaf lock: every word a reader loads is read with
// a relaxed atomic, and the version check of the routing layer
// (pm_leaf_tree.h) decides whether what it read is usable.
inline uint64_t LoadRelaxed(const uint64_t* p) {
  return std::atomic_ref<const uint64_t>(*p).load(std::memory_order_relaxed);
}

struct LeafEntry {
  uint64_t key;
  uint64_t value;
};

template <class L>
class CentralLeafOps {
 public:
  // ------------------------------------------------------------ reading
  PPtr next() const { return PPtr(LoadRelaxed(&self().next_)); }
  // The writers' lock (pm_leaf_tree.h): the lock bit, read with acquire so
  // that a reader seeing it clear sees the last writer's stores.
  bool IsLocked() const {
    return (std::atomic_ref<const uint64_t>(self().bits).load(std::memory_order_acquire) &
            L::kLockBit) != 0;
  }
  // Starts loading what a search reads before it knows the slot: the
  // header lines (bitmap, next and the per-slot array), and at 256 B the
  // whole leaf.
  void Prefetch() const {
    constexpr size_t kBytesToLoad = L::kBytes <= 256 ? L::kBytes : L::kEntryOff;
    PrefetchLines(&self(), kBytesToLoad);
  }
  uint64_t Bitmap() const { return LoadRelaxed(&self().bits) & L::kAllSlots; }
  uint64_t ValueAt(int s) const { return LoadRelaxed(&self().e[s].value); }
  [[gnu::always_inline]] bool Find(uint64_t k, uint64_t* v) const {
    int s = self().Locate(k);
    if (s < 0) return false;
    *v = ValueAt(s);
    return true;
  }
  int Count() const { return __builtin_popcountll(Bitmap()); }
  bool Full() const { return Bitmap() == L::kAllSlots; }
  // The valid entries, in slot order; returns how many.
  int Collect(KV* out) const {
    int n = 0;
    for (int s : SetBits(Bitmap())) {
      out[n++] = {LoadRelaxed(&self().e[s].key), LoadRelaxed(&self().e[s].value)};
    }
    return n;
  }

  // ------------------------------------------------------------ writing
  [[gnu::always_inline]] void SetLockBit(bool on) {
    uint64_t& b = self().bits;
    pm::store(&b, on ? (b | L::kLockBit) : (b & ~L::kLockBit), std::memory_order_release);
  }
  // An update is one NAW of the value word; with `release` the same
  // commit also clears the lock bit.
  [[gnu::always_inline]] void UpdateSlot(int s, uint64_t v, bool release = false) {
    uint64_t& b = self().bits;
    pm::naw(&self().e[s].value, v, release ? &b : nullptr, b & ~L::kLockBit);
  }
  void Relink(PPtr next) { pm::naw(&self().next_, next.raw()); }
  // Recovery: clears a stale lock bit (not flushed: if it does not reach
  // PM, the next recovery clears it again).
  void ClearStaleLock() {
    uint64_t& b = self().bits;
    if (b & L::kLockBit) pm::store(&b, b & ~L::kLockBit);
  }

  // For the recovery of a logged split whose new leaf `nl` is linked after
  // this one: this leaf's bits without the slots whose key is at least nl's
  // smallest key (the keys the split moved). The bits unchanged if nl is
  // empty.
  uint64_t BitsWithoutMovedKeys(const L* nl) const {
    KV buf[L::kSlots];
    const int n = nl->Collect(buf);
    uint64_t b = self().bits;
    if (n == 0) return b;
    uint64_t lo = buf[0].key;
    for (int i = 1; i < n; ++i) lo = std::min(lo, buf[i].key);
    for (int s : SetBits(b & L::kAllSlots)) {
      if (self().e[s].key >= lo) b &= ~(uint64_t{1} << s);
    }
    return b;
  }

  // Bytes Fill(n) writes: the header, the per-slot array and entries
  // 0..n-1; the rest of the leaf is unused space (no bit set), so bulk_load
  // flushes only these (pmcrash --mutate: flushing the rest was a
  // flush-short survivor).
  static constexpr size_t FilledBytes(int n) { return L::kEntryOff + n * sizeof(LeafEntry); }

 protected:
  // A new empty leaf: word 0 = `bits`, word 1 = `next`, durable on return
  // (flush + fence). Only line 0 is written: it holds every used word; the
  // rest (entries and the per-slot array past line 0) is unused space while
  // no bit is set, and inserts write it before a bit validates it (pmcrash
  // --mutate showed flushing it to be unnecessary). Only create_index
  // formats a leaf, right before the NAW of root slot 0 that links it; that
  // NAW's store must not reach PM before line 0, so the fence here is
  // needed (pmcrash --mutate kills dropping it and flushing late).
  static void FormatLine0(L* l, uint64_t bits, PPtr next) {
    pm::fill(l, 0, 64);
    pm::store(&l->bits, bits);
    pm::store(&l->next_, next.raw());
    pm::persist(l, 64);  // durable before anything links it
  }

  // Zeroes the bytes Fill writes and stores kv[0..n-1] in slots 0..n-1;
  // returns their bitmap. The caller writes its array, bits and next.
  static uint64_t FillEntries(L* l, const KV* kv, int n) {
    pm::fill(l, 0, FilledBytes(n));
    uint64_t b = 0;
    for (int i = 0; i < n; ++i) {
      pm::store(&l->e[i].key, kv[i].key);
      pm::store(&l->e[i].value, kv[i].value);
      b |= uint64_t{1} << i;
    }
    return b;
  }

 private:
  const L& self() const { return static_cast<const L&>(*this); }
  L& self() { return static_cast<L&>(*this); }
};

}  // namespace pmindex::common
