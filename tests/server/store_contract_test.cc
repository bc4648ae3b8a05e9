// The Store contract (server/store.h), run against every implementation:
// the test-only MapStore and, when the key-value store is built, the
// shipped KvBackedStore over an in-memory KvStore. And the item layer's
// read-modify-write loops under concurrent clients on each.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/items.h"
#include "tests/server/map_store.h"
#include "tests/support/status.h"
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
    PMINDEX_EXPECT_OK(kv);
    kv_ = std::move(kv.value());
    store_ = std::make_unique<KvBackedStore>(*kv_);
  }
  ~KvFixture() override {
    store_.reset();
    PMINDEX_EXPECT_OK(kv_->Close());
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
  PMINDEX_ASSERT_OK(v1);
  EXPECT_EQ(v1->value, "v1");
  EXPECT_NE(v1->version, 0u);
  ASSERT_EQ(*s().PutIfVersion("k", "v2", v1->version), WriteOutcome::kDone);
  EXPECT_EQ(*s().PutIfVersion("k", "v3", v1->version), WriteOutcome::kChanged);
  EXPECT_EQ(*s().PutIfVersion("absent", "x", v1->version), WriteOutcome::kAbsent);
  Result<StoredValue> v2 = s().Get("k");
  PMINDEX_ASSERT_OK(v2);
  EXPECT_EQ(v2->value, "v2");
  EXPECT_NE(v2->version, v1->version);
  EXPECT_EQ(*s().RemoveIfVersion("k", v1->version), WriteOutcome::kChanged);
  EXPECT_EQ(*s().RemoveIfVersion("k", v2->version), WriteOutcome::kDone);
  EXPECT_EQ(*s().RemoveIfVersion("k", v2->version), WriteOutcome::kAbsent);
  EXPECT_EQ(*s().Remove("k"), WriteOutcome::kAbsent);
  PMINDEX_ASSERT_OK(s().Put("k", "v4"));
  EXPECT_EQ(*s().Remove("k"), WriteOutcome::kDone);
}

TEST_P(StoreContract, PutUnlessAndTheWritesOfARecordRead) {
  auto starts_with_r = [](std::optional<std::string_view> p) { return p && p->starts_with("r"); };
  ASSERT_EQ(*s().PutUnless("k", "r1", starts_with_r), WriteOutcome::kDone);
  ASSERT_EQ(*s().PutUnless("k", "v2", starts_with_r), WriteOutcome::kPresent);
  Result<StoredValue> r1 = s().Get("k");
  PMINDEX_ASSERT_OK(r1);
  EXPECT_EQ(r1->value, "r1");
  ASSERT_EQ(*s().PutIfRead("k", "v3", *r1), WriteOutcome::kDone);
  EXPECT_EQ(*s().PutIfRead("k", "v4", *r1), WriteOutcome::kChanged);
  ASSERT_EQ(*s().PutUnless("k", "v5", starts_with_r), WriteOutcome::kDone);
  Result<StoredValue> v5 = s().Get("k");
  PMINDEX_ASSERT_OK(v5);
  EXPECT_EQ(v5->value, "v5");
  EXPECT_EQ(*s().RemoveIfRead("k", *r1), WriteOutcome::kChanged);
  // The test's last call saw what the write replaced: nothing, or the
  // value (at least its first kPeekBytes bytes).
  std::vector<std::optional<std::string>> seen;
  auto note = [&seen](std::optional<std::string_view> p) {
    seen.emplace_back(p ? std::optional<std::string>(p->substr(0, Store::kPeekBytes))
                        : std::nullopt);
    return false;
  };
  ASSERT_EQ(*s().PutUnless("fresh", "a", note), WriteOutcome::kDone);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), std::nullopt);
  const std::string long_value(100, 'x');
  PMINDEX_ASSERT_OK(s().Put("fresh", long_value));
  seen.clear();
  ASSERT_EQ(*s().PutUnless("fresh", "b", note), WriteOutcome::kDone);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), long_value.substr(0, Store::kPeekBytes));
  EXPECT_EQ(s().Get("fresh")->value, "b");
  EXPECT_EQ(*s().RemoveIfRead("k", *v5), WriteOutcome::kDone);
  EXPECT_EQ(*s().RemoveIfRead("k", *v5), WriteOutcome::kAbsent);
}

TEST_P(StoreContract, PutManyRangeAndRemoveAll) {
  std::vector<std::string> keys;
  for (int i = 0; i < 2500; ++i) keys.push_back("key" + std::to_string(100000 + i));
  keys.push_back(std::string("\0", 1));
  keys.push_back(std::string(s().max_key_bytes(), '\xff'));
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  for (const std::string& k : keys) pairs.emplace_back(k, k);
  PMINDEX_ASSERT_OK(s().PutMany(pairs));
  EXPECT_EQ(s().Info().keys, keys.size());
  std::vector<std::pair<std::string, std::string>> out;
  ASSERT_EQ(s().Range("", 3, &out), 3u);
  EXPECT_EQ(out[0].first, std::string("\0", 1));
  EXPECT_EQ(out[1].first, "key100000");
  out.clear();
  ASSERT_EQ(s().Range("key101000", 2, &out), 2u);
  EXPECT_EQ(out[1].first, "key101001");
  // More keys than one removal batch, the longest key of all included.
  PMINDEX_ASSERT_OK(s().RemoveAll());
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
  PMINDEX_ASSERT_OK(n);
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
      PMINDEX_ASSERT_OK(r);
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

TEST_P(StoreContract, TransactionSeesOwnWritesAndCommitsAllAtOnce) {
  PMINDEX_ASSERT_OK(s().Put("c", "old"));
  PMINDEX_ASSERT_OK(s().Put("d", "keep"));
  std::unique_ptr<StoreTransaction> tx = s().Begin();
  EXPECT_TRUE(tx->Get("a").status().is_not_found());
  PMINDEX_ASSERT_OK(tx->Put("a", "1"));
  PMINDEX_ASSERT_OK(tx->Put("b", "2"));
  EXPECT_EQ(*tx->Remove("c"), WriteOutcome::kDone);
  EXPECT_EQ(*tx->Remove("never"), WriteOutcome::kAbsent);
  Result<StoredValue> a = tx->Get("a");
  PMINDEX_ASSERT_OK(a);
  EXPECT_EQ(a->value, "1");
  EXPECT_NE(a->version, 0u);
  EXPECT_TRUE(tx->Get("c").status().is_not_found());
  std::vector<std::pair<std::string, std::string>> out;
  ASSERT_EQ(tx->Range("", std::nullopt, 10, &out), 3u);
  EXPECT_EQ(out[0].first, "a");
  EXPECT_EQ(out[1].first, "b");
  EXPECT_EQ(out[2].first, "d");
  out.clear();
  ASSERT_EQ(tx->Range("b", std::string_view("d"), 10, &out), 1u);
  // Nothing is visible before the commit.
  EXPECT_TRUE(s().Get("a").status().is_not_found());
  EXPECT_EQ(s().Get("c")->value, "old");
  PMINDEX_ASSERT_OK(tx->Commit());
  Result<StoredValue> a2 = s().Get("a"), b2 = s().Get("b");
  PMINDEX_ASSERT_OK(a2);
  PMINDEX_ASSERT_OK(b2);
  EXPECT_EQ(a2->value, "1");
  EXPECT_EQ(b2->value, "2");
  EXPECT_EQ(a2->version, b2->version);  // one commit, one version
  EXPECT_TRUE(s().Get("c").status().is_not_found());

  std::unique_ptr<StoreTransaction> aborted = s().Begin();
  PMINDEX_ASSERT_OK(aborted->Put("a", "x"));
  aborted->Abort();
  EXPECT_EQ(s().Get("a")->value, "1");
  // Bounded Range of the store itself.
  out.clear();
  ASSERT_EQ(s().Range("a", std::string_view("b"), 10, &out), 1u);
  EXPECT_EQ(out[0].first, "a");
}

TEST_P(StoreContract, TransactionAbortsWhenAKeyItReadChanged) {
  PMINDEX_ASSERT_OK(s().Put("k", "0"));
  // A present key read, then written by another client.
  for (int round = 0; round < 4; ++round) {
    std::unique_ptr<StoreTransaction> tx = s().Begin();
    const bool absent_key = round == 2;
    const std::string key = absent_key ? "fresh" + std::to_string(round) : "k";
    Result<StoredValue> r = tx->Get(key);
    ASSERT_EQ(r.ok(), !absent_key);
    PMINDEX_ASSERT_OK(tx->Put("out", "x"));
    if (round == 3) {
      // Removed by this transaction, changed by another.
      ASSERT_EQ(*tx->Remove("k"), WriteOutcome::kDone);
    }
    const Status other = round == 1 ? [&] {
      Result<WriteOutcome> w = s().Remove(key);
      return w.ok() ? Status::OK() : w.status();
    }()
                                    : s().Put(key, "other");
    PMINDEX_ASSERT_OK(other);
    Status c = tx->Commit();
    EXPECT_TRUE(c.is_aborted()) << round << ": " << c.ToString();
    EXPECT_TRUE(s().Get("out").status().is_not_found()) << round;
    if (round == 1) {
      PMINDEX_ASSERT_OK(s().Put("k", "back"));
    }
  }
  // A read-only transaction whose key changed aborts too; unchanged, it
  // commits (and changes nothing).
  std::unique_ptr<StoreTransaction> ro = s().Begin();
  PMINDEX_ASSERT_OK(ro->Get("k"));
  PMINDEX_ASSERT_OK(s().Put("k", "again"));
  EXPECT_TRUE(ro->Commit().is_aborted());
  std::unique_ptr<StoreTransaction> ro2 = s().Begin();
  PMINDEX_ASSERT_OK(ro2->Get("k"));
  PMINDEX_EXPECT_OK(ro2->Commit());
}

TEST_P(StoreContract, ConcurrentTransfersKeepTheSum) {
  // Transactions moving units between two keys, retried on Aborted: the
  // sum stays, and every transfer is applied exactly once.
  PMINDEX_ASSERT_OK(s().Put("x", "1000"));
  PMINDEX_ASSERT_OK(s().Put("y", "0"));
  constexpr int kThreads = 4, kTransfers = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kTransfers; ++i) {
        for (;;) {
          std::unique_ptr<StoreTransaction> tx = s().Begin();
          Result<StoredValue> x = tx->Get("x");
          Result<StoredValue> y = tx->Get("y");
          if (!x.ok() || !y.ok()) {
            ASSERT_TRUE(x.status().is_aborted() || y.status().is_aborted());
            continue;
          }
          PMINDEX_ASSERT_OK(tx->Put("x", std::to_string(std::stoi(x->value) - 1)));
          PMINDEX_ASSERT_OK(tx->Put("y", std::to_string(std::stoi(y->value) + 1)));
          Status c = tx->Commit();
          if (c.ok()) break;
          ASSERT_TRUE(c.is_aborted()) << c.ToString();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(s().Get("x")->value, std::to_string(1000 - kThreads * kTransfers));
  EXPECT_EQ(s().Get("y")->value, std::to_string(kThreads * kTransfers));
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreContract, ::testing::ValuesIn(Implementations()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pmindex::server::testing
