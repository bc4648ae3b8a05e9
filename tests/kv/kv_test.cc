// The key-value store: the public API (pmindex/kv.h) against a
// std::map oracle, reopen after a clean close and from crash images,
// transactions (snapshot reads, own writes, first committer wins, abort),
// version reclamation, a store over every persistent kind, the pool's kind
// both ways, the closed store, bad sizes, a full pool, and concurrent
// transactions (run under TSan by scripts/test.sh).
//
// Randomized tests print their seed on failure (replay: PMINDEX_SEED=n).
#include "pmindex/kv.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "gtest/gtest.h"
#include "index/index.h"
#include "index/registry.h"
#include "kv/store.h"
#include "kv/walk.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/db.h"
#include "scenarios/scenario_util.h"
#include "support/persistent_kinds.h"
#include "support/status.h"
#include "support/temp_files.h"

namespace pmindex {
namespace {

using scenario::Rng;
using scenario::SeedScope;
using Model = std::map<std::string, std::string>;
using Pairs = std::vector<std::pair<std::string, std::string>>;

// ------------------------------------------------------------ keys and values

// Keys that stress the mapping onto 8-byte index keys: YCSB-like keys with
// a shared 8-byte prefix (buckets), keys equal in their first 16 bytes
// (bucket ties resolved on the records), keys that are prefixes of others,
// NUL bytes, 1 KiB keys and random binary keys.
std::vector<std::string> KeyPool(Rng& rng, size_t n) {
  std::set<std::string> keys;
  keys.insert(std::string("a"));
  keys.insert(std::string("ab"));
  keys.insert(std::string("ab\0", 3));
  keys.insert(std::string("ab\0\0", 4));
  keys.insert(std::string("\0", 1));
  keys.insert(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff", 9));
  keys.insert(std::string(KvStore::kMaxKeyBytes, 'k'));
  keys.insert(std::string(KvStore::kMaxKeyBytes - 1, 'k'));
  while (keys.size() < n) {
    std::string k;
    switch (rng.uniform(5)) {
      case 0:
        k = "user" + std::to_string(rng.range(1000000000000000000ull, 1000100000000000000ull));
        break;
      case 1:
        k = "same-16-bytes-xx" + std::to_string(rng.uniform(50));
        break;
      case 2:
        k = std::string("usr\0", 4) + std::to_string(rng.uniform(100));
        break;
      case 3: {
        k.resize(rng.range(1, 40));
        for (char& c : k) c = static_cast<char>(rng.uniform(4) == 0 ? 0 : rng.uniform(256));
        break;
      }
      default:
        k = std::string(rng.range(900, KvStore::kMaxKeyBytes), 'p') + std::to_string(rng.uniform(20));
        k.resize(std::min(k.size(), KvStore::kMaxKeyBytes));
        break;
    }
    keys.insert(k);
  }
  return {keys.begin(), keys.end()};
}

// Mostly small values, some empty, a few above the inline limit (their own
// value block).
std::string ValueOf(Rng& rng, uint64_t tag) {
  size_t len;
  const uint64_t r = rng.uniform(100);
  if (r < 10) {
    len = 0;
  } else if (r < 85) {
    len = rng.range(1, 120);
  } else if (r < 99) {
    len = rng.range(120, 6000);
  } else {
    len = rng.range(kv::Version::kMaxInline + 1, kv::Version::kMaxInline + 70000);
  }
  std::string v(len, '\0');
  for (size_t i = 0; i < len; ++i) v[i] = static_cast<char>((tag * 131 + i * 7) & 0xff);
  return v;
}

std::string Show(std::string_view k) {
  std::string s;
  for (char c : k.substr(0, 24)) {
    if (c >= 32 && c < 127) {
      s += c;
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned char>(c));
      s += b;
    }
  }
  if (k.size() > 24) s += "...(" + std::to_string(k.size()) + " bytes)";
  return s;
}

Pairs ModelRange(const Model& m, const std::string& from, const std::optional<std::string>& to, size_t limit) {
  Pairs out;
  for (auto it = m.lower_bound(from); it != m.end() && out.size() < limit; ++it) {
    if (to && it->first >= *to) break;
    out.push_back(*it);
  }
  return out;
}

// An empty store over lbtree in memory.
std::unique_ptr<KvStore> InMemory() {
  auto kv = KvStore::CreateInMemory("lbtree");
  PMINDEX_EXPECT_OK(kv);
  return std::move(kv).value();
}

// The model after a transaction's writes.
Model Applied(Model m, const kv::Store::Writes& w) {
  for (const auto& [k, v] : w) {
    if (v) {
      m[k] = *v;
    } else {
      m.erase(k);
    }
  }
  return m;
}

// The whole store through the API, in order.
Pairs All(const KvStore& kv) {
  Pairs out;
  kv.Range("", std::nullopt, SIZE_MAX, &out);
  return out;
}

// ------------------------------------------------------------ the engine on in-memory pools

// A kv::Store on an in-memory pool (crash images need the pool's bytes).
// The store goes before its pool.
struct MemStore {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<kv::Store> store;

  MemStore(std::unique_ptr<Pool> p, std::unique_ptr<kv::Store> s) : pool(std::move(p)), store(std::move(s)) {}
  MemStore(MemStore&&) = default;
  MemStore& operator=(MemStore&& o) {
    store.reset();
    pool = std::move(o.pool);
    store = std::move(o.store);
    return *this;
  }
  ~MemStore() { store.reset(); }
};

MemStore NewMemStore(const std::string& kind, const std::string& options, uint64_t clock_chunk = 1 << 20,
                     uint32_t fanout = kv::StoreOptions{}.fanout) {
  PoolOptions po;
  po.size = 16ull << 20;
  po.max_size = 256ull << 20;
  po.kind = kind;
  po.index_options = options;
  po.incompat_flags = pm::kIncompatKvStore;
  auto pool = Pool::CreateInMemory(po);
  PMINDEX_EXPECT_OK(pool);
  kv::StoreOptions so;
  so.clock_chunk = clock_chunk;
  so.fanout = fanout;
  auto s = kv::Store::Create(pool.value().get(), kind, options, so);
  PMINDEX_EXPECT_OK(s) << kind;
  return {std::move(pool).value(), std::move(s).value()};
}

// The bytes a crash leaves at a quiescent point: the pool as it is, clean
// flag clear (the store is still open).
std::vector<std::byte> CrashBytes(const Pool& pool) { return {pool.bytes().begin(), pool.bytes().end()}; }

// Opens (recovers) a store from bytes.
MemStore OpenBytes(const std::vector<std::byte>& bytes, uint64_t clock_chunk = 1 << 20,
                   uint32_t fanout = kv::StoreOptions{}.fanout) {
  auto pool = Pool::OpenImage(bytes);
  PMINDEX_EXPECT_OK(pool);
  kv::StoreOptions so;
  so.clock_chunk = clock_chunk;
  so.fanout = fanout;
  auto s = kv::Store::Open(pool.value().get(), so);
  PMINDEX_EXPECT_OK(s);
  if (!s.ok()) return {std::move(pool).value(), nullptr};
  return {std::move(pool).value(), std::move(s).value()};
}

Model Contents(kv::Store& s) {
  Model m;
  PMINDEX_EXPECT_OK(
      s.ScanAt(s.visible_ts(), "", std::nullopt, [&](std::string_view k, std::string_view v) {
        m.emplace(std::string(k), std::string(v));
        return true;
      }));
  return m;
}

// The allocator holds exactly the blocks the index and the store reach:
// none freed while reachable, none leaked.
void ExpectNoLeak(kv::Store& s) {
  s.allocator()->Reclaim();
  std::set<uint64_t> reach;
  PMINDEX_ASSERT_OK(s.ForEachBlock(
      [&](PPtr p) { EXPECT_TRUE(reach.insert(p.raw()).second) << "block reached twice"; }));
  std::set<uint64_t> live;
  s.allocator()->ForEachLiveBlock([&](PPtr p, size_t) { live.insert(p.raw()); });
  for (uint64_t p : reach) EXPECT_TRUE(live.count(p)) << "reachable block " << p << " is free";
  for (uint64_t p : live) EXPECT_TRUE(reach.count(p)) << "leak: live block " << p << " is not reachable";
}

// Random single calls on a kv::Store against the model.
void RandomOps(kv::Store& s, Model& m, Rng& rng, const std::vector<std::string>& keys, size_t ops, uint64_t* tag) {
  for (size_t i = 0; i < ops; ++i) {
    const std::string& k = keys[rng.uniform(keys.size())];
    const bool has = m.count(k) != 0;
    if (rng.uniform(4) == 0) {
      Status st = s.Write(k, nullptr, kv::Store::Cond::kPresent, 0);
      ASSERT_EQ(st.ok(), has) << st.ToString();
      m.erase(k);
    } else {
      const std::string v = ValueOf(rng, ++*tag);
      const std::string_view sv = v;
      PMINDEX_ASSERT_OK(s.Write(k, &sv, kv::Store::Cond::kNone, 0));
      m[k] = v;
    }
  }
}

// ------------------------------------------------------------ the API against an oracle

TEST(Kv, RandomOpsAgainstAMap) {
  SeedScope seed;
  Rng rng(seed);
  auto kv = InMemory();
  KvStore& s = *kv;
  const std::vector<std::string> keys = KeyPool(rng, 600);
  Model m;
  std::map<std::string, uint64_t> versions;  // model key -> its version
  const size_t ops = scenario::Ops(6000, 600);
  for (size_t i = 0; i < ops; ++i) {
    const std::string& k = keys[rng.uniform(keys.size())];
    const bool has = m.count(k) != 0;
    const std::string v = ValueOf(rng, i);
    SCOPED_TRACE("op " + std::to_string(i) + " key " + Show(k));
    switch (rng.uniform(10)) {
      case 0:
      case 1: {
        PMINDEX_ASSERT_OK(s.Put(k, v));
        m[k] = v;
        break;
      }
      case 2: {
        // The test sees the live value in place; it refuses one in three.
        int calls = 0;
        const bool refuse = has && m[k].size() % 3 == 0;
        Status st = s.PutUnless(k, v, [&](std::string_view old) {
          ++calls;
          EXPECT_EQ(old, m[k]);
          return old.size() % 3 == 0;
        });
        ASSERT_EQ(calls, has ? 1 : 0);
        ASSERT_EQ(st.ok(), !refuse) << st.ToString();
        if (refuse) {
          ASSERT_TRUE(st.is_already_exists()) << st.ToString();
        } else {
          m[k] = v;
        }
        break;
      }
      case 3: {
        Status st = s.PutIfAbsent(k, v);
        ASSERT_EQ(st.ok(), !has) << st.ToString();
        if (has) {
          ASSERT_TRUE(st.is_already_exists()) << st.ToString();
        }
        if (!has) m[k] = v;
        break;
      }
      case 4: {
        Status st = s.PutIfPresent(k, v);
        ASSERT_EQ(st.ok(), has) << st.ToString();
        if (!has) {
          ASSERT_TRUE(st.is_not_found()) << st.ToString();
        }
        if (has) m[k] = v;
        break;
      }
      case 5: {
        auto cur = s.GetVersioned(k);
        ASSERT_EQ(cur.ok(), has);
        if (!has) {
          ASSERT_TRUE(s.PutIfVersion(k, v, 1).is_not_found());
          break;
        }
        ASSERT_EQ(cur.value().value, m[k]);
        // A stale version is refused, the current one accepted.
        ASSERT_TRUE(s.PutIfVersion(k, v, cur.value().version - 1).IsAborted());
        PMINDEX_ASSERT_OK(s.PutIfVersion(k, v, cur.value().version));
        auto after = s.GetVersioned(k);
        PMINDEX_ASSERT_OK(after);
        ASSERT_GT(after.value().version, cur.value().version);
        m[k] = v;
        break;
      }
      case 6:
      case 7: {
        Status st = s.Remove(k);
        ASSERT_EQ(st.ok(), has) << st.ToString();
        if (!has) {
          ASSERT_TRUE(st.is_not_found());
        }
        m.erase(k);
        break;
      }
      case 8: {
        auto got = s.Get(k);
        ASSERT_EQ(got.ok(), has) << got.status().ToString();
        if (has) {
          ASSERT_EQ(got.value(), m[k]);
        }
        ASSERT_EQ(s.Exists(k), has);
        break;
      }
      default: {
        const std::string& from = rng.uniform(8) == 0 ? std::string() : keys[rng.uniform(keys.size())];
        std::optional<std::string> to;
        if (rng.uniform(3) != 0) to = keys[rng.uniform(keys.size())];
        const size_t limit = rng.uniform(4) == 0 ? SIZE_MAX : rng.range(1, 40);
        Pairs got;
        const size_t n = s.Range(from, to ? std::optional<std::string_view>(*to) : std::nullopt, limit, &got);
        ASSERT_EQ(n, got.size());
        ASSERT_EQ(got, ModelRange(m, from, to, limit)) << "from " << Show(from) << " to " << (to ? Show(*to) : "end");
        break;
      }
    }
    if (i % 1000 == 999) {
      PMINDEX_ASSERT_OK(s.Verify());
      ASSERT_EQ(s.Count(), m.size());
    }
  }
  PMINDEX_ASSERT_OK(s.Verify());
  ASSERT_EQ(All(s), Pairs(m.begin(), m.end()));
  const KvStats st = s.Stats();
  EXPECT_EQ(st.keys, m.size());
  EXPECT_GE(st.versions, st.keys);
  EXPECT_GT(st.commits, 0u);
  EXPECT_GT(st.pm_bytes, 0u);
}

// YCSB-like keys share their first 8 bytes ("user6284..."): one prefix
// with over a thousand keys (a tree of buckets under a directory), some
// equal in their first 16 bytes too, against the model.
TEST(Kv, ThousandsOfKeysUnderOnePrefix) {
  SeedScope seed;
  Rng rng(seed);
  auto kv = InMemory();
  KvStore& s = *kv;
  Model m;
  const size_t n = scenario::Ops(1500, 300);
  std::vector<std::string> keys;
  for (size_t i = 0; i < n; ++i) {
    keys.push_back("user1234" + std::to_string(rng.range(1000000000000ull, 9999999999999ull)));
    if (i % 10 == 0) keys.push_back("user1234same16by" + std::to_string(i));  // ties on 16 bytes
  }
  for (const std::string& k : keys) {
    PMINDEX_ASSERT_OK(s.Put(k, k.substr(8)));
    m[k] = k.substr(8);
  }
  EXPECT_EQ(s.Stats().index.entries, 1u);  // one prefix, one tree
  for (size_t i = 0; i < keys.size() / 3; ++i) {
    const std::string& k = keys[rng.uniform(keys.size())];
    ASSERT_EQ(s.Remove(k).ok(), m.erase(k) == 1);
  }
  for (const std::string& k : keys) {
    auto g = s.Get(k);
    ASSERT_EQ(g.ok(), m.count(k) == 1) << Show(k);
    if (g.ok()) {
      ASSERT_EQ(g.value(), m[k]);
    }
  }
  Pairs r;
  s.Range("user1234same", std::string_view("user1234same16by5"), SIZE_MAX, &r);
  EXPECT_EQ(r, ModelRange(m, "user1234same", std::string("user1234same16by5"), SIZE_MAX));
  ASSERT_EQ(All(s), Pairs(m.begin(), m.end()));
  PMINDEX_ASSERT_OK(s.Verify());
}

TEST(Kv, ValuesOfEverySizeAndOneMiB) {
  auto kv = InMemory();
  KvStore& s = *kv;
  const std::vector<size_t> sizes = {0, 1, 31, 32, 33, 4096, kv::Version::kMaxInline, kv::Version::kMaxInline + 1,
                                     300000, KvStore::kMaxValueBytes};
  for (size_t n : sizes) {
    std::string v(n, '\0');
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 31 + n);
    const std::string k = "size:" + std::to_string(n);
    PMINDEX_ASSERT_OK(s.Put(k, v)) << n;
    auto got = s.Get(k);
    PMINDEX_ASSERT_OK(got) << n;
    ASSERT_EQ(got.value(), v) << n;
  }
  // A 1 MiB value overwritten many times: its pages come back.
  const std::string big(KvStore::kMaxValueBytes, 'x');
  for (int i = 0; i < 8; ++i)
    PMINDEX_ASSERT_OK(s.Put("size:" + std::to_string(KvStore::kMaxValueBytes), big));
  const uint64_t bytes = s.Stats().pm_bytes;
  for (int i = 0; i < 8; ++i)
    PMINDEX_ASSERT_OK(s.Put("size:" + std::to_string(KvStore::kMaxValueBytes), big));
  EXPECT_LE(s.Stats().pm_bytes, bytes + 2 * KvStore::kMaxValueBytes);
  PMINDEX_ASSERT_OK(s.Verify());
}

TEST(Kv, BadSizesWriteNothing) {
  auto kv = InMemory();
  KvStore& s = *kv;
  PMINDEX_ASSERT_OK(s.Put("k", "v"));
  const std::string long_key(KvStore::kMaxKeyBytes + 1, 'k');
  const std::string long_value(KvStore::kMaxValueBytes + 1, 'v');
  const uint64_t commits = s.Stats().commits;
  for (const Status& st :
       {s.Put("", "v"), s.Put(long_key, "v"), s.Put("k2", long_value), s.PutIfAbsent("", "v"),
        s.PutIfPresent("k", long_value), s.PutIfVersion(long_key, "v", 1), s.Remove(""),
        s.PutUnless("k3", long_value, [](std::string_view) { return false; })}) {
    EXPECT_TRUE(st.is_invalid_argument()) << st.ToString();
  }
  EXPECT_TRUE(s.Get("").status().is_invalid_argument());
  EXPECT_TRUE(s.Get(long_key).status().is_invalid_argument());
  EXPECT_FALSE(s.Exists(""));
  auto tx = s.Begin();
  EXPECT_TRUE(tx->Put("", "v").is_invalid_argument());
  EXPECT_TRUE(tx->Put("k", long_value).is_invalid_argument());
  EXPECT_TRUE(tx->Remove(long_key).is_invalid_argument());
  PMINDEX_EXPECT_OK(tx->Commit());  // nothing buffered
  EXPECT_EQ(s.Stats().commits, commits);
  EXPECT_EQ(All(s), Pairs({{"k", "v"}}));
  // The limits themselves are fine.
  PMINDEX_EXPECT_OK(s.Put(std::string(KvStore::kMaxKeyBytes, 'k'), ""));
}

TEST(Kv, ClosedStore) {
  auto kv = InMemory();
  KvStore& s = *kv;
  PMINDEX_ASSERT_OK(s.Put("k", "v"));
  auto early = s.Begin();
  PMINDEX_ASSERT_OK(early->Put("x", "y"));
  early.reset();  // every transaction must be gone before Close
  PMINDEX_ASSERT_OK(s.Close());
  PMINDEX_ASSERT_OK(s.Close());  // idempotent
  auto closed = [](const Status& st) { return st.is_invalid_argument() && st.message() == "the store is closed"; };
  EXPECT_TRUE(closed(s.Get("k").status()));
  EXPECT_TRUE(closed(s.GetVersioned("k").status()));
  EXPECT_TRUE(closed(s.Put("k", "v")));
  EXPECT_TRUE(closed(s.PutIfAbsent("k", "v")));
  EXPECT_TRUE(closed(s.PutIfPresent("k", "v")));
  EXPECT_TRUE(closed(s.PutIfVersion("k", "v", 1)));
  EXPECT_TRUE(closed(s.PutUnless("k", "v", [](std::string_view) { return false; })));
  EXPECT_TRUE(closed(s.Remove("k")));
  EXPECT_TRUE(closed(s.Verify()));
  EXPECT_TRUE(closed(s.Sync()));
  EXPECT_FALSE(s.Exists("k"));
  EXPECT_EQ(s.Count(), 0u);
  Pairs out;
  EXPECT_EQ(s.Range("", std::nullopt, 10, &out), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.Stats().keys, 0u);
  EXPECT_EQ(s.index_kind(), "lbtree");
  auto tx = s.Begin();
  EXPECT_TRUE(closed(tx->Get("k").status()));
  EXPECT_TRUE(closed(tx->Put("k", "v")));
  EXPECT_TRUE(closed(tx->Commit()));
}

// ------------------------------------------------------------ reopen

TEST(Kv, ReopenAfterCleanClose) {
  SeedScope seed;
  Rng rng(seed);
  testing::TempDir dir;
  const std::string path = dir.path("kv.pool");
  const std::vector<std::string> keys = KeyPool(rng, 300);
  Model m;
  uint64_t max_version = 0;
  for (int round = 0; round < 3; ++round) {
    DbOptions small;
    small.size = 8ull << 20;
    small.max_size = 64ull << 20;
    auto kv = round == 0 ? KvStore::Create(path, "lbtree", "node=256", small) : KvStore::Open(path);
    PMINDEX_ASSERT_OK(kv);
    KvStore& s = *kv.value();
    EXPECT_EQ(s.index_kind(), "lbtree");
    EXPECT_EQ(s.index_options(), "node=256");
    ASSERT_EQ(All(s), Pairs(m.begin(), m.end())) << "round " << round;
    PMINDEX_ASSERT_OK(s.Verify());
    for (const auto& [k, v] : m) {
      auto g = s.GetVersioned(k);
      PMINDEX_ASSERT_OK(g);
      max_version = std::max(max_version, g.value().version);
    }
    // Versions keep growing across restarts.
    PMINDEX_ASSERT_OK(s.Put("clock", "tick"));
    auto tick = s.GetVersioned("clock");
    PMINDEX_ASSERT_OK(tick);
    EXPECT_GT(tick.value().version, max_version);
    max_version = tick.value().version;
    m["clock"] = "tick";
    for (int i = 0; i < 300; ++i) {
      const std::string& k = keys[rng.uniform(keys.size())];
      if (rng.uniform(3) == 0) {
        if (m.erase(k)) {
          PMINDEX_ASSERT_OK(s.Remove(k));
        }
      } else {
        const std::string v = ValueOf(rng, i);
        PMINDEX_ASSERT_OK(s.Put(k, v));
        m[k] = v;
      }
    }
    PMINDEX_ASSERT_OK(s.Sync());
    PMINDEX_ASSERT_OK(s.Close());
  }
}

TEST(Kv, CrashImagesRecover) {
  SeedScope seed;
  Rng rng(seed);
  // A small clock chunk: the reservation in root slot 5 moves many times.
  MemStore ms = NewMemStore("lbtree", "node=256", 7);
  const std::vector<std::string> keys = KeyPool(rng, 200);
  Model m;
  uint64_t tag = 0;
  RandomOps(*ms.store, m, rng, keys, scenario::Ops(600, 200), &tag);
  const uint64_t last = ms.store->visible_ts();
  for (int crash = 0; crash < 3; ++crash) {
    MemStore again = OpenBytes(CrashBytes(*ms.pool), 7);
    ASSERT_NE(again.store, nullptr);
    PMINDEX_ASSERT_OK(again.store->Verify());
    ASSERT_EQ(Contents(*again.store), m);
    ExpectNoLeak(*again.store);
    EXPECT_GT(again.store->visible_ts() + 1, last);  // the clock restarts above every timestamp
    RandomOps(*again.store, m, rng, keys, scenario::Ops(300, 100), &tag);
    ms = std::move(again);
  }
}

// ------------------------------------------------------------ many keys under one prefix

// The nodes of every prefix's tree, as the store's validating walk meets
// them (the walk also checks the tree: levels, counts, directory entries
// naming their child's smallest key, keys ascending).
struct TreeShape {
  size_t buckets = 0, directories = 0;
  size_t max_entries = 0;  // in any bucket or directory
  int max_level = 0;       // of any directory (0: none)
  size_t prefixes = 0;
};

TreeShape ShapeOf(kv::Store& s) {
  class Sink final : public kv::WalkSink {
   public:
    Sink(const Pool& pool, TreeShape* t) : pool_(pool), t_(t) {}
    Status Block(PPtr p, size_t) override {
      const auto* d = pool_.to_ptr<const kv::Directory>(p);
      if (d->tag == kv::kBucketTag || d->tag == kv::kDirectoryTag) {
        (d->tag == kv::kBucketTag ? t_->buckets : t_->directories) += 1;
        t_->max_entries = std::max<size_t>(t_->max_entries, d->count);
        if (d->tag == kv::kDirectoryTag) t_->max_level = std::max<int>(t_->max_level, d->level);
      }
      return Status::OK();
    }

   private:
    const Pool& pool_;
    TreeShape* t_;
  };
  TreeShape t;
  Sink sink(*s.pool(), &t);
  Key next = 0;
  bool more = true;
  KV batch[64];
  while (more) {
    const size_t n = ScanBatch(*s.index(), &next, &more, 64, batch);
    for (size_t i = 0; i < n; ++i) {
      ++t.prefixes;
      PMINDEX_EXPECT_OK(
          kv::WalkValue(*s.pool(), batch[i].key, batch[i].value, kv::WalkRules{}, sink, nullptr));
    }
  }
  return t;
}

// NodeCheck's promise: any one changed word of a node changes it (every
// bit of every word of nodes of 4..40 words, and random replacements);
// word 1, where the check itself is stored, is not hashed.
TEST(KvTree, NodeCheckChangesWithAnyOneWord) {
  SeedScope seed;
  Rng rng(seed);
  for (size_t words = 4; words <= 40; ++words) {
    std::vector<uint64_t> node(words);
    for (uint64_t& w : node) w = rng.next();
    const size_t bytes = words * 8;
    const uint64_t base = kv::NodeCheck(node.data(), bytes);
    for (size_t i = 0; i < words; ++i) {
      const uint64_t old = node[i];
      for (int b = 0; b < 64; ++b) {
        node[i] = old ^ (uint64_t{1} << b);
        if (i == 1) {
          ASSERT_EQ(kv::NodeCheck(node.data(), bytes), base);
        } else {
          ASSERT_NE(kv::NodeCheck(node.data(), bytes), base) << "words " << words << ", word " << i << ", bit " << b;
        }
      }
      node[i] = rng.next();
      if (i != 1 && node[i] != old) {
        ASSERT_NE(kv::NodeCheck(node.data(), bytes), base) << "words " << words << ", word " << i;
      }
      node[i] = old;
    }
    // A node read with the wrong length (a count changed) hashes differently.
    ASSERT_NE(kv::NodeCheck(node.data(), bytes - 8), base);
  }
}

// Keys that share their first 8 bytes, and some their first 16 too (ties
// the directories resolve on the records), against the model, at the
// smallest fanouts: splits, root splits, merges, collapses back to a
// bucket and to a record, ranges starting inside the tree, crash images
// and a reopen with another fanout (the fanout is not part of the format).
TEST(KvTree, SharedPrefixesAgainstAMap) {
  SeedScope seed;
  for (uint32_t fanout : {3u, 4u, 7u}) {
    SCOPED_TRACE("fanout " + std::to_string(fanout));
    Rng rng(seed + fanout);
    MemStore ms = NewMemStore("lbtree", "node=256", 5, fanout);
    std::vector<std::string> keys;
    for (int i = 0; i < 300; ++i) keys.push_back("session:" + std::to_string(100000 + rng.uniform(900000)));
    for (int i = 0; i < 60; ++i) keys.push_back("session:same-16b" + std::to_string(i));  // ties on 16 bytes
    for (int i = 0; i < 20; ++i) keys.push_back("other" + std::to_string(i));
    Model m;
    uint64_t tag = 0;
    RandomOps(*ms.store, m, rng, keys, scenario::Ops(3000, 600), &tag);
    PMINDEX_ASSERT_OK(ms.store->Verify());
    ASSERT_EQ(Contents(*ms.store), m);
    const TreeShape t = ShapeOf(*ms.store);
    EXPECT_GE(t.max_level, 2);  // directories over directories
    EXPECT_LE(t.max_entries, fanout);
    // Ranges from keys inside the tree, present or not.
    for (int i = 0; i < 40; ++i) {
      const std::string from = keys[rng.uniform(keys.size())] + (i % 2 ? "" : "\x01");
      const std::string to = keys[rng.uniform(keys.size())];
      Model got;
      PMINDEX_ASSERT_OK(ms.store->ScanAt(ms.store->visible_ts(), from, std::string_view(to),
                                         [&](std::string_view k, std::string_view v) {
                                           got.emplace(std::string(k), std::string(v));
                                           return true;
                                         }));
      Model want;
      for (auto it = m.lower_bound(from); it != m.end() && it->first < to; ++it) want.insert(*it);
      ASSERT_EQ(got, want) << "from " << Show(from) << " to " << Show(to);
    }
    // A crash image recovers the trees; the allocator holds exactly what
    // they reach; a reopen with another fanout goes on from there.
    MemStore again = OpenBytes(CrashBytes(*ms.pool), 5, fanout == 3 ? 64 : 3);
    ASSERT_NE(again.store, nullptr);
    PMINDEX_ASSERT_OK(again.store->Verify());
    ASSERT_EQ(Contents(*again.store), m);
    ExpectNoLeak(*again.store);
    RandomOps(*again.store, m, rng, keys, scenario::Ops(1000, 300), &tag);
    ASSERT_EQ(Contents(*again.store), m);
    // Every key gone: the trees shrink back to nothing, freeing every node.
    for (const std::string& k : keys) {
      Status st = again.store->Write(k, nullptr, kv::Store::Cond::kPresent, 0);
      ASSERT_EQ(st.ok(), m.erase(k) == 1) << st.ToString();
      if (m.size() == 5) {
        PMINDEX_ASSERT_OK(again.store->Verify());
      }
    }
    EXPECT_TRUE(m.empty());
    EXPECT_EQ(again.store->index()->stats().entries, 0u);
    ExpectNoLeak(*again.store);
  }
}

// Damage to the nodes of a prefix's tree in a crash image (a word of a
// bucket or directory replaced: by a random value, a flipped bit, another
// node's or another record's pointer) is refused with Corruption at open
// or by Verify, or leaves the contents as they were (a word no reader
// uses); the process never crashes (ASan runs this in CI).
TEST(KvTree, DamagedNodesAreRefusedOrHarmless) {
  SeedScope seed;
  Rng rng(seed);
  MemStore ms = NewMemStore("lbtree", "node=256", 5, 3);
  std::vector<std::string> keys;
  for (int i = 0; i < 120; ++i) keys.push_back("shared:" + std::to_string(1000 + rng.uniform(9000)));
  for (int i = 0; i < 20; ++i) keys.push_back("shared:same-16b" + std::to_string(i));
  Model m;
  uint64_t tag = 0;
  RandomOps(*ms.store, m, rng, keys, 400, &tag);
  PMINDEX_ASSERT_OK(ms.store->Verify());
  // The tree nodes and the records, where the walk meets them.
  struct Node {
    uint64_t raw;
    size_t bytes;
  };
  std::vector<Node> nodes;
  std::vector<uint64_t> records;
  PMINDEX_ASSERT_OK(ms.store->ForEachBlock([&](PPtr p) {
    const auto* h = ms.pool->to_ptr<const kv::Directory>(p);
    if (ms.store->allocator()->BlockSize(p) < 16) return;
    if (h->tag == kv::kBucketTag) nodes.push_back({p.raw(), kv::Bucket::Bytes(h->count)});
    if (h->tag == kv::kDirectoryTag) nodes.push_back({p.raw(), kv::Directory::Bytes(h->count)});
    if (h->tag == kv::kRecordTag) records.push_back(p.raw());
  }));
  ASSERT_GT(nodes.size(), 10u);
  const std::vector<std::byte> base = CrashBytes(*ms.pool);
  const uint64_t base_off = ms.pool->to_pptr(ms.pool->bytes().data()).raw();
  // Each node with one entry fewer (its count lowered by one) is still a
  // well-formed node, one key or child short: only the node's check word
  // tells (a seed of CI's found this before the check word existed).
  for (const Node& n : nodes) {
    std::vector<std::byte> img = base;
    uint32_t count;
    std::memcpy(&count, img.data() + (n.raw - base_off) + 4, 4);
    if (count < 2) continue;
    --count;
    std::memcpy(img.data() + (n.raw - base_off) + 4, &count, 4);
    auto pool = Pool::OpenImage(img);
    PMINDEX_ASSERT_OK(pool);
    auto st = kv::Store::Open(pool.value().get(), kv::StoreOptions{.clock_chunk = 5, .fanout = 3});
    ASSERT_FALSE(st.ok()) << "node " << n.raw << " with " << count << " entries";
    EXPECT_TRUE(st.status().is_corruption()) << st.status().ToString();
    if (count >= 2) {  // (a root of one entry is refused for that)
      EXPECT_NE(st.status().ToString().find("check word"), std::string::npos) << st.status().ToString();
    }
  }
  int refused = 0, harmless = 0;
  const size_t trials = scenario::Ops(150, 40);
  for (size_t t = 0; t < trials; ++t) {
    const Node& n = nodes[rng.uniform(nodes.size())];
    const size_t word = rng.uniform(n.bytes / 8);
    uint64_t v;
    switch (rng.uniform(4)) {
      case 0: v = rng.next(); break;
      case 1: v = 0; break;
      case 2: v = nodes[rng.uniform(nodes.size())].raw; break;
      default: v = records[rng.uniform(records.size())]; break;
    }
    std::vector<std::byte> img = base;
    uint64_t old;
    std::memcpy(&old, img.data() + (n.raw - base_off) + word * 8, 8);
    if (rng.uniform(4) == 0) v = old ^ (uint64_t{1} << rng.uniform(64));
    std::memcpy(img.data() + (n.raw - base_off) + word * 8, &v, 8);
    SCOPED_TRACE("node " + std::to_string(n.raw) + " word " + std::to_string(word));
    auto pool = Pool::OpenImage(img);
    PMINDEX_ASSERT_OK(pool);
    auto st = kv::Store::Open(pool.value().get(), kv::StoreOptions{.clock_chunk = 5, .fanout = 3});
    if (!st.ok()) {
      EXPECT_TRUE(st.status().is_corruption()) << st.status().ToString();
      ++refused;
      continue;
    }
    Status vs = st.value()->Verify();
    if (!vs.ok()) {
      EXPECT_TRUE(vs.is_corruption()) << vs.ToString();
      ++refused;
    } else {
      EXPECT_EQ(Contents(*st.value()), m) << "old word " << old << ", new " << v;
      ++harmless;
    }
  }
  EXPECT_GT(refused, 0);
}

// Keys arriving in ascending order (a load by key) keep every node full
// but the last of each level: n keys at fanout f take ceil(n / f) buckets.
// In descending order the nodes split evenly.
TEST(KvTree, AscendingLoadFillsNodes) {
  for (bool ascending : {true, false}) {
    SCOPED_TRACE(ascending ? "ascending" : "descending");
    MemStore ms = NewMemStore("lbtree", "node=256", 1 << 20, 4);
    const size_t n = 1000;
    for (size_t i = 0; i < n; ++i) {
      char k[32];
      std::snprintf(k, sizeof k, "acct:%010zu", ascending ? i : n - 1 - i);
      const std::string_view v(k);
      PMINDEX_ASSERT_OK(ms.store->Write(k, &v, kv::Store::Cond::kNone, 0));
    }
    PMINDEX_ASSERT_OK(ms.store->Verify());
    const TreeShape t = ShapeOf(*ms.store);
    EXPECT_EQ(t.prefixes, 1u);
    EXPECT_LE(t.max_entries, 4u);
    if (ascending) {
      EXPECT_EQ(t.buckets, n / 4);
    } else {
      EXPECT_GE(t.buckets, n / 3);  // halves of 5: 2 and 3 entries
    }
    EXPECT_EQ(Contents(*ms.store).size(), n);
  }
}

// A new key under a prefix of many keys copies one path of the prefix's
// tree, not all its keys: the lines a put flushes stay within the path's
// nodes as the prefix grows (a flat bucket per prefix would copy and
// flush 16 bytes per key of the prefix on every new key).
TEST(KvTree, NewKeyFlushesOnePath) {
  SeedScope seed;
  Rng rng(seed);
  MemStore ms = NewMemStore("lbtree", "node=256");
  const uint32_t f = kv::StoreOptions{}.fanout;
  auto put = [&](uint64_t i) {
    const std::string k = "session:" + std::to_string(i);
    const std::string_view v = k;
    PMINDEX_ASSERT_OK(ms.store->Write(k, &v, kv::Store::Cond::kNone, 0));
  };
  const size_t n = 20000;
  for (size_t i = 0; i < n; ++i) put(1000000000000 + rng.uniform(1000000000000));
  const TreeShape t = ShapeOf(*ms.store);
  ASSERT_GE(t.max_level, 1);
  const uint64_t before = pm::ThreadCounters().lines_flushed;
  const size_t more = 500;
  for (size_t i = 0; i < more; ++i) put(1000000000000 + rng.uniform(1000000000000));
  const double per_put = double(pm::ThreadCounters().lines_flushed - before) / more;
  // One bucket and t.max_level directories of at most f entries, plus a
  // sibling merged now and then, the record, the version and the index's
  // own lines; far below the prefix's n keys * 16 bytes / 64.
  const double path = (kv::Bucket::Bytes(f) + t.max_level * kv::Directory::Bytes(f)) / 64.0;
  EXPECT_LT(per_put, 2 * path + 16) << "n " << n << ", levels " << t.max_level;
  EXPECT_LT(per_put, n * 16 / 64 / 10.0);
  PMINDEX_ASSERT_OK(ms.store->Verify());
}

// ------------------------------------------------------------ transactions

TEST(KvTransaction, SnapshotReadsAndOwnWrites) {
  auto kv = InMemory();
  KvStore& s = *kv;
  PMINDEX_ASSERT_OK(s.Put("a", "1"));
  PMINDEX_ASSERT_OK(s.Put("b", "2"));
  PMINDEX_ASSERT_OK(s.Put("c", "3"));
  auto tx = s.Begin();
  // Changes after the snapshot are invisible to it.
  PMINDEX_ASSERT_OK(s.Put("a", "10"));
  PMINDEX_ASSERT_OK(s.Remove("b"));
  PMINDEX_ASSERT_OK(s.Put("d", "4"));
  EXPECT_EQ(tx->Get("a").value(), "1");
  EXPECT_EQ(tx->Get("b").value(), "2");
  EXPECT_TRUE(tx->Get("d").status().is_not_found());
  Pairs r;
  tx->Range("", std::nullopt, 10, &r);
  EXPECT_EQ(r, Pairs({{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  // Own writes are visible to it, and to nobody else before Commit.
  PMINDEX_ASSERT_OK(tx->Put("e", "5"));
  PMINDEX_ASSERT_OK(tx->Remove("c"));
  EXPECT_TRUE(tx->Remove("c").is_not_found());
  EXPECT_TRUE(tx->Remove("zz").is_not_found());
  PMINDEX_ASSERT_OK(tx->Put("c", "33"));
  EXPECT_EQ(tx->Get("e").value(), "5");
  EXPECT_EQ(tx->Get("c").value(), "33");
  r.clear();
  tx->Range("b", std::string_view("e"), 10, &r);
  EXPECT_EQ(r, Pairs({{"b", "2"}, {"c", "33"}}));
  r.clear();
  tx->Range("", std::nullopt, 2, &r);
  EXPECT_EQ(r, Pairs({{"a", "1"}, {"b", "2"}}));
  EXPECT_TRUE(s.Get("e").status().is_not_found());
  EXPECT_EQ(s.Get("c").value(), "3");
  const uint64_t snap = tx->snapshot();
  // Disjoint writes: no conflict.
  PMINDEX_ASSERT_OK(tx->Commit());
  EXPECT_EQ(All(s), Pairs({{"a", "10"}, {"c", "33"}, {"d", "4"}, {"e", "5"}}));
  EXPECT_GT(s.GetVersioned("e").value().version, snap);
  EXPECT_TRUE(tx->Get("a").status().is_invalid_argument());
  EXPECT_TRUE(tx->Commit().is_invalid_argument());
}

TEST(KvTransaction, FirstCommitterWins) {
  auto kv = InMemory();
  KvStore& s = *kv;
  PMINDEX_ASSERT_OK(s.Put("x", "0"));
  auto t1 = s.Begin();
  auto t2 = s.Begin();
  PMINDEX_ASSERT_OK(t1->Put("x", "1"));
  PMINDEX_ASSERT_OK(t1->Put("y", "1"));
  PMINDEX_ASSERT_OK(t2->Put("x", "2"));
  PMINDEX_ASSERT_OK(t2->Put("z", "2"));
  PMINDEX_ASSERT_OK(t1->Commit());
  Status st = t2->Commit();
  EXPECT_TRUE(st.IsAborted()) << st.ToString();
  EXPECT_TRUE(st.is_aborted());
  // The loser changed nothing.
  EXPECT_EQ(All(s), Pairs({{"x", "1"}, {"y", "1"}}));
  EXPECT_EQ(s.Stats().aborts, 1u);
  // A single Put counts as a committer too, and so does a remove.
  auto t3 = s.Begin();
  PMINDEX_ASSERT_OK(t3->Put("y", "3"));
  PMINDEX_ASSERT_OK(s.Remove("y"));
  EXPECT_TRUE(t3->Commit().IsAborted());
  // A key created after the snapshot conflicts with a write of it.
  auto t4 = s.Begin();
  PMINDEX_ASSERT_OK(t4->Put("new", "4"));
  PMINDEX_ASSERT_OK(s.Put("new", "single"));
  EXPECT_TRUE(t4->Commit().IsAborted());
  EXPECT_EQ(s.Get("new").value(), "single");
  PMINDEX_ASSERT_OK(s.Verify());
}

TEST(KvTransaction, ValidatedReadsAbortOnLaterCommits) {
  auto kv = InMemory();
  KvStore& s = *kv;
  PMINDEX_ASSERT_OK(s.Put("w", "0"));
  // A key only read and validated conflicts like a written one: a change,
  // a remove, a creation after the snapshot.
  for (int round = 0; round < 3; ++round) {
    auto tx = s.Begin();
    const std::string key = round == 2 ? "created" : "w";
    PMINDEX_ASSERT_OK(tx->Validate(key));
    PMINDEX_ASSERT_OK(tx->Put("out", std::to_string(round)));
    const Status other = round == 0   ? s.Put("w", "1")
                         : round == 1 ? s.Remove("w")
                                      : s.Put("created", "x");
    PMINDEX_ASSERT_OK(other);
    EXPECT_TRUE(tx->Commit().IsAborted()) << round;
    EXPECT_TRUE(s.Get("out").status().is_not_found());
  }
  // Unchanged validated keys (present or absent) let the commit through;
  // without writes the commit only checks.
  auto ok = s.Begin();
  PMINDEX_ASSERT_OK(ok->Validate("created"));
  PMINDEX_ASSERT_OK(ok->Validate("never"));
  PMINDEX_ASSERT_OK(ok->Put("out", "y"));
  PMINDEX_ASSERT_OK(ok->Commit());
  EXPECT_EQ(s.Get("out").value(), "y");
  auto check = s.Begin();
  PMINDEX_ASSERT_OK(check->Validate("out"));
  PMINDEX_ASSERT_OK(s.Put("out", "z"));
  EXPECT_TRUE(check->Commit().IsAborted());
  EXPECT_TRUE(check->Validate("out").is_invalid_argument());
  PMINDEX_ASSERT_OK(s.Verify());
}

TEST(KvTransaction, AbortLeavesNothing) {
  auto kv = InMemory();
  KvStore& s = *kv;
  PMINDEX_ASSERT_OK(s.Put("keep", "1"));
  const uint64_t bytes = s.Stats().pm_bytes;
  {
    auto tx = s.Begin();
    for (char c = 'a'; c <= 'z'; ++c)
      PMINDEX_ASSERT_OK(tx->Put(std::string("t") + c, std::string(100, 'v')));
    PMINDEX_ASSERT_OK(tx->Remove("keep"));
    tx->Abort();
    EXPECT_TRUE(tx->Put("a", "b").is_invalid_argument());
  }
  {
    auto tx = s.Begin();
    PMINDEX_ASSERT_OK(tx->Put("dropped", "x"));
  }  // the destructor aborts
  EXPECT_EQ(All(s), Pairs({{"keep", "1"}}));
  EXPECT_EQ(s.Stats().pm_bytes, bytes);
  PMINDEX_ASSERT_OK(s.Verify());
}

// Old versions go once no snapshot can read them: memory does not grow
// under repeated overwrites, and a snapshot keeps what it needs.
TEST(KvTransaction, VersionsReclaimed) {
  auto kv = InMemory();
  KvStore& s = *kv;
  for (int k = 0; k < 20; ++k) PMINDEX_ASSERT_OK(s.Put("key" + std::to_string(k), "v0"));
  for (int i = 0; i < 20; ++i)
    for (int k = 0; k < 20; ++k)
      PMINDEX_ASSERT_OK(s.Put("key" + std::to_string(k), std::string(200, 'a' + i % 26)));
  const KvStats before = s.Stats();
  for (int i = 0; i < 300; ++i)
    for (int k = 0; k < 20; ++k)
      PMINDEX_ASSERT_OK(s.Put("key" + std::to_string(k), std::string(200, 'a' + i % 26)));
  const KvStats after = s.Stats();
  EXPECT_LE(after.versions, 2u * 20);
  EXPECT_LE(after.pm_bytes, before.pm_bytes + 64 * 1024);
  EXPECT_GE(after.reclaimed_versions, 300u * 20 - 40);
  // A snapshot pins the versions it can read.
  auto tx = s.Begin();
  const std::string seen = tx->Get("key3").value();
  for (int i = 0; i < 10; ++i) PMINDEX_ASSERT_OK(s.Put("key3", "later" + std::to_string(i)));
  EXPECT_EQ(tx->Get("key3").value(), seen);
  EXPECT_GE(s.Stats().versions, 20u + 10);
  tx->Abort();
  PMINDEX_ASSERT_OK(s.Put("key3", "last"));
  EXPECT_LE(s.Stats().versions, 2u * 20);
  // Removed keys go entirely once no snapshot needs them.
  for (int k = 0; k < 20; ++k) PMINDEX_ASSERT_OK(s.Remove("key" + std::to_string(k)));
  EXPECT_EQ(s.Stats().versions, 0u);
  EXPECT_EQ(s.Stats().index.entries, 0u);
  PMINDEX_ASSERT_OK(s.Verify());
}

// A crash inside a commit: before the commit word nothing of it survives,
// after it everything does (the versions not yet finalized are finalized
// by recovery), and recovery leaves no block behind.
TEST(KvTransaction, CrashInsideCommit) {
  for (int after_commit = 0; after_commit < 2; ++after_commit) {
    for (size_t links = 0; links <= 3; ++links) {
      if (after_commit && links > 0) break;
      SCOPED_TRACE("after_commit " + std::to_string(after_commit) + " links " + std::to_string(links));
      MemStore ms = NewMemStore("lbtree", "");
      Model m;
      for (int i = 0; i < 40; ++i) {
        const std::string k = "key" + std::to_string(i), v = std::string(i, 'v');
        const std::string_view sv = v;
        PMINDEX_ASSERT_OK(ms.store->Write(k, &sv, kv::Store::Cond::kNone, 0));
        m[k] = v;
      }
      kv::Store::Writes w;
      w["key1"] = "one";                                   // replaces
      w["key2"] = std::nullopt;                            // removes
      w["new-a"] = "a";                                    // new key, new prefix
      w["key3-new"] = std::string(kv::Version::kMaxInline + 5, 'L');  // new key in a bucket, value block
      const Model after = Applied(m, w);
      ms.store->StopNextCommit({after_commit ? kv::CommitStop::kAfterCommit : kv::CommitStop::kBeforeCommit, links});
      Status st = ms.store->Commit(ms.store->visible_ts(), w);
      EXPECT_EQ(st.ok(), after_commit == 1) << st.ToString();
      MemStore again = OpenBytes(CrashBytes(*ms.pool));
      ASSERT_NE(again.store, nullptr);
      PMINDEX_ASSERT_OK(again.store->Verify());
      EXPECT_EQ(Contents(*again.store), after_commit ? after : m);
      ExpectNoLeak(*again.store);
    }
  }
}

// ------------------------------------------------------------ every persistent kind

class KvOverKind : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(KvOverKind, OpsCrashImagesAndCommitCrashes) {
  const auto& [kind, options] = GetParam();
  SeedScope seed;
  Rng rng(seed);
  MemStore ms = NewMemStore(kind, options, 5);
  const std::vector<std::string> keys = KeyPool(rng, 150);
  Model m;
  uint64_t tag = 0;
  RandomOps(*ms.store, m, rng, keys, scenario::Ops(800, 200), &tag);
  PMINDEX_ASSERT_OK(ms.store->Verify());
  // A crash at a quiescent point, then one inside a commit before its
  // commit word (two keys linked) and one after it.
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    kv::Store::Writes w;
    for (int i = 0; i < 4; ++i) {
      const std::string& k = keys[rng.uniform(keys.size())];
      if (rng.uniform(3) == 0 && m.count(k)) {
        w[k] = std::nullopt;
      } else {
        w[k] = ValueOf(rng, ++tag);
      }
    }
    const Model after = Applied(m, w);
    if (step == 1) ms.store->StopNextCommit({kv::CommitStop::kBeforeCommit, 2});
    if (step == 2) ms.store->StopNextCommit({kv::CommitStop::kAfterCommit, 0});
    if (step > 0) {
      Status st = ms.store->Commit(ms.store->visible_ts(), w);
      ASSERT_EQ(st.ok(), step == 2) << st.ToString();
      if (step == 2) m = after;
    }
    MemStore again = OpenBytes(CrashBytes(*ms.pool), 5);
    ASSERT_NE(again.store, nullptr);
    PMINDEX_ASSERT_OK(again.store->Verify());
    ASSERT_EQ(Contents(*again.store), m);
    ExpectNoLeak(*again.store);
    RandomOps(*again.store, m, rng, keys, scenario::Ops(200, 50), &tag);
    ms = std::move(again);
  }
  // A clean close and reopen.
  auto bytes = [&] {
    PMINDEX_EXPECT_OK(ms.store->Close());
    ms.store.reset();
    std::vector<std::byte> b = CrashBytes(*ms.pool);
    const uint64_t one = 1;
    std::memcpy(b.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
    return b;
  }();
  MemStore clean = OpenBytes(bytes, 5);
  ASSERT_NE(clean.store, nullptr);
  ASSERT_EQ(Contents(*clean.store), m);
  ExpectNoLeak(*clean.store);
}

INSTANTIATE_TEST_SUITE_P(Kinds, KvOverKind, ::testing::ValuesIn(testing::PersistentKinds()),
                         [](const auto& info) { return testing::KindName(info.param); });

// ------------------------------------------------------------ the pool's kind both ways

TEST(Kv, WrongKindBothWays) {
  testing::TempDir dir;
  const std::string plain = dir.path("plain.pool"), store = dir.path("store.pool");
  DbOptions small;  // small files: quick to create under the sanitizers
  small.size = 8ull << 20;
  small.max_size = 64ull << 20;
  {
    auto db = Db::Create(plain, "lbtree", "", small);
    PMINDEX_ASSERT_OK(db);
    PMINDEX_ASSERT_OK(db.value()->Insert(1, 2));
  }
  {
    auto kv = KvStore::Create(store, "lbtree", "", small);
    PMINDEX_ASSERT_OK(kv);
    PMINDEX_ASSERT_OK(kv.value()->Put("k", "v"));
  }
  const auto plain_before = testing::Snapshot::Of(plain), store_before = testing::Snapshot::Of(store);
  auto kv = KvStore::Open(plain);
  EXPECT_EQ(kv.status().code(), Status::Code::kWrongKind) << kv.status().ToString();
  auto db = Db::Open(store);
  EXPECT_EQ(db.status().code(), Status::Code::kWrongKind) << db.status().ToString();
  // Neither refusal wrote a byte.
  EXPECT_TRUE(testing::Snapshot::Of(plain) == plain_before);
  EXPECT_TRUE(testing::Snapshot::Of(store) == store_before);
  // And each opens as what it is.
  PMINDEX_EXPECT_OK(KvStore::Open(store));
  PMINDEX_EXPECT_OK(Db::Open(plain));
  // A volatile kind cannot hold a store.
  EXPECT_TRUE(KvStore::CreateInMemory("dram-btree").status().is_invalid_argument());
  EXPECT_TRUE(KvStore::CreateInMemory("no-such-kind").status().is_invalid_argument());
  EXPECT_TRUE(KvStore::Create(dir.path("x.pool"), "dram-btree", "", small).status().is_invalid_argument());
  EXPECT_FALSE(std::filesystem::exists(dir.path("x.pool")));
  auto info = Pool::Inspect(store);
  PMINDEX_ASSERT_OK(info);
  EXPECT_EQ(info.value().incompat_flags, pm::kIncompatKvStore);
}

// ------------------------------------------------------------ out of space

TEST(Kv, OutOfSpaceLeavesTheStoreUsable) {
  DbOptions o;
  o.size = 4ull << 20;
  o.max_size = 4ull << 20;
  auto kv = KvStore::CreateInMemory("lbtree", "", o);
  PMINDEX_ASSERT_OK(kv);
  KvStore& s = *kv.value();
  Model m;
  Status st;
  int i = 0;
  for (; i < 100000; ++i) {
    const std::string k = "key" + std::to_string(i * 7919 % 100003);
    const std::string v(i % 3 == 0 ? 100 : 3000, static_cast<char>('a' + i % 26));
    st = s.Put(k, v);
    if (!st.ok()) break;
    m[k] = v;
  }
  ASSERT_TRUE(st.is_out_of_space()) << st.ToString();
  PMINDEX_ASSERT_OK(s.Verify());
  ASSERT_EQ(All(s), Pairs(m.begin(), m.end()));
  // A transaction that does not fit changes nothing either.
  auto tx = s.Begin();
  for (int j = 0; j < 200; ++j)
    PMINDEX_ASSERT_OK(tx->Put("tx" + std::to_string(j), std::string(5000, 't')));
  EXPECT_TRUE(tx->Commit().is_out_of_space());
  PMINDEX_ASSERT_OK(s.Verify());
  ASSERT_EQ(All(s), Pairs(m.begin(), m.end()));
  // Removing makes room again.
  int removed = 0;
  for (auto it = m.begin(); it != m.end() && removed < 200; ++removed) {
    PMINDEX_ASSERT_OK(s.Remove(it->first));
    it = m.erase(it);
  }
  PMINDEX_ASSERT_OK(s.Put("after", "room"));
  m["after"] = "room";
  ASSERT_EQ(All(s), Pairs(m.begin(), m.end()));
  PMINDEX_ASSERT_OK(s.Verify());
}

// ------------------------------------------------------------ concurrency

// Transfers between accounts in transactions (retried when they lose),
// single Puts and Gets on other keys, and readers that sum every account
// in one snapshot: the total never changes.
TEST(KvConcurrency, TransfersConserveTheTotal) {
  SeedScope seed;
  auto kv = InMemory();
  KvStore& s = *kv;
  constexpr int kAccounts = 8;  // few: concurrent transfers conflict
  constexpr int kInitial = 1000;
  auto acct = [](int i) { return "acct:" + std::to_string(i); };
  for (int i = 0; i < kAccounts; ++i) PMINDEX_ASSERT_OK(s.Put(acct(i), std::to_string(kInitial)));
  const int transfers = static_cast<int>(scenario::Ops(1500, 200));
  std::atomic<int> committed{0}, aborted{0}, bad_sums{0}, failures{0}, sums{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int t = 0; t < 3; ++t) {
    th.emplace_back([&, t] {
      Rng rng(seed + t);
      for (int n = 0; n < transfers; ++n) {
        for (;;) {
          const int a = static_cast<int>(rng.uniform(kAccounts));
          const int b = (a + 1 + static_cast<int>(rng.uniform(kAccounts - 1))) % kAccounts;
          auto tx = s.Begin();
          auto va = tx->Get(acct(a)), vb = tx->Get(acct(b));
          if (!va.ok() || !vb.ok()) {
            ++failures;
            return;
          }
          const int amount = static_cast<int>(rng.uniform(20));
          if (!tx->Put(acct(a), std::to_string(std::stoi(va.value()) - amount)).ok() ||
              !tx->Put(acct(b), std::to_string(std::stoi(vb.value()) + amount)).ok()) {
            ++failures;
            return;
          }
          Status st = tx->Commit();
          if (st.ok()) {
            ++committed;
            break;
          }
          if (!st.IsAborted()) {
            ++failures;
            return;
          }
          ++aborted;
        }
      }
    });
  }
  // Readers: every snapshot sums to the total, by Get and by Range.
  th.emplace_back([&] {
    while (!stop.load()) {
      auto tx = s.Begin();
      long sum = 0;
      for (int i = 0; i < kAccounts; ++i) sum += std::stol(tx->Get(acct(i)).value());
      Pairs r;
      tx->Range("acct:", std::string_view("acct;"), SIZE_MAX, &r);
      long sum2 = 0;
      for (const auto& [k, v] : r) sum2 += std::stol(v);
      if (sum != long{kAccounts} * kInitial || sum2 != sum || r.size() != kAccounts) ++bad_sums;
      ++sums;
    }
  });
  // Single calls on other keys.
  th.emplace_back([&] {
    Rng rng(seed + 99);
    int i = 0;
    while (!stop.load()) {
      const std::string k = "other:" + std::to_string(rng.uniform(64));
      if (!s.Put(k, std::to_string(++i)).ok()) ++failures;
      if (!s.Get(k).ok()) ++failures;
      if (rng.uniform(4) == 0 && !s.Remove(k).ok()) ++failures;
    }
  });
  for (int t = 0; t < 3; ++t) th[t].join();
  while (sums.load() < 20) std::this_thread::yield();  // the readers saw the writers' work
  stop.store(true);
  for (size_t t = 3; t < th.size(); ++t) th[t].join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(bad_sums.load(), 0);
  EXPECT_EQ(committed.load(), 3 * transfers);
  EXPECT_EQ(s.Stats().aborts, static_cast<uint64_t>(aborted.load()));
  std::printf("transfers: %d committed, %d aborted (first committer wins), %d snapshot sums\n", committed.load(),
              aborted.load(), sums.load());
  long sum = 0;
  for (int i = 0; i < kAccounts; ++i) sum += std::stol(s.Get(acct(i)).value());
  EXPECT_EQ(sum, long{kAccounts} * kInitial);
  PMINDEX_ASSERT_OK(s.Verify());
}

// Single Puts of one hot key from several threads, with Gets and
// GetVersioned: each thread's own writes are seen in order, versions grow.
TEST(KvConcurrency, HotKeyLinearizable) {
  auto kv = InMemory();
  KvStore& s = *kv;
  PMINDEX_ASSERT_OK(s.Put("hot", "0"));
  std::atomic<int> failures{0};
  const int n = static_cast<int>(scenario::Ops(2000, 200));
  std::vector<std::thread> th;
  for (int t = 0; t < 3; ++t) {
    th.emplace_back([&, t] {
      uint64_t last = 0;
      for (int i = 0; i < n; ++i) {
        if (!s.Put("hot", std::to_string(t * 1000000 + i)).ok()) ++failures;
        auto g = s.GetVersioned("hot");
        if (!g.ok() || g.value().version <= last) ++failures;
        if (g.ok()) last = g.value().version;
        if (i % 16 == 0 && !s.Put("cold:" + std::to_string(t) + ":" + std::to_string(i), "x").ok()) ++failures;
      }
    });
  }
  for (auto& x : th) x.join();
  EXPECT_EQ(failures.load(), 0);
  PMINDEX_ASSERT_OK(s.Verify());
  EXPECT_LE(s.Stats().versions, s.Stats().keys + 4);
}

// Two writers churn keys under one prefix (fanout 4: every few writes
// split, merge or collapse nodes of its tree) while a reader reads and
// scans the prefix: the keys nobody writes are always there, with their
// values, in order. Under TSan this checks that readers of the old tree
// and writers of the new one share nothing but published nodes.
TEST(KvConcurrency, SharedPrefixTreeReshapedUnderReaders) {
  MemStore ms = NewMemStore("lbtree", "node=256", 1 << 20, 4);
  kv::Store& s = *ms.store;
  auto stable = [](int i) { return "shared:s" + std::to_string(1000 + i); };
  const int kStable = 100;
  for (int i = 0; i < kStable; ++i) {
    const std::string k = stable(i);
    const std::string_view v = k;
    PMINDEX_ASSERT_OK(s.Write(k, &v, kv::Store::Cond::kNone, 0));
  }
  const int n = static_cast<int>(scenario::Ops(3000, 400));
  std::atomic<int> failures{0}, writers{2};
  std::vector<std::thread> th;
  for (int t = 0; t < 2; ++t) {
    th.emplace_back([&, t] {
      for (int i = 0; i < n; ++i) {
        // Keys between and around the stable ones, put then removed.
        const std::string k = "shared:s" + std::to_string(1000 + (i * 7 + t) % kStable) + "w" + std::to_string(t);
        const std::string_view v = k;
        if (!s.Write(k, &v, kv::Store::Cond::kNone, 0).ok()) ++failures;
        if (i % 3 != 0 && !s.Write(k, nullptr, kv::Store::Cond::kPresent, 0).ok()) ++failures;
      }
      --writers;
    });
  }
  th.emplace_back([&] {
    Rng rng(7);
    while (writers.load() > 0) {
      const std::string k = stable(static_cast<int>(rng.uniform(kStable)));
      auto r = s.Read(k, true);
      if (!r.ok() || r.value().value != k) ++failures;
      int seen = 0;
      std::string prev;
      Status st = s.ScanAt(s.visible_ts(), "shared:", std::nullopt, [&](std::string_view key, std::string_view v) {
        if (!prev.empty() && key <= prev) ++failures;
        if (key.find('w') == std::string_view::npos) {
          seen += key == stable(seen) ? 1 : 0;
          if (v != key) ++failures;
        }
        prev.assign(key);
        return true;
      });
      if (!st.ok() || seen != kStable) ++failures;
    }
  });
  for (auto& x : th) x.join();
  EXPECT_EQ(failures.load(), 0);
  PMINDEX_ASSERT_OK(s.Verify());
  ExpectNoLeak(s);
}

}  // namespace
}  // namespace pmindex
