// LCB+Tree unit tests: oracle with tiny nodes (many splits, root growth),
// undo of a hand-crafted crash in the middle of a logged modification,
// flushed lines per insert include the node log, corrupt pools.
#include "trees/lcbtree/lcbtree.h"

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

namespace pmindex::lcbtree {
namespace {

using testing::PoolAndIndex;

PoolAndIndex Make(const std::string& opts) { return testing::MakeInMemory("lcbtree", opts); }

TEST(LcbtreeTree, RandomOpsAgainstOracle) {
  testing::KeyRangeOracle o;
  o.keys = 3000;
  ASSERT_NO_FATAL_FAILURE(
      testing::RunKeyRangeOracleOnConfigs("lcbtree", {"node=128", "node=512"}, o));
}

// A crash after the log was declared valid and some nodes were changed in
// place: recovery restores the originals.
TEST(LcbtreeTree, ValidUndoLogIsRolledBack) {
  auto t = Make("node=128");
  for (Key k = 0; k < 200; ++k) PMINDEX_ASSERT_OK(t.idx->insert(k * 2, k));
  auto img = Pool::OpenImage(t.pool->bytes());
  PMINDEX_ASSERT_OK(img);
  Pool* p = img.value().get();
  auto* meta = p->to_ptr<Meta>(PPtr(p->root(0)));
  auto* log = p->to_ptr<LogHeader>(PPtr(meta->log));
  // Log the root by hand, then scribble over it.
  Node* root = p->to_ptr<Node>(PPtr(meta->root));
  auto* rec = reinterpret_cast<std::byte*>(log) + sizeof(LogHeader);
  std::memcpy(rec, &meta->root, 8);
  std::memcpy(rec + 64, root, 128);
  log->old_root = meta->root;
  log->count = 1;
  root->n = 0;
  std::memset(root->w, 0xFF, 64);
  auto idx = open_index(p);
  PMINDEX_ASSERT_OK(idx);
  PMINDEX_ASSERT_OK(idx.value()->verify());
  for (Key k = 0; k < 200; ++k) ASSERT_EQ(idx.value()->lookup(k * 2), k);
}

TEST(LcbtreeTree, InsertFlushesLogAndShiftedEntries) {
  auto t = Make("node=512");
  for (Key k = 0; k < 20; ++k) PMINDEX_ASSERT_OK(t.idx->insert(1000 + k, k));
  auto c0 = pm::ThreadCounters();
  PMINDEX_ASSERT_OK(t.idx->insert(1, 1));  // front of the leaf: shifts 20 entries
  auto c1 = pm::ThreadCounters();
  // Log: 64 B record header + 512 B node = 9 lines, plus the log header;
  // then shifted keys and values (>= 2 lines each) and the node header.
  EXPECT_GE(c1.lines_flushed - c0.lines_flushed, 14u);
  EXPECT_EQ(c1.naws - c0.naws, 2u);  // log valid, log cleared
}

TEST(LcbtreeTree, BulkLoadAndCorruptPool) {
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
  meta->root = 0x12345;
  auto idx = open_index(img.value().get());
  ASSERT_FALSE(idx.ok());
  EXPECT_TRUE(idx.status().is_corruption());
}

}  // namespace
}  // namespace pmindex::lcbtree
