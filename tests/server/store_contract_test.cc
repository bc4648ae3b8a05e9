// The Store contract (server/store.h), run against every implementation:
// the test-only MapStore and, when the key-value store is built, the
// shipped KvBackedStore over an in-memory KvStore. And the item layer's
// read-modify-write loops under concurrent clients on each.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/items.h"
#include "tests/server/map_store.h"
#ifdef PMINDEX_SERVER_TEST_KV
#include "pmindex/kv.h"
#include "server/kv_backed_store.h"
#endif

namespace pmindex::server::testing {
namespace {

// Owns one Store implementation (and what it is built on).
class StoreFixture {
 public:
  virtual ~StoreFixture() = default;
  virtual Store& store() = 0;
};

class MapFixture final : public StoreFixture {
 public:
  Store& store() override { return store_; }

 private:
  MapStore store_;
};

#ifdef PMINDEX_SERVER_TEST_KV
class KvFixture final : public StoreFixture {
 public:
  KvFixture() {
    auto kv = KvStore::CreateInMemory("lbtree");
    EXPECT_TRUE(kv.ok()) << kv.status().ToString();
    kv_ = std::move(kv.value());
    store_ = std::make_unique<KvBackedStore>(*kv_);
  }
  ~KvFixture() override {
    store_.reset();
    EXPECT_TRUE(kv_->Close().ok());
  }
  Store& store() override { return *store_; }

 private:
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<KvBackedStore> store_;
};
#endif

std::vector<std::string> Implementations() {
#ifdef PMINDEX_SERVER_TEST_KV
  return {"map", "kvstore"};
#else
  return {"map"};
#endif
}

class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#ifdef PMINDEX_SERVER_TEST_KV
    if (GetParam() == "kvstore") {
      fixture_ = std::make_unique<KvFixture>();
      return;
    }
#endif
    fixture_ = std::make_unique<MapFixture>();
  }
  Store& s() { return fixture_->store(); }

  std::unique_ptr<StoreFixture> fixture_;
};

TEST_P(StoreContract, ConditionalWritesCompareVersions) {
  EXPECT_TRUE(s().Get("k").status().is_not_found());
  ASSERT_EQ(*s().PutIfAbsent("k", "v1"), WriteOutcome::kDone);
  EXPECT_EQ(*s().PutIfAbsent("k", "v2"), WriteOutcome::kPresent);
  Result<StoredValue> v1 = s().Get("k");
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->value, "v1");
  EXPECT_NE(v1->version, 0u);
  ASSERT_EQ(*s().PutIfVersion("k", "v2", v1->version), WriteOutcome::kDone);
  EXPECT_EQ(*s().PutIfVersion("k", "v3", v1->version), WriteOutcome::kChanged);
  EXPECT_EQ(*s().PutIfVersion("absent", "x", v1->version), WriteOutcome::kAbsent);
  Result<StoredValue> v2 = s().Get("k");
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->value, "v2");
  EXPECT_NE(v2->version, v1->version);
  EXPECT_EQ(*s().RemoveIfVersion("k", v1->version), WriteOutcome::kChanged);
  EXPECT_EQ(*s().RemoveIfVersion("k", v2->version), WriteOutcome::kDone);
  EXPECT_EQ(*s().RemoveIfVersion("k", v2->version), WriteOutcome::kAbsent);
  EXPECT_EQ(*s().Remove("k"), WriteOutcome::kAbsent);
  ASSERT_TRUE(s().Put("k", "v4").ok());
  EXPECT_EQ(*s().Remove("k"), WriteOutcome::kDone);
}

TEST_P(StoreContract, PutManyRangeAndRemoveAll) {
  std::vector<std::string> keys;
  for (int i = 0; i < 2500; ++i) keys.push_back("key" + std::to_string(100000 + i));
  keys.push_back(std::string("\0", 1));
  keys.push_back(std::string(s().max_key_bytes(), '\xff'));
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  for (const std::string& k : keys) pairs.emplace_back(k, k);
  ASSERT_TRUE(s().PutMany(pairs).ok());
  EXPECT_EQ(s().Info().keys, keys.size());
  std::vector<std::pair<std::string, std::string>> out;
  ASSERT_EQ(s().Range("", 3, &out), 3u);
  EXPECT_EQ(out[0].first, std::string("\0", 1));
  EXPECT_EQ(out[1].first, "key100000");
  out.clear();
  ASSERT_EQ(s().Range("key101000", 2, &out), 2u);
  EXPECT_EQ(out[1].first, "key101001");
  // More keys than one removal batch, the longest key of all included.
  ASSERT_TRUE(s().RemoveAll().ok());
  out.clear();
  EXPECT_EQ(s().Range("", 10, &out), 0u);
  EXPECT_EQ(s().Info().keys, 0u);
}

TEST_P(StoreContract, ConcurrentReadModifyWritesLoseNothing) {
  Stats stats;
  Items items(s(), stats);
  ASSERT_EQ(*items.Write(StoreMode::kSet, "n", "0", 0, 0), ItemOutcome::kDone);
  constexpr int kThreads = 4, kIncrements = 150;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIncrements; ++i) {
        uint64_t v = 0;
        int64_t w = 0;
        // Half memcached incr, half RESP INCRBY, on the same item.
        EXPECT_EQ(t % 2 ? *items.IncrDecr("n", 1, true, &v) : *items.IncrBy("n", 1, &w),
                  ItemOutcome::kDone);
      }
    });
  }
  for (auto& t : threads) t.join();
  Result<Item> n = items.Get("n");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->data, std::to_string(kThreads * kIncrements));
}

TEST_P(StoreContract, ConcurrentCasHasOneWinnerPerVersion) {
  Stats stats;
  Items items(s(), stats);
  ASSERT_EQ(*items.Write(StoreMode::kSet, "c", "start", 0, 0), ItemOutcome::kDone);
  const uint64_t cas = items.Get("c")->version;
  std::atomic<int> stored{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Result<ItemOutcome> r = items.Write(StoreMode::kCas, "c", std::to_string(t), 0, 0, cas);
      ASSERT_TRUE(r.ok());
      if (*r == ItemOutcome::kDone) {
        stored++;
      } else {
        EXPECT_EQ(*r, ItemOutcome::kExists);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stored.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreContract, ::testing::ValuesIn(Implementations()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pmindex::server::testing
