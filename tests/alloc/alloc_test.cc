// Allocator tests: size classes, alignment, no overlap, spans, growth and
// out-of-space, recovery by reachability, page-word NAW counts, NUMA modes
// over a simulated topology, thread caches, concurrency, and pool isolation.
//
// Randomized tests print their seed on failure; PMINDEX_SEED=<n> replays.
#include <linux/mempolicy.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "alloc/page_word.h"
#include "alloc/size_classes.h"
#include "gtest/gtest.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "support/seed.h"
#include "support/status.h"

namespace pmindex::alloc {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kPage = PoolOptions::kPageSize;

using testing::TestSeed;

std::unique_ptr<Pool> MakePool(uint64_t size = 16 * kMiB, uint64_t max_size = 64 * kMiB,
                               uint64_t segment = 0, uint16_t id = 1) {
  PoolOptions po;
  po.size = size;
  po.max_size = max_size;
  po.segment_size = segment;
  po.pool_id = id;
  auto p = Pool::CreateInMemory(po);
  if (!p.ok()) {
    ADD_FAILURE() << p.status().ToString();
    return nullptr;
  }
  return std::move(p).value();
}

std::unique_ptr<Allocator> MustAttach(Pool* pool, bool fresh, AllocOptions opt = {}) {
  auto a = Allocator::Attach(pool, fresh, opt);
  if (!a.ok()) {
    ADD_FAILURE() << a.status().ToString();
    return nullptr;
  }
  return std::move(a).value();
}

PPtr MustAlloc(Allocator& a, size_t n) {
  auto r = a.Alloc(n);
  PMINDEX_EXPECT_OK(r) << "Alloc(" << n << ")";
  return r.ok() ? r.value() : PPtr();
}

std::map<uint64_t, size_t> LiveBlocks(const Allocator& a) {
  std::map<uint64_t, size_t> m;
  a.ForEachLiveBlock([&](PPtr p, size_t n) { m.emplace(p.raw(), n); });
  return m;
}

// Returns true iff no two intervals of m overlap.
bool Disjoint(const std::map<uint64_t, size_t>& m) {
  uint64_t end = 0;
  for (const auto& [start, len] : m) {
    if (start < end) return false;
    end = start + len;
  }
  return true;
}

// An interval map of live blocks that rejects overlaps.
class IntervalOracle {
 public:
  // Returns false iff [off, off+len) overlaps a block already recorded.
  bool Add(uint64_t off, size_t len) {
    auto next = m_.lower_bound(off);
    if (next != m_.end() && next->first < off + len) return false;
    if (next != m_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second > off) return false;
    }
    m_.emplace(off, len);
    return true;
  }
  void Remove(uint64_t off) { m_.erase(off); }
  const std::map<uint64_t, size_t>& map() const { return m_; }

 private:
  std::map<uint64_t, size_t> m_;
};

TEST(AllocSizeClasses, ContainTheRequiredSizes) {
  auto cls = Allocator::SizeClasses();
  ASSERT_EQ(cls.size(), static_cast<size_t>(kNumClasses));
  EXPECT_TRUE(std::is_sorted(cls.begin(), cls.end()));
  for (uint32_t want : {64u, 128u, 256u, 512u, 768u, 1024u, 2048u, 4096u, 131072u}) {
    EXPECT_TRUE(std::find(cls.begin(), cls.end(), want) != cls.end()) << want;
  }
  for (uint32_t s : cls) {
    EXPECT_EQ(s % 64, 0u) << s;
    if (s > 1024) {
      EXPECT_EQ(s % 256, 0u) << s;
    }
  }
  // 64-byte steps up to 1 KiB.
  for (uint32_t s = 64; s <= 1024; s += 64) {
    EXPECT_TRUE(std::find(cls.begin(), cls.end(), s) != cls.end()) << s;
  }
}

TEST(Alloc, EveryClassAllocatesAlignedBlocksOfTheRightSize) {
  auto pool = MakePool(64 * kMiB, 256 * kMiB);
  auto a = MustAttach(pool.get(), true);
  ASSERT_NE(a, nullptr);
  std::vector<PPtr> live;
  for (uint32_t s : Allocator::SizeClasses()) {
    for (size_t n : {size_t{s} - 63, size_t{s}}) {
      for (int i = 0; i < 3; ++i) {
        PPtr p = MustAlloc(*a, n);
        ASSERT_FALSE(p.is_null());
        EXPECT_EQ(p.pool_id(), pool->id());
        EXPECT_EQ(a->BlockSize(p), s) << "request " << n;
        auto addr = reinterpret_cast<uintptr_t>(pool->to_ptr(p));
        EXPECT_EQ(addr % 64, 0u) << "class " << s;
        if (s % 256 == 0) {
          EXPECT_EQ(addr % 256, 0u) << "class " << s;
        }
        std::memset(pool->to_ptr(p), 0xAB, s);  // the whole block is usable
        live.push_back(p);
      }
    }
  }
  EXPECT_EQ(a->stats().blocks_in_use, live.size());
  EXPECT_TRUE(Disjoint(LiveBlocks(*a)));
  for (PPtr p : live) a->Free(p);
  EXPECT_EQ(a->stats().blocks_in_use, 0u);
  EXPECT_EQ(a->stats().bytes_in_use, 0u);
}

TEST(Alloc, ZeroByteRequestGetsTheSmallestBlock) {
  auto pool = MakePool();
  auto a = MustAttach(pool.get(), true);
  PPtr p = MustAlloc(*a, 0);
  EXPECT_EQ(a->BlockSize(p), 64u);
  a->Free(p);
}

TEST(Alloc, RandomAllocFreeNeverOverlaps) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  auto pool = MakePool(16 * kMiB, 256 * kMiB, 16 * kMiB);
  AllocOptions opt;
  opt.thread_cache_blocks = 8;
  auto a = MustAttach(pool.get(), true, opt);
  IntervalOracle oracle;
  std::vector<PPtr> live;
  auto random_size = [&]() -> size_t {
    switch (rng() % 10) {
      case 0:
        return 1 + rng() % (600 * 1024);  // spans now and then
      case 1:
      case 2:
        return 1 + rng() % kMaxSmallSize;
      default:
        return 1 + rng() % 1024;
    }
  };
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 100 < 55) {
      size_t n = random_size();
      PPtr p = MustAlloc(*a, n);
      ASSERT_FALSE(p.is_null());
      size_t bs = a->BlockSize(p);
      ASSERT_GE(bs, n);
      ASSERT_TRUE(oracle.Add(p.offset(), bs)) << "overlap at step " << step;
      // Stamp the first and last word so that a later overlap is visible.
      auto* w = pool->to_ptr<uint64_t>(p);
      w[0] = p.raw();
      w[bs / 8 - 1] = ~p.raw();
      live.push_back(p);
    } else {
      size_t i = rng() % live.size();
      PPtr p = live[i];
      auto* w = pool->to_ptr<uint64_t>(p);
      size_t bs = a->BlockSize(p);
      ASSERT_EQ(w[0], p.raw()) << "block overwritten, step " << step;
      ASSERT_EQ(w[bs / 8 - 1], ~p.raw()) << "block overwritten, step " << step;
      oracle.Remove(p.offset());
      a->Free(p);
      live[i] = live.back();
      live.pop_back();
    }
  }
  auto got = LiveBlocks(*a);
  ASSERT_EQ(got.size(), oracle.map().size());
  for (const auto& [raw, n] : got) {
    auto it = oracle.map().find(PPtr(raw).offset());
    ASSERT_NE(it, oracle.map().end());
    EXPECT_EQ(it->second, n);
  }
}

TEST(Alloc, LargeRequestsTakeContiguousPageSpans) {
  auto pool = MakePool(32 * kMiB, 64 * kMiB);
  AllocOptions opt;
  opt.thread_cache_blocks = 0;
  auto a = MustAttach(pool.get(), true, opt);
  const uint64_t owned0 = a->stats().pages_owned;
  PPtr one = MustAlloc(*a, kMaxSmallSize + 1);
  PPtr three = MustAlloc(*a, 2 * kPage + 1);
  EXPECT_EQ(a->BlockSize(one), kPage);
  EXPECT_EQ(a->BlockSize(three), 3 * kPage);
  EXPECT_EQ((one.offset() - pool->heap_begin()) % kPage, 0u);
  EXPECT_EQ((three.offset() - pool->heap_begin()) % kPage, 0u);
  EXPECT_EQ(a->stats().pages_owned, owned0 + 4);
  std::memset(pool->to_ptr(three), 1, 3 * kPage);
  // The page words: one head, then tails pointing back to it.
  const uint64_t* table = pool->page_table();
  const size_t head = (three.offset() - pool->heap_begin()) / kPage;
  PageWord w;
  ASSERT_TRUE(PageWord::Decode(table[head], kNumClasses, &w));
  EXPECT_EQ(w.kind, PageKind::kSpanHead);
  EXPECT_EQ(w.span, 3u);
  for (uint32_t d = 1; d < 3; ++d) {
    ASSERT_TRUE(PageWord::Decode(table[head + d], kNumClasses, &w));
    EXPECT_EQ(w.kind, PageKind::kSpanTail);
    EXPECT_EQ(w.span, d);
  }
  a->Free(three);
  a->Free(one);
  EXPECT_EQ(a->stats().pages_owned, owned0);
  for (uint32_t d = 0; d < 3; ++d) EXPECT_EQ(table[head + d], 0u);
}

TEST(Alloc, NoRoomEvenAfterGrowthIsOutOfSpace) {
  auto pool = MakePool(4 * kMiB, 8 * kMiB);
  auto a = MustAttach(pool.get(), true);
  auto r = a->Alloc(64 * kMiB);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().is_out_of_space()) << r.status().ToString();
  EXPECT_EQ(a->stats().pages_owned, 0u);
  // Still usable.
  PPtr p = MustAlloc(*a, 100);
  a->Free(p);
}

TEST(Alloc, GrowsBySegmentsUntilOutOfSpaceAndIsUsableAfterFrees) {
  auto pool = MakePool(4 * kMiB, 16 * kMiB, 4 * kMiB);
  AllocOptions opt;
  opt.thread_cache_blocks = 4;
  auto a = MustAttach(pool.get(), true, opt);
  const size_t pages0 = pool->pages_mapped();
  std::vector<PPtr> live;
  Status last;
  for (;;) {
    auto r = a->Alloc(60 * 1024);
    if (!r.ok()) {
      last = r.status();
      break;
    }
    live.push_back(r.value());
    ASSERT_LT(live.size(), 100000u);
  }
  EXPECT_TRUE(last.is_out_of_space()) << last.ToString();
  EXPECT_GT(pool->pages_mapped(), pages0) << "the pool never grew";
  EXPECT_EQ(pool->size(), 16 * kMiB);
  auto m = LiveBlocks(*a);
  EXPECT_EQ(m.size(), live.size());
  EXPECT_TRUE(Disjoint(m));
  // A second failure leaves everything as it was.
  EXPECT_TRUE(a->Alloc(60 * 1024).status().is_out_of_space());
  EXPECT_EQ(LiveBlocks(*a).size(), live.size());

  for (PPtr p : live) a->Free(p);
  EXPECT_EQ(a->stats().blocks_in_use, 0u);
  // All of it again, and then one large span of most of the heap.
  std::vector<PPtr> again;
  for (size_t i = 0; i < live.size(); ++i) again.push_back(MustAlloc(*a, 60 * 1024));
  for (PPtr p : again) a->Free(p);
  PPtr big = MustAlloc(*a, (pool->pages_mapped() / 2) * kPage);
  EXPECT_FALSE(big.is_null());
  a->Free(big);
}

// Every page word is written twice (the page table's copies A and B, pool
// format version 2): a page taken or given back costs two NAWs.
TEST(Alloc, FreshPageCostsExactlyTwoNaws) {
  auto pool = MakePool();
  AllocOptions opt;
  opt.thread_cache_blocks = 16;
  auto a = MustAttach(pool.get(), true, opt);
  pm::Counters c0 = pm::ThreadCounters();
  PPtr p = MustAlloc(*a, 64);
  EXPECT_EQ((pm::ThreadCounters() - c0).naws, 2u) << "two NAWs for the new page";
  c0 = pm::ThreadCounters();
  std::vector<PPtr> more;
  for (int i = 0; i < 100; ++i) more.push_back(MustAlloc(*a, 64));
  EXPECT_EQ((pm::ThreadCounters() - c0).naws, 0u) << "blocks of an owned page cost no NAW";
  // A page of 4096-byte blocks holds 64 of them: 64 allocations take one
  // page, the 65th a second one.
  c0 = pm::ThreadCounters();
  std::vector<PPtr> big;
  for (int i = 0; i < 64; ++i) big.push_back(MustAlloc(*a, 4096));
  EXPECT_EQ((pm::ThreadCounters() - c0).naws, 2u);
  big.push_back(MustAlloc(*a, 4096));
  EXPECT_EQ((pm::ThreadCounters() - c0).naws, 4u);
  // A span of k pages: 2k NAWs.
  c0 = pm::ThreadCounters();
  PPtr span = MustAlloc(*a, 5 * kPage);
  EXPECT_EQ((pm::ThreadCounters() - c0).naws, 10u);
  c0 = pm::ThreadCounters();
  a->Free(span);
  EXPECT_EQ((pm::ThreadCounters() - c0).naws, 10u);
  // Allocation is counted in PM bytes.
  c0 = pm::ThreadCounters();
  PPtr q = MustAlloc(*a, 1000);
  EXPECT_EQ((pm::ThreadCounters() - c0).pm_bytes_allocated, 1024u);
  a->Free(q);
  a->Free(p);
  for (PPtr x : more) a->Free(x);
  for (PPtr x : big) a->Free(x);
}

TEST(Alloc, EmptyPagesAreGivenBack) {
  auto pool = MakePool();
  AllocOptions opt;
  opt.thread_cache_blocks = 0;
  auto a = MustAttach(pool.get(), true, opt);
  std::vector<PPtr> v;
  for (int i = 0; i < 200; ++i) v.push_back(MustAlloc(*a, 4096));  // 4 pages
  EXPECT_EQ(a->stats().pages_owned, 4u);
  for (PPtr p : v) a->Free(p);
  EXPECT_EQ(a->stats().pages_owned, 0u);
  for (size_t i = 0; i < pool->page_table_entries(); ++i) ASSERT_EQ(pool->page_table()[i], 0u);
}

// A pool of fewer than kCoarseBelowPages pages maps requests to the
// power-of-two classes only, so that one block of every class's size fits
// in 4 MiB (44 classes would need 44 pages; it has 15).
TEST(Alloc, SmallPoolUsesThePowerOfTwoClasses) {
  auto pool = MakePool(4 * kMiB, 4 * kMiB);
  ASSERT_LT(pool->page_table_entries(), kCoarseBelowPages);
  AllocOptions opt;
  opt.thread_cache_blocks = 0;
  auto a = MustAttach(pool.get(), true, opt);
  std::vector<PPtr> held;
  for (const size_t sz : Allocator::SizeClasses()) {
    held.push_back(MustAlloc(*a, sz));
    ASSERT_FALSE(held.back().is_null()) << sz << " bytes";
    const size_t got = a->BlockSize(held.back());
    ASSERT_EQ(got, std::bit_ceil(sz)) << sz << " bytes";
    ASSERT_EQ(held.back().offset() % got, 0u);
  }
  EXPECT_EQ(a->stats().pages_owned, 13u);  // 11 classes, 4 blocks of 128 KiB
  for (PPtr p : held) a->Free(p);
  EXPECT_EQ(a->stats().pages_owned, 0u);
  // A larger pool keeps every class.
  auto big = MakePool(4 * kMiB, 64 * kMiB);
  ASSERT_GE(big->page_table_entries(), kCoarseBelowPages);
  auto b = MustAttach(big.get(), true, opt);
  const PPtr p = MustAlloc(*b, 1025);
  EXPECT_EQ(b->BlockSize(p), 1280u);
  b->Free(p);
}

// A full pool whose every page but a span's holds a block of a different
// class: a request of a class without a page gets a free block of the
// smallest larger class whose blocks are aligned at least as its own,
// instead of OutOfSpace. The block stays its page's, through Free and
// through recovery.
TEST(Alloc, FullPoolLendsBlocksOfLargerClasses) {
  auto pool = MakePool(24 * kMiB, 24 * kMiB);
  const uint64_t pages = pool->page_table_entries();
  ASSERT_GE(pages, kCoarseBelowPages);
  AllocOptions opt;
  opt.thread_cache_blocks = 0;
  auto a = MustAttach(pool.get(), true, opt);
  std::vector<PPtr> held{MustAlloc(*a, (pages - 14) * kPage)};
  // Every class from 64 to 1280 bytes but 256 (and 1024, which 256 could use).
  for (size_t sz = 64; a->stats().pages_owned < pages; sz += 64) {
    ASSERT_LE(sz, 1280u);
    if (sz == 256 || sz == 1024) continue;
    held.push_back(MustAlloc(*a, sz));
  }
  // 256-byte blocks are 256-byte aligned: not a 320-byte block, a 512-byte one.
  auto r = a->Alloc(256);
  PMINDEX_ASSERT_OK(r) << "a full pool with free blocks of larger classes";
  const PPtr lent = r.value();
  EXPECT_EQ(a->BlockSize(lent), 512u);
  EXPECT_EQ(a->stats().pages_owned, pages);
  // No page of a class of 2048 bytes or more: still out of space.
  EXPECT_TRUE(a->Alloc(2048).status().is_out_of_space());
  EXPECT_TRUE(a->Alloc(kPage).status().is_out_of_space());
  a->Free(lent);
  EXPECT_FALSE(a->IsLive(lent));
  const PPtr again = MustAlloc(*a, 200);
  EXPECT_EQ(a->BlockSize(again), 512u);
  a.reset();  // "crash"
  auto b = MustAttach(pool.get(), false, opt);
  for (PPtr p : held) b->MarkReachable(p);
  b->MarkReachable(again);
  PMINDEX_ASSERT_OK(b->FinishRecovery());
  EXPECT_TRUE(b->IsLive(again));
  EXPECT_EQ(b->BlockSize(again), 512u);
  EXPECT_EQ(b->stats().blocks_in_use, held.size() + 1);
}

TEST(Alloc, ThreadCacheIsFlushedWhenTheThreadExits) {
  auto pool = MakePool();
  AllocOptions opt;
  opt.thread_cache_blocks = 64;
  auto a = MustAttach(pool.get(), true, opt);
  const pm::Counters g0 = pm::GlobalCounters();
  std::thread t([&] {
    std::vector<PPtr> v;
    for (int i = 0; i < 10; ++i) v.push_back(MustAlloc(*a, 256));
    for (PPtr p : v) a->Free(p);
    // The blocks sit in this thread's cache: the page is still owned.
    EXPECT_EQ(a->stats().pages_owned, 1u);
  });
  t.join();
  EXPECT_EQ(a->stats().pages_owned, 0u) << "cache not flushed at thread exit";
  // The page was taken and given back by that thread: all four NAWs (two
  // copies each) counted.
  EXPECT_EQ((pm::GlobalCounters() - g0).naws, 4u);
}

// ----------------------------------------------------------------- recovery

struct RecoveryCase {
  std::vector<PPtr> linked, unlinked;
};

RecoveryCase AllocateAndLink(Allocator& a, Pool& pool, uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  RecoveryCase rc;
  for (int i = 0; i < n; ++i) {
    size_t sz = rng() % 20 == 0 ? 1 + rng() % (3 * kPage) : 1 + rng() % 2048;
    PPtr p = MustAlloc(a, sz);
    std::memset(pool.to_ptr(p), 0x5A, std::min<size_t>(sz, 64));
    (i % 2 == 0 ? rc.linked : rc.unlinked).push_back(p);
  }
  return rc;
}

void CheckRecovered(Allocator& b, Pool& pool, const RecoveryCase& rc) {
  auto live = LiveBlocks(b);
  std::set<uint64_t> want;
  for (PPtr p : rc.linked) want.insert(p.raw());
  std::set<uint64_t> got;
  for (const auto& [raw, n] : live) got.insert(raw);
  EXPECT_EQ(got, want) << "live blocks after recovery != marked blocks";
  for (PPtr p : rc.unlinked) EXPECT_FALSE(b.IsLive(p));
  // New allocations never overlap a marked block.
  IntervalOracle oracle;
  for (const auto& [raw, n] : live) ASSERT_TRUE(oracle.Add(PPtr(raw).offset(), n));
  for (int i = 0; i < 3000; ++i) {
    PPtr p = MustAlloc(b, i % 50 == 0 ? 2 * kPage : 64 + (i % 32) * 64);
    ASSERT_FALSE(p.is_null());
    ASSERT_TRUE(oracle.Add(p.offset(), b.BlockSize(p))) << "new block overlaps a live one";
  }
  (void)pool;
}

TEST(AllocRecovery, UnmarkedBlocksAreFreedOnTheSamePool) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  auto pool = MakePool(32 * kMiB, 128 * kMiB);
  RecoveryCase rc;
  {
    auto a = MustAttach(pool.get(), true);
    rc = AllocateAndLink(*a, *pool, seed, 2000);
  }  // "crash": the DRAM state is gone
  auto b = MustAttach(pool.get(), false);
  ASSERT_TRUE(b->in_recovery());
  for (PPtr p : rc.linked) b->MarkReachable(p);
  PMINDEX_ASSERT_OK(b->FinishRecovery());
  EXPECT_FALSE(b->in_recovery());
  EXPECT_EQ(b->stats().blocks_in_use, rc.linked.size());
  CheckRecovered(*b, *pool, rc);
}

TEST(AllocRecovery, WorksOnAnImageCopyWhileTheOriginalIsLive) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  auto pool = MakePool(32 * kMiB, 128 * kMiB);
  auto a = MustAttach(pool.get(), true);
  RecoveryCase rc = AllocateAndLink(*a, *pool, seed, 1500);
  auto image = Pool::OpenImage(pool->bytes());
  PMINDEX_ASSERT_OK(image);
  auto copy = std::move(image).value();
  auto b = MustAttach(copy.get(), false);
  for (PPtr p : rc.linked) b->MarkReachable(p);
  PMINDEX_ASSERT_OK(b->FinishRecovery());
  CheckRecovered(*b, *copy, rc);
  // The original allocator is untouched by the copy's recovery.
  EXPECT_EQ(a->stats().blocks_in_use, rc.linked.size() + rc.unlinked.size());
  for (PPtr p : rc.unlinked) EXPECT_TRUE(a->IsLive(p));
}

TEST(AllocRecovery, NothingMarkedGivesEveryPageBack) {
  auto pool = MakePool();
  {
    auto a = MustAttach(pool.get(), true);
    for (int i = 0; i < 500; ++i) MustAlloc(*a, 100 + i);
    MustAlloc(*a, 3 * kPage);
  }
  auto b = MustAttach(pool.get(), false);
  EXPECT_GT(b->stats().pages_owned, 0u);
  pm::Counters c0 = pm::ThreadCounters();
  const uint64_t owned = b->stats().pages_owned;
  PMINDEX_ASSERT_OK(b->FinishRecovery());
  EXPECT_EQ(b->stats().pages_owned, 0u);
  EXPECT_EQ((pm::ThreadCounters() - c0).naws, 2 * owned) << "two NAWs per page given back";
  for (size_t i = 0; i < pool->page_table_entries(); ++i) ASSERT_EQ(pool->page_table()[i], 0u);
}

TEST(AllocRecovery, BadMarksAreCorruptionNotACrash) {
  auto pool = MakePool();
  auto other = MakePool(16 * kMiB, 64 * kMiB, 0, 7);
  PPtr good;
  {
    auto a = MustAttach(pool.get(), true);
    good = MustAlloc(*a, 256);
    MustAlloc(*a, 2 * kPage);
  }
  struct Bad {
    const char* what;
    PPtr p;
  };
  const uint64_t heap = pool->heap_begin();
  std::vector<Bad> bad = {
      {"null", PPtr()},
      {"misaligned", PPtr::Make(pool->id(), good.offset() + 8)},
      {"middle of a block", PPtr::Make(pool->id(), good.offset() + 64)},
      {"other pool", PPtr::Make(7, good.offset())},
      {"header", PPtr::Make(pool->id(), 16)},
      {"beyond the heap", PPtr::Make(pool->id(), pool->size() + 4096)},
      {"far beyond", PPtr::Make(pool->id(), PPtr::kOffsetMask)},
      {"free page", PPtr::Make(pool->id(), heap + 10 * kPage)},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.what);
    auto r = MustAttach(pool.get(), false);
    r->MarkReachable(good);
    r->MarkReachable(b.p);
    Status s = r->FinishRecovery();
    EXPECT_TRUE(s.is_corruption()) << s.ToString();
    EXPECT_TRUE(r->in_recovery());
  }
  // The span's tail page is not a block start either.
  auto r = MustAttach(pool.get(), false);
  PPtr span_tail;
  r->ForEachLiveBlock([](PPtr, size_t) {});
  for (size_t i = 0; i < pool->pages_mapped(); ++i) {
    PageWord w;
    if (PageWord::Decode(pool->page_table()[i], kNumClasses, &w) && w.kind == PageKind::kSpanTail) {
      span_tail = PPtr::Make(pool->id(), heap + i * kPage);
    }
  }
  ASSERT_FALSE(span_tail.is_null());
  r->MarkReachable(span_tail);
  EXPECT_TRUE(r->FinishRecovery().is_corruption());
  // Marking the same block twice is fine.
  auto ok = MustAttach(pool.get(), false);
  ok->MarkReachable(good);
  ok->MarkReachable(good);
  PMINDEX_EXPECT_OK(ok->FinishRecovery());
  EXPECT_EQ(ok->stats().blocks_in_use, 1u);
}

TEST(AllocRecovery, OrphanTailsAreFreedAndBrokenSpansAreCorruption) {
  auto pool = MakePool();
  uint64_t* table = pool->page_table();
  // A crash between the tails and the head of a span: tails only.
  pm::naw(&table[3], PageWord{PageKind::kSpanTail, 0, 0, 1}.Encode());
  pm::naw(&table[4], PageWord{PageKind::kSpanTail, 0, 0, 2}.Encode());
  {
    auto a = MustAttach(pool.get(), false);
    EXPECT_EQ(a->stats().pages_owned, 2u);
    PMINDEX_ASSERT_OK(a->FinishRecovery());
    EXPECT_EQ(a->stats().pages_owned, 0u);
    EXPECT_EQ(table[3], 0u);
    EXPECT_EQ(table[4], 0u);
  }
  // A head whose tail is missing cannot come from any crash.
  pm::naw(&table[5], PageWord{PageKind::kSpanHead, 0, 0, 2}.Encode());
  auto r = Allocator::Attach(pool.get(), false);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().is_corruption()) << r.status().ToString();
  // Garbage in a page word, in both copies of the table.
  uint64_t* mirror = pool->page_table_mirror();
  pm::naw(&table[5], 0xDEADBEEFull);
  pm::naw(&mirror[5], 0xDEADBEEFull);
  r = Allocator::Attach(pool.get(), false);
  EXPECT_TRUE(r.status().is_corruption()) << r.status().ToString();
  // A head running past the mapped heap.
  pm::naw(&table[5], PageWord{PageKind::kSpanHead, 0, 0, 1u << 25}.Encode());
  pm::naw(&mirror[5], table[5]);
  r = Allocator::Attach(pool.get(), false);
  EXPECT_TRUE(r.status().is_corruption()) << r.status().ToString();
  // An attach with fresh=true clears whatever is there.
  auto f = MustAttach(pool.get(), true);
  EXPECT_EQ(table[5], 0u);
}

TEST(AllocRecovery, NodeOfAPageSurvivesRecovery) {
  auto pool = MakePool();
  AllocOptions opt;
  opt.topology = Topology::Simulated(4);
  opt.mode = NumaMode::kGivenNode;
  opt.given_node = 3;
  PPtr p;
  {
    auto a = MustAttach(pool.get(), true, opt);
    p = MustAlloc(*a, 512);
    EXPECT_EQ(a->NodeOf(p), 3);
  }
  auto b = MustAttach(pool.get(), false, opt);
  b->MarkReachable(p);
  PMINDEX_ASSERT_OK(b->FinishRecovery());
  EXPECT_EQ(b->NodeOf(p), 3);
}

TEST(AllocRecovery, SurvivesCloseAndReopenOfAFilePool) {
  char tmpl[] = "/tmp/pmindex-alloc-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/pool";
  PoolOptions po;
  po.size = 8 * kMiB;
  po.max_size = 64 * kMiB;
  po.segment_size = 8 * kMiB;
  std::vector<PPtr> keep, drop;
  {
    auto pool = Pool::Create(path, po);
    PMINDEX_ASSERT_OK(pool);
    auto a = MustAttach(pool.value().get(), true);
    // Enough to need a second segment.
    for (int i = 0; i < 120; ++i) {
      PPtr p = MustAlloc(*a, i % 10 == 0 ? 3 * kPage : 60 * 1024);
      (i % 3 == 0 ? keep : drop).push_back(p);
    }
    EXPECT_GT(pool.value()->pages_mapped() * kPage, po.size);
    a.reset();
    PMINDEX_ASSERT_OK(pool.value()->Close());
  }
  {
    auto pool = Pool::Open(path);
    PMINDEX_ASSERT_OK(pool);
    auto b = MustAttach(pool.value().get(), false);
    for (PPtr p : keep) b->MarkReachable(p);
    PMINDEX_ASSERT_OK(b->FinishRecovery());
    EXPECT_EQ(b->stats().blocks_in_use, keep.size());
    for (PPtr p : drop) EXPECT_FALSE(b->IsLive(p));
    for (PPtr p : keep) EXPECT_TRUE(b->IsLive(p));
    b.reset();
    PMINDEX_ASSERT_OK(pool.value()->Close());
  }
  std::string cmd = std::string("rm -rf ") + tmpl;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

// ------------------------------------------------------------ checked errors

using AllocDeathTest = ::testing::Test;

TEST_F(AllocDeathTest, DoubleFreeStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto pool = MakePool();
  auto a = MustAttach(pool.get(), true);
  PPtr p = MustAlloc(*a, 128);
  a->Free(p);
  EXPECT_DEATH(a->Free(p), "double free");
  PPtr s = MustAlloc(*a, 2 * kPage);
  a->Free(s);
  EXPECT_DEATH(a->Free(s), "bad pointer|double free");
}

TEST_F(AllocDeathTest, BadPointersStopTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto pool = MakePool();
  auto a = MustAttach(pool.get(), true);
  PPtr p = MustAlloc(*a, 128);
  EXPECT_DEATH(a->Free(PPtr::Make(pool->id(), p.offset() + 64)), "bad pointer");
  EXPECT_DEATH(a->Free(PPtr::Make(pool->id(), p.offset() + 8)), "not the start of a block");
  EXPECT_DEATH(a->Free(PPtr::Make(pool->id(), 64)), "outside the heap");
  EXPECT_DEATH(a->Free(PPtr()), "null");
  EXPECT_DEATH(a->Free(PPtr::Make(pool->id() + 1, p.offset())), "pool id");
  EXPECT_DEATH(a->Free(PPtr::Make(pool->id(), pool->heap_begin() + 20 * kPage)),
               "not allocated");
  EXPECT_DEATH(a->BlockSize(PPtr::Make(pool->id(), p.offset() + 8)), "bad pointer");
}

TEST_F(AllocDeathTest, AllocBeforeFinishRecoveryStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto pool = MakePool();
  { MustAttach(pool.get(), true); }
  auto a = MustAttach(pool.get(), false);
  EXPECT_DEATH(a->Alloc(64).ok(), "before FinishRecovery");
  PMINDEX_ASSERT_OK(a->FinishRecovery());
  EXPECT_TRUE(a->FinishRecovery().is_invalid_argument());
  EXPECT_DEATH(a->MarkReachable(PPtr::Make(pool->id(), pool->heap_begin())), "outside recovery");
}

TEST(Alloc, AttachRejectsBadOptions) {
  auto pool = MakePool();
  AllocOptions opt;
  opt.topology = Topology::Simulated(2);
  opt.mode = NumaMode::kGivenNode;
  opt.given_node = 2;
  auto r = Allocator::Attach(pool.get(), true, opt);
  EXPECT_TRUE(r.status().is_invalid_argument()) << r.status().ToString();
  opt.given_node = -1;
  EXPECT_TRUE(Allocator::Attach(pool.get(), true, opt).status().is_invalid_argument());
  EXPECT_TRUE(Allocator::Attach(nullptr, true).status().is_invalid_argument());
}

// --------------------------------------------------------------------- NUMA

TEST(AllocNuma, LocalModeTakesPagesOfTheThreadsNode) {
  auto pool = MakePool(32 * kMiB, 64 * kMiB);
  AllocOptions opt;
  opt.topology = Topology::Simulated(4);
  opt.mode = NumaMode::kLocal;
  auto a = MustAttach(pool.get(), true, opt);
  std::vector<std::thread> ts;
  std::mutex mu;
  std::vector<std::pair<int, int>> seen;  // (thread's node, block's node)
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&] {
      int node = a->topology().node_of_this_thread();
      for (size_t n : {size_t{64}, size_t{4096}, size_t{3 * kPage}}) {
        PPtr p = MustAlloc(*a, n);
        std::lock_guard<std::mutex> lock(mu);
        seen.emplace_back(node, a->NodeOf(p));
      }
    });
    ts.back().join();  // one at a time: thread t is on node t % 4
  }
  std::set<int> nodes;
  for (auto [want, got] : seen) {
    EXPECT_EQ(got, want);
    nodes.insert(want);
  }
  EXPECT_EQ(nodes.size(), 4u);
  EXPECT_EQ(a->stats().remote_allocs, 0u);
}

TEST(AllocNuma, RoundRobinModeCyclesOverNodes) {
  auto pool = MakePool(32 * kMiB, 64 * kMiB);
  AllocOptions opt;
  opt.topology = Topology::Simulated(4);
  opt.mode = NumaMode::kRoundRobin;
  auto a = MustAttach(pool.get(), true, opt);
  std::vector<int> got;
  for (int i = 0; i < 8; ++i) got.push_back(a->NodeOf(MustAlloc(*a, kPage)));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  // Small blocks: each refill goes to the next node.
  opt.thread_cache_blocks = 0;
  auto pool2 = MakePool(32 * kMiB, 64 * kMiB);
  auto b = MustAttach(pool2.get(), true, opt);
  std::vector<int> small;
  for (int i = 0; i < 8; ++i) small.push_back(b->NodeOf(MustAlloc(*b, 128)));
  EXPECT_EQ(small, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(b->stats().pages_owned, 4u);
}

TEST(AllocNuma, GivenNodeModeAndRemoteAllocations) {
  // 4 MiB pool: about 15 pages, so node 2 owns only three or four.
  auto pool = MakePool(4 * kMiB, 4 * kMiB);
  AllocOptions opt;
  opt.topology = Topology::Simulated(4);
  opt.mode = NumaMode::kGivenNode;
  opt.given_node = 2;
  opt.thread_cache_blocks = 0;
  auto a = MustAttach(pool.get(), true, opt);
  std::vector<PPtr> v;
  std::vector<int> nodes;
  for (;;) {
    auto r = a->Alloc(kPage);
    if (!r.ok()) {
      EXPECT_TRUE(r.status().is_out_of_space());
      break;
    }
    v.push_back(r.value());
    nodes.push_back(a->NodeOf(r.value()));
  }
  ASSERT_GE(v.size(), 8u);
  const size_t local = std::count(nodes.begin(), nodes.end(), 2);
  EXPECT_GE(local, 2u);
  EXPECT_LT(local, v.size());
  // Local pages come first; the rest were taken from other nodes.
  for (size_t i = 0; i < local; ++i) EXPECT_EQ(nodes[i], 2) << i;
  EXPECT_EQ(a->stats().remote_allocs, v.size() - local);
  EXPECT_EQ(a->stats().pages_owned, v.size());
  for (PPtr p : v) a->Free(p);
  EXPECT_EQ(a->NodeOf(MustAlloc(*a, 64)), 2);
}

TEST(AllocNuma, AllocOnAGivenNodeWhateverTheMode) {
  auto pool = MakePool(32 * kMiB, 64 * kMiB);
  AllocOptions opt;
  opt.topology = Topology::Simulated(4);
  opt.mode = NumaMode::kRoundRobin;
  auto a = MustAttach(pool.get(), true, opt);
  for (int round = 0; round < 3; ++round) {
    for (int node = 0; node < 4; ++node) {
      for (size_t n : {size_t{64}, size_t{256}, size_t{4096}, size_t{2 * kPage}}) {
        auto r = a->Alloc(n, node);
        PMINDEX_ASSERT_OK(r);
        EXPECT_EQ(a->NodeOf(r.value()), node) << n;
        EXPECT_EQ(a->NodeOfAddress(pool->to_ptr(r.value())), node);
        // Any byte of the block, not only its start.
        EXPECT_EQ(a->NodeOfAddress(static_cast<char*>(pool->to_ptr(r.value())) + n - 1), node);
      }
    }
  }
  EXPECT_EQ(a->stats().remote_allocs, 0u);
  // The mode still applies to kAnyNode.
  std::vector<int> rr;
  for (int i = 0; i < 4; ++i) rr.push_back(a->NodeOf(MustAlloc(*a, kPage)));
  std::sort(rr.begin(), rr.end());
  EXPECT_EQ(rr, (std::vector<int>{0, 1, 2, 3}));
  for (int bad : {-2, 4, 1000}) {
    auto r = a->Alloc(64, bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << bad;
  }
  // Outside the heap, or in a free page: no node.
  EXPECT_EQ(a->NodeOfAddress(pool->base()), -1);
  int local = 0;
  EXPECT_EQ(a->NodeOfAddress(&local), -1);
}

TEST(AllocNuma, PerNodeCachesGoBackWhenTheThreadExits) {
  auto pool = MakePool(32 * kMiB, 64 * kMiB);
  AllocOptions opt;
  opt.topology = Topology::Simulated(2);
  opt.thread_cache_blocks = 64;
  auto a = MustAttach(pool.get(), true, opt);
  std::vector<PPtr> kept;
  std::thread([&] {
    for (int node = 0; node < 2; ++node) kept.push_back(a->Alloc(128, node).value());
  }).join();
  // The thread's caches held the rest of each refill; only the two blocks
  // it kept are in use now, and the other blocks of their pages are free.
  EXPECT_EQ(a->stats().blocks_in_use, 2u);
  EXPECT_EQ(a->stats().pages_owned, 2u);
  for (PPtr p : kept) a->Free(p);
  a->Reclaim();
}

TEST(AllocNuma, PlacingAThreadOnANode) {
  auto topo = Topology::Simulated(3);
  std::vector<int> seen(6, -1);
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t) {
    ts.emplace_back([&, t] {
      PMINDEX_EXPECT_OK(topo->place_this_thread((t * 2) % 3));
      seen[t] = topo->node_of_this_thread();
    });
  }
  for (auto& t : ts) t.join();
  for (int t = 0; t < 6; ++t) EXPECT_EQ(seen[t], (t * 2) % 3) << t;
  // A thread can move, and a node outside the topology is refused.
  PMINDEX_EXPECT_OK(topo->place_this_thread(1));
  EXPECT_EQ(topo->node_of_this_thread(), 1);
  PMINDEX_EXPECT_OK(topo->place_this_thread(2));
  EXPECT_EQ(topo->node_of_this_thread(), 2);
  EXPECT_EQ(topo->place_this_thread(3).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(topo->place_this_thread(-1).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Topology::Real()->place_this_thread(Topology::Real()->nodes()).code(),
            Status::Code::kInvalidArgument);
}

TEST(AllocNuma, DefaultTopologyIsWhatAllocatorsAttachWith) {
  auto pool = MakePool();
  auto topo = Topology::Simulated(5);
  Topology::SetDefault(topo);
  auto a = MustAttach(pool.get(), true);
  Topology::SetDefault(nullptr);
  EXPECT_EQ(&a->topology(), topo.get());
  EXPECT_EQ(Topology::Default(), Topology::Real());
  auto pool2 = MakePool();
  auto b = MustAttach(pool2.get(), true);
  EXPECT_EQ(&b->topology(), Topology::Real().get());
}

TEST(AllocNuma, MeterCountsLocalAndRemoteVisits) {
  auto pool = MakePool(32 * kMiB, 64 * kMiB);
  AllocOptions opt;
  opt.topology = Topology::Simulated(2);
  auto a = MustAttach(pool.get(), true, opt);
  void* on0 = pool->to_ptr(a->Alloc(256, 0).value());
  void* on1 = pool->to_ptr(a->Alloc(256, 1).value());
  pm::Counters before = pm::ThreadCounters();
  MeterVisit(*a, on0);  // metering off: nothing counted
  EXPECT_EQ((pm::ThreadCounters() - before).numa_local_visits, 0u);
  SetNumaMetering(true);
  PMINDEX_ASSERT_OK(opt.topology->place_this_thread(0));
  before = pm::ThreadCounters();
  for (int i = 0; i < 3; ++i) MeterVisit(*a, on0);
  for (int i = 0; i < 2; ++i) MeterVisit(*a, on1);
  int outside = 0;
  MeterVisit(*a, &outside);  // not in the pool: not counted
  pm::Counters d = pm::ThreadCounters() - before;
  EXPECT_EQ(d.numa_local_visits, 3u);
  EXPECT_EQ(d.numa_remote_visits, 2u);
  // Another thread, on node 1, sees the same blocks the other way round.
  std::thread([&] {
    PMINDEX_ASSERT_OK(opt.topology->place_this_thread(1));
    pm::Counters b = pm::ThreadCounters();
    MeterVisit(*a, on0);
    MeterVisit(*a, on1);
    MeterVisit(*a, on1);
    pm::Counters e = pm::ThreadCounters() - b;
    EXPECT_EQ(e.numa_local_visits, 2u);
    EXPECT_EQ(e.numa_remote_visits, 1u);
  }).join();
  // A remote visit waits RemoteAccessNs (a lower bound only: the test
  // asserts no upper one on a shared machine).
  pm::SetRemoteAccessNs(200000);  // 0.2 ms
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) MeterVisit(*a, on1);
  const auto waited = std::chrono::steady_clock::now() - t0;
  pm::SetRemoteAccessNs(0);
  SetNumaMetering(false);
  EXPECT_GE(waited, std::chrono::microseconds(5 * 200 * 9 / 10));
}

// Binding pages to a node through the kernel (the path a real multi-node
// machine takes; this one has a node 0 and no other).
TEST(AllocNuma, RealTopologyBindsPagesToANode) {
  auto real = Topology::Real();
  const size_t len = 4 * kPage;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  Status s = real->bind(m, len, 0);
  if (s.code() == Status::Code::kIOError && s.message().find("without libnuma") != std::string_view::npos) {
    munmap(m, len);
    GTEST_SKIP() << s.ToString();
  }
  PMINDEX_ASSERT_OK(s);
  int policy = -1;
  unsigned long mask = 0;
  ASSERT_EQ(syscall(SYS_get_mempolicy, &policy, &mask, 8 * sizeof(mask), m, MPOL_F_ADDR), 0)
      << std::strerror(errno);
  EXPECT_EQ(policy, MPOL_PREFERRED);
  EXPECT_EQ(mask, 1ul);
  EXPECT_EQ(real->bind(m, len, real->nodes()).code(), Status::Code::kInvalidArgument);
  munmap(m, len);
}

// -------------------------------------------------------------- concurrency

TEST(AllocConcurrent, FourThreadsNeverShareABlock) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  auto pool = MakePool(16 * kMiB, 512 * kMiB, 16 * kMiB);
  AllocOptions opt;
  opt.topology = Topology::Simulated(2);
  opt.thread_cache_blocks = 16;
  auto a = MustAttach(pool.get(), true, opt);
  constexpr int kThreads = 4;
  std::mutex handoff_mu;
  std::vector<PPtr> handoff;  // blocks freed by another thread than the allocating one
  std::atomic<bool> failed{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      std::vector<PPtr> mine;
      for (int step = 0; step < 20000 && !failed; ++step) {
        int op = static_cast<int>(rng() % 100);
        if (mine.empty() || op < 50) {
          size_t n = rng() % 50 == 0 ? kPage + rng() % kPage : 1 + rng() % 4096;
          PPtr p = MustAlloc(*a, n);
          if (p.is_null()) {
            failed = true;
            break;
          }
          // Fill the whole block with its own address: an overlapping block
          // would overwrite it.
          auto* w = pool->to_ptr<uint64_t>(p);
          size_t words = a->BlockSize(p) / 8;
          for (size_t i = 0; i < words; i += 7) w[i] = p.raw();
          mine.push_back(p);
        } else {
          size_t i = rng() % mine.size();
          PPtr p = mine[i];
          mine[i] = mine.back();
          mine.pop_back();
          auto* w = pool->to_ptr<uint64_t>(p);
          size_t words = a->BlockSize(p) / 8;
          for (size_t k = 0; k < words; k += 7) {
            if (w[k] != p.raw()) {
              ADD_FAILURE() << "block " << p.raw() << " overwritten";
              failed = true;
              break;
            }
          }
          if (op < 60) {
            std::lock_guard<std::mutex> lock(handoff_mu);
            handoff.push_back(p);
          } else {
            a->Free(p);
          }
        }
        if (step % 100 == 0) {
          std::vector<PPtr> theirs;
          {
            std::lock_guard<std::mutex> lock(handoff_mu);
            theirs.swap(handoff);
          }
          for (PPtr p : theirs) a->Free(p);
        }
      }
      for (PPtr p : mine) a->Free(p);
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_FALSE(failed);
  // Freed on a thread that exits, so that no cache keeps a page.
  std::thread([&] {
    for (PPtr p : handoff) a->Free(p);
  }).join();
  EXPECT_EQ(a->stats().blocks_in_use, 0u);
  EXPECT_EQ(a->stats().pages_owned, 0u) << "all threads exited: every page should be back";
}

// ------------------------------------------------------------- isolation

TEST(AllocIsolation, TwoAllocatorsOnTwoPoolsDoNotMixCaches) {
  auto p1 = MakePool(16 * kMiB, 64 * kMiB, 0, 1);
  auto p2 = MakePool(16 * kMiB, 64 * kMiB, 0, 2);
  auto a1 = MustAttach(p1.get(), true);
  auto a2 = MustAttach(p2.get(), true);
  std::vector<PPtr> v1, v2;
  auto work = [&](std::vector<PPtr>& out1, std::vector<PPtr>& out2) {
    for (int i = 0; i < 500; ++i) {
      PPtr x = MustAlloc(*a1, 64 * (1 + i % 4));
      PPtr y = MustAlloc(*a2, 64 * (1 + i % 4));
      if (i % 3 == 0) {
        a1->Free(x);
        a2->Free(y);
      } else {
        out1.push_back(x);
        out2.push_back(y);
      }
    }
  };
  work(v1, v2);
  std::vector<PPtr> w1, w2;
  std::thread t([&] { work(w1, w2); });
  t.join();
  v1.insert(v1.end(), w1.begin(), w1.end());
  v2.insert(v2.end(), w2.begin(), w2.end());
  for (PPtr p : v1) EXPECT_EQ(p.pool_id(), 1);
  for (PPtr p : v2) EXPECT_EQ(p.pool_id(), 2);
  auto l1 = LiveBlocks(*a1);
  auto l2 = LiveBlocks(*a2);
  EXPECT_EQ(l1.size(), v1.size());
  EXPECT_EQ(l2.size(), v2.size());
  for (PPtr p : v1) EXPECT_TRUE(l1.contains(p.raw()));
  for (PPtr p : v2) EXPECT_TRUE(l2.contains(p.raw()));
  // Destroying one allocator leaves the other (and this thread's cache for
  // it) intact.
  a1.reset();
  for (PPtr p : v2) a2->Free(p);
  EXPECT_EQ(a2->stats().blocks_in_use, 0u);
  // A new allocator on the first pool starts from its page table.
  auto again = MustAttach(p1.get(), false);
  for (PPtr p : v1) again->MarkReachable(p);
  PMINDEX_ASSERT_OK(again->FinishRecovery());
  EXPECT_EQ(again->stats().blocks_in_use, v1.size());
}

}  // namespace
}  // namespace pmindex::alloc
