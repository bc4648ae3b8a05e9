// SplitLogArea: the persistent split micro-logs of the baseline trees
// (fptree, wbtree), one 64-byte line per log so that concurrent splits of
// different leaves each own one log.
//
// Contract
// - A log is {cur, fresh}: the leaf being split and the new leaf. It is
//   "active" iff cur != 0. Begin() writes both words and flushes the line;
//   the caller's next fence (the new leaf's persist, which writes only
//   unused PM) makes the log durable before the split touches any used PM;
//   Clear() stores cur = 0 after the split's last persist point, without
//   flush or fence (a stale active log replays harmlessly, see Clear).
// - Recovery first validates every active log (ForEachActive, read-only:
//   both pointers through pm::Decode) and reports what replaying it will
//   drop, so the leaf walk can check key order as the repair will leave
//   it; only when the whole pool passed does RepairEachActive replay (the
//   new leaf is linked) or skip (it is not) each split and clear its log.
// - Slots are claimed in DRAM (a bitmask with CAS), never persisted: after
//   a restart every slot is free once recovery has cleared the active ones.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pm/persist.h"
#include "pm/pptr_decode.h"
#include "index/index.h"
#include "pm/pool.h"
#include "pmindex/status.h"

namespace pmindex::common {

// What a PmLeafTree meta block's repair (split-log replay) will remove at
// recovery: every key >= from leaves the leaf `leaf`.
struct MetaDrop {
  PPtr leaf;
  uint64_t from;
};

struct alignas(64) SplitLog {
  uint64_t cur;    // PPtr raw of the leaf being split; 0 = inactive
  uint64_t fresh;  // PPtr raw of the new leaf
  uint64_t pad[6];
};
static_assert(sizeof(SplitLog) == 64);

class SplitLogArea {
 public:
  static constexpr int kLogs = 64;
  static constexpr size_t kBytes = kLogs * sizeof(SplitLog);

  // Formats and flushes the area (creation). No fence: create_index's
  // next fence (the head leaf's Format) makes it durable before root slot
  // 0 is set, and until then a crash may leave a pool that does not open.
  static void Format(void* area) {
    pm::fill(area, 0, kBytes);
    pm::flush(area, kBytes);
  }

  // Claims a log (spins while all kLogs are in use) and records the split.
  int Begin(void* area, PPtr cur, PPtr fresh) {
    int i = Claim();
    SplitLog* log = static_cast<SplitLog*>(area) + i;
    pm::store(&log->fresh, fresh.raw());
    pm::store(&log->cur, cur.raw());
    // The log must be durable before the split changes any used word. No
    // fence here: the caller writes the new (unlinked) leaf next and its
    // persist's fence makes the log durable too, before the link (pmcrash
    // --mutate showed a fence here redundant: one fence less per split).
    pm::flush(log, sizeof(SplitLog));
    return i;
  }
  // A plain store, neither flushed nor fenced: a finished split's log
  // needs no durable clear. If a crash leaves it active, recovery replays
  // the split, which changes nothing (ReplaySplit acts only while cur's
  // next is still `fresh`, and then drops from cur only keys >= fresh's
  // smallest, which cur no longer holds), and then clears it; at run time
  // the slot is reused through the DRAM mask, and a later Begin on the
  // line persists over it. pmcrash --mutate showed first its fence, then
  // its flush undetectable: one flush and one fence less per split.
  void Clear(void* area, int i) {
    SplitLog* log = static_cast<SplitLog*>(area) + i;
    pm::store(&log->cur, uint64_t{0});
    busy_.fetch_and(~(uint64_t{1} << i), std::memory_order_release);
  }

  // Recovery, reading only: fn(cur, fresh) for every active log.
  static void ForEachActive(const void* area, const std::function<void(PPtr, PPtr)>& fn) {
    const SplitLog* logs = static_cast<const SplitLog*>(area);
    for (int i = 0; i < kLogs; ++i) {
      if (logs[i].cur == 0) continue;
      fn(PPtr(logs[i].cur), PPtr(logs[i].fresh));
    }
  }
  // Recovery, after validation: fn(cur, fresh) (the repair) for every
  // active log, then clears it (NAW: the repair durable before the log
  // stops asking for it).
  static void RepairEachActive(void* area, const std::function<void(PPtr, PPtr)>& fn) {
    SplitLog* logs = static_cast<SplitLog*>(area);
    for (int i = 0; i < kLogs; ++i) {
      if (logs[i].cur == 0) continue;
      fn(PPtr(logs[i].cur), PPtr(logs[i].fresh));
      pm::naw(&logs[i].cur, 0);
    }
  }

 private:
  int Claim() {
    for (;;) {
      uint64_t b = busy_.load(std::memory_order_relaxed);
      if (~b != 0) {
        int i = __builtin_ctzll(~b);
        if (busy_.compare_exchange_weak(b, b | (uint64_t{1} << i), std::memory_order_acquire))
          return i;
      } else {
        std::this_thread::yield();
      }
    }
  }
  std::atomic<uint64_t> busy_{0};
};

// The PmLeafTree policy (trees/pm_leaf/pm_leaf_tree.h) of a leaf whose splits are
// protected by a SplitLogArea: fptree and wbtree. `kTreeName` names the
// index (kind(), errors). LeafT provides kBytes, ReplaySplit(new leaf),
// next(), and SplitInsert(k, v, new leaf, self, new ptr, logs, area).
//
// Recovery, per active log {cur, fresh}: if cur already links fresh, the
// split reached its link step and is replayed (the moved keys are dropped
// from cur); otherwise fresh is unreachable and cur unchanged, so nothing
// is undone (the allocator's reachability pass frees fresh).
template <class LeafT_, const char* kTreeName>
struct SplitLoggedPolicy {
  static constexpr std::string_view kName = kTreeName;
  using LeafT = LeafT_;
  static constexpr size_t kMetaBytes = SplitLogArea::kBytes;
  SplitLogArea logs;

  void InitMeta(void* meta) { SplitLogArea::Format(meta); }
  // Read-only: every active log's pointers decode; for each log that
  // recovery will replay (cur links fresh), the keys >= fresh's smallest
  // that the replay drops from cur.
  Status CheckMeta(const void* meta, const Pool* pool, std::vector<MetaDrop>* drops) const {
    Status st;
    SplitLogArea::ForEachActive(meta, [&](PPtr cur, PPtr fresh) {
      if (!st.ok()) return;
      auto c = DecodeLeaf(pool, cur, "split log's leaf (cur)");
      auto f = DecodeLeaf(pool, fresh, "split log's new leaf (fresh)");
      if (!c.ok()) st = c.status();
      else if (!f.ok()) st = f.status();
      if (!st.ok() || c.value()->next() != fresh) return;
      KV buf[LeafT::kSlots];
      const int n = f.value()->Collect(buf);
      if (n == 0) return;  // ReplaySplit drops nothing
      uint64_t lo = buf[0].key;
      for (int i = 1; i < n; ++i) lo = std::min(lo, buf[i].key);
      drops->push_back({cur, lo});
    });
    return st;
  }
  // After CheckMeta and every other check passed: replays and clears.
  void RepairMeta(void* meta, Pool* pool) {
    SplitLogArea::RepairEachActive(meta, [&](PPtr cur, PPtr fresh) {
      LeafT* l = pool->to_ptr<LeafT>(cur);
      if (l->next() == fresh) l->ReplaySplit(pool->to_ptr<LeafT>(fresh));
    });
  }
  uint64_t Split(LeafT* l, PPtr self, uint64_t k, uint64_t v, LeafT* nl, PPtr nl_ptr, void* meta) {
    return l->SplitInsert(k, v, nl, self, nl_ptr, logs, meta);
  }
  // A leaf pointer of a split log, through the one decoder (pool id, heap
  // range, 256-byte alignment, size), so a damaged log is refused before
  // anything is read or written through it.
  static Result<LeafT*> DecodeLeaf(const Pool* pool, PPtr p, std::string_view what) {
    return pm::Decode<LeafT>(*pool, p.raw(), LeafT::kBytes, 256, std::string(kName) + ": " + std::string(what));
  }
};

}  // namespace pmindex::common
