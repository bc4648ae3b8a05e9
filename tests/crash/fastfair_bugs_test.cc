// Regression tests of the crash bugs published against FAST-FAIR (issue
// 9): each bug is put back on purpose in a test-only kind
// (crashsim/fixtures/fastfair_bugs.cc) and the crash simulator must find
// it, while the real fastfair, same options and workloads, stays clean
// (FastFairReal).
//   fastfair-bug-duplicates    recovery does not remove the stale record of
//                              a shift cut short by the crash
//   fastfair-bug-split-copies  recovery does not cut off the records a split
//                              cut short (after its link) left in the old node
//   fastfair-bug-root          a root split that is not atomic: root slot 0
//                              names the new root before the root is durable
//   fastfair-bug-remove-flush  remove's flush condition: the last line a
//                              delete shifted is not flushed before the count
//   fastfair-bug-merge         a merge that is not atomic: the left node's
//                              sibling pointer skips the right node before
//                              the left node holds the right node's records
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "simulator.h"
#include "support/seed.h"

namespace pmindex::crash {
void LinkFastFairBugs();
namespace {

// One known seed unless PMINDEX_SEED names another.
uint64_t Seed() { return testing::TestSeed(1); }

Config Base(const std::string& index, const std::string& workload) {
  LinkFastFairBugs();
  Config c;
  c.index = index;
  c.options = index == "fastfair" ? "node=256" : "";  // the bug kinds are node=256 too
  c.workload = workload;
  c.ops = 40;
  c.seed = Seed();
  c.budget = 16;
  c.further_ops = 30;
  return c;
}

std::string First(const RunStats& s) {
  if (!s.setup_error.empty()) return "setup error: " + s.setup_error;
  if (s.failures.empty()) return "no failure recorded";
  return s.failures[0].where + ": " + s.failures[0].message + "\n  " + s.failures[0].replay;
}

struct Case {
  const char* kind;
  const char* workload;
};

class FastFairBug : public ::testing::TestWithParam<Case> {};

// The real fastfair under the bug kinds' options, seed and workloads: the
// failures the simulator reports against a bug kind are the bug's, not
// the workload's. Once per workload (each bug case below uses one of these).
class FastFairReal : public ::testing::TestWithParam<const char*> {};

TEST_P(FastFairReal, IsCleanUnderTheBugWorkloads) {
  RunStats good = crash::Run(Base("fastfair", GetParam()));
  ASSERT_TRUE(good.setup_error.empty()) << good.setup_error;
  EXPECT_TRUE(good.ok()) << "fastfair, workload " << GetParam() << ", seed " << Seed() << ": "
                         << First(good);
  EXPECT_GT(good.images, 0u);
}

INSTANTIATE_TEST_SUITE_P(Published, FastFairReal, ::testing::Values("insert", "delete"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

TEST_P(FastFairBug, IsFound) {
  const Case& c = GetParam();
  Config b = Base(c.kind, c.workload);
  b.stop_after = 1;  // one failing image is the finding
  RunStats bad = crash::Run(b);
  ASSERT_TRUE(bad.setup_error.empty()) << bad.setup_error;
  EXPECT_GT(bad.failing_images, 0u) << c.kind << ", workload " << c.workload << ", seed " << Seed()
                                    << ": the simulator did not find the bug";
  EXPECT_GT(bad.images, 0u);
}

INSTANTIATE_TEST_SUITE_P(Published, FastFairBug,
                         ::testing::Values(Case{"fastfair-bug-duplicates", "insert"},
                                           Case{"fastfair-bug-duplicates", "delete"},
                                           Case{"fastfair-bug-split-copies", "insert"},
                                           Case{"fastfair-bug-root", "insert"},
                                           Case{"fastfair-bug-remove-flush", "delete"},
                                           Case{"fastfair-bug-merge", "delete"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = std::string(i.param.kind).substr(13) + "_" + i.param.workload;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace pmindex::crash
