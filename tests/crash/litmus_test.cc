// Litmus tests of the crash simulator's PM model (crashsim/tracer.h): small
// store/flush/fence programs on a plain 64-byte-aligned buffer, and the
// exact set of crash images the model must (and must not) produce.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "pm/persist.h"
#include "tracer.h"

namespace pmindex::crash {
namespace {

constexpr size_t kLines = 16;

struct alignas(64) Mem {
  uint64_t w[kLines * 8];
  uint64_t* line(size_t l) { return &w[l * 8]; }
};

// Every image of a crash point, as the words of interest.
using Snapshot = std::vector<uint64_t>;

class Litmus : public ::testing::Test, public CrashTracer::Listener {
 protected:
  void Start(Mode mode, Mutation m = {}) {
    std::memset(&mem_, 0, sizeof mem_);
    tracer_ = std::make_unique<CrashTracer>(&mem_, sizeof mem_, mode, m);
    tracer_->set_listener(this);
    pm::SetEadr(mode == Mode::kEadr);
    pm::InstallTracer(tracer_.get());
  }
  void TearDown() override {
    pm::InstallTracer(nullptr);
    pm::SetEadr(false);
  }
  void OnCrashPoint(CrashTracer& t, const pm::Site&) override {
    fence_points_.push_back(Collect(t.Images(budget_, 1)));
  }
  // The values of `watch` words in every image of `set`.
  std::set<Snapshot> Collect(const ImageSet& set) {
    std::set<Snapshot> out;
    std::vector<std::byte> img;
    for (size_t i = 0; i < set.size(); ++i) {
      set.Build(i, &img);
      Snapshot s;
      for (const uint64_t* w : watch_) {
        uint64_t v;
        std::memcpy(&v, img.data() + (reinterpret_cast<const char*>(w) -
                                      reinterpret_cast<const char*>(&mem_)),
                    8);
        s.push_back(v);
      }
      out.insert(s);
    }
    return out;
  }
  std::set<Snapshot> Now() { return Collect(tracer_->Images(budget_, 1)); }

  Mem mem_;
  std::unique_ptr<CrashTracer> tracer_;
  std::vector<const uint64_t*> watch_;
  std::vector<std::set<Snapshot>> fence_points_;
  uint64_t budget_ = 4096;
};

TEST_F(Litmus, TwoStoresToOneLineNeverPersistSecondWithoutFirst) {
  Start(Mode::kPrefix);
  uint64_t* a = &mem_.line(0)[0];
  uint64_t* b = &mem_.line(0)[5];
  watch_ = {a, b};
  pm::store(a, uint64_t{1});
  pm::store(b, uint64_t{1});
  EXPECT_EQ(Now(), (std::set<Snapshot>{{0, 0}, {1, 0}, {1, 1}}));
}

TEST_F(Litmus, LineModeShowsOnlyOldOrNew) {
  Start(Mode::kLine);
  uint64_t* a = &mem_.line(0)[0];
  uint64_t* b = &mem_.line(0)[5];
  watch_ = {a, b};
  pm::store(a, uint64_t{1});
  pm::store(b, uint64_t{1});
  EXPECT_EQ(Now(), (std::set<Snapshot>{{0, 0}, {1, 1}}));
}

TEST_F(Litmus, TwoUnfencedLinesShowAllFourCombinations) {
  Start(Mode::kPrefix);
  uint64_t* x = mem_.line(1);
  uint64_t* y = mem_.line(2);
  watch_ = {x, y};
  pm::store(x, uint64_t{1});
  pm::flush(x, 8);
  pm::store(y, uint64_t{1});
  pm::flush(y, 8);
  EXPECT_EQ(Now(), (std::set<Snapshot>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
}

TEST_F(Litmus, FlushPlusFenceOrdersLines) {
  Start(Mode::kPrefix);
  uint64_t* data = mem_.line(1);
  uint64_t* commit = mem_.line(2);
  watch_ = {data, commit};
  pm::store(data, uint64_t{7});
  pm::persist(data, 8);
  pm::store(commit, uint64_t{1});
  // data is durable: commit can never be seen without it.
  EXPECT_EQ(Now(), (std::set<Snapshot>{{7, 0}, {7, 1}}));
  // The crash point before the persist's fence still had data optional.
  ASSERT_EQ(fence_points_.size(), 1u);
  EXPECT_EQ(fence_points_[0], (std::set<Snapshot>{{0, 0}, {7, 0}}));
}

TEST_F(Litmus, StoreAfterTheFlushStaysOptional) {
  Start(Mode::kPrefix);
  uint64_t* a = &mem_.line(3)[0];
  uint64_t* b = &mem_.line(3)[1];
  watch_ = {a, b};
  pm::store(a, uint64_t{1});
  pm::flush(a, 8);
  pm::store(b, uint64_t{1});  // after the flush, before the fence
  pm::fence();
  // a is durable; b may or may not have reached PM.
  EXPECT_EQ(Now(), (std::set<Snapshot>{{1, 0}, {1, 1}}));
}

TEST_F(Litmus, EightByteStoreNeverTears) {
  Start(Mode::kTear);
  uint64_t* a = &mem_.line(4)[1];
  watch_ = {a};
  pm::store(a, ~uint64_t{0});
  EXPECT_EQ(Now(), (std::set<Snapshot>{{0}, {~uint64_t{0}}}));
}

TEST_F(Litmus, WideStoreTearsInTearModeOnly) {
  struct Pair {
    uint64_t lo, hi;
  };
  uint64_t* lo = &mem_.line(5)[0];
  uint64_t* hi = &mem_.line(5)[1];
  watch_ = {lo, hi};
  Start(Mode::kTear);
  pm::store(reinterpret_cast<Pair*>(lo), Pair{1, 2});
  EXPECT_EQ(Now(), (std::set<Snapshot>{{0, 0}, {1, 0}, {0, 2}, {1, 2}}));
  pm::InstallTracer(nullptr);
  Start(Mode::kPrefix);
  pm::store(reinterpret_cast<Pair*>(lo), Pair{1, 2});
  EXPECT_EQ(Now(), (std::set<Snapshot>{{0, 0}, {1, 2}}));
}

TEST_F(Litmus, EadrShowsPrefixesOfTheGlobalStoreOrder) {
  Start(Mode::kEadr);
  uint64_t* a = mem_.line(6);
  uint64_t* b = mem_.line(7);
  uint64_t* c = mem_.line(8);
  watch_ = {a, b, c};
  tracer_->BeginOp();
  pm::store(a, uint64_t{1});
  pm::store(b, uint64_t{1});
  pm::store(c, uint64_t{1});
  EXPECT_EQ(Collect(tracer_->EadrImages(true, 64, 1)),
            (std::set<Snapshot>{{0, 0, 0}, {1, 0, 0}, {1, 1, 0}}));
  EXPECT_EQ(Collect(tracer_->EadrImages(false, 64, 1)), (std::set<Snapshot>{{1, 1, 1}}));
  EXPECT_TRUE(fence_points_.empty());
  tracer_->EndOpEadr();
  EXPECT_EQ(Collect(tracer_->EadrImages(false, 64, 1)), (std::set<Snapshot>{{1, 1, 1}}));
}

TEST_F(Litmus, DroppedFlushMutantLeavesTheLinePending) {
  // First find the site identity of the flush below.
  auto program = [this](uint64_t* x) {
    pm::store(x, uint64_t{1});
    pm::flush(x, 8);
    pm::fence();
  };
  Start(Mode::kPrefix);
  program(mem_.line(9));
  std::string site;
  for (const auto& [k, s] : tracer_->Sites()) {
    if (!s.fence && s.file.find("litmus_test.cc") != std::string::npos) site = s.key();
  }
  ASSERT_FALSE(site.empty());
  watch_ = {mem_.line(9)};
  EXPECT_EQ(Now(), (std::set<Snapshot>{{1}}));
  pm::InstallTracer(nullptr);

  Start(Mode::kPrefix, Mutation{MutKind::kDropFlush, site});
  program(mem_.line(9));
  EXPECT_EQ(Now(), (std::set<Snapshot>{{0}, {1}}));
}

TEST_F(Litmus, FlushShortMutantLeavesTheLastLineOut) {
  auto program = [](uint64_t* x) {
    pm::fill(x, 1, 128);  // two lines
    pm::persist(x, 128);
  };
  Start(Mode::kPrefix);
  program(mem_.line(10));
  std::string site;
  for (const auto& [k, s] : tracer_->Sites()) {
    if (!s.fence && s.multi_line_calls > 0) site = s.key();
  }
  ASSERT_FALSE(site.empty());
  pm::InstallTracer(nullptr);
  Start(Mode::kPrefix, Mutation{MutKind::kFlushShort, site});
  program(mem_.line(10));
  watch_ = {mem_.line(10), mem_.line(11)};
  const uint64_t ones = 0x0101010101010101ull;
  EXPECT_EQ(Now(), (std::set<Snapshot>{{ones, 0}, {ones, ones}}));
}

TEST_F(Litmus, BypassingStoreIsDetected) {
  Start(Mode::kPrefix);
  pm::store(mem_.line(12), uint64_t{5});
  EXPECT_TRUE(tracer_->FindBypassedLines().empty());
  mem_.line(13)[2] = 9;  // not through pm::store
  auto lines = tracer_->FindBypassedLines();
  ASSERT_EQ(lines.size(), 1u);
  const uint64_t base_line = reinterpret_cast<uintptr_t>(&mem_) / 64;
  EXPECT_EQ(lines[0], reinterpret_cast<uintptr_t>(mem_.line(13)) / 64 - base_line);
  EXPECT_TRUE(tracer_->FindBypassedLines().empty());  // reported once
}

TEST_F(Litmus, ManyLinesAreSampledWithinBudget) {
  Start(Mode::kPrefix);
  for (size_t l = 0; l < 12; ++l) pm::store(mem_.line(l), uint64_t{1});
  ImageSet set = tracer_->Images(64, 3);
  EXPECT_FALSE(set.exhaustive());
  EXPECT_EQ(set.size(), 64u);
  EXPECT_EQ(set.lines_in_play(), 12u);
  for (size_t l = 0; l < 12; ++l) watch_.push_back(mem_.line(l));
  auto images = Collect(set);
  EXPECT_EQ(images.size(), 64u);  // all distinct
  EXPECT_TRUE(images.count(Snapshot(12, 0)));  // none
  EXPECT_TRUE(images.count(Snapshot(12, 1)));  // all
  // Deterministic for a seed: the replay handle.
  ImageSet again = tracer_->Images(64, 3);
  std::vector<std::byte> x, y;
  for (size_t i = 0; i < set.size(); ++i) {
    set.Build(i, &x);
    again.Build(i, &y);
    ASSERT_EQ(x, y) << "image " << i;
  }
  // Within budget: exhaustive.
  EXPECT_TRUE(tracer_->Images(4096, 3).exhaustive());
  EXPECT_EQ(tracer_->Images(4096, 3).size(), 4096u);
}

// A set whose base is owned is the crash image of its moment: a fence that
// comes after it (pmcrash: another thread of the index fencing while a
// crash point's images wait for their check) changes nothing in it. An
// unowned base is the tracer's live one, so such a fence would show line
// 1's later store next to line 0's earlier lines in play, an image no
// crash produces when line 1's store was fenced after line 0's.
TEST_F(Litmus, OwnedBaseIgnoresLaterFences) {
  Start(Mode::kPrefix);
  uint64_t* a = mem_.line(0);
  uint64_t* b = mem_.line(1);
  watch_ = {a, b};
  pm::store(a, uint64_t{1});
  pm::flush(a, 8);
  ImageSet owned = tracer_->Images(budget_, 1, /*own_base=*/true);
  ImageSet live = tracer_->Images(budget_, 1);
  pm::fence();  // a persisted, then b stored, flushed and fenced
  pm::store(b, uint64_t{2});
  pm::flush(b, 8);
  pm::fence();
  EXPECT_EQ(Collect(owned), (std::set<Snapshot>{{0, 0}, {1, 0}}));
  EXPECT_EQ(Collect(live), (std::set<Snapshot>{{0, 2}, {1, 2}}));
}

}  // namespace
}  // namespace pmindex::crash
