// Test helpers shared by the unit tests of the two sorted-node trees
// (fastfair_test.cc, circtree_test.cc; common/sorted_node.h): the seed of
// a randomized test, the name of a parameterized config, and the range
// checks of a tree against its std::map oracle.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pmindex/db.h"

namespace pmindex::testing_util {

// PMINDEX_SEED if set (to replay a failure), else a random seed.
inline uint64_t TestSeed() {
  const char* s = std::getenv("PMINDEX_SEED");
  if (s != nullptr && *s != '\0') return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

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

}  // namespace pmindex::testing_util
