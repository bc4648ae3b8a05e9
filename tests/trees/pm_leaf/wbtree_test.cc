// WB+-Tree leaf tests: oracle and flush-image crash checks (shared bodies in
// central_leaf_checks.h), line writes of the traditional insert.
#include <gtest/gtest.h>

#include "trees/pm_leaf/central_leaf_checks.h"
#include "trees/pm_leaf/wbtree_leaf.h"

namespace pmindex::wbtree {
namespace {

TEST(WbtreeLeaf, Oracle256) { testing_util::CentralLeafOracle<Leaf<256>>(); }
TEST(WbtreeLeaf, Oracle512) { testing_util::CentralLeafOracle<Leaf<512>>(); }
TEST(WbtreeLeaf, Oracle1024) { testing_util::CentralLeafOracle<Leaf<1024>>(); }
TEST(WbtreeCrashImage, EveryFence256) { testing_util::CentralLeafCrashImages<Leaf<256>>(); }
TEST(WbtreeCrashImage, EveryFence512) { testing_util::CentralLeafCrashImages<Leaf<512>>(); }
TEST(WbtreeCrashImage, EveryFence1024) { testing_util::CentralLeafCrashImages<Leaf<1024>>(); }

// Section (1) is a plain store when the whole indirection array is in line
// 0 (256-768 B), so 256 B costs 2 lines and 2 fences (1 line, 1 fence when
// the slot is in line 0: slots 0 and 1) and one NAW. At 1024 B the array
// reaches line 1 and section (1) is an NAW: entry line, line 0, array line
// 1, line 0 again, 4 fences, 2 NAWs.
template <size_t B>
void InsertCosts(std::vector<uint64_t> want_lines, std::vector<uint64_t> want_fences,
                 uint64_t want_naws) {
  using L = Leaf<B>;
  L* l = static_cast<L*>(std::aligned_alloc(256, L::kBytes));
  L::Format(l, PPtr());
  std::vector<uint64_t> lines, fences;
  for (uint64_t k = 0; k < want_lines.size(); ++k) {
    pm::Counters before = pm::ThreadCounters();
    l->Insert(100 - k, k);
    pm::Counters d = pm::ThreadCounters() - before;
    lines.push_back(d.lines_flushed);
    fences.push_back(d.fences);
    EXPECT_EQ(d.naws, want_naws) << "insert " << k;
  }
  EXPECT_EQ(lines, want_lines);
  EXPECT_EQ(fences, want_fences);
  EXPECT_EQ(l->Check(), "");
  std::free(l);
}

TEST(WbtreeLeaf, InsertLineWritesAndNaws256) {
  std::vector<uint64_t> lines = {1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
  InsertCosts<256>(lines, lines, 1);
}

TEST(WbtreeLeaf, InsertLineWritesAndNaws1024) {
  InsertCosts<1024>(std::vector<uint64_t>(59, 4), std::vector<uint64_t>(59, 4), 2);
}

}  // namespace
}  // namespace pmindex::wbtree
