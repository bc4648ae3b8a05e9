// The PM cost models (pm::SetPmModel, docs/persistence-model.md "Cost
// models"): the xpline model's counters on hand-counted cases. First its
// own arithmetic (write combining within a 256-byte block, no combining
// across a fence, the combining window, the read cache and its LRU
// order), then what it counts for real tree code: an LB+-Tree leaf insert
// and split, a FAST-FAIR in-node shift, and an LB+-Tree lookup. All
// constants are 0 ns here: these are counts, not timings.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "pm/persist.h"
#include "pmindex/db.h"
#include "support/status.h"
#include "trees/pm_leaf/lbtree_leaf.h"

namespace pmindex::pm {
namespace {

// Counts only (no waits); cache_bytes as given.
XplineParams CountOnly(uint64_t cache_bytes) {
  XplineParams p;
  p.block_write_ns = 0;
  p.read_ns = 0;
  p.read_seq_ns = 0;
  p.cache_bytes = cache_bytes;
  return p;
}

class PmModelTest : public testing::Test {
 protected:
  void SetUp() override {
    buf_ = static_cast<char*>(std::aligned_alloc(kXplineBlock, kBytes));
    std::memset(buf_, 0, kBytes);
  }
  void TearDown() override {
    SetPmModel(PmModel::kFixed);  // the default, for the tests after this one
    std::free(buf_);
  }
  // Line i of the buffer (block i / 4).
  char* Line(int i) { return buf_ + i * kCacheLine; }
  static Counters Since(const Counters& before) { return ThreadCounters() - before; }

  static constexpr size_t kBytes = 256 * kXplineBlock;
  char* buf_ = nullptr;
};

TEST_F(PmModelTest, NamesParse) {
  PmModel m = PmModel::kDram;
  ASSERT_TRUE(ParsePmModel("xpline", &m));
  EXPECT_EQ(m, PmModel::kXpline);
  ASSERT_TRUE(ParsePmModel("fixed", &m));
  EXPECT_EQ(m, PmModel::kFixed);
  ASSERT_TRUE(ParsePmModel("dram", &m));
  EXPECT_EQ(m, PmModel::kDram);
  EXPECT_FALSE(ParsePmModel("optane", &m));
  EXPECT_EQ(m, PmModel::kDram);  // unchanged on failure
  EXPECT_STREQ(PmModelName(PmModel::kXpline), "xpline");
}

TEST_F(PmModelTest, LinesOfOneBlockCombineBeforeAFence) {
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  const Counters before = ThreadCounters();
  for (int i = 0; i < 4; ++i) flush(Line(i), 8);  // the 4 lines of block 0
  flush(Line(1), 64);                             // again: still block 0
  fence();
  const Counters d = Since(before);
  EXPECT_EQ(d.lines_flushed, 5u);
  EXPECT_EQ(d.fences, 1u);
  EXPECT_EQ(d.media_blocks_written, 1u);
}

TEST_F(PmModelTest, AFenceEndsTheCombining) {
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  const Counters before = ThreadCounters();
  persist(Line(0), 8);
  persist(Line(1), 8);  // same block, after a fence: a second media write
  flush(Line(2), 8);
  flush(Line(4), 8);  // block 1
  flush(Line(3), 8);  // block 0 again, before the fence
  fence();
  const Counters d = Since(before);
  EXPECT_EQ(d.lines_flushed, 5u);
  EXPECT_EQ(d.media_blocks_written, 4u);  // {0}, {0}, {0, 1}
}

TEST_F(PmModelTest, ARangeAcrossABlockBoundaryWritesBoth) {
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  const Counters before = ThreadCounters();
  persist(buf_ + kXplineBlock - 8, 16);  // lines 3 and 4: blocks 0 and 1
  persist(buf_, 2 * kXplineBlock);       // 8 lines, 2 blocks
  const Counters d = Since(before);
  EXPECT_EQ(d.lines_flushed, 10u);
  EXPECT_EQ(d.media_blocks_written, 4u);
}

TEST_F(PmModelTest, TheCombiningWindowHoldsSoManyBlocks) {
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  Counters before = ThreadCounters();
  for (uint32_t b = 0; b < kXplineCombineBlocks; ++b) flush(buf_ + b * kXplineBlock, 8);
  flush(buf_ + 8, 8);  // block 0: still in the window
  EXPECT_EQ(Since(before).media_blocks_written, kXplineCombineBlocks);
  fence();
  before = ThreadCounters();
  for (uint32_t b = 0; b <= kXplineCombineBlocks; ++b) flush(buf_ + b * kXplineBlock, 8);
  flush(buf_ + 8, 8);  // block 0 left the window when block 64 came in
  fence();
  EXPECT_EQ(Since(before).media_blocks_written, kXplineCombineBlocks + 2);
}

TEST_F(PmModelTest, ReadsMissOnceThenHit) {
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  Counters before = ThreadCounters();
  ModelRead(buf_ + 10, 250);  // lines 0..4
  Counters d = Since(before);
  EXPECT_EQ(d.model_lines_read, 5u);
  EXPECT_EQ(d.model_read_misses, 5u);
  before = ThreadCounters();
  ModelRead(buf_, 64 * 6);  // lines 0..5: only line 5 is new
  d = Since(before);
  EXPECT_EQ(d.model_lines_read, 6u);
  EXPECT_EQ(d.model_read_misses, 1u);
  // A flushed line stays cached (clwb): reading it costs nothing.
  persist(Line(100), 8);
  before = ThreadCounters();
  ModelRead(Line(100), 8);
  EXPECT_EQ(Since(before).model_read_misses, 0u);
  // Setting the model again empties the cache.
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  before = ThreadCounters();
  ModelRead(buf_, 64);
  EXPECT_EQ(Since(before).model_read_misses, 1u);
}

TEST_F(PmModelTest, TheCacheEvictsTheLeastRecentlyUsedLine) {
  // 512 bytes: one set of 8 lines.
  SetPmModel(PmModel::kXpline, CountOnly(8 * kCacheLine));
  for (int i = 0; i < 8; ++i) ModelRead(Line(i), 8);
  Counters before = ThreadCounters();
  ModelRead(Line(0), 8);  // hit; line 1 is now the least recent
  ModelRead(Line(8), 8);  // miss; evicts line 1
  ModelRead(Line(0), 8);  // hit
  ModelRead(Line(2), 8);  // hit
  ModelRead(Line(1), 8);  // miss; evicts line 3
  ModelRead(Line(3), 8);  // miss
  const Counters d = Since(before);
  EXPECT_EQ(d.model_lines_read, 6u);
  EXPECT_EQ(d.model_read_misses, 3u);
}

TEST_F(PmModelTest, NoCacheMeansEveryLineMisses) {
  SetPmModel(PmModel::kXpline, CountOnly(0));
  const Counters before = ThreadCounters();
  ModelRead(buf_, 256);
  ModelRead(buf_, 256);
  EXPECT_EQ(Since(before).model_read_misses, 8u);
}

TEST_F(PmModelTest, OtherModelsCountNothing) {
  for (PmModel m : {PmModel::kDram, PmModel::kFixed}) {
    SetPmModel(m, CountOnly(1 << 20));
    const Counters before = ThreadCounters();
    persist(buf_, 512);
    ModelRead(buf_, 512);
    const Counters d = Since(before);
    EXPECT_EQ(d.lines_flushed, 8u) << PmModelName(m);
    EXPECT_EQ(d.media_blocks_written, 0u) << PmModelName(m);
    EXPECT_EQ(d.model_lines_read, 0u) << PmModelName(m);
  }
}

TEST_F(PmModelTest, DramModelIgnoresTheFixedWriteDelay) {
  SetPmWriteNs(300);
  SetPmModel(PmModel::kDram);
  EXPECT_EQ(detail::g_write_ticks_per_line, 0u);
  EXPECT_TRUE(detail::g_plain_flush || ActiveFlushKind() != FlushKind::kClwb);
  SetPmModel(PmModel::kFixed);
  EXPECT_NE(detail::g_write_ticks_per_line, 0u);
  SetPmWriteNs(0);
  EXPECT_EQ(detail::g_write_ticks_per_line, 0u);
}

// Algorithm 2 on a 256 B leaf: a slot in the header's line is one line,
// one fence, one media block; a slot in another line flushes that line,
// fences, then the header line: two lines, two fences and, although both
// lines are in the leaf's one block, two media writes (the fence between
// them prevents combining).
TEST_F(PmModelTest, LbtreeLeafInsertsWriteOneBlockPerFence) {
  using L = lbtree::Leaf<1>;
  auto* l = reinterpret_cast<L*>(buf_);
  L::Format(l, PPtr());
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  std::vector<uint64_t> blocks, lines, fences;
  for (uint64_t k = 1; k <= 14; ++k) {
    const Counters before = ThreadCounters();
    l->Insert(k * 10, k);
    const Counters d = Since(before);
    blocks.push_back(d.media_blocks_written);
    lines.push_back(d.lines_flushed);
    fences.push_back(d.fences);
  }
  const std::vector<uint64_t> want = {1, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1, 2, 1, 1};
  EXPECT_EQ(lines, want);
  EXPECT_EQ(fences, want);
  EXPECT_EQ(blocks, want);
}

// Algorithm 3 on a full 256 B leaf, the new key going to the new leaf:
// the new leaf's lines 0-3 (header, slot 6's line, slots 7..13) are
// flushed together (4 lines, 1 block), with the old leaf's sibling line
// (1 line, a second block) before one fence; then the NAW of the old
// header (1 line, 1 block). 6 lines, 2 fences, 3 media writes.
TEST_F(PmModelTest, LbtreeSplitCombinesTheNewLeaf) {
  using L = lbtree::Leaf<1>;
  auto* l = reinterpret_cast<L*>(buf_);
  auto* nl = reinterpret_cast<L*>(buf_ + kXplineBlock);
  L::Format(l, PPtr());
  for (int i = 0; i < L::kSlots; ++i) l->Insert(1000 + 10 * i, 1);
  ASSERT_TRUE(l->Full());
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  const Counters before = ThreadCounters();
  l->SplitInsert(5000, 7, nl, PPtr::Make(1, 0x40000));
  const Counters d = Since(before);
  EXPECT_EQ(d.lines_flushed, 6u);
  EXPECT_EQ(d.fences, 2u);
  EXPECT_EQ(d.media_blocks_written, 3u);
  uint64_t v = 0;
  EXPECT_TRUE(nl->Find(5000, &v));
}

// FAST-FAIR's in-node shift fences after every line it leaves, so nothing
// combines: one media block per line. A 4 KiB leaf of 60 records (15
// lines); an insert at slot 0 flushes 17 lines with 17 fences (the
// counts of FastFairCost.InsertAtTheFrontShiftsLineByLine).
TEST_F(PmModelTest, FastFairShiftWritesOneBlockPerLine) {
  auto db = Db::CreateInMemory("fastfair", "node=4096,sentinel=off");
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  for (Key k = 1; k <= 60; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 10, k));
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  const Counters before = ThreadCounters();
  PMINDEX_ASSERT_OK(d.Insert(5, 5));
  const Counters c = Since(before);
  EXPECT_EQ(c.lines_flushed, 17u);
  EXPECT_EQ(c.fences, 17u);
  EXPECT_EQ(c.media_blocks_written, 17u);
}

// What a search of one 4 KiB FAST-FAIR leaf of 60 records reads, by search
// mode, for a key in slot 58: linear, the header and records 0..58 (16
// lines); sentinel, the header and the first 15 sentinels (3 lines) and
// slot 58's line (4 lines); binary, the header and the 6 records it
// probes (slots 30, 45, 53, 57, 59, 58), one line each (7 lines read, 4
// of them distinct).
TEST_F(PmModelTest, FastFairSearchModesReadWhatTheySearch) {
  const std::pair<const char*, uint64_t> cases[] = {{"node=4096,sentinel=off", 16},
                                                    {"node=4096,sentinel=on", 4},
                                                    {"node=4096,sentinel=off,search=binary", 7}};
  for (const auto& [opt, want] : cases) {
    SCOPED_TRACE(opt);
    auto db = Db::CreateInMemory("fastfair", opt);
    PMINDEX_ASSERT_OK(db);
    Db& d = *db.value();
    for (Key k = 1; k <= 60; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 10, k));
    SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
    const Counters before = ThreadCounters();
    ASSERT_EQ(d.Get(590).value(), 59u);
    EXPECT_EQ(Since(before).model_lines_read, want);
  }
}

// Reads at node visits: an LB+-Tree lookup reads its leaf (4 lines at
// node=256; the inner nodes are DRAM and not counted), all missing from
// a fresh cache, then none.
TEST_F(PmModelTest, LbtreeLookupReadsItsLeaf) {
  auto db = Db::CreateInMemory("lbtree", "node=256");
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  for (Key k = 1; k <= 5; ++k) PMINDEX_ASSERT_OK(d.Insert(k, k));
  SetPmModel(PmModel::kXpline, CountOnly(1 << 20));
  Counters before = ThreadCounters();
  ASSERT_EQ(d.Get(3).value(), 3u);
  Counters c = Since(before);
  EXPECT_EQ(c.model_lines_read, 4u);
  EXPECT_EQ(c.model_read_misses, 4u);
  before = ThreadCounters();
  ASSERT_EQ(d.Get(4).value(), 4u);
  c = Since(before);
  EXPECT_EQ(c.model_lines_read, 4u);
  EXPECT_EQ(c.model_read_misses, 0u);
}

}  // namespace
}  // namespace pmindex::pm
