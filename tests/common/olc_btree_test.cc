// OlcBTree against a std::map oracle, at tiny and default node sizes, plus
// concurrent runs. Randomized cases print their seed on failure; set
// PMINDEX_SEED to replay one.
#include "common/olc_btree.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "support/seed.h"
#include "support/status.h"

namespace pmindex {
namespace {

using testing::TestSeed;

template <class T>
class OlcBTreeTest : public ::testing::Test {};

struct Tiny {
  using Tree = OlcBTree<3, 3>;
};
struct Small {
  using Tree = OlcBTree<4, 5>;
};
struct Default {
  using Tree = OlcBTree<>;
};
using Sizes = ::testing::Types<Tiny, Small, Default>;
TYPED_TEST_SUITE(OlcBTreeTest, Sizes);

using Map = std::map<uint64_t, uint64_t>;

// Compares the whole tree with the oracle: verify(), size(), full scan.
template <class Tree>
void ExpectSame(const Tree& t, const Map& m) {
  PMINDEX_ASSERT_OK(t.verify());
  ASSERT_EQ(t.size(), m.size());
  std::vector<KV> all(m.size() + 1);
  size_t n = t.scan(0, all.size(), all.data());
  ASSERT_EQ(n, m.size());
  size_t i = 0;
  for (const auto& [k, v] : m) {
    ASSERT_EQ(all[i].key, k) << "at " << i;
    ASSERT_EQ(all[i].value, v) << "at " << i;
    ++i;
  }
}

template <class Tree>
void CheckPointQueries(const Tree& t, const Map& m, uint64_t k) {
  auto it = m.find(k);
  auto got = t.lookup(k);
  if (it == m.end()) {
    ASSERT_FALSE(got.has_value()) << "lookup " << k;
  } else {
    ASSERT_TRUE(got.has_value()) << "lookup " << k;
    ASSERT_EQ(*got, it->second);
  }
  auto fl = t.floor(k);
  auto ub = m.upper_bound(k);
  if (ub == m.begin()) {
    ASSERT_FALSE(fl.has_value()) << "floor " << k;
  } else {
    --ub;
    ASSERT_TRUE(fl.has_value()) << "floor " << k;
    ASSERT_EQ(fl->first, ub->first) << "floor " << k;
    ASSERT_EQ(fl->second, ub->second);
  }
  auto nx = t.next(k);
  auto up = m.upper_bound(k);
  if (up == m.end()) {
    ASSERT_FALSE(nx.has_value()) << "next " << k;
  } else {
    ASSERT_TRUE(nx.has_value()) << "next " << k;
    ASSERT_EQ(nx->first, up->first) << "next " << k;
    ASSERT_EQ(nx->second, up->second);
  }
}

TYPED_TEST(OlcBTreeTest, EmptyTree) {
  typename TypeParam::Tree t;
  PMINDEX_EXPECT_OK(t.verify());
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.height(), 1u);
  EXPECT_FALSE(t.lookup(0).has_value());
  EXPECT_FALSE(t.lookup(UINT64_MAX).has_value());
  EXPECT_FALSE(t.floor(UINT64_MAX).has_value());
  EXPECT_FALSE(t.next(0).has_value());
  KV kv;
  EXPECT_EQ(t.scan(0, 1, &kv), 0u);
  EXPECT_FALSE(t.remove(5));
  EXPECT_FALSE(t.update(5, 1));
}

TYPED_TEST(OlcBTreeTest, ExtremeKeys) {
  typename TypeParam::Tree t;
  EXPECT_TRUE(t.insert(UINT64_MAX, 1));
  EXPECT_TRUE(t.insert(0, 2));
  EXPECT_FALSE(t.insert(0, 3));
  for (uint64_t k = 1; k < 50; ++k) EXPECT_TRUE(t.insert(UINT64_MAX - k, k));
  EXPECT_EQ(*t.lookup(0), 2u);
  EXPECT_EQ(*t.lookup(UINT64_MAX), 1u);
  EXPECT_FALSE(t.next(UINT64_MAX).has_value());
  EXPECT_EQ(t.floor(0)->first, 0u);
  EXPECT_EQ(t.next(0)->first, UINT64_MAX - 49);
  EXPECT_EQ(t.floor(UINT64_MAX - 50)->first, 0u);
  EXPECT_EQ(t.floor(UINT64_MAX)->first, UINT64_MAX);
  KV out[3];
  ASSERT_EQ(t.scan(UINT64_MAX - 1, 3, out), 2u);
  EXPECT_EQ(out[1].key, UINT64_MAX);
  EXPECT_TRUE(t.remove(0));
  EXPECT_FALSE(t.floor(1).has_value());
  PMINDEX_EXPECT_OK(t.verify());
}

TYPED_TEST(OlcBTreeTest, TinyNodesSplitAndGrow) {
  typename TypeParam::Tree t;
  for (uint64_t k = 0; k < 1000; ++k) ASSERT_TRUE(t.insert(k * 7 % 1000, k));
  PMINDEX_ASSERT_OK(t.verify());
  EXPECT_GT(t.height(), 1u);
  EXPECT_GT(t.leaves(), 1000u / TypeParam::Tree::kLeafKeys);
  EXPECT_GT(t.dram_bytes(), t.leaves() * sizeof(uint64_t) * 2 * TypeParam::Tree::kLeafKeys);
}

TYPED_TEST(OlcBTreeTest, RandomOpsAgainstMap) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  // A small key universe forces duplicates, misses and empty leaves; the
  // extremes are always in it.
  std::vector<uint64_t> universe = {0, 1, UINT64_MAX, UINT64_MAX - 1};
  while (universe.size() < 600) universe.push_back(rng() >> (rng() % 64));
  typename TypeParam::Tree t;
  Map m;
  for (int op = 0; op < 30000; ++op) {
    uint64_t k = universe[rng() % universe.size()];
    uint64_t v = rng();
    switch (rng() % 8) {
      case 0:
      case 1: {
        bool fresh = m.emplace(k, v).second;
        ASSERT_EQ(t.insert(k, v), fresh) << "insert " << k;
        break;
      }
      case 2: {
        auto it = m.find(k);
        ASSERT_EQ(t.update(k, v), it != m.end()) << "update " << k;
        if (it != m.end()) it->second = v;
        break;
      }
      case 3:
        t.upsert(k, v);
        m[k] = v;
        break;
      case 4:
        ASSERT_EQ(t.remove(k), m.erase(k) == 1) << "remove " << k;
        break;
      case 5: {
        size_t n = rng() % 20;
        std::vector<KV> out(n);
        size_t got = t.scan(k, n, out.data());
        auto it = m.lower_bound(k);
        size_t want = 0;
        for (; it != m.end() && want < n; ++it, ++want) {
          ASSERT_LT(want, got);
          ASSERT_EQ(out[want].key, it->first);
          ASSERT_EQ(out[want].value, it->second);
        }
        ASSERT_EQ(got, want);
        break;
      }
      default:
        CheckPointQueries(t, m, k);
        CheckPointQueries(t, m, k + 1);
        CheckPointQueries(t, m, k - 1);
    }
    if (op % 5000 == 0) ExpectSame(t, m);
  }
  ExpectSame(t, m);
  // Remove everything: the tree keeps its (empty) leaves and stays valid.
  for (auto [k, v] : m) ASSERT_TRUE(t.remove(k));
  m.clear();
  ExpectSame(t, m);
  EXPECT_FALSE(t.floor(UINT64_MAX).has_value());
  EXPECT_FALSE(t.next(0).has_value());
  t.clear();
  ExpectSame(t, m);
  EXPECT_EQ(t.height(), 1u);
}

TYPED_TEST(OlcBTreeTest, FloorAcrossEmptyLeaves) {
  typename TypeParam::Tree t;
  Map m;
  for (uint64_t k = 0; k < 2000; ++k) {
    t.insert(k * 10, k);
    m[k * 10] = k;
  }
  // Empty out a long middle stretch, so floor/next must cross empty leaves.
  for (uint64_t k = 300; k < 1700; ++k) {
    ASSERT_TRUE(t.remove(k * 10));
    m.erase(k * 10);
  }
  ExpectSame(t, m);
  for (uint64_t k = 2900; k < 17100; k += 37) CheckPointQueries(t, m, k);
  EXPECT_EQ(t.floor(16999)->first, 2990u);
  EXPECT_EQ(t.next(2990)->first, 17000u);
}

TYPED_TEST(OlcBTreeTest, BulkLoadAtFills) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{100}, size_t{5000}}) {
    for (double fill : {0.5, 0.6, 0.7, 0.8, 0.9, 1.0}) {
      SCOPED_TRACE("n " + std::to_string(n) + " fill " + std::to_string(fill));
      Map m;
      if (n > 0) m[0] = 42;
      if (n > 1) m[UINT64_MAX] = 43;
      while (m.size() < n) m[rng()] = rng();
      std::vector<KV> sorted;
      for (auto [k, v] : m) sorted.push_back({k, v});
      typename TypeParam::Tree t;
      t.bulk_load(sorted, fill);
      ExpectSame(t, m);
      if (n >= 100) {
        // round(fill * capacity) entries per leaf, spread evenly.
        size_t want = std::max<size_t>(1, std::llround(fill * TypeParam::Tree::kLeafKeys));
        EXPECT_EQ(t.leaves(), (n + want - 1) / want);
      }
      for (int i = 0; i < 200; ++i) {
        uint64_t k = n > 0 && rng() % 4 == 0 ? sorted[rng() % n].key : rng();
        CheckPointQueries(t, m, k);
      }
      // The loaded tree keeps working.
      for (int i = 0; i < 2000; ++i) {
        uint64_t k = rng() % 3 == 0 ? rng() % 64 : rng();
        ASSERT_EQ(t.insert(k, i), m.emplace(k, i).second);
        if (i % 3 == 0) {
          uint64_t r = m.begin()->first;
          ASSERT_TRUE(t.remove(r));
          m.erase(r);
        }
      }
      ExpectSame(t, m);
    }
  }
}

TYPED_TEST(OlcBTreeTest, AscendingAndDescendingInserts) {
  typename TypeParam::Tree up, down;
  Map m;
  for (uint64_t k = 0; k < 3000; ++k) {
    ASSERT_TRUE(up.insert(k, k + 1));
    ASSERT_TRUE(down.insert(2999 - k, 3000 - k));
    m[k] = k + 1;
  }
  ExpectSame(up, m);
  ExpectSame(down, m);
  // Ascending inserts leave the left leaf full at each split.
  EXPECT_LE(up.leaves(), 3000 / TypeParam::Tree::kLeafKeys + 2);
}

// ---------------------------------------------------------------- threads

constexpr int kThreads = 4;

TYPED_TEST(OlcBTreeTest, ConcurrentDisjointRanges) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  typename TypeParam::Tree t;
  const uint64_t per = 6000;
  std::vector<Map> oracles(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int id = 0; id < kThreads; ++id) {
    ts.emplace_back([&, id] {
      std::mt19937_64 rng(seed + id);
      Map& m = oracles[id];
      const uint64_t base = id * per;  // thread id owns [base, base + per)
      for (int op = 0; op < 20000; ++op) {
        uint64_t k = base + rng() % per;
        uint64_t v = rng();
        switch (rng() % 5) {
          case 0:
          case 1:
            if (t.insert(k, v) != m.emplace(k, v).second) ++failures;
            break;
          case 2:
            if (t.remove(k) != (m.erase(k) == 1)) ++failures;
            break;
          case 3: {
            auto got = t.lookup(k);
            auto it = m.find(k);
            if (got.has_value() != (it != m.end()) || (got && *got != it->second)) ++failures;
            break;
          }
          default:
            t.upsert(k, v);
            m[k] = v;
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(failures.load(), 0);
  Map all;
  for (auto& m : oracles) all.insert(m.begin(), m.end());
  ExpectSame(t, all);
}

TYPED_TEST(OlcBTreeTest, ConcurrentOverlappingRanges) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  typename TypeParam::Tree t;
  const uint64_t range = 4000;
  // Every thread works on the same key range. A value encodes its key, so
  // any value read must belong to the key it was read under; insert and
  // remove outcomes per key are counted and must balance at the end.
  auto value_of = [](uint64_t k, uint64_t r) { return (k << 20) | (r & 0xfffff); };
  std::vector<std::vector<int64_t>> net(kThreads, std::vector<int64_t>(range, 0));
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int id = 0; id < kThreads; ++id) {
    ts.emplace_back([&, id] {
      std::mt19937_64 rng(seed * 31 + id);
      for (int op = 0; op < 20000; ++op) {
        uint64_t k = rng() % range;
        switch (rng() % 4) {
          case 0:
            if (t.insert(k, value_of(k, rng()))) ++net[id][k];
            break;
          case 1:
            if (t.remove(k)) --net[id][k];
            break;
          case 2: {
            auto v = t.lookup(k);
            if (v && (*v >> 20) != k) ++failures;
            break;
          }
          default: {
            KV out[8];
            size_t n = t.scan(k, 8, out);
            for (size_t i = 0; i < n; ++i) {
              if ((out[i].value >> 20) != out[i].key) ++failures;
              if (out[i].key < k || (i > 0 && out[i - 1].key >= out[i].key)) ++failures;
            }
          }
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(failures.load(), 0);
  PMINDEX_ASSERT_OK(t.verify());
  size_t present = 0;
  for (uint64_t k = 0; k < range; ++k) {
    int64_t sum = 0;
    for (int id = 0; id < kThreads; ++id) sum += net[id][k];
    ASSERT_TRUE(sum == 0 || sum == 1) << "key " << k << " net " << sum;
    ASSERT_EQ(t.lookup(k).has_value(), sum == 1) << "key " << k;
    present += sum;
  }
  EXPECT_EQ(t.size(), present);
  std::vector<KV> all(range + 1);
  EXPECT_EQ(t.scan(0, all.size(), all.data()), present);
}

TYPED_TEST(OlcBTreeTest, ReadersDuringWriters) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  typename TypeParam::Tree t;
  // Even keys are loaded first and never touched; writers churn odd keys.
  const uint64_t range = 10000;
  for (uint64_t k = 0; k < range; k += 2) t.insert(k, k * 3);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int id = 0; id < 2; ++id) {
    ts.emplace_back([&, id] {
      std::mt19937_64 rng(seed + 100 + id);
      for (int op = 0; op < 30000; ++op) {
        uint64_t k = (rng() % (range / 2)) * 2 + 1;
        if (rng() % 2) t.upsert(k, k * 3); else t.remove(k);
      }
      stop = true;
    });
  }
  for (int id = 0; id < 2; ++id) {
    ts.emplace_back([&, id] {
      std::mt19937_64 rng(seed + 200 + id);
      while (!stop) {
        uint64_t k = (rng() % (range / 2)) * 2;
        auto v = t.lookup(k);
        if (!v || *v != k * 3) ++failures;
        auto f = t.floor(k + 1);
        if (!f || f->first < k) ++failures;
        KV out[16];
        size_t n = t.scan(k, 16, out);
        if (n == 0 || out[0].key != k) ++failures;
        for (size_t i = 1; i < n; ++i) {
          if (out[i].key <= out[i - 1].key || out[i].value != out[i].key * 3) ++failures;
          // No even key may be skipped.
          if (out[i].key - out[i - 1].key > 2) ++failures;
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(failures.load(), 0);
  PMINDEX_ASSERT_OK(t.verify());
}

// More threads than slots, in two waves so that slots are given back and
// claimed again: every Add lands (owned slots add with a plain load and
// store, shared ones atomically), and the sum is exact once all are joined.
TEST(StripedCounterTest, SumIsExactWithMoreThreadsThanSlotsAndSlotReuse) {
  olc_detail::StripedCounter c;
  constexpr int kThreads = 24, kAdds = 20000;
  for (int wave = 0; wave < 2; ++wave) {
    std::vector<std::thread> ts;
    std::atomic<bool> go{false};
    for (int t = 0; t < kThreads; ++t) {
      ts.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < kAdds; ++i) c.Add(t % 3 == 0 ? -1 : 2);
      });
    }
    go.store(true);
    for (auto& th : ts) th.join();
  }
  const int64_t per_wave = (8 * -1 + 16 * 2) * int64_t{kAdds};
  EXPECT_EQ(c.Sum(), static_cast<uint64_t>(2 * per_wave));
  c.Set(7);
  EXPECT_EQ(c.Sum(), 7u);
}

}  // namespace
}  // namespace pmindex
