// Epoch-based reclamation: EpochDomain on its own, and Allocator::Retire.
// These tests are meant to run under TSan too (scripts build a Tsan type).
#include "alloc/epoch.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "gtest/gtest.h"
#include "pm/pool.h"
#include "support/seed.h"
#include "support/status.h"

namespace pmindex::alloc {
namespace {

using testing::TestSeed;

// Reclaimed items, shared between threads.
struct Sink {
  std::mutex mu;
  std::multiset<uint64_t> items;
  void Add(uint64_t x) {
    std::lock_guard<std::mutex> lock(mu);
    items.insert(x);
  }
  size_t Count(uint64_t x) {
    std::lock_guard<std::mutex> lock(mu);
    return items.count(x);
  }
  size_t Size() {
    std::lock_guard<std::mutex> lock(mu);
    return items.size();
  }
};

// A thread that enters a critical section and stays until told to leave.
class Holder {
 public:
  explicit Holder(std::function<void()> enter, std::function<void()> exit)
      : t_([this, enter, exit] {
          enter();
          inside_.store(true);
          while (!leave_.load()) std::this_thread::yield();
          exit();
          left_.store(true);
        }) {
    while (!inside_.load()) std::this_thread::yield();
  }
  void Leave() {
    leave_.store(true);
    t_.join();
  }
  ~Holder() {
    if (t_.joinable()) Leave();
  }

 private:
  std::atomic<bool> inside_{false}, leave_{false}, left_{false};
  std::thread t_;
};

TEST(Epoch, NothingIsReclaimedWhileAnEarlierGuardIsAlive) {
  Sink sink;
  EpochDomain d([&](uint64_t x) { sink.Add(x); });
  Holder reader([&] { d.Enter(); }, [&] { d.Exit(); });
  d.Retire(42);
  for (int i = 0; i < 100; ++i) d.Reclaim();
  EXPECT_EQ(sink.Count(42), 0u) << "reclaimed under a live guard";
  EXPECT_EQ(d.pending(), 1u);
  reader.Leave();
  for (int i = 0; i < 3; ++i) d.Reclaim();
  EXPECT_EQ(sink.Count(42), 1u);
  EXPECT_EQ(d.pending(), 0u);
}

TEST(Epoch, OneReclaimWithoutReadersReclaimsEveryThreadsItems) {
  Sink sink;
  EpochDomain d([&](uint64_t x) { sink.Add(x); });
  const uint64_t e0 = d.epoch();
  d.Retire(1);
  // Another live thread (outside any critical section) retires too.
  std::atomic<bool> retired{false}, done{false};
  std::thread t([&] {
    d.Retire(2);
    retired = true;
    while (!done) std::this_thread::yield();
  });
  while (!retired) std::this_thread::yield();
  EXPECT_EQ(d.Reclaim(), 2u);
  EXPECT_EQ(sink.Count(1), 1u);
  EXPECT_EQ(sink.Count(2), 1u);
  EXPECT_EQ(d.epoch(), e0 + 2);
  done = true;
  t.join();
}

TEST(Epoch, AnItemNeedsTwoAdvances) {
  Sink sink;
  EpochDomain d([&](uint64_t x) { sink.Add(x); });
  // A reader that entered before the Retire lets the epoch advance once
  // (it announced the current epoch) but not twice.
  Holder reader([&] { d.Enter(); }, [&] { d.Exit(); });
  d.Retire(5);
  const uint64_t e0 = d.epoch();
  d.Reclaim();
  EXPECT_EQ(d.epoch(), e0 + 1);
  EXPECT_EQ(sink.Size(), 0u);
  reader.Leave();
  d.Reclaim();
  EXPECT_EQ(sink.Size(), 1u);
}

TEST(Epoch, GuardsNestAndTheOwnGuardBlocksToo) {
  Sink sink;
  EpochDomain d([&](uint64_t x) { sink.Add(x); });
  {
    EpochDomain::Guard g1(d);
    {
      EpochDomain::Guard g2(d);
      EXPECT_TRUE(d.InCriticalSection());
    }
    EXPECT_TRUE(d.InCriticalSection());
    d.Retire(7);
    for (int i = 0; i < 10; ++i) d.Reclaim();
    EXPECT_EQ(sink.Size(), 0u);
  }
  EXPECT_FALSE(d.InCriticalSection());
  for (int i = 0; i < 3; ++i) d.Reclaim();
  EXPECT_EQ(sink.Size(), 1u);
}

TEST(Epoch, ItemsOfAnExitedThreadAreReclaimedByOthers) {
  Sink sink;
  EpochDomain d([&](uint64_t x) { sink.Add(x); });
  std::thread([&] {
    for (uint64_t i = 1; i <= 10; ++i) d.Retire(i);
  }).join();
  EXPECT_EQ(d.pending(), 10u);
  for (int i = 0; i < 3; ++i) d.Reclaim();
  EXPECT_EQ(sink.Size(), 10u);
  EXPECT_EQ(d.pending(), 0u);
}

TEST(Epoch, RetireReclaimsPeriodically) {
  Sink sink;
  EpochDomain d([&](uint64_t x) { sink.Add(x); });
  for (uint64_t i = 0; i < 10 * EpochDomain::kReclaimEvery; ++i) d.Retire(i);
  EXPECT_GT(sink.Size(), 0u);
  EXPECT_LT(d.pending(), 3 * EpochDomain::kReclaimEvery);
}

// Readers follow a shared pointer inside guards; a writer swaps in new
// objects and retires the old ones; the reclaimer marks an object dead
// (it is kept until the end, so a reader finding a dead object is a
// detected use-after-free rather than undefined behaviour).
TEST(Epoch, ReadersNeverSeeAReclaimedObject) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  struct Obj {
    std::atomic<bool> dead{false};
    uint64_t value = 0;
  };
  std::vector<std::unique_ptr<Obj>> all;
  std::mutex all_mu;
  auto make = [&](uint64_t v) {
    auto o = std::make_unique<Obj>();
    o->value = v;
    Obj* p = o.get();
    std::lock_guard<std::mutex> lock(all_mu);
    all.push_back(std::move(o));
    return p;
  };
  EpochDomain d([](uint64_t x) {
    reinterpret_cast<Obj*>(x)->dead.store(true, std::memory_order_relaxed);
  });
  std::atomic<Obj*> shared{make(0)};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        EpochDomain::Guard g(d);
        Obj* o = shared.load(std::memory_order_acquire);
        for (int spin = 0; spin < 50; ++spin) {
          if (o->dead.load(std::memory_order_relaxed)) bad.fetch_add(1);
        }
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  while (reads.load() == 0) std::this_thread::yield();
  std::mt19937_64 rng(seed);
  for (uint64_t i = 1; i <= 5000; ++i) {
    if (i % 64 == 0) std::this_thread::yield();
    Obj* old = shared.exchange(make(i), std::memory_order_acq_rel);
    d.Retire(reinterpret_cast<uint64_t>(old));
    if (rng() % 8 == 0) d.Reclaim();
  }
  stop = true;
  for (auto& t : readers) t.join();
  for (int i = 0; i < 3; ++i) d.Reclaim();
  EXPECT_EQ(bad.load(), 0u) << "a reader saw a reclaimed object";
  EXPECT_GT(reads.load(), 0u);
  EXPECT_EQ(d.pending(), 0u);
  size_t dead = 0;
  for (auto& o : all) dead += o->dead.load();
  EXPECT_EQ(dead, all.size() - 1) << "every retired object is reclaimed in the end";
}

// ------------------------------------------------------- Allocator::Retire

std::unique_ptr<Pool> SmallPool() {
  PoolOptions po;
  po.size = 16ull << 20;
  po.max_size = 64ull << 20;
  auto p = Pool::CreateInMemory(po);
  PMINDEX_EXPECT_OK(p);
  return std::move(p).value();
}

TEST(AllocEpoch, RetiredBlockOutlivesAnEarlierGuard) {
  auto pool = SmallPool();
  auto r = Allocator::Attach(pool.get(), true);
  PMINDEX_ASSERT_OK(r);
  auto& a = *r.value();
  PPtr p = a.Alloc(256).value();
  // A reader inside an EpochGuard that began before the Retire.
  std::atomic<bool> in{false}, leave{false};
  std::thread t([&] {
    Allocator::EpochGuard g(a);
    in = true;
    while (!leave) std::this_thread::yield();
  });
  while (!in) std::this_thread::yield();
  a.Retire(p);
  EXPECT_EQ(a.stats().retired_pending, 1u);
  for (int i = 0; i < 100; ++i) a.Reclaim();
  EXPECT_TRUE(a.IsLive(p)) << "freed while a guard that saw it is alive";
  leave = true;
  t.join();
  for (int i = 0; i < 3; ++i) a.Reclaim();
  EXPECT_FALSE(a.IsLive(p));
  EXPECT_EQ(a.stats().retired_pending, 0u);
  EXPECT_EQ(a.stats().blocks_in_use, 0u);
}

TEST(AllocEpoch, ConcurrentReadersNeverSeeAReusedBlock) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  auto pool = SmallPool();
  AllocOptions opt;
  opt.thread_cache_blocks = 4;  // reuse freed blocks quickly
  auto r = Allocator::Attach(pool.get(), true, opt);
  PMINDEX_ASSERT_OK(r);
  auto& a = *r.value();
  auto stamp = [&](PPtr p) {
    auto* w = pool->to_ptr<uint64_t>(p);
    for (int i = 0; i < 8; ++i) w[i] = p.raw();
  };
  PPtr first = a.Alloc(64).value();
  stamp(first);
  std::atomic<uint64_t> shared{first.raw()};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        Allocator::EpochGuard g(a);
        PPtr p(shared.load(std::memory_order_acquire));
        const auto* w = pool->to_ptr<const uint64_t>(p);
        for (int i = 0; i < 8; ++i) {
          if (w[i] != p.raw()) bad.fetch_add(1);
        }
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  while (reads.load() == 0) std::this_thread::yield();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 5000; ++i) {
    if (i % 64 == 0) std::this_thread::yield();
    PPtr p = a.Alloc(64).value();
    stamp(p);
    PPtr old(shared.exchange(p.raw(), std::memory_order_acq_rel));
    a.Retire(old);
    if (rng() % 16 == 0) a.Reclaim();
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0u) << "a reader saw a block that was freed and reused";
  for (int i = 0; i < 3; ++i) a.Reclaim();
  EXPECT_EQ(a.stats().retired_pending, 0u);
  EXPECT_EQ(a.stats().blocks_in_use, 1u);
}

}  // namespace
}  // namespace pmindex::alloc
