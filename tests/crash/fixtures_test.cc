// The crash simulator end to end on its test-only fixtures
// (crashsim/fixtures/parray.cc): the correct persistent sorted array is
// clean in every mode and workload; the broken one (count published before
// the entries are flushed) is caught with a replay line that reproduces
// the failure; mutants of the correct one are killed.
//
// Seeds: PMINDEX_SEED replays a run; the seed is printed on failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "simulator.h"
#include "support/seed.h"

namespace pmindex::crash {
namespace {

// One known seed unless PMINDEX_SEED names another.
uint64_t Seed() { return testing::TestSeed(20261122); }

std::string Summary(const RunStats& s) {
  std::ostringstream os;
  os << "points " << s.crash_points << " images " << s.images << " failing "
     << s.failing_images;
  if (!s.setup_error.empty()) os << " error: " << s.setup_error;
  for (const auto& f : s.failures) os << "\n  " << f.where << ": " << f.message << "\n  " << f.replay;
  for (const auto& b : s.bypasses) os << "\n  bypass: " << b;
  return os.str();
}

Config Base(const std::string& index, const std::string& workload, uint64_t ops) {
  Config c;
  c.index = index;
  c.workload = workload;
  c.ops = ops;
  c.seed = Seed();
  c.budget = 16;
  c.further_ops = 50;
  return c;
}

TEST(CrashFixtures, ParrayIsCleanInEveryWorkload) {
  for (const char* w : {"mixed", "delete", "update", "bulk", "recovery"}) {
    Config c = Base("parray", w, 24);
    RunStats s = crash::Run(c);
    EXPECT_TRUE(s.ok()) << "workload " << w << " seed " << c.seed << ": " << Summary(s);
    EXPECT_GT(s.images, 0u) << w;
    EXPECT_GT(s.crash_points, c.ops) << w;  // fences plus one per operation
  }
}

TEST(CrashFixtures, ParrayIsCleanInEveryMode) {
  for (Mode m : {Mode::kLine, Mode::kTear, Mode::kEadr}) {
    Config c = Base("parray", "mixed", 16);
    c.mode = m;
    RunStats s = crash::Run(c);
    EXPECT_TRUE(s.ok()) << ModeName(m) << " seed " << c.seed << ": " << Summary(s);
    EXPECT_GT(s.images, 0u) << ModeName(m);
  }
}

TEST(CrashFixtures, BrokenParrayIsCaughtWithAReplayLineThatReproducesIt) {
  Config c = Base("parray-broken", "insert", 8);
  RunStats s = crash::Run(c);
  ASSERT_FALSE(s.ok()) << "seed " << c.seed;
  ASSERT_GT(s.failing_images, 0u) << Summary(s);
  ASSERT_FALSE(s.failures.empty());
  const Failure& f = s.failures[0];
  EXPECT_NE(f.replay.find("--index parray-broken"), std::string::npos) << f.replay;
  EXPECT_NE(f.replay.find("--replay " + std::to_string(f.point) + ":" + std::to_string(f.image)),
            std::string::npos)
      << f.replay;
  // Replaying exactly that image fails again, and checks only that image.
  Config r = c;
  r.replay = std::make_pair(f.point, f.image);
  RunStats again = crash::Run(r);
  EXPECT_EQ(again.images, 1u);
  EXPECT_EQ(again.failing_images, 1u) << Summary(again);
  ASSERT_FALSE(again.failures.empty());
  EXPECT_EQ(again.failures[0].message, f.message);
}

TEST(CrashFixtures, UnknownIndexAndWorkloadAreClearErrors) {
  RunStats s = crash::Run(Base("no-such-index", "mixed", 4));
  EXPECT_NE(s.setup_error.find("unknown index"), std::string::npos) << s.setup_error;
  s = crash::Run(Base("parray", "no-such-workload", 4));
  EXPECT_NE(s.setup_error.find("unknown workload"), std::string::npos) << s.setup_error;
}

TEST(CrashFixtures, EveryMutantOfParrayIsKilledOrExplained) {
  Config c = Base("parray", "mixed", 16);
  MutationReport rep = RunMutation(c, false, nullptr);
  ASSERT_TRUE(rep.baseline.ok()) << Summary(rep.baseline);
  ASSERT_FALSE(rep.mutants.empty());
  bool entries_flush_killed = false;
  for (const auto& m : rep.mutants) {
    EXPECT_TRUE(m.killed || m.redundant)
        << m.mutation.ToString() << " " << m.site << ": " << m.reason;
    // Dropping the flush of the shadow buffer (Publish) must be caught.
    if (m.mutation.kind == MutKind::kDropFlush && m.site.find("Publish") != std::string::npos &&
        m.killed) {
      entries_flush_killed = true;
    }
  }
  EXPECT_TRUE(entries_flush_killed);
  EXPECT_EQ(rep.unexplained, 0u);
  EXPECT_EQ(rep.stale, 0u);
  EXPECT_GT(rep.killed, 0u);
}

TEST(CrashFixtures, RedundantDeclarationIsReadFromTheCommentAboveTheSite) {
  SiteInfo s;
  s.file = __FILE__;
  // pmcrash-redundant(drop-fence, flush-late): a test declaration,
  // continued on the next comment line
  s.line = __LINE__;
  std::optional<RedundantDecl> d = FindRedundantDecl(s);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->line, s.line - 2);
  EXPECT_EQ(d->kinds, (std::vector<MutKind>{MutKind::kDropFence, MutKind::kFlushLate}));
  EXPECT_EQ(d->reason, "a test declaration, continued on the next comment line");
  // A line with code above it has no declaration; neither has a missing file.
  s.line += 1;
  EXPECT_FALSE(FindRedundantDecl(s).has_value());
  s.file = "no/such/file.cc";
  EXPECT_FALSE(FindRedundantDecl(s).has_value());
}

}  // namespace
}  // namespace pmindex::crash
