// fastfair unit tests (the node layout: sorted_node_test.cc): every
// search mode against a std::map oracle at several node sizes
// (splits, root growth, deletes and merges, scans across leaves),
// option checks, and the flushes and fences of one shift.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "pm/persist.h"
#include "pmindex/db.h"
#include "trees/sorted_node/fastfair.h"
#include "unit/sorted_node_checks.h"

namespace pmindex::fastfair {
namespace {

using testing_util::ConfigName;
using testing_util::TestSeed;

// The node layout (shared with circtree): sorted_node_test.cc.

TEST(FastFairOptions, BadCombinationsAreRefused) {
  for (const char* bad : {"node=100", "node=300", "sentinel=maybe", "search=sentinel,sentinel=off",
                          "search=hash", "fingerprints=on,sentinel=on", "fingerprints=on,search=sentinel",
                          "fingerprint=on"}) {
    auto db = Db::CreateInMemory("fastfair", bad);
    EXPECT_TRUE(db.status().is_invalid_argument()) << bad << ": " << db.status().ToString();
  }
}

class FastFairOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(FastFairOracle, MatchesAMapThroughSplitsAndDeletes) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  auto db = Db::CreateInMemory("fastfair", GetParam());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Db& d = *db.value();
  std::mt19937_64 rng(seed);
  std::map<Key, Value> oracle;
  std::vector<Key> keys;
  for (int i = 0; i < 30000; ++i) {
    // Small and huge keys, 0 and UINT64_MAX among them.
    Key k = i == 0 ? 0 : i == 1 ? UINT64_MAX : (rng() % 4 == 0 ? rng() % 5000 : rng());
    Value v = rng() % 3 == 0 ? 0 : rng();  // equal values are allowed
    Status s = d.Insert(k, v);
    if (oracle.count(k)) {
      ASSERT_TRUE(s.is_already_exists());
    } else {
      ASSERT_TRUE(s.ok()) << s.ToString();
      oracle[k] = v;
      keys.push_back(k);
    }
  }
  ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
  // Remove three quarters in random order: leaves empty out.
  std::shuffle(keys.begin(), keys.end(), rng);
  for (size_t i = 0; i < keys.size() * 3 / 4; ++i) {
    ASSERT_TRUE(d.Remove(keys[i]).ok());
    oracle.erase(keys[i]);
  }
  for (size_t i = 0; i < keys.size() / 8; ++i) {
    ASSERT_TRUE(d.Remove(keys[i]).is_not_found());
    ASSERT_TRUE(d.Upsert(keys[i], i).ok());
    oracle[keys[i]] = i;
  }
  ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
  for (Key k : keys) {
    auto it = oracle.find(k);
    Result<Value> v = d.Get(k);
    if (it == oracle.end()) {
      EXPECT_TRUE(v.status().is_not_found()) << k;
    } else {
      ASSERT_TRUE(v.ok()) << k;
      EXPECT_EQ(v.value(), it->second) << k;
    }
  }
  ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
}

INSTANTIATE_TEST_SUITE_P(Configs, FastFairOracle,
                         ::testing::Values("node=256", "node=4096", "node=512,search=linear",
                                           "node=1024,search=binary", "node=512,sentinel=off",
                                           "node=4096,sentinel=off,search=binary", "node=512,fingerprints=on",
                                           "node=4096,fingerprints=on,search=binary"),
                         ConfigName);

// Deletes merge underfull nodes into their left neighbours, at every
// level, and an inner root left with one child hands the root down: a tree
// emptied by deletes is one leaf again, and one thinned out keeps few
// nodes. Inserts after the merges split as before.
TEST(FastFairMerge, DeletesMergeNodesAndShrinkTheTree) {
  for (const char* opt : {"node=256", "node=256,sentinel=off", "node=256,fingerprints=on"})
    testing_util::ExpectDeletesShrinkTheTree("fastfair", opt, 4);
}

// An insert in the middle of a leaf: the copy into the free slot and the
// count are each made durable before the shift, then one flush and fence
// per line the shift leaves and one for the new record. Counted on a
// 4 KiB leaf filled to 60 records (15 lines) by ascending inserts.
TEST(FastFairCost, InsertAtTheFrontShiftsLineByLine) {
  auto db = Db::CreateInMemory("fastfair", "node=4096,sentinel=off");
  ASSERT_TRUE(db.ok());
  Db& d = *db.value();
  for (Key k = 1; k <= 60; ++k) ASSERT_TRUE(d.Insert(k * 10, k).ok());
  const uint64_t lines = pm::ThreadLinesFlushed(), fences = pm::ThreadFences();
  ASSERT_TRUE(d.Insert(5, 5).ok());  // slot 0: every record moves
  // Slot 60 (line 15): copy + count = 2 fences; the shift leaves lines
  // 14..1 (the line of slot 60 was made durable already, so 14 more), and
  // the new record's line 0: 2 + 14 + 1 = 17 fences and as many lines.
  EXPECT_EQ(pm::ThreadFences() - fences, 17u);
  EXPECT_EQ(pm::ThreadLinesFlushed() - lines, 17u);
  ASSERT_TRUE(d.Verify().ok());
  EXPECT_EQ(d.Get(5).value(), 5u);
  EXPECT_EQ(d.Get(600).value(), 60u);
}

TEST(FastFairNuma, NodeVisitsAreMetered) {
  ASSERT_NO_FATAL_FAILURE(testing_util::ExpectNodeVisitsMetered("fastfair"));
}

}  // namespace
}  // namespace pmindex::fastfair
