// WB+-Tree leaf tests: oracle and flush-image crash checks (shared bodies in
// central_leaf_checks.h), line writes of the traditional insert.
#include <gtest/gtest.h>

#include "trees/wbtree/wbtree_leaf.h"
#include "unit/central_leaf_checks.h"

namespace pmindex::wbtree {
namespace {

TEST(WbtreeLeaf, Oracle256) { testing_util::CentralLeafOracle<Leaf<256>>(); }
TEST(WbtreeLeaf, Oracle512) { testing_util::CentralLeafOracle<Leaf<512>>(); }
TEST(WbtreeLeaf, Oracle1024) { testing_util::CentralLeafOracle<Leaf<1024>>(); }
TEST(WbtreeCrashImage, EveryFence256) { testing_util::CentralLeafCrashImages<Leaf<256>>(); }
TEST(WbtreeCrashImage, EveryFence512) { testing_util::CentralLeafCrashImages<Leaf<512>>(); }
TEST(WbtreeCrashImage, EveryFence1024) { testing_util::CentralLeafCrashImages<Leaf<1024>>(); }

// Two NAW sections per insert: 256 B costs 3 lines (2 when the slot is in
// line 0: slots 0 and 1).
TEST(WbtreeLeaf, InsertLineWritesAndNaws) {
  using L = Leaf<256>;
  L* l = static_cast<L*>(std::aligned_alloc(256, L::kBytes));
  L::Format(l, PPtr());
  std::vector<uint64_t> cost;
  for (uint64_t k = 0; k < 14; ++k) {
    pm::Counters before = pm::ThreadCounters();
    l->Insert(100 - k, k);
    pm::Counters d = pm::ThreadCounters() - before;
    cost.push_back(d.lines_flushed);
    EXPECT_EQ(d.naws, 2u);
  }
  std::vector<uint64_t> want = {2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
  EXPECT_EQ(cost, want);
  EXPECT_EQ(l->Check(), "");
  std::free(l);
}

}  // namespace
}  // namespace pmindex::wbtree
