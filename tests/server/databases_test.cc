// Databases (server/databases.h) over both stores: the key encoding,
// isolation of databases, logical flushes and their reclamation, SWAPDB,
// the table across reopening, refusal of stores without databases,
// transactions across databases, the expiry sweep, and flushes racing
// writers.
#include "server/databases.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/items.h"
#include "server/key_slot.h"
#include "server/keyspace.h"
#include "server/maintenance.h"
#include "tests/server/map_store.h"
#include "tests/support/status.h"
#ifdef PMINDEX_SERVER_TEST_KV
#include "pmindex/kv.h"
#include "server/kv_backed_store.h"
#endif

namespace pmindex::server::testing {
namespace {

// prefix + n (appends: GCC 12 warns wrongly about "literal" + std::string
// with -Wrestrict).
std::string Name(std::string_view prefix, int n, std::string_view sep = {}, int m = -1) {
  std::string s(prefix);
  s.append(std::to_string(n)).append(sep);
  if (m >= 0) s.append(std::to_string(m));
  return s;
}

TEST(KeySlot, MatchesRedisCluster) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the XMODEM check value
  EXPECT_EQ(KeySlot("foo"), 12182);       // Redis Cluster's documented examples
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), KeySlot("foo{}{bar}"));  // an empty tag hashes the whole key
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
}

TEST(KeySlot, Crc16EightBytesAtATimeIsTheBytewiseCrc) {
  std::string s;
  uint32_t x = 12345;
  for (size_t n = 0; n <= 40; ++n) {
    EXPECT_EQ(Crc16(s), key_slot_detail::Crc16Bytewise(0, s)) << n;
    x = x * 1103515245u + 12345u;
    s.push_back(static_cast<char>(x >> 16));
  }
}

class StoreOwner {
 public:
  virtual ~StoreOwner() = default;
  virtual Store& store() = 0;
};

class MapOwner final : public StoreOwner {
 public:
  Store& store() override { return store_; }

 private:
  MapStore store_;
};

#ifdef PMINDEX_SERVER_TEST_KV
class KvOwner final : public StoreOwner {
 public:
  KvOwner() {
    auto kv = KvStore::CreateInMemory("lbtree");
    PMINDEX_EXPECT_OK(kv);
    kv_ = std::move(kv.value());
    store_ = std::make_unique<KvBackedStore>(*kv_);
  }
  ~KvOwner() override {
    store_.reset();
    PMINDEX_EXPECT_OK(kv_->Verify());
    PMINDEX_EXPECT_OK(kv_->Close());
  }
  Store& store() override { return *store_; }

 private:
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<KvBackedStore> store_;
};
#endif

std::vector<std::string> Kinds() {
#ifdef PMINDEX_SERVER_TEST_KV
  return {"map", "kvstore"};
#else
  return {"map"};
#endif
}

class DatabasesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#ifdef PMINDEX_SERVER_TEST_KV
    if (GetParam() == "kvstore") {
      owner_ = std::make_unique<KvOwner>();
    }
#endif
    if (owner_ == nullptr) owner_ = std::make_unique<MapOwner>();
    Reopen(4);
  }
  void TearDown() override { dbs_.reset(); }
  void Reopen(int n) {
    dbs_.reset();
    auto d = Databases::Open(base(), n);
    PMINDEX_ASSERT_OK(d);
    dbs_ = std::move(d.value());
  }
  Store& base() { return owner_->store(); }
  Databases& dbs() { return *dbs_; }
  uint64_t StoredKeys() {
    std::vector<std::pair<std::string, std::string>> all;
    return base().Range("", 1u << 30, &all);
  }
  std::string Value(int db, std::string_view key) {
    Result<StoredValue> r = dbs().db(db).Get(key);
    return r.ok() ? r->value : r.status().is_not_found() ? "(absent)" : r.status().ToString();
  }
  void ReclaimAll() {
    for (int i = 0; i < 100000 && dbs().reclaim_pending(); ++i) dbs().ReclaimStep(500);
    ASSERT_FALSE(dbs().reclaim_pending());
  }

  std::unique_ptr<StoreOwner> owner_;
  std::unique_ptr<Databases> dbs_;
};

TEST_P(DatabasesTest, DatabasesAreSeparateNamespacesOfSlotOrderedKeys) {
  PMINDEX_ASSERT_OK(dbs().db(0).Put("k", "zero"));
  PMINDEX_ASSERT_OK(dbs().db(1).Put("k", "one"));
  EXPECT_EQ(Value(0, "k"), "zero");
  EXPECT_EQ(Value(1, "k"), "one");
  EXPECT_EQ(Value(2, "k"), "(absent)");
  // The stored form: namespace, slot, kind, key.
  const std::string stored = Databases::Encode(dbs().ns(1), "k");
  EXPECT_EQ(stored.size(), Databases::kHeaderBytes + 1);
  EXPECT_EQ(stored.substr(0, 4), Databases::NamespacePrefix(dbs().ns(1)));
  EXPECT_EQ((static_cast<uint8_t>(stored[4]) << 8) | static_cast<uint8_t>(stored[5]), KeySlot("k"));
  EXPECT_EQ(stored[6], '\0');
  EXPECT_EQ(base().Get(stored)->value, "one");
  EXPECT_EQ(dbs().db(0).max_key_bytes(), base().max_key_bytes() - Databases::kHeaderBytes);
  // A view's range is its database's keys, ordered by (slot, key).
  for (const char* k : {"foo", "bar", "{bar}x", "zap"}) PMINDEX_ASSERT_OK(dbs().db(2).Put(k, k));
  std::vector<std::pair<std::string, std::string>> out;
  ASSERT_EQ(dbs().db(2).Range("", 100, &out), 4u);
  for (size_t i = 1; i < out.size(); ++i) {
    const auto a = std::make_pair(KeySlot(out[i - 1].first), out[i - 1].first);
    const auto b = std::make_pair(KeySlot(out[i].first), out[i].first);
    EXPECT_LT(a, b);
  }
  // From a key: that key and what follows it.
  out.clear();
  size_t after_bar = 0;
  for (const char* k : {"foo", "bar", "{bar}x", "zap"})
    after_bar += std::make_pair(KeySlot(k), std::string(k)) >=
                 std::make_pair(KeySlot("bar"), std::string("bar"));
  ASSERT_EQ(dbs().db(2).Range("bar", 100, &out), after_bar);
  EXPECT_EQ(out[0].first, "bar");  // bar and {bar}x share a slot
  EXPECT_EQ(out[1].first, "{bar}x");
  EXPECT_EQ(dbs().KeyCount(2), 4u);
  EXPECT_EQ(dbs().KeyCount(3), 0u);
}

TEST_P(DatabasesTest, FlushIsLogicalDurableAndReclaimedInSteps) {
  std::vector<std::string> keys;
  for (int i = 0; i < 1500; ++i) keys.push_back(Name("key", i));
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  for (const std::string& k : keys) pairs.emplace_back(k, k);
  PMINDEX_ASSERT_OK(dbs().db(0).PutMany(pairs));
  PMINDEX_ASSERT_OK(dbs().db(1).Put("other", "stays"));
  const uint64_t before = StoredKeys();
  EXPECT_EQ(before, 1 + keys.size() + 1);     // the table, db 0, db 1
  PMINDEX_ASSERT_OK(dbs().db(0).RemoveAll());  // FLUSHDB: Flush(0)
  // Gone at once for every read, nothing walked yet.
  EXPECT_EQ(Value(0, "key7"), "(absent)");
  EXPECT_EQ(dbs().KeyCount(0), 0u);
  EXPECT_EQ(Value(1, "other"), "stays");
  EXPECT_EQ(StoredKeys(), before);
  PMINDEX_ASSERT_OK(dbs().db(0).Put("key7", "new"));
  // The flush point survives a restart, and so does the work left.
  Reopen(4);
  EXPECT_EQ(Value(0, "key1"), "(absent)");
  EXPECT_EQ(Value(0, "key7"), "new");
  EXPECT_TRUE(dbs().reclaim_pending());
  // Bounded steps.
  EXPECT_EQ(dbs().ReclaimStep(1000), 1000u);
  EXPECT_EQ(StoredKeys(), before + 1 - 1000);
  ReclaimAll();
  EXPECT_EQ(StoredKeys(), 3u);  // the table, db 0's key7, db 1's key
  EXPECT_EQ(Value(0, "key7"), "new");
  // FLUSHALL: every database in one write.
  PMINDEX_ASSERT_OK(dbs().FlushAll());
  EXPECT_EQ(Value(0, "key7"), "(absent)");
  EXPECT_EQ(Value(1, "other"), "(absent)");
  ReclaimAll();
  EXPECT_EQ(StoredKeys(), 1u);
}

TEST_P(DatabasesTest, SwapExchangesDatabasesDurably) {
  PMINDEX_ASSERT_OK(dbs().db(0).Put("x", "in0"));
  PMINDEX_ASSERT_OK(dbs().db(3).Put("x", "in3"));
  PMINDEX_ASSERT_OK(dbs().db(3).Put("y", "y3"));
  PMINDEX_ASSERT_OK(dbs().Swap(0, 3));
  EXPECT_EQ(Value(0, "x"), "in3");
  EXPECT_EQ(Value(0, "y"), "y3");
  EXPECT_EQ(Value(3, "x"), "in0");
  Reopen(4);
  EXPECT_EQ(Value(0, "x"), "in3");
  EXPECT_EQ(Value(3, "y"), "(absent)");
  EXPECT_EQ(dbs().KeyCount(0), 2u);
  PMINDEX_ASSERT_OK(dbs().Swap(2, 2));
  EXPECT_FALSE(dbs().reclaim_pending());
}

TEST_P(DatabasesTest, TableGrowsAndKeepsDatabasesBeyondTheCount) {
  PMINDEX_ASSERT_OK(dbs().db(3).Put("k", "three"));
  Reopen(2);  // db 3 is not served, but kept
  EXPECT_EQ(dbs().count(), 2);
  Reopen(6);
  EXPECT_EQ(Value(3, "k"), "three");
  EXPECT_EQ(Value(5, "k"), "(absent)");
  PMINDEX_ASSERT_OK(dbs().db(5).Put("k", "five"));
  EXPECT_EQ(Value(5, "k"), "five");
  EXPECT_TRUE(Databases::Open(base(), 0).status().is_invalid_argument());
}

TEST(Databases, StoreWithoutTableIsRefusedNotEmpty) {
  {
    MapStore raw;
    PMINDEX_ASSERT_OK(raw.Put("user:1", std::string("\x50", 1) + "data"));  // an item, stored raw
    auto d = Databases::Open(raw, 16);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), Status::Code::kNotSupported);
    EXPECT_NE(d.status().ToString().find("without databases"), std::string::npos);
    // Nothing was written.
    EXPECT_EQ(raw.Info().keys, 1u);
  }
  {
    // A raw key that happens to be the table's key, holding an item.
    MapStore raw;
    PMINDEX_ASSERT_OK(raw.Put(Databases::kTableKey, std::string("\x50", 1)));
    EXPECT_EQ(Databases::Open(raw, 16).status().code(), Status::Code::kNotSupported);
  }
  {
    // A damaged table.
    MapStore raw;
    PMINDEX_ASSERT_OK(Databases::Open(raw, 2));
    std::string t = raw.Get(Databases::kTableKey)->value;
    PMINDEX_ASSERT_OK(raw.Put(Databases::kTableKey, t.substr(0, t.size() - 1)));
    EXPECT_TRUE(Databases::Open(raw, 2).status().is_corruption());
    t[t.size() - 5] = 0x7f;  // a namespace at or past next_ns
    PMINDEX_ASSERT_OK(raw.Put(Databases::kTableKey, t));
    EXPECT_TRUE(Databases::Open(raw, 2).status().is_corruption());
  }
}

TEST_P(DatabasesTest, TransactionSpansDatabasesAndIsOrderedBeforeALaterFlush) {
  PMINDEX_ASSERT_OK(dbs().db(1).Put("src", "v"));
  {
    std::unique_ptr<DbTransaction> t = dbs().Begin();
    Result<StoredValue> v = t->db(1).Get("src");
    PMINDEX_ASSERT_OK(v);
    PMINDEX_ASSERT_OK(t->db(2).Put("dst", v->value));
    EXPECT_EQ(*t->db(1).Remove("src"), WriteOutcome::kDone);
    std::vector<std::pair<std::string, std::string>> out;
    EXPECT_EQ(t->db(2).Range("", std::nullopt, 10, &out), 1u);
    EXPECT_EQ(Value(2, "dst"), "(absent)");
    PMINDEX_ASSERT_OK(t->Commit());
  }
  EXPECT_EQ(Value(2, "dst"), "v");
  EXPECT_EQ(Value(1, "src"), "(absent)");
  // Begun before a flush: its writes go to the flushed namespace, so the
  // flush removes them too.
  std::unique_ptr<DbTransaction> t = dbs().Begin();
  PMINDEX_ASSERT_OK(t->db(2).Put("late", "x"));
  PMINDEX_ASSERT_OK(dbs().Flush(2));
  PMINDEX_ASSERT_OK(t->Commit());
  t.reset();
  EXPECT_EQ(Value(2, "late"), "(absent)");
  EXPECT_EQ(Value(2, "dst"), "(absent)");
  ReclaimAll();
  EXPECT_EQ(StoredKeys(), 1u);
  // A single database's transaction (the view's Begin).
  std::unique_ptr<StoreTransaction> one = dbs().db(3).Begin();
  PMINDEX_ASSERT_OK(one->Put("a", "1"));
  PMINDEX_ASSERT_OK(one->Commit());
  EXPECT_EQ(Value(3, "a"), "1");
}

TEST_P(DatabasesTest, ExpireStepRemovesWhatThePredicateCallsExpiredInBoundedSteps) {
  for (int i = 0; i < 300; ++i) {
    PMINDEX_ASSERT_OK(dbs().db(i % 2).Put(Name("k", i), i % 3 == 0 ? "dead" : "live"));
  }
  PMINDEX_ASSERT_OK(dbs().db(3).Put("gone", "dead"));
  PMINDEX_ASSERT_OK(dbs().Flush(3));  // garbage is ReclaimStep's, not the sweep's
  auto dead = [](std::string_view v) { return v == "dead"; };
  size_t removed = 0;
  for (int step = 0; step < 20; ++step) removed += dbs().ExpireStep(50, dead);
  EXPECT_EQ(removed, 100u);
  EXPECT_EQ(dbs().KeyCount(0) + dbs().KeyCount(1), 200u);
  EXPECT_EQ(StoredKeys(), 1 + 200 + 1);
  EXPECT_EQ(dbs().ExpireStep(1000, dead), 0u);
}

TEST_P(DatabasesTest, FlushesRacingWritersLeaveNoOldKeyAndNoLeak) {
  // Writers write fresh keys into db 0 while db 0 is flushed over and
  // over and reclaimed: after each flush returns, no key acknowledged
  // before it started is visible; at the end the store holds exactly the
  // live databases' keys (nothing written into a reclaimed namespace).
  constexpr int kWriters = 3;
  std::atomic<bool> stop{false};
  std::vector<std::atomic<int>> acked(kWriters);
  for (auto& a : acked) a.store(-1);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; !stop.load(); ++i) {
        PMINDEX_ASSERT_OK(dbs().db(0).Put(Name("w", w, ":", i), "v"));
        acked[static_cast<size_t>(w)].store(i);
      }
    });
  }
  std::thread reclaimer([&] {
    while (!stop.load()) dbs().ReclaimStep(64);
  });
  for (int round = 0; round < 30; ++round) {
    std::vector<int> before(kWriters);
    for (int w = 0; w < kWriters; ++w)
      before[static_cast<size_t>(w)] = acked[static_cast<size_t>(w)].load();
    PMINDEX_ASSERT_OK(dbs().Flush(0));
    for (int w = 0; w < kWriters; ++w) {
      if (before[static_cast<size_t>(w)] < 0) continue;
      EXPECT_EQ(Value(0, Name("w", w, ":", before[static_cast<size_t>(w)])), "(absent)");
    }
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  reclaimer.join();
  ReclaimAll();
  EXPECT_EQ(StoredKeys(), 1 + dbs().KeyCount(0));
}

TEST_P(DatabasesTest, ExpireStepNeverRemovesANewerVersion) {
  PMINDEX_ASSERT_OK(dbs().db(0).Put("x", "dead"));
  // The second look at x (with its version, just before the conditional
  // removal) finds it expired, and a client writes x again right then.
  int looks = 0;
  auto expired = [&](std::string_view v) {
    if (v == "dead" && ++looks == 2) {
      PMINDEX_EXPECT_OK(dbs().db(0).Put("x", "dead"));
    }
    return v == "dead";
  };
  EXPECT_EQ(dbs().ExpireStep(100, expired), 0u);
  EXPECT_EQ(Value(0, "x"), "dead");  // the newer version stays
  EXPECT_EQ(dbs().ExpireStep(100, expired), 1u);
  EXPECT_EQ(Value(0, "x"), "(absent)");
}

TEST_P(DatabasesTest, MaintenanceExpiresItemsNobodyReadsAndReclaimsFlushes) {
  EXPECT_FALSE(dbs().AnyExpiry());
  Stats stats;
  int64_t now = 1'700'000'000'000;
  Keyspace keyspace(dbs(), stats, [&] { return now; });
  for (int i = 0; i < 600; ++i) {
    const int db = i % 3;
    const int64_t expiry = i % 2 == 0 ? now + 1000 : 0;
    ASSERT_EQ(*keyspace.db(db).Write(StoreMode::kSet, Name("k", i), "v", 0, expiry),
              ItemOutcome::kDone);
  }
  PMINDEX_ASSERT_OK(dbs().db(3).Put("raw", "not an item"));  // never expires
  Maintenance::Options o;
  o.batch = 64;
  o.expire_keys_per_cycle = 128;
  o.busy_ms = 1000;
  Maintenance m(dbs(), stats, [&] { return now; }, o);
  EXPECT_TRUE(dbs().AnyExpiry());
  Maintenance::Work w = m.Cycle();
  EXPECT_EQ(w.expired, 0u);  // nothing has expired yet
  now += 1000;
  size_t expired = 0;
  for (int cycle = 0; cycle < 100 && expired < 300; ++cycle) expired += m.Cycle().expired;
  EXPECT_EQ(expired, 300u);
  EXPECT_FALSE(dbs().AnyExpiry());  // the cycles no longer walk the items
  EXPECT_EQ(Stats::Read(stats.expired_keys), 300u);
  EXPECT_EQ(dbs().KeyCount(0) + dbs().KeyCount(1) + dbs().KeyCount(2), 300u);
  EXPECT_EQ(Value(3, "raw"), "not an item");
  // memcached's flush_all and RESP FLUSHDB go through Items::Flush: a
  // logical flush, reclaimed by the cycles.
  PMINDEX_ASSERT_OK(keyspace.db(1).Flush(0));
  EXPECT_EQ(dbs().KeyCount(1), 0u);
  size_t reclaimed = 0;
  for (int cycle = 0; cycle < 100 && dbs().reclaim_pending(); ++cycle)
    reclaimed += m.Cycle().reclaimed;
  EXPECT_EQ(reclaimed, 100u);
  EXPECT_EQ(StoredKeys(), 1 + 200 + 1);
  // The thread runs the same cycles.
  m.Start();
  m.Stop();
}

TEST(Databases, ASetReadsItsKeyOnceBeforeItsConditionalWrite) {
  // SET of a present or absent key: one read of the store under the
  // databases (the view's), then one conditional write; the key counters
  // take the record read. A collection in the way is read again (rare).
  MapStore map;
  auto d = Databases::Open(map, 2);
  PMINDEX_ASSERT_OK(d);
  Stats stats;
  Keyspace keyspace(**d, stats, [] { return int64_t{1'700'000'000'000}; });
  Items& db0 = keyspace.db(0);
  for (const int64_t expiry : {int64_t{0}, int64_t{1'800'000'000'000}, int64_t{0}}) {
    const uint64_t before = map.gets();
    ASSERT_EQ(*db0.Write(StoreMode::kSet, "k", "v", 0, expiry), ItemOutcome::kDone);
    EXPECT_EQ(map.gets() - before, 1u) << "expiry " << expiry;
  }
  EXPECT_EQ((*d)->Counts(0).keys, 1);
  EXPECT_EQ((*d)->Counts(0).expires, 0);
}

TEST_P(DatabasesTest, KeyCountersFollowEveryWritePathAndReopen) {
  // The counters (DBSIZE, INFO keyspace) against a walk of every served
  // database, after each kind of write.
  auto same_as_walk = [this](const char* when) {
    for (int i = 0; i < dbs().count(); ++i) {
      const KeyCounts c = dbs().Counts(i), w = dbs().CountByWalk(i);
      EXPECT_EQ(c.keys, w.keys) << when << ", db " << i;
      EXPECT_EQ(c.expires, w.expires) << when << ", db " << i;
    }
  };
  Stats stats;
  int64_t now = 1'700'000'000'000;
  Keyspace keyspace(dbs(), stats, [&] { return now; });
  Items& db0 = keyspace.db(0);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(*db0.Write(StoreMode::kSet, Name("k", i), "v", 0, i < 5 ? now + 1000 : 0),
              ItemOutcome::kDone);
  }
  EXPECT_EQ(dbs().Counts(0).keys, 20);
  EXPECT_EQ(dbs().Counts(0).expires, 5);
  // Overwrites: same count; an expiry added to one, dropped from two.
  ASSERT_EQ(*db0.Write(StoreMode::kSet, "k10", "w", 0, now + 5), ItemOutcome::kDone);
  ASSERT_EQ(*db0.Write(StoreMode::kSet, "k0", "w", 0, 0), ItemOutcome::kDone);
  ASSERT_EQ(*db0.Write(StoreMode::kSet, "k1", "w", 0, 0), ItemOutcome::kDone);
  EXPECT_EQ(dbs().Counts(0).keys, 20);
  EXPECT_EQ(dbs().Counts(0).expires, 4);
  same_as_walk("items");
  // The view's own calls.
  Store& v1 = dbs().db(1);
  PMINDEX_ASSERT_OK(v1.Put("a", "1"));
  ASSERT_EQ(*v1.PutIfAbsent("b", "1"), WriteOutcome::kDone);
  ASSERT_EQ(*v1.PutIfAbsent("b", "2"), WriteOutcome::kPresent);
  PMINDEX_ASSERT_OK(v1.PutMany({{"c", "1"}, {"d", "1"}, {"a", "2"}, {"c", "3"}}));
  EXPECT_EQ(dbs().KeyCount(1), 4u);
  Result<StoredValue> b = v1.Get("b");
  PMINDEX_ASSERT_OK(b);
  ASSERT_EQ(*v1.PutIfVersion("b", "3", b->version), WriteOutcome::kDone);
  ASSERT_EQ(*v1.PutIfVersion("b", "4", b->version), WriteOutcome::kChanged);
  ASSERT_EQ(*v1.Remove("a"), WriteOutcome::kDone);
  ASSERT_EQ(*v1.Remove("a"), WriteOutcome::kAbsent);
  ASSERT_EQ(*v1.RemoveIfVersion("b", b->version), WriteOutcome::kChanged);
  b = v1.Get("b");
  ASSERT_EQ(*v1.RemoveIfVersion("b", b->version), WriteOutcome::kDone);
  EXPECT_EQ(dbs().KeyCount(1), 2u);
  // PutUnless: refused by what the key holds (nothing changes), else a
  // write like any other.
  auto starts_with_r = [](std::optional<std::string_view> p) { return p && p->starts_with("r"); };
  ASSERT_EQ(*v1.PutUnless("e", "r1", starts_with_r), WriteOutcome::kDone);
  ASSERT_EQ(*v1.PutUnless("e", "2", starts_with_r), WriteOutcome::kPresent);
  EXPECT_EQ(Value(1, "e"), "r1");
  ASSERT_EQ(*v1.PutUnless("d", "r2", starts_with_r), WriteOutcome::kDone);
  EXPECT_EQ(Value(1, "d"), "r2");
  EXPECT_EQ(dbs().KeyCount(1), 3u);
  same_as_walk("view");
  // Transactions count at commit, and an aborted one not at all.
  {
    std::unique_ptr<DbTransaction> t = dbs().Begin();
    PMINDEX_ASSERT_OK(t->db(2).Put("x", "1"));
    PMINDEX_ASSERT_OK(t->db(2).Put("x", "2"));
    PMINDEX_ASSERT_OK(t->db(2).Put("y", "1"));
    ASSERT_EQ(*t->db(1).Remove("c"), WriteOutcome::kDone);
    EXPECT_EQ(dbs().KeyCount(2), 0u);
    PMINDEX_ASSERT_OK(t->Commit());
  }
  EXPECT_EQ(dbs().KeyCount(2), 2u);
  EXPECT_EQ(dbs().KeyCount(1), 2u);
  {
    std::unique_ptr<DbTransaction> t = dbs().Begin();
    PMINDEX_ASSERT_OK(t->db(2).Put("z", "1"));
    t->Abort();
  }
  EXPECT_EQ(dbs().KeyCount(2), 2u);
  // A flush inside a transaction: the flushed database counts what the
  // transaction wrote after it.
  {
    std::unique_ptr<DbTransaction> t = dbs().Begin();
    PMINDEX_ASSERT_OK(t->db(2).Put("w", "1"));
    PMINDEX_ASSERT_OK(t->Flush(2));
    PMINDEX_ASSERT_OK(t->db(2).Put("after", "1"));
    PMINDEX_ASSERT_OK(t->Commit());
  }
  EXPECT_EQ(dbs().KeyCount(2), 1u);
  same_as_walk("transactions");
  // SWAPDB exchanges the counts; FLUSHDB and FLUSHALL zero them.
  PMINDEX_ASSERT_OK(dbs().Swap(0, 3));
  EXPECT_EQ(dbs().KeyCount(0), 0u);
  EXPECT_EQ(dbs().KeyCount(3), 20u);
  EXPECT_EQ(dbs().Counts(3).expires, 4);
  PMINDEX_ASSERT_OK(dbs().Flush(1));
  EXPECT_EQ(dbs().KeyCount(1), 0u);
  same_as_walk("swap and flush");
  // The expiry sweep.
  now += 2000;
  size_t expired = 0;
  for (int step = 0; step < 10; ++step) {
    expired +=
        dbs().ExpireStep(100, [&](std::string_view v) { return item_codec::ExpiredAt(v, now); });
  }
  EXPECT_EQ(expired, 4u);
  EXPECT_EQ(dbs().KeyCount(3), 16u);
  EXPECT_EQ(dbs().Counts(3).expires, 0);
  ReclaimAll();
  same_as_walk("expiry and reclamation");
  // A reopen (a restart) counts again, once.
  Reopen(4);
  EXPECT_EQ(dbs().KeyCount(3), 16u);
  EXPECT_EQ(dbs().KeyCount(2), 1u);
  same_as_walk("reopen");
  PMINDEX_ASSERT_OK(dbs().FlushAll());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(dbs().KeyCount(i), 0u);
}

TEST_P(DatabasesTest, KeyCountersStayExactUnderConcurrentWritersOfTheSameKeys) {
  // Threads set and delete the same few keys, some with an expiry: every
  // insert and removal is counted once, whoever wins each race.
  constexpr int kThreads = 3, kOps = 400, kKeys = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Stats stats;
      Keyspace keyspace(dbs(), stats, [] { return int64_t{1'700'000'000'000}; });
      for (int i = 0; i < kOps; ++i) {
        const std::string key = Name("k", (i * 7 + t) % kKeys);
        if ((i + t) % 3 == 0) {
          PMINDEX_ASSERT_OK(dbs().db(0).Remove(key));
        } else {
          const int64_t expiry = i % 2 == 0 ? int64_t{1'800'000'000'000} : 0;
          PMINDEX_ASSERT_OK(keyspace.db(0).Write(StoreMode::kSet, key, "v", 0, expiry));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const KeyCounts c = dbs().Counts(0), w = dbs().CountByWalk(0);
  EXPECT_EQ(c.keys, w.keys);
  EXPECT_EQ(c.expires, w.expires);
}

INSTANTIATE_TEST_SUITE_P(Stores, DatabasesTest, ::testing::ValuesIn(Kinds()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pmindex::server::testing
