// The two-layer tree's log-free merge of underfull leaves (nobtree by
// default, tlbtree with merge=on; docs/layout/nobtree.md "The merge"):
// a leaf merges with its left neighbour, and the first child of a parent
// with its right one, never across parents; deletes trigger merges that
// shrink the tree; pools open after a crash copy and a clean close with
// every key; lookups and scans running beside merging deletes never miss
// a key that stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "index/index.h"
#include "pm/pool.h"
#include "trees/two_layer/two_layer.h"
#include "unit/sorted_node_checks.h"

namespace pmindex::tlbtree {
namespace {

struct Made {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
  TwoLayerTree* tree() const { return dynamic_cast<TwoLayerTree*>(&TreeOf(*idx)); }
};

Made Make(const std::string& kind, const std::string& options) {
  PoolOptions po;
  po.size = 32ull << 20;
  po.kind = kind;
  po.index_options = options;
  Made m;
  auto pool = Pool::CreateInMemory(po);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  m.pool = std::move(pool.value());
  auto idx = create_index(kind, options, m.pool.get());
  EXPECT_TRUE(idx.ok()) << idx.status().ToString();
  m.idx = std::move(idx.value());
  return m;
}

// Every pair of `want`, in order, and nothing else (a full scan and a lookup of each).
void ExpectContent(Index& t, const std::map<Key, Value>& want) {
  std::vector<KV> all(want.size() + 1);
  ASSERT_EQ(t.scan(0, all.size(), all.data()), want.size());
  size_t i = 0;
  for (const auto& [k, v] : want) {
    ASSERT_EQ(all[i].key, k) << i;
    ASSERT_EQ(all[i].value, v) << k;
    ASSERT_EQ(t.lookup(k).value_or(~0ull), v) << k;
    ++i;
  }
}

TEST(TwoLayerMerge, OptionsAndDefaults) {
  testing_util::ExpectOptions("nobtree", {"merge=maybe", "merge=1"},
                              {"merge=on", "merge=off,migrate=off"});
  testing_util::ExpectOptions("tlbtree", {"merge=yes"}, {"merge=on", "height=3,merge=off"});
  // nobtree merges by default; tlbtree keeps the original's no-merge.
  Made nob = Make("nobtree", "migrate=off");
  Made tlb = Make("tlbtree", "");
  ASSERT_TRUE(nob.tree() && tlb.tree());
  for (Key k = 0; k < 2000; ++k) {
    ASSERT_TRUE(nob.idx->insert(k, k).ok());
    ASSERT_TRUE(tlb.idx->insert(k, k).ok());
  }
  for (Key k = 0; k < 2000; ++k) {
    if (k % 10 == 0) continue;
    ASSERT_TRUE(nob.idx->remove(k).ok());
    ASSERT_TRUE(tlb.idx->remove(k).ok());
  }
  EXPECT_GT(nob.tree()->merges(), 50u);
  EXPECT_EQ(tlb.tree()->merges(), 0u);
  EXPECT_FALSE(tlb.tree()->MergeLeafOf(0));  // merge=off: never
  EXPECT_LT(nob.idx->stats().leaves * 2, tlb.idx->stats().leaves);
  ASSERT_TRUE(nob.idx->verify().ok()) << nob.idx->verify().ToString();
  ASSERT_TRUE(tlb.idx->verify().ok());
}

// Bulk-loaded at 4 records a leaf, 5 leaves under each level-1 node
// (height 2: the roots): leaf i holds keys 10 * (4i .. 4i + 3).
TEST(TwoLayerMerge, LeftAndRightNeighboursUnderOneParent) {
  for (const char* kind : {"nobtree", "tlbtree"}) {
    SCOPED_TRACE(kind);
    Made m =
        Make(kind, std::string(kind) == "nobtree" ? "height=2,migrate=off" : "height=2,merge=on");
    TwoLayerTree* t = m.tree();
    ASSERT_NE(t, nullptr);
    const uint64_t leaves = 100;
    std::map<Key, Value> want;
    std::vector<KV> load;
    for (Key k = 0; k < 4 * leaves; ++k) {
      load.push_back(KV{10 * k, k});
      want[10 * k] = k;
    }
    ASSERT_TRUE(m.idx->bulk_load(load, 0.34).ok());
    ASSERT_EQ(m.idx->stats().leaves, leaves);
    auto key_of_leaf = [](uint64_t leaf) { return Key{10 * (4 * leaf + 1)}; };
    // Leaf 4, the last child of root 0: only its left neighbour (3) is under the same parent.
    EXPECT_TRUE(t->MergeLeafOf(key_of_leaf(4)));
    // Leaf 5, the first child of root 1: its left neighbour (4, now gone,
    // 3 before it) is another root's child; it takes its right one (6).
    EXPECT_TRUE(t->MergeLeafOf(key_of_leaf(5)));
    // Leaf 12, a middle child (of root 2: leaves 10..14): its left neighbour.
    EXPECT_TRUE(t->MergeLeafOf(key_of_leaf(12)));
    EXPECT_EQ(t->merges(), 3u);
    EXPECT_EQ(m.idx->stats().leaves, leaves - 3);
    // No pair fits any more around the merged leaves (8 + 4 > 8).
    EXPECT_FALSE(t->MergeLeafOf(key_of_leaf(3)));   // 3+4 (8): alone under root 0's end
    EXPECT_FALSE(t->MergeLeafOf(key_of_leaf(5)));   // 5+6 (8) with 7 (4)
    EXPECT_FALSE(t->MergeLeafOf(key_of_leaf(12)));  // 11+12 (8) with 10 and 13 (4 each)
    EXPECT_EQ(m.idx->stats().leaves, leaves - 3);
    ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
    ASSERT_NO_FATAL_FAILURE(ExpectContent(*m.idx, want));
    // The merged leaves take inserts and split again.
    for (Key k = 0; k < 60; ++k) {
      ASSERT_TRUE(m.idx->insert(10 * k + 5, k).ok());
      want[10 * k + 5] = k;
    }
    ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
    ASSERT_NO_FATAL_FAILURE(ExpectContent(*m.idx, want));
    ASSERT_TRUE(m.idx->close().ok());
  }
}

// Random inserts, then 90% of the keys deleted in random order at height 3
// (merges under level-1 inner nodes): fewer leaves and PM bytes, the same
// content as a std::map, and the pool opens with every key after a crash
// copy and after a clean close, then takes more inserts and deletes.
TEST(TwoLayerMerge, DeletesShrinkTheTreeAndReopenKeepsEveryKey) {
  Made m = Make("nobtree", "height=3,migrate=off");
  TwoLayerTree* t = m.tree();
  ASSERT_NE(t, nullptr);
  std::mt19937_64 rng(5);
  std::map<Key, Value> want;
  std::vector<Key> keys;
  while (keys.size() < 20000) {
    const Key k = rng() >> 20;
    if (!want.emplace(k, keys.size()).second) continue;
    ASSERT_TRUE(m.idx->insert(k, keys.size()).ok());
    keys.push_back(k);
  }
  const IndexStats before = m.idx->stats();
  std::shuffle(keys.begin(), keys.end(), rng);
  for (size_t i = 0; i < keys.size() * 9 / 10; ++i) {
    ASSERT_TRUE(m.idx->remove(keys[i]).ok());
    want.erase(keys[i]);
  }
  const IndexStats after = m.idx->stats();
  EXPECT_GT(t->merges(), 1000u);
  EXPECT_EQ(after.entries, want.size());
  EXPECT_LT(after.leaves * 3, before.leaves);
  EXPECT_LT(after.pm_bytes * 2, before.pm_bytes);
  ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectContent(*m.idx, want));
  for (bool crash : {true, false}) {
    SCOPED_TRACE(crash ? "after a crash" : "after a clean close");
    const std::vector<std::byte> bytes = testing_util::PoolImage(*m.pool, &m.idx, crash);
    auto img = Pool::OpenImage(bytes);
    ASSERT_TRUE(img.ok()) << img.status().ToString();
    auto re = open_index(img.value().get());
    ASSERT_TRUE(re.ok()) << re.status().ToString();
    ASSERT_TRUE(re.value()->verify().ok()) << re.value()->verify().ToString();
    EXPECT_EQ(re.value()->stats().leaves, after.leaves);
    ASSERT_NO_FATAL_FAILURE(ExpectContent(*re.value(), want));
    std::map<Key, Value> more = want;
    for (Key k = 1; k < 3000; k += 2) {
      if (more.count(k) != 0) continue;
      ASSERT_TRUE(re.value()->insert(k, k).ok());
      more[k] = k;
    }
    for (auto it = more.begin(); it != more.end();) {
      ASSERT_TRUE(re.value()->remove(it->first).ok());
      it = more.erase(it);
      if (it != more.end()) ++it;
    }
    ASSERT_TRUE(re.value()->verify().ok()) << re.value()->verify().ToString();
    ASSERT_NO_FATAL_FAILURE(ExpectContent(*re.value(), more));
    ASSERT_TRUE(re.value()->close().ok());
  }
}

// Two deleting writers empty most of the key space (merging leaves all
// the time) while a writer inserts into it and two readers look up and
// scan the keys that stay (every tenth): no reader misses one, and the
// tree verifies with exactly the expected content. Also run under TSan.
TEST(TwoLayerMerge, ConcurrentLookupsAndScansDuringMerges) {
  for (const char* opts : {"height=2,migrate=off", "height=3,migrate=inline,sample=1,hot=2"}) {
    SCOPED_TRACE(opts);
    Made m = Make("nobtree", opts);
    TwoLayerTree* t = m.tree();
    ASSERT_NE(t, nullptr);
    const Key n = 24000;
    std::vector<KV> load;
    for (Key k = 0; k < n; ++k) load.push_back(KV{k * 4, k});
    ASSERT_TRUE(m.idx->bulk_load(load, 0.7).ok());
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> misses{0};
    std::vector<std::thread> ts;
    for (int w = 0; w < 2; ++w) {
      ts.emplace_back([&, w] {
        for (Key k = w; k < n; k += 2)
          if (k % 10 != 0 && !m.idx->remove(k * 4).ok()) misses.fetch_add(1);
      });
    }
    ts.emplace_back([&] {  // new keys (4k + 1) into a range being emptied
      for (Key k = n / 2; k < n / 2 + 2000; ++k)
        if (!m.idx->insert(k * 4 + 1, k).ok()) misses.fetch_add(1);
    });
    std::vector<std::thread> readers;
    readers.emplace_back([&] {
      std::mt19937_64 rng(1);
      while (!stop.load()) {
        const Key k = rng() % (n / 10) * 10;
        if (m.idx->lookup(k * 4).value_or(~0ull) != k) misses.fetch_add(1);
      }
    });
    readers.emplace_back([&] {
      std::mt19937_64 rng(2);
      KV out[32];
      while (!stop.load()) {
        const Key from = rng() % n * 4;
        const size_t got = m.idx->scan(from, 32, out);
        Key expect = (from / 40 + (from % 40 != 0)) * 40;  // the next kept key at or above from
        for (size_t j = 0; j < got; ++j) {
          if (j > 0 && out[j].key <= out[j - 1].key) misses.fetch_add(1);
          if (out[j].key % 40 != 0) continue;  // a key being deleted or inserted
          if (out[j].key != expect || out[j].value != expect / 4) misses.fetch_add(1);
          expect += 40;
        }
      }
    });
    for (auto& th : ts) th.join();
    stop = true;
    for (auto& th : readers) th.join();
    EXPECT_EQ(misses.load(), 0u);
    EXPECT_GT(t->merges(), 500u);
    ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
    std::map<Key, Value> want;
    for (Key k = 0; k < n; k += 10) want[k * 4] = k;
    for (Key k = n / 2; k < n / 2 + 2000; ++k) want[k * 4 + 1] = k;
    ASSERT_NO_FATAL_FAILURE(ExpectContent(*m.idx, want));
    ASSERT_TRUE(m.idx->close().ok());
  }
}

}  // namespace
}  // namespace pmindex::tlbtree
