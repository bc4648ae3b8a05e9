// circtree unit tests (the node layout: common/sorted_node_test.cc): the ring
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
#include "support/sorted_node_checks.h"
#include "support/status.h"
#include "support/temp_files.h"

namespace pmindex::circtree {
namespace {

using testing_util::ConfigName;
using testing_util::TestSeed;

// The node layout (shared with fastfair): common/sorted_node_test.cc. Here: the
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
    PMINDEX_EXPECT_OK(db) << good;
  }
}

class CircTreeOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(CircTreeOracle, MatchesAMapThroughSplitsAndDeletes) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  auto db = Db::CreateInMemory("circtree", GetParam());
  PMINDEX_ASSERT_OK(db);
  testing_util::InsertRemoveOracle o;
  o.seed = seed;
  // Small and huge keys, 0 and UINT64_MAX among them; runs of ascending
  // and descending keys fill rings from either end.
  o.key = [](int i, std::mt19937_64& rng) -> Key {
    return i == 0                ? 0
           : i == 1              ? UINT64_MAX
           : (i / 1000) % 3 == 1 ? 1000000 + i
           : (i / 1000) % 3 == 2 ? 900000 - i
                                 : (rng() % 4 == 0 ? rng() % 5000 : rng());
  };
  o.verify_every = 5000;
  o.interleave = true;  // inserts between the removals: both shift directions
  ASSERT_NO_FATAL_FAILURE(testing_util::RunInsertRemoveOracle(*db.value(), o));
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
    PMINDEX_ASSERT_OK(db);
    Db& d = *db.value();
    std::vector<KV> kv;
    for (Key k = 1; k <= 5000; ++k) kv.push_back({k * 8, k});
    PMINDEX_ASSERT_OK(d.BulkLoad(kv, 0.5));
    PMINDEX_ASSERT_OK(d.Verify());
    std::map<Key, Value> oracle;
    for (const KV& e : kv) oracle[e.key] = e.value;
    for (Key k = 1; k <= 5000; k += 3) {
      PMINDEX_ASSERT_OK(d.Insert(k * 8 - 1, 1));
      oracle[k * 8 - 1] = 1;
      PMINDEX_ASSERT_OK(d.Insert(k * 8 + 1, 2));
      oracle[k * 8 + 1] = 2;
      PMINDEX_ASSERT_OK(d.Remove(k * 8));
      oracle.erase(k * 8);
    }
    PMINDEX_ASSERT_OK(d.Verify());
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
      PMINDEX_ASSERT_OK(db);
      Db& d = *db.value();
      for (int i = 0; i < 20000; ++i) {
        const Key k = rng() % 1000000;
        if (oracle.count(k)) continue;
        PMINDEX_ASSERT_OK(d.Insert(k, k * 3));
        oracle[k] = k * 3;
      }
      full = d.Stats();
      std::vector<Key> keys;
      for (const auto& kv : oracle) keys.push_back(kv.first);
      std::shuffle(keys.begin(), keys.end(), rng);
      for (size_t i = 0; i < keys.size() * 19 / 20; ++i) {
        PMINDEX_ASSERT_OK(d.Remove(keys[i])) << keys[i];
        oracle.erase(keys[i]);
        if (i % 16 == 0) {
          const Key k = rng() % 1000000;
          if (!oracle.count(k)) {
            PMINDEX_ASSERT_OK(d.Insert(k, k ^ 5));
            oracle[k] = k ^ 5;
          }
        }
        if (i % 4000 == 0) {
          PMINDEX_ASSERT_OK(d.Verify());
        }
      }
      PMINDEX_ASSERT_OK(d.Verify());
      thin = d.Stats();
      EXPECT_EQ(thin.entries, oracle.size());
      EXPECT_LT(thin.leaves, full.leaves / 4);
      EXPECT_LE(thin.height, full.height);
      ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
      PMINDEX_ASSERT_OK(d.Close());
    }
    auto db = Db::Open(path, "circtree");
    PMINDEX_ASSERT_OK(db);
    Db& d = *db.value();
    PMINDEX_ASSERT_OK(d.Verify());
    EXPECT_EQ(d.Stats().leaves, thin.leaves);
    ASSERT_NO_FATAL_FAILURE(testing_util::ExpectRangesMatch(d, oracle));
    for (const auto& [k, v] : oracle) ASSERT_EQ(d.Get(k).value(), v) << k;
    // The rest goes too: one leaf is left.
    for (const auto& kv : oracle) PMINDEX_ASSERT_OK(d.Remove(kv.first));
    PMINDEX_ASSERT_OK(d.Verify());
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
    PMINDEX_ASSERT_OK(db);
    Db& d = *db.value();
    constexpr Key kKept = 300;
    for (Key k = 0; k < kKept; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 10, k + 7));
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
          PMINDEX_ASSERT_OK(d.Insert(k, k));
        }
      for (Key i = 0; i < kKept * 10; ++i) {
        const Key k = wave % 2 ? kKept * 10 - 1 - i : i;  // from either end
        if (k % 10 != 0) {
          PMINDEX_ASSERT_OK(d.Remove(k)) << k;
        }
      }
    }
    stop = true;
    r1.join();
    r2.join();
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_GT(reads.load(), 0u);
    PMINDEX_ASSERT_OK(d.Verify());
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
  PMINDEX_ASSERT_OK(db);
  Db& d = *db.value();
  for (Key k = 1; k <= 60; ++k) PMINDEX_ASSERT_OK(d.Insert(k * 10, k));
  uint64_t lines = pm::ThreadLinesFlushed(), fences = pm::ThreadFences();
  PMINDEX_ASSERT_OK(d.Insert(5, 5));  // prepend: slot 251 (the ring wraps)
  EXPECT_EQ(pm::ThreadFences() - fences, 2u);
  EXPECT_EQ(pm::ThreadLinesFlushed() - lines, 2u);
  lines = pm::ThreadLinesFlushed(), fences = pm::ThreadFences();
  PMINDEX_ASSERT_OK(d.Insert(595, 7));  // logical 60 of 61: one record moves right
  EXPECT_EQ(pm::ThreadFences() - fences, 3u);
  EXPECT_EQ(pm::ThreadLinesFlushed() - lines, 3u);
  // Now 62 records at slots 251, 0..60. Key 305 goes to logical 31 (31
  // records left of it, 31 right; the right side moves on a tie): the copy
  // of the last record into slot 61 and the metadata word (2), the lines
  // the shift leaves (it writes slots 60..31: lines 15, 14, .., 8, line 15
  // again since slot 60 changed after the copy: 8), the new record's line
  // 7: 11.
  lines = pm::ThreadLinesFlushed(), fences = pm::ThreadFences();
  PMINDEX_ASSERT_OK(d.Insert(305, 9));
  EXPECT_EQ(pm::ThreadFences() - fences, 11u);
  EXPECT_EQ(pm::ThreadLinesFlushed() - lines, 11u);
  // A linear (fastfair-style) array would have moved every record for
  // key 5 (16 fences); here the left side's records moved not at all.
  PMINDEX_ASSERT_OK(d.Verify());
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
