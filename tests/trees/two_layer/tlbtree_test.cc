// tlbtree unit tests: the state word and the top layer on their own, then
// the tree through its interface: splits at every level and root-chain
// growth, a full top-layer leaf that forces chain walks and a rebuild,
// reopen after a clean close and after a "crash" (a copy of a live pool),
// random operations against a std::map oracle across reopens, option
// checks, and readers running while a writer splits.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "index/index.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/db.h"
#include "support/sorted_node_checks.h"
#include "support/status.h"
#include "support/temp_files.h"
#include "trees/two_layer/top_layer.h"
#include "trees/two_layer/two_layer.h"
#include "trees/two_layer/wo_node.h"

namespace pmindex::tlbtree {
namespace {

using testing_util::TestSeed;

double Extra(const IndexStats& s, const std::string& name) {
  for (const auto& [n, v] : s.extra)
    if (n == name) return v;
  ADD_FAILURE() << "no stats counter " << name;
  return -1;
}

TEST(TlbTreeState, SlotArrayInsertRemoveAndFlags) {
  uint64_t s = st::Identity(0);
  EXPECT_EQ(st::Count(s), 0u);
  s = st::Insert(s, 0, 7);  // [7]
  s = st::Insert(s, 0, 3);  // [3 7]
  s = st::Insert(s, 2, 11); // [3 7 11]
  s = st::Insert(s, 1, 0);  // [3 0 7 11]
  ASSERT_EQ(st::Count(s), 4u);
  EXPECT_EQ(st::Slot(s, 0), 3u);
  EXPECT_EQ(st::Slot(s, 1), 0u);
  EXPECT_EQ(st::Slot(s, 2), 7u);
  EXPECT_EQ(st::Slot(s, 3), 11u);
  EXPECT_EQ(st::UsedMask(s), (1u << 3) | 1u | (1u << 7) | (1u << 11));
  s = st::Remove(s, 1);  // [3 7 11]
  ASSERT_EQ(st::Count(s), 3u);
  EXPECT_EQ(st::Slot(s, 1), 7u);
  EXPECT_EQ(st::Slot(s, 2), 11u);
  const uint64_t b = st::Bump(s | st::kSibBit | st::kLatch);
  EXPECT_TRUE(st::Latched(b));
  EXPECT_EQ(st::Sib(b), 1u);
  EXPECT_EQ(st::Count(b), 3u);
  EXPECT_NE(b, s | st::kSibBit | st::kLatch);
  // The counter wraps without touching the other bits.
  uint64_t w = s;
  for (int i = 0; i < 1024; ++i) w = st::Bump(w);
  EXPECT_EQ(w, s);
  // A full array of 12 and a truncation to 6.
  uint64_t f = st::Identity(kSlots);
  EXPECT_EQ(st::Count(f), kSlots);
  EXPECT_EQ(st::Slot(f, 11), 11u);
  EXPECT_EQ(st::Count(st::Truncate(f, 6)), 6u);
  EXPECT_EQ(st::UsedMask(st::Truncate(f, 6)), 0x3fu);
}

TEST(TlbTreeTop, FindsTheLastEntryAtOrBelowAndAbsorbsNewOnes) {
  std::vector<std::pair<Key, uint64_t>> chain;
  for (uint64_t i = 0; i < 1000; ++i) chain.push_back({i * 100, i + 1});
  TopLayer t(chain);
  EXPECT_EQ(t.leaves(), (1000u + TopLayer::kLeafFill - 1) / TopLayer::kLeafFill);
  EXPECT_GE(t.levels(), 3u);
  for (Key k : {uint64_t{0}, uint64_t{99}, uint64_t{100}, uint64_t{55555}, uint64_t{99900}, ~uint64_t{0}})
    EXPECT_EQ(t.Find(k), std::min<uint64_t>(k / 100, 999) + 1) << k;
  // A leaf absorbs kLeafSlots - kLeafFill new entries, then is full.
  const uint32_t room = TopLayer::kLeafSlots - TopLayer::kLeafFill;
  ASSERT_GE(room, 3u);
  EXPECT_EQ(t.Insert(150, 5000), TopLayer::Add::kAdded);
  EXPECT_EQ(t.Insert(150, 5000), TopLayer::Add::kPresent);
  for (uint32_t j = 1; j < room; ++j)
    EXPECT_EQ(t.Insert(150 + j, 5000 + j), TopLayer::Add::kAdded) << j;
  EXPECT_EQ(t.Insert(150 + room, 6000), TopLayer::Add::kFull);
  EXPECT_EQ(t.Find(150), 5000u);
  EXPECT_EQ(t.Find(151), 5001u);
  EXPECT_EQ(t.Find(150 + room - 1), 5000u + room - 1);
  EXPECT_EQ(t.Find(185), 5000u + room - 1);
  EXPECT_EQ(t.Find(200), 3u);
}

// A layer whose leaves reach 1 MiB takes whole 2 MiB units (offered for
// huge pages); a small one takes only its leaves. Both find every entry.
TEST(TlbTreeTop, LargeLayerTakesWholeHugePagesAndFindsEveryEntry) {
  const uint64_t small_bytes = TopLayer({{0, 1}}).bytes();
  EXPECT_LT(small_bytes, uint64_t{4096});
  std::vector<std::pair<Key, uint64_t>> chain;
  const uint64_t n = 40000;  // 5000 leaves of 256 bytes: 1.22 MiB
  for (uint64_t i = 0; i < n; ++i) chain.push_back({i * 10, i + 1});
  TopLayer t(chain);
  EXPECT_GE(t.bytes(), uint64_t{2} << 20);
  EXPECT_LT(t.bytes(), (uint64_t{2} << 20) + (uint64_t{1} << 20));
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(t.Find(i * 10), i + 1) << i;
    ASSERT_EQ(t.Find(i * 10 + 9), i + 1) << i;
  }
}

TEST(TlbTreeOptions, BadOptionsAreRefused) {
  testing_util::ExpectOptions("tlbtree", {"height=1", "height=9", "height=x", "rebuild=0", "node=512", "height=2,height=3"},
                              {"", "height=2", "height=8,rebuild=1"});
}

// Ascending inserts at height 2: leaves split, roots fill and split (new
// subindexes on the chain), and the top layer's gapped leaf fills; with
// rebuild=2 the chain walks then trigger rebuilds. Every key is found
// before and after.
TEST(TlbTreeSplits, RootChainGrowsAndTopLayerRebuilds) {
  auto db = Db::CreateInMemory("tlbtree", "height=2,rebuild=2");
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  const Key n = 6000;
  for (Key k = 0; k < n; ++k) {
    PMINDEX_ASSERT_OK(d.Insert(k * 7, k)) << k;
    if (k % 1500 == 0) {
      PMINDEX_ASSERT_OK(d.Verify());
    }
  }
  PMINDEX_ASSERT_OK(d.Verify());
  IndexStats s = d.Stats();
  EXPECT_EQ(s.height, 2u);
  EXPECT_EQ(s.entries, n);
  EXPECT_GT(Extra(s, "root_splits"), 10);
  EXPECT_GT(Extra(s, "subindexes"), 10);
  EXPECT_GT(Extra(s, "top_skipped"), 0);  // a top-layer leaf was full
  const double rebuilds = Extra(s, "top_rebuilds");
  EXPECT_GT(rebuilds, 0);
  for (Key k = 0; k < n; ++k) ASSERT_EQ(d.Get(k * 7).value(), k) << k;
  EXPECT_FALSE(d.Get(8).ok());
  std::vector<KV> all;
  EXPECT_EQ(d.Range(0, std::nullopt, SIZE_MAX, &all), n);  // the scan crosses subindexes
  for (Key k = 0; k < n; ++k) ASSERT_EQ(all[k].key, k * 7);
}

// With no walk-triggered rebuild (rebuild= above any walk), subindexes a
// full top-layer leaf could not take wait for the next merge (at 1/32 of
// the layer) and are found by walking the chain of roots meanwhile; the
// same pool reopened gets a top layer built from the chain, which holds
// every subindex.
TEST(TlbTreeSplits, StaleTopLayerIsCorrectByChainWalks) {
  testing::TempDir dir;
  const std::string path = dir.path("tlb.pool");
  const Key n = 5000;
  double subindexes = 0;
  {
    auto db = Db::Create(path, "tlbtree", "height=2,rebuild=1000000");
    PMINDEX_ASSERT_OK(db);
    Db& d = *db.value();
    for (Key k = 0; k < n; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 3, k)) << k;
    const IndexStats s = d.Stats();
    EXPECT_GT(Extra(s, "top_skipped"), 10);
    // Merges only: far fewer than the entries left out.
    EXPECT_LT(Extra(s, "top_rebuilds"), Extra(s, "top_skipped") / 4);
    subindexes = Extra(s, "subindexes");
    PMINDEX_ASSERT_OK(d.Verify());
    for (Key k = 0; k < n; ++k) ASSERT_EQ(d.Get(k * 3).value(), k) << k;
    PMINDEX_ASSERT_OK(d.Close());
  }
  auto db = Db::Open(path, "tlbtree");
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  PMINDEX_ASSERT_OK(d.Verify());
  const IndexStats s = d.Stats();
  EXPECT_EQ(Extra(s, "subindexes"), subindexes);
  // Built from the chain: kLeafFill entries per leaf, none left out.
  EXPECT_EQ(Extra(s, "top_leaves"), std::ceil(subindexes / TopLayer::kLeafFill));
  for (Key k = 0; k < n; ++k) ASSERT_EQ(d.Get(k * 3).value(), k) << k;
}

// Height 3 with random keys: splits of leaves, of inner nodes below the
// roots and of roots; the leaves' sibling links cross subindexes.
TEST(TlbTreeSplits, EveryLevelSplitsAtHeightThree) {
  auto db = Db::CreateInMemory("tlbtree", "height=3,rebuild=1");
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  std::mt19937_64 rng(TestSeed());
  std::map<Key, Value> oracle;
  while (oracle.size() < 20000) {
    const Key k = rng();
    if (oracle.count(k)) continue;
    PMINDEX_ASSERT_OK(d.Insert(k, ~k));
    oracle[k] = ~k;
  }
  PMINDEX_ASSERT_OK(d.Verify());
  IndexStats s = d.Stats();
  EXPECT_EQ(s.height, 3u);
  EXPECT_GT(s.inner_nodes, Extra(s, "subindexes") * 2);  // inner nodes below the roots
  EXPECT_GT(Extra(s, "root_splits"), 0);
  ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
}

// Random operations against a std::map, with clean reopens between
// rounds: the reopened tree verifies, rebuilds its top layer from the
// chain and finds the same pairs. Deletes empty leaves out (no merges).
TEST(TlbTreeOracle, RandomOpsMatchAMapAcrossReopens) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  testing::TempDir dir;
  const std::string path = dir.path("tlb.pool");
  std::mt19937_64 rng(seed);
  std::map<Key, Value> oracle;
  {
    auto db = Db::Create(path, "tlbtree", "height=2,rebuild=3");
    PMINDEX_ASSERT_OK(db);
    PMINDEX_ASSERT_OK(db.value()->Close());
  }
  for (int round = 0; round < 4; ++round) {
    auto db = Db::Open(path, "tlbtree");
    PMINDEX_ASSERT_OK(db);
    Db& d = *db.value();
    PMINDEX_ASSERT_OK(d.Verify());
    for (const auto& [k, v] : oracle) ASSERT_EQ(d.Get(k).value(), v) << k;
    for (int i = 0; i < 6000; ++i) {
      const Key k = i == 0 ? 0 : i == 1 ? ~uint64_t{0} : rng() % 20000;
      const Value v = rng();
      const bool present = oracle.count(k) != 0;
      switch (rng() % 5) {
        case 0:
        case 1: {
          Status s = d.Insert(k, v);
          ASSERT_EQ(s.ok(), !present) << s.ToString();
          if (!present) oracle[k] = v;
          break;
        }
        case 2: {
          Status s = d.Update(k, v);
          ASSERT_EQ(s.ok(), present) << s.ToString();
          if (present) oracle[k] = v;
          break;
        }
        case 3:
          PMINDEX_ASSERT_OK(d.Upsert(k, v));
          oracle[k] = v;
          break;
        default: {
          Status s = d.Remove(k);
          ASSERT_EQ(s.ok(), present) << s.ToString();
          oracle.erase(k);
        }
      }
    }
    // Empty a key range: its leaves stay, empty.
    if (round == 2) {
      for (auto it = oracle.lower_bound(5000); it != oracle.end() && it->first < 9000;) {
        PMINDEX_ASSERT_OK(d.Remove(it->first));
        it = oracle.erase(it);
      }
      std::vector<KV> part;
      d.Range(5000, 9000, SIZE_MAX, &part);
      EXPECT_TRUE(part.empty());
    }
    PMINDEX_ASSERT_OK(d.Verify());
    EXPECT_EQ(d.Stats().entries, oracle.size());
    ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
    PMINDEX_ASSERT_OK(d.Close());
  }
}

// A copy of a live pool (no close: what a crash leaves) opens, rebuilds
// the top layer from the chain of roots and holds every key; so does a
// cleanly closed one.
TEST(TlbTreeRecovery, OpenAfterCrashAndAfterCloseRebuildsTheTopLayer) {
  PoolOptions po;
  po.size = 16ull << 20;
  po.kind = "tlbtree";
  po.index_options = "height=2,rebuild=4";
  auto pool = Pool::CreateInMemory(po);
  PMINDEX_ASSERT_OK(pool);
  auto idx = create_index("tlbtree", "height=2,rebuild=4", pool.value().get());
  PMINDEX_ASSERT_OK(idx);
  std::vector<KV> load;
  for (Key k = 0; k < 3000; ++k) load.push_back(KV{k * 4, k});
  PMINDEX_ASSERT_OK(idx.value()->bulk_load(load, 0.9));
  EXPECT_TRUE(idx.value()->bulk_load(load, 0.9).is_invalid_argument());  // not empty any more
  for (Key k = 0; k < 3000; ++k) PMINDEX_ASSERT_OK(idx.value()->insert(k * 4 + 1, k));
  PMINDEX_ASSERT_OK(idx.value()->verify());
  const uint64_t subs = static_cast<uint64_t>(Extra(idx.value()->stats(), "subindexes"));
  EXPECT_GT(subs, 20u);
  for (bool crash : {true, false}) {
    SCOPED_TRACE(crash ? "after a crash" : "after a clean close");
    const std::vector<std::byte> bytes = testing_util::PoolImage(*pool.value(), &idx.value(), crash);
    auto img = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(img);
    auto re = open_index(img.value().get());
    PMINDEX_ASSERT_OK(re);
    Index& t = *re.value();
    PMINDEX_ASSERT_OK(t.verify());
    const IndexStats s = t.stats();
    EXPECT_EQ(s.entries, 6000u);
    EXPECT_EQ(static_cast<uint64_t>(Extra(s, "subindexes")), subs);
    EXPECT_GE(Extra(s, "top_leaves"), static_cast<double>(subs / TopLayer::kLeafFill));
    for (Key k = 0; k < 3000; ++k) {
      ASSERT_EQ(t.lookup(k * 4).value_or(~0ull), k);
      ASSERT_EQ(t.lookup(k * 4 + 1).value_or(~0ull), k);
      ASSERT_FALSE(t.lookup(k * 4 + 2).has_value());
    }
    PMINDEX_ASSERT_OK(t.insert(1u << 30, 1));
    PMINDEX_ASSERT_OK(t.verify());
    PMINDEX_ASSERT_OK(t.close());
  }
}

// The height is the pool's: a pool whose header names no height but whose
// subindexes have three levels (what a pool made under the earlier
// default, height=3, is) opens at height 3 with every key; one whose
// header names a height its nodes contradict is refused as corrupt.
TEST(TlbTreeRecovery, APoolKeepsTheHeightItWasMadeWith) {
  for (const char* header : {"", "height=2"}) {
    SCOPED_TRACE(std::string("header options \"") + header + "\"");
    PoolOptions po;
    po.size = 16ull << 20;
    po.kind = "tlbtree";
    po.index_options = header;
    auto pool = Pool::CreateInMemory(po);
    PMINDEX_ASSERT_OK(pool);
    PMINDEX_ASSERT_OK(pool.value()->MarkInUse());
    {
      auto a = alloc::Allocator::Attach(pool.value().get(), /*fresh=*/true);
      PMINDEX_ASSERT_OK(a);
      TwoLayerConfig c;
      c.height = 3;
      auto t = TwoLayerTree::Create(IndexEnv{pool.value().get(), a.value().get()}, c, "tlbtree");
      PMINDEX_ASSERT_OK(t);
      for (Key k = 0; k < 3000; ++k) PMINDEX_ASSERT_OK(t.value()->insert(k * 5, k));
      PMINDEX_ASSERT_OK(t.value()->close());
    }
    auto re = open_index(pool.value().get());
    if (*header != '\0') {
      ASSERT_FALSE(re.ok());
      EXPECT_TRUE(re.status().is_corruption()) << re.status().ToString();
      continue;
    }
    PMINDEX_ASSERT_OK(re);
    Index& t = *re.value();
    PMINDEX_ASSERT_OK(t.verify());
    EXPECT_EQ(t.stats().height, 3u);
    for (Key k = 0; k < 3000; ++k) ASSERT_EQ(t.lookup(k * 5).value_or(~0ull), k) << k;
    PMINDEX_ASSERT_OK(t.insert(1, 1));
    PMINDEX_ASSERT_OK(t.verify());
    PMINDEX_ASSERT_OK(t.close());
  }
}

// Placement: inner nodes (made by create, splits and bulk load) take the
// allocator's 320-byte class and leaves its 256-byte one, so that no
// allocator page holds both and the nodes every descent reads share few
// pages. The tree still verifies and reopens with every key.
TEST(TlbTreePlacement, InnerNodesTakeAClassOfTheirOwn) {
  for (const bool bulk : {false, true}) {
    SCOPED_TRACE(bulk ? "bulk load" : "inserts");
    PoolOptions po;
    po.size = 32ull << 20;
    po.kind = "tlbtree";
    po.index_options = "height=3";
    auto pool = Pool::CreateInMemory(po);
    PMINDEX_ASSERT_OK(pool);
    PMINDEX_ASSERT_OK(pool.value()->MarkInUse());
    std::vector<KV> kvs;
    for (Key k = 1; k <= 20000; ++k) kvs.push_back(KV{k * 7, k});
    {
      auto a = alloc::Allocator::Attach(pool.value().get(), /*fresh=*/true);
      PMINDEX_ASSERT_OK(a);
      TwoLayerConfig c;
      c.height = 3;
      auto t = TwoLayerTree::Create(IndexEnv{pool.value().get(), a.value().get()}, c, "tlbtree");
      PMINDEX_ASSERT_OK(t);
      Index& idx = *t.value();
      if (bulk) {
        PMINDEX_ASSERT_OK(idx.bulk_load(kvs, 0.7));
      } else {
        std::mt19937_64 rng(TestSeed());
        std::vector<KV> shuffled = kvs;
        std::shuffle(shuffled.begin(), shuffled.end(), rng);
        for (const KV& kv : shuffled) PMINDEX_ASSERT_OK(idx.insert(kv.key, kv.value));
      }
      uint64_t inner = 0, leaves = 0;
      PMINDEX_ASSERT_OK(idx.for_each_block([&](PPtr p) {
        const Node* x = pool.value()->to_ptr<Node>(p);
        const size_t want = x->level > 0 ? kInnerBlockBytes : kNodeBytes;
        (x->level > 0 ? inner : leaves) += 1;
        EXPECT_EQ(a.value()->BlockSize(p), want) << "node of level " << x->level;
      }));
      EXPECT_GT(inner, 1u);
      EXPECT_GT(leaves, inner);
      PMINDEX_ASSERT_OK(idx.verify());
      PMINDEX_ASSERT_OK(idx.close());
    }
    auto re = open_index(pool.value().get());
    PMINDEX_ASSERT_OK(re);
    PMINDEX_ASSERT_OK(re.value()->verify());
    for (const KV& kv : kvs)
      ASSERT_EQ(re.value()->lookup(kv.key).value_or(~0ull), kv.value) << kv.key;
    PMINDEX_ASSERT_OK(re.value()->close());
  }
}

// Readers (lookups and scans) while two writers insert and remove: the
// kept keys k*8 are always found with their values and scans see them in
// order, none missing.
TEST(TlbTreeConcurrency, ReadersDuringWritersSeeEveryKeptKey) {
  auto db = Db::CreateInMemory("tlbtree", "height=2,rebuild=2");
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  const Key kept = 3000;
  for (Key k = 0; k < kept; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 8, k));
  std::atomic<bool> stop{false};
  std::atomic<int> writers_done{0};
  std::atomic<uint64_t> bad{0};
  auto writer = [&](Key off) {
    for (int wave = 0; wave < 3; ++wave) {
      for (Key k = 0; k < kept; ++k)
        if (!d.Insert(k * 8 + off, wave).ok()) bad.fetch_add(1);
      for (Key k = 0; k < kept; k += 2)
        if (!d.Remove(k * 8 + off).ok()) bad.fetch_add(1);
      for (Key k = 1; k < kept; k += 2)
        if (!d.Remove(k * 8 + off).ok()) bad.fetch_add(1);
    }
    writers_done.fetch_add(1);
  };
  std::thread w1(writer, 1), w2(writer, 5);
  std::thread reader([&] {
    std::mt19937_64 rng(7);
    while (writers_done.load() < 2) {
      const Key k = rng() % kept;
      Result<Value> v = d.Get(k * 8);
      if (!v.ok() || v.value() != k) bad.fetch_add(1);
      std::vector<KV> part;
      d.Range(k * 8, std::nullopt, 50, &part);
      Key want = k;
      for (const KV& kv : part) {
        if (kv.key % 8 != 0) continue;
        if (kv.key != want * 8 || kv.value != want) bad.fetch_add(1);
        ++want;
      }
    }
  });
  w1.join();
  w2.join();
  reader.join();
  EXPECT_EQ(bad.load(), 0u);
  PMINDEX_ASSERT_OK(d.Verify());
  EXPECT_EQ(d.Stats().entries, kept);
}

}  // namespace
}  // namespace pmindex::tlbtree
