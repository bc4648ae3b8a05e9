// WB+-Tree leaf (Chen and Jin, PVLDB 2015, as the LB+-Tree paper's section
// 2.4 describes it): unsorted entries, a bitmap, and a sorted slot
// indirection array searched by binary search, in one node of kBytes
// (256/512/768/1024) with a centralized header.
//
// Contract
// - Persistent: word 0 = bitmap (bit i = slot i valid) | order-valid bit 62
//   | lock bit 63; word 1 = next leaf (PPtr); then the indirection array:
//   byte 0 = number of entries, bytes 1..n = slot numbers in key order
//   (padded to 16 B; accessed as 8-byte words); then kSlots entries.
// - Invariant: if order-valid is set, the indirection array lists exactly
//   the valid slots in ascending key order. If it is clear, the array is
//   unused space and recovery rebuilds it.
// - Insert and delete are the two NAW sections of section 2.4:
//   (1) insert only: write the entry into an invalid slot, flush its line
//       (if not line 0) and fence; NAW of word 0 changing the bit AND
//       clearing order-valid;
//   (2) write the new indirection array (unused space now), flush its lines
//       other than line 0 and fence; NAW of word 0 setting order-valid.
// - Update: NAW of the value word.
// - Split: persistent micro-log (trees/pm_leaf/split_log.h) as in fptree: log,
//   build the new leaf (upper half, sorted, order-valid) and persist it, NAW
//   cur.next = new, then the two sections above for cur without the moved
//   entries, clear the log; the new key is then inserted normally.
// - Locks: as lbtree (pm_leaf_tree.h); readers read with relaxed atomics.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pmindex/status.h"
#include "trees/pm_leaf/central_leaf.h"
#include "trees/pm_leaf/small_sort.h"
#include "trees/pm_leaf/split_log.h"
#include "util/bits.h"
#include "util/prefetch.h"

namespace pmindex::wbtree {

using common::LoadRelaxed;

constexpr int SlotsFor(size_t bytes) {
  int n = static_cast<int>((bytes - 17) / 17);
  while (16 + ((n + 1 + 15) / 16) * 16 + 16 * n > static_cast<int>(bytes)) --n;
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
  static constexpr int kOrdBytes = ((kSlots + 1 + 15) / 16) * 16;
  static_assert(kSlots <= 62);
  static constexpr uint64_t kLockBit = uint64_t{1} << 63;
  static constexpr uint64_t kOrderValid = uint64_t{1} << 62;
  static constexpr uint64_t kAllSlots = (uint64_t{1} << kSlots) - 1;

  using Entry = common::LeafEntry;

  // [0]  bits   [8] next   [16] ord[kOrdBytes]   [16 + kOrdBytes] entries
  uint64_t bits;
  uint64_t next_;
  uint64_t ordw[kOrdBytes / 8];
  Entry e[kSlots];
  static constexpr size_t kEntryOff = 16 + kOrdBytes;

  // ------------------------------------------------------------ reading
  void LoadOrder(uint8_t* ord) const {
    uint64_t w[kOrdBytes / 8];
    for (int i = 0; i < kOrdBytes / 8; ++i) w[i] = LoadRelaxed(&ordw[i]);
    std::memcpy(ord, w, kOrdBytes);
  }

  // Binary search over the indirection array (linear scan if it is not
  // valid, which only a crash leaves behind until recovery).
  [[gnu::always_inline]] int Locate(uint64_t k) const {
    const uint64_t b = LoadRelaxed(&bits);
    if ((b & kOrderValid) == 0) {
      for (int s : SetBits(b & kAllSlots)) {
        if (LoadRelaxed(&e[s].key) == k) return s;
      }
      return -1;
    }
    uint8_t ord[kOrdBytes];
    LoadOrder(ord);
    int lo = 0, hi = std::min<int>(ord[0], kSlots) - 1;
    while (lo <= hi) {
      int mid = (lo + hi) / 2;
      int s = ord[1 + mid] % kSlots;
      uint64_t key = LoadRelaxed(&e[s].key);
      if (key == k) return s;
      if (key < k) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }
  // ------------------------------------------------------------ writing
  // New empty leaf with sibling `next`, durable on return (FormatLine0):
  // an empty indirection array, marked valid.
  static void Format(Leaf* l, PPtr next) { Ops::FormatLine0(l, kOrderValid, next); }

  // Insert, UpdateSlot and RemoveSlot take `release`: when true, the
  // commit store also clears the lock bit (see lbtree_leaf.h: no store to
  // the line after its write-back has started).

  // REQUIRES: lock held, k absent, !Full().
  [[gnu::always_inline]] void Insert(uint64_t k, uint64_t v, bool release = false) {
    const int s = __builtin_ctzll(~Bitmap() & kAllSlots);
    pm::store(&e[s].key, k);
    pm::store(&e[s].value, v);
    if ((reinterpret_cast<uintptr_t>(&e[s]) - reinterpret_cast<uintptr_t>(this)) / 64 != 0) {
      pm::flush(&e[s], sizeof(Entry));  // entry durable before its bit
      pm::fence();
    }
    // Section 1: bit set, order invalid.
    Section1((bits | (uint64_t{1} << s)) & ~kOrderValid);
    RewriteOrder(release);
  }

  [[gnu::always_inline]] void RemoveSlot(int s, bool release = false) {
    Section1(bits & ~(uint64_t{1} << s) & ~kOrderValid);
    RewriteOrder(release);
  }

  uint64_t SplitInsert(uint64_t k, uint64_t v, Leaf* nl, PPtr self, PPtr nl_ptr,
                       common::SplitLogArea& logs, void* log_area) {
    uint8_t ord[kOrdBytes];
    SortedSlots(ord);  // ord[1..kSlots] in key order (leaf is full)
    const int keep = kSlots - kSlots / 2;
    const uint64_t split_key = e[ord[1 + keep]].key;
    const int log = logs.Begin(log_area, self, nl_ptr);
    uint64_t nbits = 0, moved = 0;
    uint8_t nord[kOrdBytes] = {};
    for (int i = keep; i < kSlots; ++i) {
      const int j = i - keep, s = ord[1 + i];
      pm::store(&nl->e[j].key, e[s].key);
      pm::store(&nl->e[j].value, e[s].value);
      nord[1 + j] = static_cast<uint8_t>(j);
      nbits |= uint64_t{1} << j;
      moved |= uint64_t{1} << s;
    }
    nord[0] = static_cast<uint8_t>(kSlots - keep);
    StoreOrder(nl, nord);
    pm::store(&nl->bits, nbits | kOrderValid);
    pm::store(&nl->next_, next_);
    // New leaf durable before the link: only the lines written (header,
    // indirection array, entries 0..kSlots-keep-1); the rest is unused space
    // (pmcrash --mutate showed flushing the last line redundant).
    pm::persist(nl, kEntryOff + (kSlots - keep) * sizeof(Entry));
    // The link needs no flush or fence of its own: next_ and bits share
    // line 0, whose stores persist in program order, so a crash state with
    // section 1's bitmap also has the link, and the NAWs that follow
    // persist it before the log is cleared.
    pm::store(&next_, nl_ptr.raw(), std::memory_order_release);
    Section1(bits & ~moved & ~kOrderValid);
    RewriteOrder();
    logs.Clear(log_area, log);
    if (k >= split_key) nl->Insert(k, v);
    else Insert(k, v);
    return split_key;
  }

  void ReplaySplit(const Leaf* nl) {
    const uint64_t b = this->BitsWithoutMovedKeys(nl);
    if (b != bits) pm::naw(&bits, b & ~kOrderValid);
    // RecoverLeaf (the leaf walk) rebuilds the order if it is now invalid.
  }

  // Recovery: clears a stale lock bit (unflushed, as in lbtree) and
  // finishes an interrupted section 2 (rebuilds the indirection array).
  void RecoverLeaf() {
    this->ClearStaleLock();
    if ((bits & kOrderValid) == 0) RewriteOrder();
  }

  // Fill(n) writes FilledBytes(n) (central_leaf.h).
  static void Fill(Leaf* l, const KV* kv, int n, PPtr next) {
    const uint64_t b = Ops::FillEntries(l, kv, n);
    uint8_t ord[kOrdBytes] = {};
    for (int i = 0; i < n; ++i) ord[1 + i] = static_cast<uint8_t>(i);
    ord[0] = static_cast<uint8_t>(n);
    StoreOrder(l, ord);
    pm::store(&l->bits, b | kOrderValid);
    pm::store(&l->next_, next.raw());
  }

  std::string Check() const {
    if (bits & kLockBit) return "lock bit set";
    if ((bits & kOrderValid) == 0) return "indirection array not valid";
    return CheckBeforeRecovery();
  }
  // Check() as recovery sees the leaf before repairing it (open validates first): a
  // crash may leave a stale lock bit and an indirection array marked not
  // valid (RecoverLeaf rebuilds it from the bitmap); an array marked valid
  // is one RecoverLeaf keeps, so it must already be right. Read-only.
  std::string CheckBeforeRecovery() const {
    if (bits & ~(kAllSlots | kLockBit | kOrderValid)) return "bits beyond the slots set";
    if ((bits & kOrderValid) == 0) return {};
    uint8_t ord[kOrdBytes];
    LoadOrder(ord);
    if (ord[0] != Count()) return "indirection array count differs from the bitmap";
    uint64_t seen = 0;
    for (int i = 0; i < ord[0]; ++i) {
      int s = ord[1 + i];
      if (s >= kSlots || !((Bitmap() >> s) & 1) || ((seen >> s) & 1))
        return "indirection array entry " + std::to_string(i) + " not a distinct valid slot";
      seen |= uint64_t{1} << s;
      if (i > 0 && e[ord[i]].key >= e[s].key) return "indirection array not in key order";
    }
    return {};
  }

 private:
  // ord[0] = count, ord[1..] = valid slots in key order.
  void SortedSlots(uint8_t* ord) const {
    std::memset(ord, 0, kOrdBytes);
    int n = 0;
    for (int s : SetBits(bits & kAllSlots)) ord[1 + n++] = static_cast<uint8_t>(s);
    common::SmallSort(ord + 1, n, [this](uint8_t s) { return e[s].key; });
    ord[0] = static_cast<uint8_t>(n);
  }
  static void StoreOrder(Leaf* l, const uint8_t* ord) {
    uint64_t w[kOrdBytes / 8];
    std::memcpy(w, ord, kOrdBytes);
    for (int i = 0; i < kOrdBytes / 8; ++i) pm::store(&l->ordw[i], w[i]);
  }
  // True when the whole indirection array lies in line 0 with the bitmap.
  static constexpr bool kOrderInLine0 = 16 + kOrdBytes <= 64;

  // Section 1: the bitmap word `b` (order-valid clear). When the array lies
  // in line 0, section 2 writes only line 0, whose stores persist in
  // program order: every crash state with any of section 2's stores also
  // has this one, and section 2's NAW persists it, so a plain store is
  // enough (pmcrash --mutate showed the fence redundant at node<=768).
  // Otherwise (node=1024) the NAW's fence keeps section 2's array stores
  // in line 1 from persisting while line 0 still says order-valid.
  void Section1(uint64_t b) {
    if constexpr (kOrderInLine0) {
      pm::store(&bits, b, std::memory_order_release);
    } else {
      pm::naw(&bits, b);
    }
  }
  // Section 2: new indirection array, then NAW setting order-valid (and,
  // with `release`, clearing the lock bit).
  // REQUIRES: order-valid clear (the array is unused space).
  void RewriteOrder(bool release = false) {
    const uint64_t unlock = release ? kLockBit : 0;
    uint8_t ord[kOrdBytes];
    SortedSlots(ord);
    StoreOrder(this, ord);
    if (16 + kOrdBytes > 64) {
      // Array lines past line 0 durable before the NAW (line 0's part
      // persists in order with it).
      pm::flush(reinterpret_cast<const char*>(this) + 64, 16 + kOrdBytes - 64);
      pm::fence();
    }
    if constexpr (kOrderInLine0) {
      // Also persists section 1's bitmap store (a plain store here).
      pm::naw(&bits, (bits | kOrderValid) & ~unlock);
    } else {
      // pmcrash-redundant: at node=1024 section 1's NAW already made the
      // bitmap durable and this NAW only persists order-valid; a crash that
      // loses it leaves the bit clear, which recovery repairs (RecoverLeaf
      // rebuilds the array), so no crash state is wrong without it. It
      // stays so that a restart need not rebuild the array of every leaf
      // written recently (a recovery cost the simulator does not see); a
      // plain store would save a flush and a fence per insert and delete.
      pm::naw(&bits, (bits | kOrderValid) & ~unlock);
    }
  }
};

template <size_t B>
constexpr bool LayoutOk() {
  return sizeof(Leaf<B>) == B && offsetof(Leaf<B>, bits) == 0 && offsetof(Leaf<B>, next_) == 8 &&
         offsetof(Leaf<B>, ordw) == 16 && offsetof(Leaf<B>, e) == Leaf<B>::kEntryOff;
}
static_assert(LayoutOk<256>() && Leaf<256>::kSlots == 14);
static_assert(LayoutOk<512>() && Leaf<512>::kSlots == 29);
static_assert(LayoutOk<768>() && Leaf<768>::kSlots == 44);
static_assert(LayoutOk<1024>() && Leaf<1024>::kSlots == 59);

}  // namespace pmindex::wbtree
