// circtree unit tests (the node layout: sorted_node_test.cc): the ring
// fits the metadata word, option checks, every search mode against a std::map
// oracle at node sizes 256 B to 4 KiB (rings that wrap, both shift
// directions, splits, root growth, deletes and merges, scans across
// leaves), merges that shrink the tree (in memory and across a reopen),
// and the flushes and fences of one insert per side.
#include "trees/sorted_node/circtree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pm/persist.h"
#include "pmindex/db.h"
#include "support/temp_files.h"
#include "unit/sorted_node_checks.h"

namespace pmindex::circtree {
namespace {

using testing_util::ConfigName;
using testing_util::TestSeed;

// The node layout (shared with fastfair): sorted_node_test.cc. Here: the
// ring of every node size fits the metadata word.
TEST(CircTreeLayout, SlotsFitTheMetaWord) {
  for (uint32_t bytes = 256; bytes <= 65536; bytes += 64) {
    SCOPED_TRACE(bytes);
    for (int aux = 0; aux < 3; ++aux) {
      EXPECT_LT(Layout::For(bytes, aux == 1, aux == 2).cap, 1u << 16);  // start and count: 16-bit fields
    }
  }
}

TEST(CircTreeLayout, MetaWordRoundTrips) {
  Meta m{4091, 17, true};
  EXPECT_EQ(Meta::Unpack(m.Pack()).start, 4091u);
  EXPECT_EQ(Meta::Unpack(m.Pack()).count, 17u);
  EXPECT_TRUE(Meta::Unpack(m.Pack()).left);
  EXPECT_EQ(m.Pack() >> 33, 0u);
}

TEST(CircTreeOptions, BadCombinationsAreRefused) {
  for (const char* bad : {"node=100", "node=300", "node=128", "node=131072", "sentinel=maybe",
                          "search=sentinel,sentinel=off", "search=hash", "fingerprints=on,sentinel=on",
                          "fingerprints=on,search=sentinel", "fingerprint=on", "fingerprints=2"}) {
    auto db = Db::CreateInMemory("circtree", bad);
    EXPECT_TRUE(db.status().is_invalid_argument()) << bad << ": " << db.status().ToString();
  }
  for (const char* good : {"node=256", "node=4096,sentinel=off,search=binary", "fingerprints=on"}) {
    auto db = Db::CreateInMemory("circtree", good);
    EXPECT_TRUE(db.ok()) << good << ": " << db.status().ToString();
  }
}

class CircTreeOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(CircTreeOracle, MatchesAMapThroughSplitsAndDeletes) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  auto db = Db::CreateInMemory("circtree", GetParam());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Db& d = *db.value();
  std::mt19937_64 rng(seed);
  std::map<Key, Value> oracle;
  std::vector<Key> keys;
  for (int i = 0; i < 30000; ++i) {
    // Small and huge keys, 0 and UINT64_MAX among them; runs of ascending
    // and descending keys fill rings from either end.
    Key k = i == 0 ? 0 : i == 1 ? UINT64_MAX
                   : (i / 1000) % 3 == 1 ? 1000000 + i
                   : (i / 1000) % 3 == 2 ? 900000 - i
                                         : (rng() % 4 == 0 ? rng() % 5000 : rng());
    Value v = rng() % 3 == 0 ? 0 : rng();  // equal values are allowed
    Status s = d.Insert(k, v);
    if (oracle.count(k)) {
      ASSERT_TRUE(s.is_already_exists());
    } else {
      ASSERT_TRUE(s.ok()) << s.ToString();
      oracle[k] = v;
      keys.push_back(k);
    }
    if (i % 5000 == 4999) {
      ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
    }
  }
  ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
  // Remove three quarters in random order: leaves empty out.
  std::shuffle(keys.begin(), keys.end(), rng);
  for (size_t i = 0; i < keys.size() * 3 / 4; ++i) {
    ASSERT_TRUE(d.Remove(keys[i]).ok());
    oracle.erase(keys[i]);
    if (i % 4 == 0) {  // interleaved inserts: both shift directions after deletes
      Key k = rng();
      if (!oracle.count(k)) {
        ASSERT_TRUE(d.Insert(k, k ^ 1).ok());
        oracle[k] = k ^ 1;
      }
    }
  }
  for (size_t i = 0; i < keys.size() / 8; ++i) {
    ASSERT_TRUE(d.Remove(keys[i]).is_not_found());
    ASSERT_TRUE(d.Upsert(keys[i], i).ok());
    oracle[keys[i]] = i;
  }
  ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
  for (const auto& [k, v] : oracle) {
    Result<Value> got = d.Get(k);
    ASSERT_TRUE(got.ok()) << k;
    EXPECT_EQ(got.value(), v) << k;
  }
  for (size_t i = keys.size() / 8; i < keys.size() * 3 / 4; ++i)
    if (!oracle.count(keys[i])) {
      EXPECT_TRUE(d.Get(keys[i]).status().is_not_found()) << keys[i];
    }
  ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
}

INSTANTIATE_TEST_SUITE_P(Configs, CircTreeOracle,
                         ::testing::Values("node=256", "node=512", "node=1024", "node=4096",
                                           "node=512,search=linear", "node=1024,search=binary",
                                           "node=256,sentinel=off", "node=4096,sentinel=off,search=binary",
                                           "node=512,fingerprints=on", "node=1024,fingerprints=on",
                                           "node=4096,fingerprints=on,search=binary"),
                         ConfigName);

// Bulk load, then inserts and deletes at both ends of every leaf.
TEST(CircTreeBulk, BulkLoadThenBothEnds) {
  for (const char* cfg : {"node=256", "node=512,fingerprints=on", "node=1024,sentinel=off"}) {
    SCOPED_TRACE(cfg);
    auto db = Db::CreateInMemory("circtree", cfg);
    ASSERT_TRUE(db.ok());
    Db& d = *db.value();
    std::vector<KV> kv;
    for (Key k = 1; k <= 5000; ++k) kv.push_back({k * 8, k});
    ASSERT_TRUE(d.BulkLoad(kv, 0.5).ok());
    ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
    std::map<Key, Value> oracle;
    for (const KV& e : kv) oracle[e.key] = e.value;
    for (Key k = 1; k <= 5000; k += 3) {
      ASSERT_TRUE(d.Insert(k * 8 - 1, 1).ok());
      oracle[k * 8 - 1] = 1;
      ASSERT_TRUE(d.Insert(k * 8 + 1, 2).ok());
      oracle[k * 8 + 1] = 2;
      ASSERT_TRUE(d.Remove(k * 8).ok());
      oracle.erase(k * 8);
    }
    ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
    ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
  }
}

// Deletes merge underfull nodes into their left neighbours, at every
// level, and an inner root left with one child hands the root down: a tree
// thinned out by deletes keeps few nodes, one emptied is one leaf again.
// Keys are removed from both ends toward the middle (rings shrink from
// either side before a merge copies them) and, in a second tree, in
// random order against a std::map oracle.
TEST(CircTreeMerge, DeletesMergeNodesAndShrinkTheTree) {
  for (const char* opt : {"node=256", "node=256,sentinel=off", "node=256,fingerprints=on", "node=512,search=binary"})
    testing_util::ExpectDeletesShrinkTheTree("circtree", opt, 3);
}

// Many inserts, then most keys deleted in random order (with some inserts
// between): the tree shrinks, matches a std::map throughout, verifies, and
// a reopen (recovery's validation and repairs) finds the same pairs.
TEST(CircTreeMerge, RandomDeletesShrinkAndSurviveAReopen) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  for (const char* opt : {"node=256", "node=256,fingerprints=on", "node=1024,sentinel=off"}) {
    SCOPED_TRACE(opt);
    testing::TempDir dir;
    const std::string path = dir.path("circ.pool");
    std::mt19937_64 rng(seed);
    std::map<Key, Value> oracle;
    IndexStats full, thin;
    {
      auto db = Db::Create(path, "circtree", opt);
      ASSERT_TRUE(db.ok()) << db.status().ToString();
      Db& d = *db.value();
      for (int i = 0; i < 20000; ++i) {
        const Key k = rng() % 1000000;
        if (oracle.count(k)) continue;
        ASSERT_TRUE(d.Insert(k, k * 3).ok());
        oracle[k] = k * 3;
      }
      full = d.Stats();
      std::vector<Key> keys;
      for (const auto& kv : oracle) keys.push_back(kv.first);
      std::shuffle(keys.begin(), keys.end(), rng);
      for (size_t i = 0; i < keys.size() * 19 / 20; ++i) {
        ASSERT_TRUE(d.Remove(keys[i]).ok()) << keys[i];
        oracle.erase(keys[i]);
        if (i % 16 == 0) {
          const Key k = rng() % 1000000;
          if (!oracle.count(k)) {
            ASSERT_TRUE(d.Insert(k, k ^ 5).ok());
            oracle[k] = k ^ 5;
          }
        }
        if (i % 4000 == 0) {
          ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
        }
      }
      ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
      thin = d.Stats();
      EXPECT_EQ(thin.entries, oracle.size());
      EXPECT_LT(thin.leaves, full.leaves / 4);
      EXPECT_LE(thin.height, full.height);
      ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
      ASSERT_TRUE(d.Close().ok());
    }
    auto db = Db::Open(path, "circtree");
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Db& d = *db.value();
    ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
    EXPECT_EQ(d.Stats().leaves, thin.leaves);
    ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
    for (const auto& [k, v] : oracle) ASSERT_EQ(d.Get(k).value(), v) << k;
    // The rest goes too: one leaf is left.
    for (const auto& kv : oracle) ASSERT_TRUE(d.Remove(kv.first).ok());
    ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
    EXPECT_EQ(d.Stats().height, 1u);
    EXPECT_EQ(d.Stats().leaves, 1u);
  }
}

// Lock-free readers while one writer splits and merges: the keys k*10 stay
// with their values throughout, the writer inserts and removes the keys in
// between in waves (leaves fill, split, empty out, merge; the root grows
// and collapses). A reader must always find every kept key with its value
// (a node merged away sends it back to the root) and a scan must see them
// in order, none missing.
TEST(CircTreeMerge, ReadersDuringMergesSeeEveryKeptKey) {
  for (const char* opt : {"node=256", "node=256,fingerprints=on"}) {
    SCOPED_TRACE(opt);
    auto db = Db::CreateInMemory("circtree", opt);
    ASSERT_TRUE(db.ok());
    Db& d = *db.value();
    constexpr Key kKept = 300;
    for (Key k = 0; k < kKept; ++k) ASSERT_TRUE(d.Insert(k * 10, k + 7).ok());
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> bad{0}, reads{0};
    auto reader = [&](uint64_t seed) {
      std::mt19937_64 rng(seed);
      std::vector<KV> got;
      while (!stop.load(std::memory_order_relaxed)) {
        const Key k = rng() % kKept;
        Result<Value> v = d.Get(k * 10);
        if (!v.ok() || v.value() != k + 7) bad.fetch_add(1);
        got.clear();
        d.Range(k * 10, std::nullopt, 20, &got);
        Key want = k;
        for (const KV& e : got) {
          if (e.key % 10 != 0) continue;
          if (e.key != want * 10 || e.value != want + 7) bad.fetch_add(1);
          ++want;
        }
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    };
    std::thread r1(reader, 1), r2(reader, 2);
    for (int wave = 0; wave < 12; ++wave) {
      for (Key k = 0; k < kKept * 10; ++k)
        if (k % 10 != 0) {
          ASSERT_TRUE(d.Insert(k, k).ok());
        }
      for (Key i = 0; i < kKept * 10; ++i) {
        const Key k = wave % 2 ? kKept * 10 - 1 - i : i;  // from either end
        if (k % 10 != 0) {
          ASSERT_TRUE(d.Remove(k).ok()) << k;
        }
      }
    }
    stop = true;
    r1.join();
    r2.join();
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_GT(reads.load(), 0u);
    ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
    EXPECT_EQ(d.Stats().entries, kKept);
  }
}

// An insert shifts only its shorter side. On a 4 KiB leaf (no sentinels,
// 252 slots) filled with 60 ascending keys (ring slots 0..59, 15 lines):
// an insert before the first key moves nothing (a prepend into the free
// slot before the ring's start: the record, then the metadata word, 2
// fences and 2 lines); an insert just below the last key moves one
// record (copy into the free slot after the range, metadata word, new
// record: 3 fences, 3 lines); an insert in the middle moves the 30 of
// the shorter side, one fence per line it leaves.
TEST(CircTreeCost, InsertsShiftTheShorterSide) {
  auto db = Db::CreateInMemory("circtree", "node=4096,sentinel=off");
  ASSERT_TRUE(db.ok());
  Db& d = *db.value();
  for (Key k = 1; k <= 60; ++k) ASSERT_TRUE(d.Insert(k * 10, k).ok());
  uint64_t lines = pm::ThreadLinesFlushed(), fences = pm::ThreadFences();
  ASSERT_TRUE(d.Insert(5, 5).ok());  // prepend: slot 251 (the ring wraps)
  EXPECT_EQ(pm::ThreadFences() - fences, 2u);
  EXPECT_EQ(pm::ThreadLinesFlushed() - lines, 2u);
  lines = pm::ThreadLinesFlushed(), fences = pm::ThreadFences();
  ASSERT_TRUE(d.Insert(595, 7).ok());  // logical 60 of 61: one record moves right
  EXPECT_EQ(pm::ThreadFences() - fences, 3u);
  EXPECT_EQ(pm::ThreadLinesFlushed() - lines, 3u);
  // Now 62 records at slots 251, 0..60. Key 305 goes to logical 31 (31
  // records left of it, 31 right; the right side moves on a tie): the copy
  // of the last record into slot 61 and the metadata word (2), the lines
  // the shift leaves (it writes slots 60..31: lines 15, 14, .., 8, line 15
  // again since slot 60 changed after the copy: 8), the new record's line
  // 7: 11.
  lines = pm::ThreadLinesFlushed(), fences = pm::ThreadFences();
  ASSERT_TRUE(d.Insert(305, 9).ok());
  EXPECT_EQ(pm::ThreadFences() - fences, 11u);
  EXPECT_EQ(pm::ThreadLinesFlushed() - lines, 11u);
  // A linear (fastfair-style) array would have moved every record for
  // key 5 (16 fences); here the left side's records moved not at all.
  ASSERT_TRUE(d.Verify().ok()) << d.Verify().ToString();
  EXPECT_EQ(d.Get(5).value(), 5u);
  EXPECT_EQ(d.Get(595).value(), 7u);
  EXPECT_EQ(d.Get(305).value(), 9u);
  EXPECT_EQ(d.Get(600).value(), 60u);
  EXPECT_EQ(d.Get(10).value(), 1u);
}

TEST(CircTreeNuma, NodeVisitsAreMetered) {
  ASSERT_NO_FATAL_FAILURE(testing_util::ExpectNodeVisitsMetered("circtree"));
}

}  // namespace
}  // namespace pmindex::circtree
