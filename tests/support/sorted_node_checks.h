// Test helpers shared by the unit tests of the two sorted-node trees
// (fastfair_test.cc, circtree_test.cc; common/sorted_node.h): the seed of
// a randomized test, the name of a parameterized config, and the range
// checks of a tree against its std::map oracle.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "index/index.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/db.h"
#include "support/seed.h"
#include "support/status.h"

namespace pmindex::testing_util {

using testing::TestSeed;

// A gtest parameter name for an options string ("node=512,search=binary"
// -> "node_512_search_binary").
inline std::string ConfigName(const ::testing::TestParamInfo<const char*>& i) {
  std::string n = i.param;
  for (char& ch : n)
    if (ch == '=' || ch == ',') ch = '_';
  return n;
}

// The whole range equals the oracle, and a bounded range of 100 from the
// oracle's middle key starts there (call with ASSERT_NO_FATAL_FAILURE).
inline void ExpectRangesMatch(Db& d, const std::map<Key, Value>& oracle) {
  std::vector<KV> all;
  d.Range(0, std::nullopt, SIZE_MAX, &all);
  ASSERT_EQ(all.size(), oracle.size());
  size_t i = 0;
  for (const auto& [k, v] : oracle) {
    EXPECT_EQ(all[i].key, k);
    EXPECT_EQ(all[i].value, v);
    ++i;
  }
  if (oracle.empty()) return;
  auto mid = std::next(oracle.begin(), static_cast<long>(oracle.size() / 2));
  std::vector<KV> part;
  d.Range(mid->first, std::nullopt, 100, &part);
  ASSERT_EQ(part.size(), std::min<size_t>(100, oracle.size() / 2 + oracle.size() % 2));
  EXPECT_EQ(part.front().key, mid->first);
}

// Deletes that merge nodes shrink the tree (fastfair, circtree): 4000 keys
// inserted, all but one in 50 removed from both ends toward the middle,
// then the rest; the tree verifies, holds exactly the kept pairs, ends as
// one empty leaf and grows again. min_height: the full tree's height at
// least (so that inner nodes merge too).
inline void ExpectDeletesShrinkTheTree(const std::string& kind, const std::string& opt, uint32_t min_height) {
  SCOPED_TRACE(kind + " " + opt);
  auto db = Db::CreateInMemory(kind, opt);
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  constexpr Key kN = 4000;
  for (Key k = 0; k < kN; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 7 + 3, k));
  const IndexStats full = d.Stats();
  ASSERT_GE(full.height, min_height);
  for (Key i = 0; i < kN / 2; ++i) {
    for (Key k : {i, kN - 1 - i}) {
      if (k % 50 != 0) {
        PMINDEX_ASSERT_OK(d.Remove(k * 7 + 3)) << k;
      }
    }
  }
  PMINDEX_ASSERT_OK(d.Verify());
  const IndexStats thin = d.Stats();
  EXPECT_EQ(thin.entries, kN / 50);
  // Merged nodes hold at most 3/4 of their slots and unmerged neighbours
  // at least a quarter between them: at most one leaf per key kept.
  EXPECT_LE(thin.leaves, kN / 50);
  EXPECT_LT(thin.leaves, full.leaves / 4);
  EXPECT_LT(thin.height, full.height);
  for (Key k = 0; k < kN; ++k) {
    Result<Value> v = d.Get(k * 7 + 3);
    if (k % 50 == 0) {
      PMINDEX_ASSERT_OK(v) << k;
      EXPECT_EQ(v.value(), k);
    } else {
      EXPECT_TRUE(v.status().is_not_found()) << k;
    }
  }
  for (Key k = 0; k < kN; k += 50) PMINDEX_ASSERT_OK(d.Remove(k * 7 + 3));
  PMINDEX_ASSERT_OK(d.Verify());
  const IndexStats empty = d.Stats();
  EXPECT_EQ(empty.entries, 0u);
  EXPECT_EQ(empty.height, 1u);
  EXPECT_EQ(empty.leaves, 1u);
  // The emptied tree grows again.
  for (Key k = 0; k < 500; ++k) PMINDEX_ASSERT_OK(d.Insert(k, k + 1));
  PMINDEX_ASSERT_OK(d.Verify());
  std::vector<KV> all;
  d.Range(0, std::nullopt, SIZE_MAX, &all);
  ASSERT_EQ(all.size(), 500u);
  for (Key k = 0; k < 500; ++k) EXPECT_EQ(all[k].value, k + 1);
}

// Db::CreateInMemory(kind, o) refuses every option string of `bad` with
// InvalidArgument and accepts every one of `good`.
inline void ExpectOptions(const std::string& kind, std::initializer_list<const char*> bad,
                          std::initializer_list<const char*> good) {
  for (const char* o : bad) {
    auto db = Db::CreateInMemory(kind, o);
    EXPECT_TRUE(db.status().is_invalid_argument()) << kind << " " << o << ": " << db.status().ToString();
  }
  for (const char* o : good) {
    auto db = Db::CreateInMemory(kind, o);
    PMINDEX_EXPECT_OK(db) << kind << " " << o;
  }
}

// The bytes of `pool` as a crash at a quiescent point leaves them
// (crash), or as a clean close does: *idx closed and destroyed first, then
// the clean flag set as Pool::Close sets it.
inline std::vector<std::byte> PoolImage(Pool& pool, std::unique_ptr<Index>* idx, bool crash) {
  if (!crash) {
    PMINDEX_EXPECT_OK((*idx)->close());
    idx->reset();
  }
  std::vector<std::byte> bytes(pool.bytes().begin(), pool.bytes().end());
  if (!crash) {
    const uint64_t one = 1;
    std::memcpy(bytes.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
  }
  return bytes;
}

}  // namespace pmindex::testing_util
