// CDDS-Tree unit tests: oracle with tiny nodes (versioned splits, root
// growth, dead-entry garbage collection), recovery of hand-crafted crash
// states (uncommitted insert, uncommitted delete, duplicate left by an
// interrupted shift, a torn entry copy named by the shift marker), flushes
// and fences per shifted entry, corrupt pools.
#include "trees/cddstree/cddstree.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "support/oracle.h"
#include "support/pools.h"
#include "support/seed.h"
#include "support/status.h"

namespace pmindex::cddstree {
namespace {

using testing::PoolAndIndex;

PoolAndIndex Make(const std::string& opts) { return testing::MakeInMemory("cddstree", opts); }

TEST(CddstreeTree, RandomOpsAgainstOracle) {
  testing::KeyRangeOracle o;
  o.keys = 2000;
  o.lookup_each = true;
  ASSERT_NO_FATAL_FAILURE(
      testing::RunKeyRangeOracleOnConfigs("cddstree", {"node=256", "node=512"}, o));
}

TEST(CddstreeTree, UncommittedVersionsAreUndone) {
  auto t = Make("node=512");
  for (Key k = 0; k < 5; ++k) PMINDEX_ASSERT_OK(t.idx->insert(k * 10, k));
  auto img = Pool::OpenImage(t.pool->bytes());
  Pool* p = img.value().get();
  auto* meta = p->to_ptr<Meta>(PPtr(p->root(0)));
  Node* leaf = p->to_ptr<Node>(PPtr(meta->root));
  ASSERT_TRUE(leaf->leaf);
  const uint64_t nv = meta->gv + 1;
  // In flight at version nv: delete of key 20, insert of key 25 with a
  // shift interrupted after copying key 30 (duplicate at slots 3 and 4).
  leaf->e[2].end = nv;
  leaf->e[5] = leaf->e[4];
  leaf->e[4] = leaf->e[3];
  leaf->n = 6;
  leaf->e[3] = Entry{25, 99, nv, Entry::kInf};
  auto idx = open_index(p);
  PMINDEX_ASSERT_OK(idx);
  PMINDEX_ASSERT_OK(idx.value()->verify());
  EXPECT_EQ(idx.value()->lookup(20), 2u);
  EXPECT_FALSE(idx.value()->lookup(25));
  EXPECT_EQ(idx.value()->stats().entries, 5u);
  // Version nv is written again by the next operation: the neutralized
  // entry must not come back.
  PMINDEX_ASSERT_OK(idx.value()->insert(7, 7));
  EXPECT_FALSE(idx.value()->lookup(25));
  EXPECT_EQ(idx.value()->stats().entries, 6u);
  PMINDEX_ASSERT_OK(idx.value()->verify());
}

// A shift overwriting slot 4 (marker 5) of {0,10,20,30,40} while inserting
// 25: slot 5 already holds 40 and is covered by n. `words` of the 32-byte
// copy of slot 3 into slot 4 persisted (any prefix of its 8-byte pieces).
void TornShiftCase(int words) {
  SCOPED_TRACE(::testing::Message() << "persisted words=" << words);
  auto t = Make("node=512");
  for (Key k = 0; k < 5; ++k) PMINDEX_ASSERT_OK(t.idx->insert(k * 10, k));
  auto img = Pool::OpenImage(t.pool->bytes());
  Pool* p = img.value().get();
  auto* meta = p->to_ptr<Meta>(PPtr(p->root(0)));
  Node* leaf = p->to_ptr<Node>(PPtr(meta->root));
  ASSERT_TRUE(leaf->leaf);
  ASSERT_EQ(leaf->torn, 0u);
  leaf->e[5] = leaf->e[4];
  leaf->n = 6;
  leaf->torn = 5;
  std::memcpy(&leaf->e[4], &leaf->e[3], static_cast<size_t>(words) * 8);
  auto idx = open_index(p);
  PMINDEX_ASSERT_OK(idx);
  PMINDEX_ASSERT_OK(idx.value()->verify());
  for (Key k = 0; k < 5; ++k) EXPECT_EQ(idx.value()->lookup(k * 10), k);
  EXPECT_EQ(idx.value()->stats().entries, 5u);
  // The stale marker names a dead slot; the next shift in the node
  // replaces it and clears it.
  PMINDEX_ASSERT_OK(idx.value()->insert(25, 25));
  PMINDEX_ASSERT_OK(idx.value()->verify());
  EXPECT_EQ(leaf->torn, 0u);
  EXPECT_EQ(idx.value()->lookup(25), 25u);
  EXPECT_EQ(idx.value()->lookup(30), 3u);
  EXPECT_EQ(idx.value()->stats().entries, 6u);
}

TEST(CddstreeTree, TornShiftCopyIsNeutralized) {
  for (int words = 0; words <= 4; ++words) TornShiftCase(words);
}

TEST(CddstreeTree, MarkerBeyondNIsCorruption) {
  auto t = Make("node=512");
  for (Key k = 0; k < 3; ++k) PMINDEX_ASSERT_OK(t.idx->insert(k, k));
  auto img = Pool::OpenImage(t.pool->bytes());
  auto* meta = img.value()->to_ptr<Meta>(PPtr(img.value()->root(0)));
  Node* leaf = img.value()->to_ptr<Node>(PPtr(meta->root));
  leaf->torn = 4;  // beyond n
  auto idx = open_index(img.value().get());
  ASSERT_FALSE(idx.ok());
  EXPECT_TRUE(idx.status().is_corruption());
}

TEST(CddstreeTree, FlushPerShiftedEntry) {
  auto t = Make("node=1024");
  for (Key k = 0; k < 20; ++k) PMINDEX_ASSERT_OK(t.idx->insert(100 + k, k));
  auto c0 = pm::ThreadCounters();
  PMINDEX_ASSERT_OK(t.idx->insert(1, 1));  // shifts 20 entries
  auto c1 = pm::ThreadCounters();
  EXPECT_GE(c1.lines_flushed - c0.lines_flushed, 21u);
  // Marker and slot each fenced for slots 19..0 (slot 0 takes the new
  // entry), plus the copy into slot 20 (beyond n), n+1 and the commit.
  EXPECT_GE(c1.fences - c0.fences, 2u * 20 + 3);
}

TEST(CddstreeTree, BulkLoadAndCorruptPool) {
  auto t = Make("node=256");
  std::vector<KV> kv;
  for (Key k = 0; k < 3000; ++k) kv.push_back({k * 3, k});
  PMINDEX_ASSERT_OK(t.idx->bulk_load(kv, 0.8));
  PMINDEX_ASSERT_OK(t.idx->verify());
  for (Key k = 0; k < 3000; ++k) PMINDEX_ASSERT_OK(t.idx->insert(k * 3 + 1, k));
  PMINDEX_ASSERT_OK(t.idx->verify());
  EXPECT_EQ(t.idx->stats().entries, 6000u);
  auto img = Pool::OpenImage(t.pool->bytes());
  auto* meta = img.value()->to_ptr<Meta>(PPtr(img.value()->root(0)));
  Node* root = img.value()->to_ptr<Node>(PPtr(meta->root));
  root->n = 1000;
  auto idx = open_index(img.value().get());
  ASSERT_FALSE(idx.ok());
  EXPECT_TRUE(idx.status().is_corruption());
}

}  // namespace
}  // namespace pmindex::cddstree
