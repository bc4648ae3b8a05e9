// roart (ROART, FAST 2021): option checks; a std::map oracle over key sets
// that drive each node type (N4 .. N256 growth, leaf array splits,
// compressed paths broken by a new key, collapses on delete) at leaf array
// lengths the shared scenarios do not run; open after a crash and after a
// clean close; the N48 child index, the child counts and the leaf arrays'
// bitmaps rebuilt at open (the write paths do not persist them); underfull
// leaf arrays merged; and damaged pools refused.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "index/index.h"
#include "pm/pool.h"
#include "support/oracle.h"
#include "support/sorted_node_checks.h"
#include "support/status.h"
#include "trees/roart/roart_layout.h"

namespace pmindex {
namespace {

using testing_util::PoolImage;

Result<std::unique_ptr<Index>> Make(const std::string& options, std::unique_ptr<Pool>* pool) {
  return testing::CreateInPool("roart", options, pool, 32ull << 20);
}

double Extra(const IndexStats& s, const std::string& name) {
  for (const auto& [n, v] : s.extra)
    if (n == name) return v;
  return -1;
}

TEST(RoartOptions, BadOptionsAreRefused) {
  for (const char* bad :
       {"leaf_array=1", "leaf_array=65", "leaf_array=x", "levels=4", "leaf_array=4,leaf_array=8"}) {
    std::unique_ptr<Pool> pool;
    auto idx = Make(bad, &pool);
    EXPECT_TRUE(idx.status().is_invalid_argument()) << bad << ": " << idx.status().ToString();
  }
  for (const char* good : {"", "leaf_array=2", "leaf_array=64"}) {
    std::unique_ptr<Pool> pool;
    auto idx = Make(good, &pool);
    PMINDEX_EXPECT_OK(idx) << good;
  }
}

// Keys of one of three shapes: dense small keys (long shared prefixes,
// full N256 nodes low down), random 64-bit keys, and clusters that share
// six bytes (deep compressed paths that new keys break).
Key DrawKey(std::mt19937_64& rng, int shape) {
  switch (shape) {
    case 0:
      return rng() % 2000;
    case 1:
      return rng();
    default:
      return (rng() % 8) << 56 | (rng() % 3) << 20 | rng() % 600;
  }
}

TEST(RoartOracle, KeyShapesAndLeafArrayLengths) {
  for (const char* opt : {"leaf_array=2", "leaf_array=5", "leaf_array=64"}) {
    for (int shape = 0; shape < 3; ++shape) {
      SCOPED_TRACE(std::string(opt) + " shape " + std::to_string(shape));
      std::unique_ptr<Pool> pool;
      auto idx = Make(opt, &pool);
      PMINDEX_ASSERT_OK(idx);
      // Grows for the first half (inserts, upserts, updates), then the
      // full mix with removes weighted twice and scans of 1 to 70 records.
      using enum testing::OracleOp;
      testing::OracleOptions o;
      o.seed = 42 + shape;
      o.ops = 4000;
      o.key = [shape](std::mt19937_64& rng) { return DrawKey(rng, shape); };
      o.first_half_mix = {kInsert, kInsert, kUpsert, kUpdate};
      o.mix = {kInsert, kInsert, kUpsert, kUpdate, kRemove, kRemove, kRead};
      o.scan = 70;
      o.random_scan_length = true;
      o.verify_every = 500;
      o.lookup_all_at_end = true;
      ASSERT_NO_FATAL_FAILURE(testing::RunOracle(*idx.value(), o));
    }
  }
}

// Every node type appears, and deletes merge nodes of leaf arrays again.
TEST(RoartShape, NodesGrowSplitAndCollapse) {
  std::unique_ptr<Pool> pool;
  auto idx = Make("leaf_array=2", &pool);
  PMINDEX_ASSERT_OK(idx);
  Index& t = *idx.value();
  // Dense keys (N48 and N256 at depth 7, an N256 at depth 6), ten keys
  // differing in byte 5 (an N16) and three in byte 4 (an N4).
  std::vector<Key> keys;
  for (Key k = 0; k < 3000; ++k) keys.push_back(k * 5);
  for (Key k = 0; k < 10; ++k) keys.push_back((Key{1} << 40) + (k << 16));
  for (Key k = 0; k < 3; ++k) keys.push_back((Key{2} << 40) + (k << 24));
  for (size_t i = 0; i < keys.size(); ++i) PMINDEX_ASSERT_OK(t.insert(keys[i], i));
  PMINDEX_ASSERT_OK(t.verify());
  IndexStats s = t.stats();
  EXPECT_GT(Extra(s, "n4"), 0);
  EXPECT_GT(Extra(s, "n16"), 0);
  EXPECT_GT(Extra(s, "n48"), 0);
  EXPECT_GT(Extra(s, "n256"), 1);  // the root and grown nodes
  EXPECT_GT(Extra(s, "splits"), 0);
  EXPECT_GT(Extra(s, "grows"), 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i % 50 != 0) {
      PMINDEX_ASSERT_OK(t.remove(keys[i]));
    }
  }
  PMINDEX_ASSERT_OK(t.verify());
  s = t.stats();
  EXPECT_EQ(s.entries, 61u);
  EXPECT_GT(Extra(s, "merges"), 0);  // leaf arrays of 2 merge at 2 leaves
  for (size_t i = 0; i < keys.size(); i += 50) ASSERT_EQ(t.lookup(keys[i]).value_or(~0ull), i);
  for (size_t i = 0; i < keys.size(); i += 50) PMINDEX_ASSERT_OK(t.remove(keys[i]));
  PMINDEX_ASSERT_OK(t.verify());
  s = t.stats();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.inner_nodes, 1u);  // the root alone
  EXPECT_EQ(s.leaves, 0u);
}

TEST(RoartBulk, LoadThenWriteAndReopen) {
  std::unique_ptr<Pool> pool;
  auto idx = Make("leaf_array=8", &pool);
  PMINDEX_ASSERT_OK(idx);
  std::vector<KV> load;
  for (Key k = 0; k < 5000; ++k) load.push_back(KV{k * k * 977 + k, k});
  PMINDEX_ASSERT_OK(idx.value()->bulk_load(load, 0.5));
  EXPECT_TRUE(idx.value()->bulk_load(load, 1.0).is_invalid_argument());  // not empty any more
  PMINDEX_ASSERT_OK(idx.value()->verify());
  // Arrays are cut at fill * 8 leaves (or fewer, where the keys' bytes
  // part them earlier).
  EXPECT_LE(Extra(idx.value()->stats(), "leaf_array_fill"), 0.5);
  for (Key k = 0; k < 5000; k += 2) PMINDEX_ASSERT_OK(idx.value()->remove(k * k * 977 + k));
  for (Key k = 0; k < 1000; ++k) PMINDEX_ASSERT_OK(idx.value()->insert(k * 3 + 1, k));
  PMINDEX_ASSERT_OK(idx.value()->verify());
  for (bool crash : {true, false}) {
    SCOPED_TRACE(crash ? "after a crash" : "after a clean close");
    const std::vector<std::byte> bytes = PoolImage(*pool, &idx.value(), crash);
    testing::Reopened re;
    PMINDEX_ASSERT_OK(testing::ReopenBytes(bytes, &re));
    Index& t = *re.idx;
    PMINDEX_ASSERT_OK(t.verify());
    EXPECT_EQ(t.stats().entries, 3500u);
    for (Key k = 0; k < 5000; ++k)
      ASSERT_EQ(t.lookup(k * k * 977 + k), k % 2 == 1 ? std::optional<Value>(k) : std::nullopt);
    for (Key k = 0; k < 1000; ++k) ASSERT_EQ(t.lookup(k * 3 + 1).value_or(~0ull), k);
    PMINDEX_ASSERT_OK(t.close());
  }
}

// Deletes that leave a node's leaf arrays holding at most MergeAt() leaves
// in all (2 at leaf_array=4) replace the node by one array of them: when
// the array a remove leaves underfull has an underfull neighbour, and when
// the remove empties an array (two neighbours left, each of one leaf).
// The merged tree verifies, counts its bytes exactly and opens after a
// crash as it was.
TEST(RoartMerge, UnderfullLeafArraysMergeIntoOne) {
  std::unique_ptr<Pool> pool;
  auto made = Make("leaf_array=4", &pool);
  PMINDEX_ASSERT_OK(made);
  std::unique_ptr<Index>& t = made.value();
  const auto shape = [&t](double n4, double n16, double arrays, double merges) {
    const IndexStats s = t->stats();
    EXPECT_EQ(Extra(s, "n4"), n4);
    EXPECT_EQ(Extra(s, "n16"), n16);
    EXPECT_EQ(Extra(s, "leaf_arrays"), arrays);
    EXPECT_EQ(Extra(s, "merges"), merges);
    PMINDEX_EXPECT_OK(t->verify());
  };
  // Under root byte 0: {0x100 .. 0x103} fills an array, 0x200 splits it
  // into an N4 at depth 6 over {0x100 .. 0x103} and {0x200}.
  for (Key k : {0x100, 0x101, 0x102, 0x103, 0x200}) PMINDEX_ASSERT_OK(t->insert(k, k));
  shape(1, 0, 2, 0);
  PMINDEX_ASSERT_OK(t->remove(0x101));  // 3 leaves left there: not underfull
  shape(1, 0, 2, 0);
  PMINDEX_ASSERT_OK(t->remove(0x102));  // 2 there, 3 in all: no merge
  shape(1, 0, 2, 0);
  PMINDEX_ASSERT_OK(t->remove(0x103));  // 1 there, 2 in all: merged
  shape(0, 0, 1, 1);
  // Under root byte 1: five keys differing in their last byte split into
  // an N16 at depth 7 over five one-leaf arrays; removes clear an entry,
  // shrink the node to an N4 (3 children), then merge the last two arrays.
  const auto key = [](Key b) { return (Key{1} << 56) | b; };
  for (Key b = 0; b < 5; ++b) PMINDEX_ASSERT_OK(t->insert(key(b), b));
  shape(0, 1, 6, 1);
  PMINDEX_ASSERT_OK(t->remove(key(4)));
  PMINDEX_ASSERT_OK(t->remove(key(3)));
  shape(1, 0, 4, 1);
  EXPECT_EQ(Extra(t->stats(), "shrinks"), 1);
  PMINDEX_ASSERT_OK(t->remove(key(2)));
  shape(0, 0, 2, 2);
  const IndexStats s = t->stats();
  EXPECT_EQ(s.inner_nodes, 1u);  // the root over the two merged arrays
  EXPECT_EQ(s.entries, 4u);
  EXPECT_EQ(s.pm_bytes,
            roart::InnerBytes(roart::kN256) + 2 * roart::LeafArrayBytes(4) + 4 * roart::kLeafBytes);
  const std::map<Key, Value> want = {{0x100, 0x100}, {0x200, 0x200}, {key(0), 0}, {key(1), 1}};
  const std::vector<std::byte> bytes = PoolImage(*pool, &t, /*crash=*/true);
  testing::Reopened re;
  PMINDEX_ASSERT_OK(testing::ReopenBytes(bytes, &re));
  PMINDEX_ASSERT_OK(re.idx->verify());
  EXPECT_EQ(Extra(re.idx->stats(), "leaf_arrays"), 2);
  KV out[8];
  ASSERT_EQ(re.idx->scan(0, 8, out), want.size());
  size_t i = 0;
  for (const auto& [k, v] : want) {
    EXPECT_EQ(out[i].key, k);
    EXPECT_EQ(out[i++].value, v);
  }
}

// The N48 child index, the inner nodes' child counts and the leaf arrays'
// bitmaps are metadata: an image that lost them (the write paths store
// them without a flush) opens with every child and leaf found again, and
// the removes that read the counts (a shrink at ShrinkAt) act on the
// rebuilt ones.
TEST(RoartRecovery, N48IndexCountsAndBitmapsAreRebuiltAtOpen) {
  std::unique_ptr<Pool> pool;
  auto idx = Make("leaf_array=2", &pool);
  PMINDEX_ASSERT_OK(idx);
  // 30 children under one node of depth 7: an N48.
  for (Key k = 0; k < 30; ++k) PMINDEX_ASSERT_OK(idx.value()->insert(0x1000 + k * 8, k));
  ASSERT_EQ(Extra(idx.value()->stats(), "n48"), 1);
  const std::vector<std::byte> bytes = PoolImage(*pool, &idx.value(), true);
  auto img = Pool::OpenImage(bytes);
  PMINDEX_ASSERT_OK(img);
  // Find the N48 below the root and zero its index.
  uint64_t* root = img.value()->to_ptr<uint64_t>(PPtr(img.value()->root(0)));
  uint64_t* n48 = nullptr;
  for (uint64_t* n = root; n48 == nullptr;) {
    uint64_t next = 0;
    for (unsigned i = 0; i < roart::Capacity(roart::MetaType(n[0])) && next == 0; ++i)
      next = n[2 + i];
    ASSERT_NE(next, 0u);
    ASSERT_NE(roart::EntryType(next), roart::kLeafArray + 0u);
    n = img.value()->to_ptr<uint64_t>(PPtr::Make(img.value()->id(), roart::EntryOffset(next)));
    if (roart::MetaType(n[0]) == roart::kN48) n48 = n;
  }
  std::memset(n48 + 2 + 48, 0, 256);
  // Its count byte (30) and the root's (1) as a crash may leave them.
  ASSERT_EQ(n48[1] & roart::kCountMask, 30u);
  ASSERT_EQ(root[1] & roart::kCountMask, 1u);
  n48[1] = (n48[1] & ~roart::kCountMask) | 45;
  root[1] = (root[1] & ~roart::kCountMask) | 7;
  // And the bitmap of a leaf array below it (its slots are the truth).
  uint64_t* la = nullptr;
  for (unsigned i = 0; i < 48 && la == nullptr; ++i)
    if (n48[2 + i] != 0 && roart::EntryType(n48[2 + i]) == roart::kLeafArray)
      la = img.value()->to_ptr<uint64_t>(
          PPtr::Make(img.value()->id(), roart::EntryOffset(n48[2 + i])));
  ASSERT_NE(la, nullptr);
  ASSERT_NE(la[1], 0u);
  la[1] = 0;
  auto re = open_index(img.value().get());
  PMINDEX_ASSERT_OK(re);
  PMINDEX_ASSERT_OK(re.value()->verify());
  for (Key k = 0; k < 30; ++k) {
    ASSERT_EQ(re.value()->lookup(0x1000 + k * 8).value_or(~0ull), k);
  }
  // 18 removes leave the N48 with 12 children: shrunk to an N16 (by the
  // count 45 it would stay an N48).
  for (Key k = 0; k < 18; ++k) PMINDEX_ASSERT_OK(re.value()->remove(0x1000 + k * 8));
  const IndexStats s = re.value()->stats();
  EXPECT_EQ(Extra(s, "n48"), 0);
  EXPECT_EQ(Extra(s, "n16"), 1);
  EXPECT_EQ(Extra(s, "shrinks"), 1);
  PMINDEX_EXPECT_OK(re.value()->verify());
  for (Key k = 0; k < 30; ++k)
    EXPECT_EQ(re.value()->lookup(0x1000 + k * 8).has_value(), k >= 18) << k;
}

// States no crash leaves are refused at open, naming what is wrong.
TEST(RoartRecovery, DamageIsRefused) {
  std::unique_ptr<Pool> pool;
  auto idx = Make("leaf_array=4", &pool);
  PMINDEX_ASSERT_OK(idx);
  for (Key k = 1; k <= 200; ++k) PMINDEX_ASSERT_OK(idx.value()->insert(k * 1000, k));
  const std::vector<std::byte> bytes = PoolImage(*pool, &idx.value(), true);
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    auto img = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(img);
    uint64_t* root = img.value()->to_ptr<uint64_t>(PPtr(img.value()->root(0)));
    uint64_t* e = &root[2 + 0];  // byte 0: every key is below 2^56
    ASSERT_NE(*e, 0u);
    uint64_t* child =
        img.value()->to_ptr<uint64_t>(PPtr::Make(img.value()->id(), roart::EntryOffset(*e)));
    const char* expect = nullptr;
    if (variant == 0) {
      *e = roart::Entry(roart::EntryOffset(*e), 0, 9);
      expect = "child type";
    } else if (variant == 1) {
      child[1] ^= uint64_t{1} << 60;  // a prefix byte above the root's
      expect = "does not fit its parent";
    } else if (variant == 2) {
      *e = roart::Entry(roart::EntryOffset(*e) + 1, 0, roart::EntryType(*e));
      expect = "misaligned";
    } else {
      root[2 + 5] = *e | (uint64_t{5} << 48);  // the same child under byte 5 too
      expect = "does not fit";
    }
    auto re = open_index(img.value().get());
    ASSERT_TRUE(re.status().is_corruption()) << re.status().ToString();
    EXPECT_NE(re.status().ToString().find(expect), std::string::npos) << re.status().ToString();
  }
}

}  // namespace
}  // namespace pmindex
