// FP-Tree leaf tests: oracle and flush-image crash checks (shared bodies in
// central_leaf_checks.h), line writes of the traditional insert.
#include <gtest/gtest.h>

#include "trees/pm_leaf/central_leaf_checks.h"
#include "trees/pm_leaf/fptree_leaf.h"

namespace pmindex::fptree {
namespace {

TEST(FptreeLeaf, Oracle256) { testing_util::CentralLeafOracle<Leaf<256>>(); }
TEST(FptreeLeaf, Oracle512) { testing_util::CentralLeafOracle<Leaf<512>>(); }
TEST(FptreeLeaf, Oracle1024) { testing_util::CentralLeafOracle<Leaf<1024>>(); }
TEST(FptreeCrashImage, EveryFence256) { testing_util::CentralLeafCrashImages<Leaf<256>>(); }
TEST(FptreeCrashImage, EveryFence512) { testing_util::CentralLeafCrashImages<Leaf<512>>(); }
TEST(FptreeCrashImage, EveryFence1024) { testing_util::CentralLeafCrashImages<Leaf<1024>>(); }

// 256 B: slots 0 and 1 share line 0 with the bitmap (1 line per insert),
// the other 12 cost 2 lines.
TEST(FptreeLeaf, InsertLineWrites) {
  using L = Leaf<256>;
  L* l = static_cast<L*>(std::aligned_alloc(256, L::kBytes));
  L::Format(l, PPtr());
  std::vector<uint64_t> cost;
  for (uint64_t k = 0; k < 14; ++k) {
    uint64_t before = pm::ThreadCounters().lines_flushed;
    l->Insert(k, k);
    cost.push_back(pm::ThreadCounters().lines_flushed - before);
  }
  std::vector<uint64_t> want = {1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
  EXPECT_EQ(cost, want);
  std::free(l);
}

}  // namespace
}  // namespace pmindex::fptree
