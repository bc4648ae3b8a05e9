// The user's handle, pmindex::Db (include/pmindex/db.h): create/open round
// trips for every persistent kind, refusals that write nothing, the data
// calls against a std::map oracle, Range bounds, the iterator (alone and
// with a concurrent writer), Close and every call after it.
#include "pmindex/db.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "pm/pool.h"
#include "support/kinds.h"
#include "support/temp_files.h"

namespace pmindex {
namespace {

using testing::Snapshot;
using testing::TempDir;
using Code = Status::Code;

constexpr Key kMax = UINT64_MAX;

// Db::Kinds() lists every registered kind, this binary's fixtures
// (support/kinds.h) included; the per-kind tests leave those out.
bool IsFixture(const KindInfo& k) { return testing::TestKinds::Get().IsFixture(k.name); }

std::vector<std::string> PersistentKinds() {
  std::vector<std::string> out;
  for (const KindInfo& k : Db::Kinds()) {
    if (k.persistent && !IsFixture(k)) out.push_back(k.name);
  }
  return out;
}

// Every kind that stores what it is given ("null" stores nothing), each
// created with CreateInMemory.
std::vector<std::string> DataKinds() {
  std::vector<std::string> out;
  for (const KindInfo& k : Db::Kinds()) {
    if (k.name != "null" && !IsFixture(k)) out.push_back(k.name);
  }
  return out;
}

std::unique_ptr<Db> MustCreateInMemory(const std::string& kind, std::string_view options = {}) {
  auto db = Db::CreateInMemory(kind, options);
  EXPECT_TRUE(db.ok()) << kind << ": " << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

std::vector<KV> Walk(const Db& db) {
  std::vector<KV> out;
  auto it = db.NewIterator();
  for (it->SeekToFirst(); it->Valid(); it->Next()) out.push_back({it->key(), it->value()});
  return out;
}

std::vector<KV> OracleRange(const std::map<Key, Value>& m, Key from, std::optional<Key> to,
                            size_t limit) {
  std::vector<KV> out;
  for (auto it = m.lower_bound(from); it != m.end() && out.size() < limit; ++it) {
    if (to && it->first >= *to) break;
    out.push_back({it->first, it->second});
  }
  return out;
}

std::vector<KV> AsVector(const std::map<Key, Value>& m) {
  return OracleRange(m, 0, std::nullopt, SIZE_MAX);
}

// Keys spread over the whole range, 0 and UINT64_MAX included.
std::map<Key, Value> SpreadKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<Key, Value> m{{0, 7}, {1, 8}, {kMax - 1, 9}, {kMax, 10}};
  while (m.size() < n) {
    Key k = rng();
    m[k] = k ^ 0x5555;
  }
  return m;
}

void Fill(Db& db, const std::map<Key, Value>& m) {
  for (auto& [k, v] : m) ASSERT_TRUE(db.Insert(k, v).ok()) << db.kind() << " key " << k;
}

TEST(DbTest, KindsAreSortedAndIncludeBothSorts) {
  std::vector<KindInfo> kinds = Db::Kinds();
  ASSERT_FALSE(kinds.empty());
  EXPECT_TRUE(std::is_sorted(kinds.begin(), kinds.end(),
                             [](const KindInfo& a, const KindInfo& b) { return a.name < b.name; }));
  bool lbtree = false, dram = false;
  for (const KindInfo& k : kinds) {
    // The only kinds beyond the library's are this binary's fixtures.
    if (k.name.rfind("probe-", 0) == 0) {
      EXPECT_TRUE(IsFixture(k)) << k.name;
    }
    if (k.name == "lbtree") lbtree = k.persistent && !k.options_help.empty();
    if (k.name == "dram-btree") dram = !k.persistent;
  }
  EXPECT_TRUE(lbtree);
  EXPECT_TRUE(dram);
}

TEST(DbTest, CreateCloseOpenRoundTripEveryPersistentKind) {
  TempDir dir;
  std::map<Key, Value> m = SpreadKeys(3000, 1);
  for (const std::string& kind : PersistentKinds()) {
    SCOPED_TRACE(kind);
    const std::string path = dir.path(kind + ".pool");
    {
      auto db = Db::Create(path, kind, "", DbOptions{.size = 16ull << 20, .max_size = 1ull << 30});
      ASSERT_TRUE(db.ok()) << db.status().ToString();
      Db& d = *db.value();
      EXPECT_EQ(d.kind(), kind);
      EXPECT_TRUE(d.persistent());
      EXPECT_EQ(d.path(), path);
      EXPECT_NE(d.durability(), "volatile");
      Fill(d, m);
      ASSERT_TRUE(d.Update(0, 70).ok());
      ASSERT_TRUE(d.Close().ok());
    }
    m[0] = 70;
    auto info = Pool::Inspect(path);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_TRUE(info.value().clean);
    EXPECT_EQ(info.value().kind, kind);

    auto db = Db::Open(path);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Db& d = *db.value();
    EXPECT_EQ(d.kind(), kind);
    EXPECT_EQ(d.options(), std::string(info.value().index_options));
    EXPECT_EQ(d.Count(), m.size());
    EXPECT_TRUE(d.Verify().ok());
    EXPECT_EQ(Walk(d), AsVector(m));
    for (auto& [k, v] : m) {
      auto got = d.Get(k);
      ASSERT_TRUE(got.ok()) << k;
      ASSERT_EQ(got.value(), v);
    }
    EXPECT_TRUE(d.Sync().ok());
    ASSERT_TRUE(d.Close().ok());
  }
}

TEST(DbTest, OptionsAreStoredAndReadBack) {
  TempDir dir;
  const std::string path = dir.path("p");
  {
    auto db = Db::Create(path, "lbtree", "node=512");
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_EQ(db.value()->options(), "node=512");
  }
  auto db = Db::Open(path, "lbtree");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(db.value()->options(), "node=512");
}

TEST(DbTest, DbOptionsPoolIdIsStoredAndTheIndexWorksWithIt) {
  TempDir dir;
  const std::string path = dir.path("id");
  DbOptions o;
  o.pool_id = 4242;
  {
    auto db = Db::Create(path, "fptree", "", o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Fill(*db.value(), SpreadKeys(2000, 5));
    ASSERT_TRUE(db.value()->Close().ok());
  }
  auto info = Pool::Inspect(path);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info.value().pool_id, 4242);
  auto db = Db::Open(path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(db.value()->Count(), 2000u);
  EXPECT_TRUE(db.value()->Verify().ok());
}

TEST(DbTest, PoolGrowsIntoSegmentsAndReopens) {
  TempDir dir;
  const std::string path = dir.path("grow");
  DbOptions o{.size = 4ull << 20, .max_size = 256ull << 20, .segment_size = 4ull << 20};
  const uint64_t n = 200000;
  {
    auto db = Db::Create(path, "lbtree", "", o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    for (uint64_t k = 0; k < n; ++k) ASSERT_TRUE(db.value()->Insert(k * 3, k).ok()) << k;
  }  // the destructor closes
  EXPECT_TRUE(std::filesystem::exists(path + ".1"));
  auto db = Db::Open(path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(db.value()->Count(), n);
  EXPECT_EQ(db.value()->Get((n - 1) * 3).value(), n - 1);
}

TEST(DbTest, OpenOfAMissingPathIsNotFound) {
  TempDir dir;
  auto db = Db::Open(dir.path("nothing-here"));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Code::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.path("nothing-here")));
}

TEST(DbTest, CreateOnAnExistingPathIsAlreadyExistsAndChangesNothing) {
  TempDir dir;
  const std::string pool = dir.path("pool");
  {
    auto db = Db::Create(pool, "lbtree");
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE(db.value()->Insert(1, 2).ok());
  }
  const std::string other = dir.path("other");
  {
    std::ofstream(other) << "not a pool";
  }
  for (const std::string& path : {pool, other}) {
    Snapshot before = Snapshot::Of(path);
    auto db = Db::Create(path, "fptree");
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), Code::kAlreadyExists) << db.status().ToString();
    EXPECT_TRUE(Snapshot::Of(path) == before) << path;
  }
  auto db = Db::Open(pool);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(db.value()->Get(1).value(), 2u);
}

TEST(DbTest, CreateWithABadArgumentWritesNoFile) {
  TempDir dir;
  const std::string path = dir.path("bad");
  struct Case {
    std::string kind, options;
    DbOptions o;
  };
  const Case cases[] = {
      {"lbtree", "node=7", {}},
      {"lbtree", "no_such_option=1", {}},
      {"lbtree", "node", {}},
      {"no-such-kind", "", {}},
      {"dram-btree", "", {}},
      {"lbtree", "", DbOptions{.size = 1ull << 20}},
      {"lbtree", "", DbOptions{.size = 64ull << 20, .max_size = 32ull << 20}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.kind + " / " + c.options);
    auto db = Db::Create(path, c.kind, c.options, c.o);
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), Code::kInvalidArgument) << db.status().ToString();
    EXPECT_TRUE(std::filesystem::is_empty(std::filesystem::path(path).parent_path()));
  }
}

TEST(DbTest, OpenWithTheWrongExpectedKindIsWrongKindAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.path("p");
  ASSERT_TRUE(Db::Create(path, "wbtree").ok());  // closed by the destructor
  Snapshot before = Snapshot::Of(path);
  auto db = Db::Open(path, "lbtree");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Code::kWrongKind) << db.status().ToString();
  EXPECT_TRUE(Snapshot::Of(path) == before);
  auto ok = Db::Open(path, "wbtree");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok.value()->kind(), "wbtree");
}

TEST(DbTest, VolatileKindsOnlyInMemory) {
  TempDir dir;
  auto refused = Db::Create(dir.path("v"), "dram-btree");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("CreateInMemory"), std::string_view::npos)
      << refused.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.path("v")));

  auto db = Db::CreateInMemory("dram-btree");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Db& d = *db.value();
  EXPECT_FALSE(d.persistent());
  EXPECT_EQ(d.durability(), "volatile");
  EXPECT_EQ(d.path(), "");
  ASSERT_TRUE(d.Insert(3, 4).ok());
  EXPECT_EQ(d.Get(3).value(), 4u);
  EXPECT_TRUE(d.Sync().ok());
  EXPECT_TRUE(d.Close().ok());

  auto bad = Db::CreateInMemory("dram-btree", "no_such_option=1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  auto unknown = Db::CreateInMemory("no-such-kind");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
}

TEST(DbTest, PersistentKindInMemory) {
  auto db = Db::CreateInMemory("lbtree", "node=512", DbOptions{.size = 8ull << 20});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Db& d = *db.value();
  EXPECT_TRUE(d.persistent());
  EXPECT_EQ(d.durability(), "volatile");
  EXPECT_EQ(d.path(), "");
  EXPECT_EQ(d.options(), "node=512");
  ASSERT_TRUE(d.Insert(kMax, 1).ok());
  EXPECT_EQ(d.Get(kMax).value(), 1u);

  auto bad = Db::CreateInMemory("lbtree", "node=7");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  auto small = Db::CreateInMemory("lbtree", "", DbOptions{.size = 1ull << 20});
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), Code::kInvalidArgument);
}

TEST(DbTest, DataCallsMatchAMapOracleEveryKind) {
  for (const std::string& kind : DataKinds()) {
    SCOPED_TRACE(kind);
    auto db = MustCreateInMemory(kind);
    ASSERT_NE(db, nullptr);
    std::map<Key, Value> m;
    std::mt19937_64 rng(42);
    // A small key space (edges included) so that every call meets both
    // present and absent keys.
    auto pick = [&] {
      uint64_t r = rng() % 1200;
      return r < 1000 ? r * 7 : kMax - (r - 1000);
    };
    for (int i = 0; i < 20000; ++i) {
      Key k = pick();
      Value v = rng();
      bool present = m.count(k) != 0;
      switch (rng() % 6) {
        case 0: {
          Status s = db->Insert(k, v);
          ASSERT_EQ(s.code(), present ? Code::kAlreadyExists : Code::kOk) << k;
          if (!present) m[k] = v;
          break;
        }
        case 1: {
          Status s = db->Update(k, v);
          ASSERT_EQ(s.code(), present ? Code::kOk : Code::kNotFound) << k;
          if (present) m[k] = v;
          break;
        }
        case 2:
          ASSERT_TRUE(db->Upsert(k, v).ok()) << k;
          m[k] = v;
          break;
        case 3: {
          Status s = db->Remove(k);
          ASSERT_EQ(s.code(), present ? Code::kOk : Code::kNotFound) << k;
          m.erase(k);
          break;
        }
        default: {
          auto got = db->Get(k);
          ASSERT_EQ(got.ok(), present) << k;
          if (present) {
            ASSERT_EQ(got.value(), m[k]);
          } else {
            ASSERT_EQ(got.status().code(), Code::kNotFound);
          }
          ASSERT_EQ(db->Exists(k), present);
          break;
        }
      }
    }
    EXPECT_EQ(db->Count(), m.size());
    EXPECT_EQ(Walk(*db), AsVector(m));
    EXPECT_TRUE(db->Verify().ok());
  }
}

TEST(DbTest, RangeBounds) {
  for (const std::string& kind : DataKinds()) {
    SCOPED_TRACE(kind);
    auto db = MustCreateInMemory(kind);
    ASSERT_NE(db, nullptr);
    std::map<Key, Value> m = SpreadKeys(1500, 2);
    for (Key k = 100; k < 1000; ++k) m[k] = k;  // a dense run over several batches
    Fill(*db, m);
    const Key mid = std::next(m.begin(), 700)->first;
    struct Case {
      Key from;
      std::optional<Key> to;
      size_t limit;
    };
    const Case cases[] = {
        {0, std::nullopt, SIZE_MAX},  // everything, 0 and UINT64_MAX included
        {0, std::nullopt, 0},         // limit 0
        {0, std::nullopt, 1},
        {0, std::nullopt, 256},
        {0, std::nullopt, 257},
        {0, 0, SIZE_MAX},             // empty: to is exclusive
        {5, 5, SIZE_MAX},             // empty: from == to
        {9, 3, SIZE_MAX},             // empty: from > to
        {0, 1, SIZE_MAX},             // key 0 only
        {1, 2, SIZE_MAX},
        {100, 1000, SIZE_MAX},        // the dense run exactly
        {100, 1000, 300},
        {101, 999, 10},
        {mid, std::nullopt, SIZE_MAX},
        {mid, mid + 1, SIZE_MAX},
        {mid + 1, mid + 1, SIZE_MAX},
        {kMax, std::nullopt, SIZE_MAX},  // the last key alone
        {kMax, kMax, SIZE_MAX},          // empty
        {kMax - 1, kMax, SIZE_MAX},      // UINT64_MAX excluded
        {0, kMax, SIZE_MAX},             // all but UINT64_MAX
        {kMax - 1, std::nullopt, 1},
        {1000, 100000, SIZE_MAX},        // between the dense run and the spread keys
    };
    for (const Case& c : cases) {
      SCOPED_TRACE("from " + std::to_string(c.from) + " to " +
                   (c.to ? std::to_string(*c.to) : "none") + " limit " + std::to_string(c.limit));
      std::vector<KV> out{{1, 1}};  // Range appends
      size_t n = db->Range(c.from, c.to, c.limit, &out);
      std::vector<KV> want = OracleRange(m, c.from, c.to, c.limit);
      ASSERT_EQ(n, want.size());
      ASSERT_EQ(out.size(), want.size() + 1);
      EXPECT_EQ(out.front(), (KV{1, 1}));
      EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin() + 1));
    }
  }
  // An empty index.
  auto db = MustCreateInMemory("lbtree");
  ASSERT_NE(db, nullptr);
  std::vector<KV> out;
  EXPECT_EQ(db->Range(0, std::nullopt, SIZE_MAX, &out), 0u);
  EXPECT_TRUE(out.empty());
}

TEST(DbTest, IteratorSeekAndNextMatchTheOracle) {
  for (const std::string& kind : DataKinds()) {
    SCOPED_TRACE(kind);
    auto db = MustCreateInMemory(kind);
    ASSERT_NE(db, nullptr);
    auto it = db->NewIterator();
    EXPECT_FALSE(it->Valid());  // unpositioned
    it->SeekToFirst();
    EXPECT_FALSE(it->Valid());  // empty index

    std::map<Key, Value> m = SpreadKeys(5000, 3);
    Fill(*db, m);
    EXPECT_EQ(Walk(*db), AsVector(m));

    std::mt19937_64 rng(4);
    std::vector<Key> seeks{0, 1, 2, kMax - 1, kMax};
    for (int i = 0; i < 100; ++i) seeks.push_back(rng());
    for (int i = 0; i < 100; ++i) seeks.push_back(std::next(m.begin(), rng() % m.size())->first);
    for (Key s : seeks) {
      SCOPED_TRACE(s);
      it->Seek(s);
      auto want = m.lower_bound(s);
      for (int steps = 0; steps < 300 && want != m.end(); ++steps, ++want) {
        ASSERT_TRUE(it->Valid());
        ASSERT_EQ(it->key(), want->first);
        ASSERT_EQ(it->value(), want->second);
        it->Next();
      }
      if (want == m.end()) {
        EXPECT_FALSE(it->Valid());
      }
    }
    it->Seek(kMax);
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ(it->key(), kMax);
    it->Next();
    EXPECT_FALSE(it->Valid());
    ASSERT_TRUE(db->Remove(kMax).ok());
    it->Seek(kMax);
    EXPECT_FALSE(it->Valid());
    it->SeekToFirst();  // repositions after the end
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ(it->key(), 0u);
  }
}

// One thread iterates while another inserts and removes keys between the
// stable ones and rewrites the stable ones' values. Each pass must yield
// strictly ascending keys, every stable key, and only values that were
// stored. In the TSan run (label unit).
TEST(DbTest, IteratorWithAConcurrentWriter) {
  constexpr Key kStable = 3000;  // stable keys 4*i; churned keys 4*i+2
  for (const std::string& kind : DataKinds()) {
    SCOPED_TRACE(kind);
    auto db = MustCreateInMemory(kind);
    ASSERT_NE(db, nullptr);
    for (Key i = 0; i < kStable; ++i) ASSERT_TRUE(db->Insert(4 * i, 4 * i).ok());
    ASSERT_TRUE(db->Insert(kMax, kMax).ok());

    std::atomic<bool> stop{false};
    std::atomic<uint64_t> writes{0};
    std::atomic<uint64_t> write_errors{0};  // one writer: every call must succeed
    std::thread writer([&] {
      std::mt19937_64 rng(5);
      while (!stop.load(std::memory_order_relaxed)) {
        Key i = rng() % kStable;
        Key churn = 4 * i + 2;
        if (!db->Upsert(churn, churn).ok()) write_errors.fetch_add(1);
        if (!db->Update(4 * i, 4 * i + (rng() & 1)).ok()) write_errors.fetch_add(1);
        if (!db->Remove(churn).ok()) write_errors.fetch_add(1);
        writes.fetch_add(1, std::memory_order_relaxed);
      }
    });
    while (writes.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
    auto it = db->NewIterator();
    // At least 4 passes, and more until the writer has done a few thousand
    // rounds meanwhile (bounded, for a starved writer).
    const uint64_t writes_before = writes.load();
    for (int pass = 0; pass < 4 || (writes.load() - writes_before < 3000 && pass < 200); ++pass) {
      Key stable_seen = 0;
      std::optional<Key> last;
      bool max_seen = false;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        Key k = it->key();
        Value v = it->value();
        if (last) {
          ASSERT_GT(k, *last) << "pass " << pass;
        }
        last = k;
        if (k == kMax) {
          max_seen = true;
        } else if (k % 4 == 0) {
          ASSERT_LT(k / 4, kStable);
          ASSERT_TRUE(v == k || v == k + 1) << k << " -> " << v;
          ++stable_seen;
        } else {
          ASSERT_EQ(k % 4, 2u) << k;
          ASSERT_EQ(v, k);
        }
      }
      EXPECT_EQ(stable_seen, kStable) << "pass " << pass;
      EXPECT_TRUE(max_seen);
    }
    stop = true;
    writer.join();
    EXPECT_EQ(write_errors.load(), 0u) << "failed Upsert/Update/Remove calls of the writer";
    EXPECT_TRUE(db->Verify().ok());
  }
}

TEST(DbTest, CloseTwiceIsOkAndAccessorsStayValid) {
  TempDir dir;
  const std::string path = dir.path("c");
  auto db = Db::Create(path, "nvtree");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE(db.value()->Insert(8, 9).ok());
  EXPECT_TRUE(db.value()->Close().ok());
  EXPECT_TRUE(db.value()->Close().ok());
  EXPECT_EQ(db.value()->kind(), "nvtree");
  EXPECT_EQ(db.value()->path(), path);
  db.value().reset();  // the destructor after Close
  auto again = Db::Open(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again.value()->Get(8).value(), 9u);

  auto mem = MustCreateInMemory("dram-btree");
  ASSERT_NE(mem, nullptr);
  EXPECT_TRUE(mem->Close().ok());
  EXPECT_TRUE(mem->Close().ok());
}

// After Close every data call answers InvalidArgument ("the Db is closed")
// or its empty counterpart, and never reaches the destroyed index: a file
// pool, an in-memory pool and a volatile kind.
void ExpectClosedAnswers(Db& db, const std::string& what) {
  SCOPED_TRACE(what);
  auto closed = [](const Status& s) {
    return s.code() == Code::kInvalidArgument && s.message() == "the Db is closed";
  };
  const KV sorted[] = {{1, 1}, {2, 2}};
  EXPECT_TRUE(closed(db.Insert(100, 1)));
  EXPECT_TRUE(closed(db.Upsert(1, 1)));
  EXPECT_TRUE(closed(db.Update(1, 1)));
  EXPECT_TRUE(closed(db.Remove(1)));
  EXPECT_TRUE(closed(db.BulkLoad(sorted)));
  EXPECT_TRUE(closed(db.Verify()));
  EXPECT_TRUE(closed(db.Sync()));
  Result<Value> v = db.Get(1);
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(closed(v.status())) << v.status().ToString();
  EXPECT_FALSE(db.Exists(1));
  EXPECT_EQ(db.Count(), 0u);
  std::vector<KV> out{{5, 5}};
  EXPECT_EQ(db.Range(0, std::nullopt, 10, &out), 0u);
  EXPECT_EQ(out, (std::vector<KV>{{5, 5}}));  // nothing appended
  IndexStats st = db.Stats();
  EXPECT_EQ(st.entries, 0u);
  EXPECT_EQ(st.height, 0u);
  EXPECT_EQ(st.leaves, 0u);
  EXPECT_EQ(st.pm_bytes, 0u);
  EXPECT_EQ(st.dram_bytes, 0u);
  EXPECT_TRUE(st.extra.empty());
  auto it = db.NewIterator();
  ASSERT_NE(it, nullptr);
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(closed(it->status())) << it->status().ToString();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  it->Seek(1);
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(closed(it->status()));
  EXPECT_TRUE(db.Close().ok());  // still idempotent
}

TEST(DbTest, EveryDataCallAfterCloseFailsCleanly) {
  TempDir dir;
  const std::string path = dir.path("closed");
  {
    auto db = Db::Create(path, "lbtree");
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Fill(*db.value(), {{1, 10}, {2, 20}});
    ASSERT_TRUE(db.value()->Close().ok());
    ExpectClosedAnswers(*db.value(), "file pool");
  }
  // Nothing the calls after Close did reached the pool.
  auto again = Db::Open(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again.value()->Count(), 2u);
  EXPECT_EQ(again.value()->Get(1).value(), 10u);
  EXPECT_FALSE(again.value()->Exists(100));
  ASSERT_TRUE(again.value()->Close().ok());

  for (const char* kind : {"fptree", "dram-btree"}) {
    auto mem = MustCreateInMemory(kind);
    ASSERT_NE(mem, nullptr);
    Fill(*mem, {{1, 10}});
    ASSERT_TRUE(mem->Close().ok());
    ExpectClosedAnswers(*mem, std::string("in memory, ") + kind);
  }
}

TEST(DbTest, AnIteratorMadeBeforeCloseEndsAfterIt) {
  auto db = MustCreateInMemory("lbtree");
  ASSERT_NE(db, nullptr);
  std::map<Key, Value> m = SpreadKeys(1000, 3);
  Fill(*db, m);
  auto it = db->NewIterator();
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_TRUE(it->status().ok());
  it->Next();
  ASSERT_TRUE(it->Valid());
  ASSERT_TRUE(db->Close().ok());
  it->Next();  // the index is gone: it ends instead of reading it
  EXPECT_FALSE(it->Valid());
  EXPECT_EQ(it->status().code(), Code::kInvalidArgument) << it->status().ToString();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  EXPECT_EQ(it->status().code(), Code::kInvalidArgument);
}

TEST(DbTest, AnIteratorAtTheEndHasAnOkStatus) {
  auto db = MustCreateInMemory("lbtree");
  ASSERT_NE(db, nullptr);
  Fill(*db, {{1, 10}, {2, 20}});
  auto it = db->NewIterator();
  EXPECT_TRUE(it->status().ok());
  it->Seek(2);
  ASSERT_TRUE(it->Valid());
  it->Next();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  ASSERT_TRUE(db->Close().ok());
}

TEST(DbTest, TheOpenPoolIsBusyForASecondOpen) {
  TempDir dir;
  const std::string path = dir.path("b");
  auto db = Db::Create(path, "lbtree");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto second = Db::Open(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kBusy) << second.status().ToString();
  ASSERT_TRUE(db.value()->Close().ok());
  EXPECT_TRUE(Db::Open(path).ok());
}

TEST(DbTest, VerifyStatsAndBulkLoad) {
  for (const std::string& kind : DataKinds()) {
    SCOPED_TRACE(kind);
    auto db = MustCreateInMemory(kind);
    ASSERT_NE(db, nullptr);
    std::vector<KV> sorted;
    for (Key k = 0; k < 5000; ++k) sorted.push_back({k * 2 + 1, k});
    sorted.push_back({kMax, 1});
    ASSERT_TRUE(db->BulkLoad(sorted, 0.8).ok());
    EXPECT_TRUE(db->Verify().ok());
    IndexStats st = db->Stats();
    EXPECT_EQ(st.entries, sorted.size());
    EXPECT_EQ(db->Count(), sorted.size());
    EXPECT_GT(st.height, 0u);
    if (db->persistent()) {
      EXPECT_GT(st.pm_bytes, 0u);
    }
    std::vector<KV> all;
    db->Range(0, std::nullopt, SIZE_MAX, &all);
    EXPECT_EQ(all, sorted);
    // Not empty any more: refused.
    const KV more[] = {{2, 2}};
    EXPECT_EQ(db->BulkLoad(more).code(), Code::kInvalidArgument);
  }
  auto db = MustCreateInMemory("lbtree");
  ASSERT_NE(db, nullptr);
  const KV unsorted[] = {{2, 2}, {1, 1}};
  EXPECT_EQ(db->BulkLoad(unsorted).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pmindex
