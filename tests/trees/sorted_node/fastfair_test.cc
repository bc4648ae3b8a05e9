// fastfair unit tests (the node layout: common/sorted_node_test.cc): every
// search mode against a std::map oracle at several node sizes
// (splits, root growth, deletes and merges, scans across leaves),
// option checks, and the flushes and fences of one shift.
#include "trees/sorted_node/fastfair.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "pm/persist.h"
#include "pmindex/db.h"
#include "support/sorted_node_checks.h"
#include "support/status.h"

namespace pmindex::fastfair {
namespace {

using testing_util::ConfigName;
using testing_util::TestSeed;

// The node layout (shared with circtree): common/sorted_node_test.cc.

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
  PMINDEX_ASSERT_OK(db);
  testing_util::InsertRemoveOracle o;
  o.seed = seed;
  // Small and huge keys, 0 and UINT64_MAX among them.
  o.key = [](int i, std::mt19937_64& rng) -> Key {
    return i == 0 ? 0 : i == 1 ? UINT64_MAX : (rng() % 4 == 0 ? rng() % 5000 : rng());
  };
  ASSERT_NO_FATAL_FAILURE(testing_util::RunInsertRemoveOracle(*db.value(), o));
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
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  for (Key k = 1; k <= 60; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 10, k));
  const uint64_t lines = pm::ThreadLinesFlushed(), fences = pm::ThreadFences();
  PMINDEX_ASSERT_OK(d.Insert(5, 5));  // slot 0: every record moves
  // Slot 60 (line 15): copy + count = 2 fences; the shift leaves lines
  // 14..1 (the line of slot 60 was made durable already, so 14 more), and
  // the new record's line 0: 2 + 14 + 1 = 17 fences and as many lines.
  EXPECT_EQ(pm::ThreadFences() - fences, 17u);
  EXPECT_EQ(pm::ThreadLinesFlushed() - lines, 17u);
  PMINDEX_ASSERT_OK(d.Verify());
  EXPECT_EQ(d.Get(5).value(), 5u);
  EXPECT_EQ(d.Get(600).value(), 60u);
}

TEST(FastFairNuma, NodeVisitsAreMetered) {
  ASSERT_NO_FATAL_FAILURE(testing_util::ExpectNodeVisitsMetered("fastfair"));
}

}  // namespace
}  // namespace pmindex::fastfair
