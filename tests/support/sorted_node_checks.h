// Test helpers shared by the unit tests of the two sorted-node trees
// (fastfair_test.cc, circtree_test.cc; common/sorted_node.h): the seed of
// a randomized test, the name of a parameterized config, and the range
// checks of a tree against its std::map oracle.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/db.h"
#include "support/oracle.h"
#include "support/seed.h"
#include "support/status.h"

namespace pmindex::testing_util {

using testing::TestSeed;

// A gtest parameter name for an options string ("node=512,search=binary"
// -> "node_512_search_binary").
inline std::string ConfigName(const ::testing::TestParamInfo<const char*>& i) {
  std::string n = i.param;
  for (char& ch : n)
    if (ch == '=' || ch == ',') ch = '_';
  return n;
}

// The whole range equals the oracle, and a bounded range of 100 from the
// oracle's middle key starts there (call with ASSERT_NO_FATAL_FAILURE).
inline void ExpectRangesMatch(Db& d, const std::map<Key, Value>& oracle) {
  std::vector<KV> all;
  d.Range(0, std::nullopt, SIZE_MAX, &all);
  ASSERT_EQ(all.size(), oracle.size());
  size_t i = 0;
  for (const auto& [k, v] : oracle) {
    EXPECT_EQ(all[i].key, k);
    EXPECT_EQ(all[i].value, v);
    ++i;
  }
  if (oracle.empty()) return;
  auto mid = std::next(oracle.begin(), static_cast<long>(oracle.size() / 2));
  std::vector<KV> part;
  d.Range(mid->first, std::nullopt, 100, &part);
  ASSERT_EQ(part.size(), std::min<size_t>(100, oracle.size() / 2 + oracle.size() % 2));
  EXPECT_EQ(part.front().key, mid->first);
}

// Deletes that merge nodes shrink the tree (fastfair, circtree): 4000 keys
// inserted, all but one in 50 removed from both ends toward the middle,
// then the rest; the tree verifies, holds exactly the kept pairs, ends as
// one empty leaf and grows again. min_height: the full tree's height at
// least (so that inner nodes merge too).
inline void ExpectDeletesShrinkTheTree(const std::string& kind, const std::string& opt, uint32_t min_height) {
  SCOPED_TRACE(kind + " " + opt);
  auto db = Db::CreateInMemory(kind, opt);
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  constexpr Key kN = 4000;
  for (Key k = 0; k < kN; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 7 + 3, k));
  const IndexStats full = d.Stats();
  ASSERT_GE(full.height, min_height);
  for (Key i = 0; i < kN / 2; ++i) {
    for (Key k : {i, kN - 1 - i}) {
      if (k % 50 != 0) {
        PMINDEX_ASSERT_OK(d.Remove(k * 7 + 3)) << k;
      }
    }
  }
  PMINDEX_ASSERT_OK(d.Verify());
  const IndexStats thin = d.Stats();
  EXPECT_EQ(thin.entries, kN / 50);
  // Merged nodes hold at most 3/4 of their slots and unmerged neighbours
  // at least a quarter between them: at most one leaf per key kept.
  EXPECT_LE(thin.leaves, kN / 50);
  EXPECT_LT(thin.leaves, full.leaves / 4);
  EXPECT_LT(thin.height, full.height);
  for (Key k = 0; k < kN; ++k) {
    Result<Value> v = d.Get(k * 7 + 3);
    if (k % 50 == 0) {
      PMINDEX_ASSERT_OK(v) << k;
      EXPECT_EQ(v.value(), k);
    } else {
      EXPECT_TRUE(v.status().is_not_found()) << k;
    }
  }
  for (Key k = 0; k < kN; k += 50) PMINDEX_ASSERT_OK(d.Remove(k * 7 + 3));
  PMINDEX_ASSERT_OK(d.Verify());
  const IndexStats empty = d.Stats();
  EXPECT_EQ(empty.entries, 0u);
  EXPECT_EQ(empty.height, 1u);
  EXPECT_EQ(empty.leaves, 1u);
  // The emptied tree grows again.
  for (Key k = 0; k < 500; ++k) PMINDEX_ASSERT_OK(d.Insert(k, k + 1));
  PMINDEX_ASSERT_OK(d.Verify());
  std::vector<KV> all;
  d.Range(0, std::nullopt, SIZE_MAX, &all);
  ASSERT_EQ(all.size(), 500u);
  for (Key k = 0; k < 500; ++k) EXPECT_EQ(all[k].value, k + 1);
}

// Db::CreateInMemory(kind, o) refuses every option string of `bad` with
// InvalidArgument and accepts every one of `good`.
inline void ExpectOptions(const std::string& kind, std::initializer_list<const char*> bad,
                          std::initializer_list<const char*> good) {
  for (const char* o : bad) {
    auto db = Db::CreateInMemory(kind, o);
    EXPECT_TRUE(db.status().is_invalid_argument()) << kind << " " << o << ": " << db.status().ToString();
  }
  for (const char* o : good) {
    auto db = Db::CreateInMemory(kind, o);
    PMINDEX_EXPECT_OK(db) << kind << " " << o;
  }
}

// The bytes of `pool` as a crash at a quiescent point leaves them
// (crash), or as a clean close does: *idx closed and destroyed first, then
// the clean flag set as Pool::Close sets it.
inline std::vector<std::byte> PoolImage(Pool& pool, std::unique_ptr<Index>* idx, bool crash) {
  if (!crash) {
    PMINDEX_EXPECT_OK((*idx)->close());
    idx->reset();
  }
  std::vector<std::byte> bytes(pool.bytes().begin(), pool.bytes().end());
  if (!crash) {
    const uint64_t one = 1;
    std::memcpy(bytes.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
  }
  return bytes;
}

// NUMA node-visit metering (alloc/numa_meter.h) of the sorted-node tree
// `kind` on two simulated nodes: every node a lookup descends through is
// one visit, local for the thread on the node that allocated the tree
// (node 0) and remote for a thread on node 1; a scan adds one visit per
// further leaf; an insert visits at least its path; with metering off
// nothing is counted. (Call with ASSERT_NO_FATAL_FAILURE.)
inline void ExpectNodeVisitsMetered(const std::string& kind) {
  struct Scope {  // simulated nodes and metering for the pools made inside
    std::shared_ptr<alloc::Topology> topo = alloc::Topology::Simulated(2);
    Scope() {
      alloc::Topology::SetDefault(topo);
      alloc::SetNumaMetering(true);
    }
    ~Scope() {
      alloc::SetNumaMetering(false);
      alloc::Topology::SetDefault(nullptr);
    }
  } scope;
  const std::string options = "node=256";
  PoolOptions po;
  po.size = 16ull << 20;
  po.kind = kind;
  po.index_options = options;
  auto pool = Pool::CreateInMemory(po);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  alloc::Topology& topo = *scope.topo;
  ASSERT_TRUE(topo.place_this_thread(0).ok());
  auto made = create_index(kind, options, pool.value().get());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Index& t = *made.value();
  const Key n = 4000;
  std::vector<KV> load;
  for (Key k = 1; k <= n; ++k) load.push_back(KV{2 * k, k});
  ASSERT_TRUE(t.bulk_load(load, 0.7).ok());
  const IndexStats st = t.stats();
  ASSERT_GE(st.height, 3u);  // inner levels too, not only the root leaf

  // n lookups of a bulk-loaded tree: height visits each, no B-link steps.
  auto lookups = [&t, n] {
    const pm::Counters before = pm::ThreadCounters();
    for (Key k = 1; k <= n; ++k) EXPECT_EQ(t.lookup(2 * k).value_or(0), k);
    return pm::ThreadCounters() - before;
  };
  const pm::Counters here = lookups();
  EXPECT_EQ(here.numa_local_visits, n * st.height);
  EXPECT_EQ(here.numa_remote_visits, 0u);
  pm::Counters there;
  std::thread other([&] {
    EXPECT_TRUE(topo.place_this_thread(1).ok());
    there = lookups();
  });
  other.join();
  EXPECT_EQ(there.numa_remote_visits, n * st.height);
  EXPECT_EQ(there.numa_local_visits, 0u);

  // A scan of every pair: the descent, then each further leaf once.
  std::vector<KV> out(n);
  pm::Counters before = pm::ThreadCounters();
  ASSERT_EQ(t.scan(0, n, out.data()), n);
  pm::Counters d = pm::ThreadCounters() - before;
  EXPECT_EQ(d.numa_local_visits, st.height + st.leaves - 1);

  // Inserts: at least the path of each.
  before = pm::ThreadCounters();
  for (Key k = 1; k <= 100; ++k) ASSERT_TRUE(t.insert(2 * k + 1, k).ok());
  d = pm::ThreadCounters() - before;
  EXPECT_GE(d.numa_local_visits, 100 * st.height);

  alloc::SetNumaMetering(false);
  before = pm::ThreadCounters();
  EXPECT_EQ(t.lookup(2).value_or(0), 1u);
  ASSERT_EQ(t.scan(0, 10, out.data()), 10u);
  d = pm::ThreadCounters() - before;
  EXPECT_EQ(d.numa_local_visits + d.numa_remote_visits, 0u);
}

// The oracle test of the sorted-node trees (fastfair, circtree), through
// Db: `inserts` inserts (op i draws key(i, rng), then a value that is 0
// one time in three, from a generator seeded with `seed`; an existing key
// must answer AlreadyExists), Verify() every verify_every inserts (0:
// never); then three quarters of the keys removed in random order (with
// interleave, every fourth removal is followed by an insert of a random
// key), the first eighth removed again (NotFound) and upserted back.
// Checked at the end: Verify(), every pair of the map by Get, every
// removed key NotFound, and the ranges (ExpectRangesMatch). Call with
// ASSERT_NO_FATAL_FAILURE.
struct InsertRemoveOracle {
  uint64_t seed = 0;
  int inserts = 30000;
  std::function<Key(int, std::mt19937_64&)> key;
  int verify_every = 0;
  bool interleave = false;
};

inline void RunInsertRemoveOracle(Db& d, const InsertRemoveOracle& o) {
  std::mt19937_64 rng(o.seed);
  std::map<Key, Value> oracle;
  std::vector<Key> keys;
  for (int i = 0; i < o.inserts; ++i) {
    const Key k = o.key(i, rng);
    const Value v = rng() % 3 == 0 ? 0 : rng();  // equal values are allowed
    Status s = d.Insert(k, v);
    if (oracle.count(k)) {
      ASSERT_TRUE(s.is_already_exists()) << k;
    } else {
      PMINDEX_ASSERT_OK(s);
      oracle[k] = v;
      keys.push_back(k);
    }
    if (o.verify_every > 0 && i % o.verify_every == o.verify_every - 1) {
      PMINDEX_ASSERT_OK(d.Verify());
    }
  }
  PMINDEX_ASSERT_OK(d.Verify());
  // Remove three quarters in random order: leaves empty out.
  std::shuffle(keys.begin(), keys.end(), rng);
  for (size_t i = 0; i < keys.size() * 3 / 4; ++i) {
    PMINDEX_ASSERT_OK(d.Remove(keys[i]));
    oracle.erase(keys[i]);
    if (o.interleave && i % 4 == 0) {  // both shift directions after deletes
      const Key k = rng();
      if (!oracle.count(k)) {
        PMINDEX_ASSERT_OK(d.Insert(k, k ^ 1));
        oracle[k] = k ^ 1;
      }
    }
  }
  for (size_t i = 0; i < keys.size() / 8; ++i) {
    ASSERT_TRUE(d.Remove(keys[i]).is_not_found());
    PMINDEX_ASSERT_OK(d.Upsert(keys[i], i));
    oracle[keys[i]] = i;
  }
  PMINDEX_ASSERT_OK(d.Verify());
  for (const auto& [k, v] : oracle) {
    Result<Value> got = d.Get(k);
    PMINDEX_ASSERT_OK(got) << k;
    EXPECT_EQ(got.value(), v) << k;
  }
  for (Key k : keys) {
    if (!oracle.count(k)) {
      EXPECT_TRUE(d.Get(k).status().is_not_found()) << k;
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectRangesMatch(d, oracle));
}

// The reopen test of trees that rebuild a DRAM part at open (pactree's
// search layer, the divided skip list's upper levels): keys 0, 3, ..,
// 5997 (value k / 3) bulk-loaded into the empty *idx at `fill`, a second
// bulk_load refused, every other key removed and 500 keys inserted between
// them; then from a crash image and from a clean close's (*idx closed and
// destroyed), the reopened index verifies, holds exactly those 1,500
// pairs, passes check_stats (what the rebuilt part must show) and closes.
// Call with ASSERT_NO_FATAL_FAILURE.
inline void ExpectBulkLoadSurvivesReopen(
    Pool& pool, std::unique_ptr<Index>* idx, double fill,
    const std::function<void(const IndexStats&)>& check_stats) {
  std::vector<KV> load;
  for (Key k = 0; k < 2000; ++k) load.push_back(KV{k * 3, k});
  PMINDEX_ASSERT_OK((*idx)->bulk_load(load, fill));
  EXPECT_TRUE((*idx)->bulk_load(load, 1.0).is_invalid_argument());  // not empty any more
  for (Key k = 0; k < 2000; k += 2) PMINDEX_ASSERT_OK((*idx)->remove(k * 3));
  for (Key k = 0; k < 500; ++k) PMINDEX_ASSERT_OK((*idx)->insert(k * 3 + 1, k));
  PMINDEX_ASSERT_OK((*idx)->verify());
  for (bool crash : {true, false}) {
    SCOPED_TRACE(crash ? "after a crash" : "after a clean close");
    const std::vector<std::byte> bytes = PoolImage(pool, idx, crash);
    testing::Reopened re;
    PMINDEX_ASSERT_OK(testing::ReopenBytes(bytes, &re));
    Index& t = *re.idx;
    PMINDEX_ASSERT_OK(t.verify());
    const IndexStats s = t.stats();
    EXPECT_EQ(s.entries, 1500u);
    check_stats(s);
    for (Key k = 0; k < 2000; ++k)
      ASSERT_EQ(t.lookup(k * 3), k % 2 == 1 ? std::optional<Value>(k) : std::nullopt);
    for (Key k = 0; k < 500; ++k) ASSERT_EQ(t.lookup(k * 3 + 1).value_or(~0ull), k);
    PMINDEX_ASSERT_OK(t.close());
  }
}

}  // namespace pmindex::testing_util
