// nobtree unit tests (paper 003's NUMA designs on the two-layer tree), on
// four simulated NUMA nodes: options; bottom nodes spread over the nodes
// and one top-layer replica per node, seen through node-visit metering;
// leaf migration toward the node that reads a leaf (inline and by the
// background coordinator, also on request), which must cut remote visits
// and lose nothing; reopen after a close and after a "crash" copy; and
// two threads on two nodes writing and reading while leaves move.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/db.h"
#include "trees/two_layer/two_layer.h"
#include "unit/sorted_node_checks.h"

namespace pmindex::tlbtree {
namespace {

double Extra(const IndexStats& s, const std::string& name) {
  for (const auto& [n, v] : s.extra)
    if (n == name) return v;
  ADD_FAILURE() << "no stats counter " << name;
  return -1;
}

// Pools attached inside the scope see `nodes` simulated NUMA nodes; node
// metering is on (restored after).
class SimulatedNodes {
 public:
  explicit SimulatedNodes(int nodes) {
    alloc::Topology::SetDefault(alloc::Topology::Simulated(nodes));
    alloc::SetNumaMetering(true);
  }
  ~SimulatedNodes() {
    alloc::SetNumaMetering(false);
    alloc::Topology::SetDefault(nullptr);
  }
};

struct Made {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
  TwoLayerTree* tree() const { return dynamic_cast<TwoLayerTree*>(&TreeOf(*idx)); }
};

Made Make(const std::string& options, Key keys, Key stride = 4) {
  PoolOptions po;
  po.size = 32ull << 20;
  po.kind = "nobtree";
  po.index_options = options;
  Made m;
  auto pool = Pool::CreateInMemory(po);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  m.pool = std::move(pool.value());
  auto idx = create_index("nobtree", options, m.pool.get());
  EXPECT_TRUE(idx.ok()) << idx.status().ToString();
  m.idx = std::move(idx.value());
  std::vector<KV> load;
  for (Key k = 0; k < keys; ++k) load.push_back(KV{k * stride, k});
  if (keys > 0) {
    EXPECT_TRUE(m.idx->bulk_load(load, 0.8).ok());
  }
  return m;
}

// Remote and local node visits of n lookups of the loaded keys.
std::pair<uint64_t, uint64_t> Visits(Index& t, Key keys, Key stride = 4) {
  const pm::Counters before = pm::ThreadCounters();
  for (Key k = 0; k < keys; ++k) EXPECT_EQ(t.lookup(k * stride).value_or(~0ull), k) << k;
  const pm::Counters d = pm::ThreadCounters() - before;
  return {d.numa_remote_visits, d.numa_local_visits};
}

TEST(NobTreeOptions, BadOptionsAreRefused) {
  testing_util::ExpectOptions("nobtree", {"height=1", "migrate=sometimes", "sample=0", "hot=0", "rebuild=0", "node=512"},
                              {"", "height=2,migrate=inline,sample=1,hot=2", "migrate=off,rebuild=2.5"});
}

// Round-robin placement puts most bottom nodes on other nodes than the
// reader's; the reader's top-layer replica is its own, so a tlbtree (one
// top layer, on node 0) read from node 1 has more remote visits.
TEST(NobTreePlacement, NodesSpreadAndEachNodeReadsItsOwnReplica) {
  SimulatedNodes sim(4);
  const Key n = 3000;
  Made m = Make("height=3,migrate=off", n);
  ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
  EXPECT_EQ(Extra(m.idx->stats(), "top_replicas"), 4);
  const auto [remote, local] = Visits(*m.idx, n);
  // 3 of 4 bottom nodes are elsewhere; the top layer is local.
  EXPECT_GT(remote, local / 2) << remote << " remote, " << local << " local";
  EXPECT_GT(local, n);  // at least the top layer's visits
  // From another node: the same reads, the replica of that node.
  std::pair<uint64_t, uint64_t> other;
  std::thread([&] {
    ASSERT_TRUE(alloc::Topology::Default()->place_this_thread(2).ok());
    other = Visits(*m.idx, n);
  }).join();
  EXPECT_GT(other.second, n);  // that node's replica: local
  ASSERT_TRUE(m.idx->close().ok());
}

// With sample=1 and hot=2 a node below the roots read twice from node 0
// while it lives on another node moves to node 0 (the second pass moves
// them): the third pass has fewer remote visits, every key is still
// there, writes land in the copies and the structure verifies.
TEST(NobTreeMigration, InlineMovesReadLeavesToTheReadersNode) {
  SimulatedNodes sim(4);
  const Key n = 4000;
  Made m = Make("height=2,migrate=inline,sample=1,hot=2", n);
  TwoLayerTree* t = m.tree();
  ASSERT_NE(t, nullptr);
  const auto first = Visits(*m.idx, n);
  Visits(*m.idx, n);
  EXPECT_GT(t->migrations(), 50u);
  const auto third = Visits(*m.idx, n);
  // Leaves are half the visits of a height-2 lookup below the top layer.
  EXPECT_LT(third.first, first.first * 7 / 10) << first.first << " -> " << third.first;
  ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
  EXPECT_EQ(m.idx->stats().entries, n);
  // Writes after the moves land in the copies.
  for (Key k = 0; k < n; ++k) ASSERT_TRUE(m.idx->insert(k * 4 + 1, k).ok()) << k;
  for (Key k = 0; k < n; k += 3) ASSERT_TRUE(m.idx->remove(k * 4).ok()) << k;
  ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
  for (Key k = 0; k < n; ++k) {
    ASSERT_EQ(m.idx->lookup(k * 4 + 1).value_or(~0ull), k);
    ASSERT_EQ(m.idx->lookup(k * 4).has_value(), k % 3 != 0) << k;
  }
  std::vector<KV> all(3 * n);
  ASSERT_EQ(m.idx->scan(0, all.size(), all.data()), n + n - (n + 2) / 3);
  for (size_t i = 1; i < n; ++i) ASSERT_LT(all[i - 1].key, all[i].key);
  ASSERT_TRUE(m.idx->close().ok());
}

// MigrateNodeOf moves the leaf, the level-1 node and some subindex roots
// of keys to given nodes (not the first root); writes that split moved
// nodes find their copies; a pool copied right after (a crash) and one closed cleanly both
// open with every key and an idle log.
TEST(NobTreeMigration, MovedNodesSurviveSplitsReopenAndCrash) {
  SimulatedNodes sim(4);
  const Key n = 6000;
  Made m = Make("height=3,migrate=inline,sample=1000000,hot=1000000", n);
  TwoLayerTree* t = m.tree();
  ASSERT_NE(t, nullptr);
  int moved = 0;
  for (Key k = 0; k < n; k += 10) {
    moved += t->MigrateNodeOf(k * 4, 0, static_cast<int>(k / 10 % 4)) ? 1 : 0;
    if (k % 100 == 0) moved += t->MigrateNodeOf(k * 4, 1, static_cast<int>(k / 100 % 4)) ? 1 : 0;
    if (k % 1000 == 500) moved += t->MigrateNodeOf(k * 4, 2, static_cast<int>(k / 1000 % 4)) ? 1 : 0;
  }
  EXPECT_GT(moved, 400);
  EXPECT_EQ(t->migrations(), static_cast<uint64_t>(moved));
  EXPECT_GT(Extra(m.idx->stats(), "subindexes"), 2);
  EXPECT_FALSE(t->MigrateNodeOf(0, 0, 4));  // no such NUMA node
  EXPECT_FALSE(t->MigrateNodeOf(0, 2, 1));  // the first root (root slot 0 names it)
  EXPECT_FALSE(t->MigrateNodeOf(0, 3, 1));  // no such level
  // A subindex root moves: the top layers name the copy.
  EXPECT_TRUE(t->MigrateNodeOf((n - 1) * 4, 2, 3));
  ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
  // Fill the moved leaves and their moved parents until they split.
  for (Key k = 0; k < n; ++k)
    for (Key j = 1; j < 4; ++j) ASSERT_TRUE(m.idx->insert(k * 4 + j, k).ok()) << k;
  ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
  for (Key k = 0; k < n; k += 7) ASSERT_TRUE(m.idx->remove(k * 4 + 3).ok()) << k;
  const uint64_t entries = m.idx->stats().entries;
  EXPECT_EQ(entries, 4 * n - (n + 6) / 7);
  ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
  for (bool crash : {true, false}) {
    SCOPED_TRACE(crash ? "after a crash" : "after a clean close");
    const std::vector<std::byte> bytes = testing_util::PoolImage(*m.pool, &m.idx, crash);
    auto img = Pool::OpenImage(bytes);
    ASSERT_TRUE(img.ok()) << img.status().ToString();
    auto re = open_index(img.value().get());
    ASSERT_TRUE(re.ok()) << re.status().ToString();
    ASSERT_TRUE(re.value()->verify().ok()) << re.value()->verify().ToString();
    EXPECT_EQ(re.value()->stats().entries, entries);
    for (Key k = 0; k < n; ++k) {
      ASSERT_EQ(re.value()->lookup(k * 4).value_or(~0ull), k);
      ASSERT_EQ(re.value()->lookup(k * 4 + 3).has_value(), k % 7 != 0);
    }
    ASSERT_TRUE(re.value()->close().ok());
  }
}

// The background coordinator: two threads on nodes 1 and 3 each read and
// write their own half; the leaves they use move to them (remote visits
// fall), nothing is lost, and a concurrent reader of a kept key range
// always finds it.
TEST(NobTreeMigration, BackgroundCoordinatorMovesLeavesWhileThreadsRun) {
  SimulatedNodes sim(4);
  const Key n = 8000;
  Made m = Make("height=3,migrate=background,sample=1,hot=4", n);
  TwoLayerTree* t = m.tree();
  ASSERT_NE(t, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> misses{0};
  std::vector<std::pair<uint64_t, uint64_t>> before(2), after(2);
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i) {
    ts.emplace_back([&, i] {
      ASSERT_TRUE(alloc::Topology::Default()->place_this_thread(1 + 2 * i).ok());
      const Key lo = i * (n / 2), hi = lo + n / 2;
      auto pass = [&] {
        const pm::Counters c0 = pm::ThreadCounters();
        for (Key k = lo; k < hi; ++k)
          if (m.idx->lookup(k * 4).value_or(~0ull) != k) misses.fetch_add(1);
        const pm::Counters d = pm::ThreadCounters() - c0;
        return std::make_pair(d.numa_remote_visits, d.numa_local_visits);
      };
      before[i] = pass();
      for (Key k = lo; k < hi; ++k) ASSERT_TRUE(m.idx->insert(k * 4 + 2, k).ok());
      for (int r = 0; r < 3; ++r) pass();
      t->DrainMigrations();
      after[i] = pass();
    });
  }
  std::thread reader([&] {
    while (!stop.load()) {
      KV out[64];
      const size_t got = m.idx->scan(1000, 64, out);
      for (size_t j = 0; j < got; ++j)
        if (out[j].key % 4 == 0 && out[j].value != out[j].key / 4) misses.fetch_add(1);
    }
  });
  for (auto& th : ts) th.join();
  stop = true;
  reader.join();
  EXPECT_EQ(misses.load(), 0u);
  EXPECT_GT(t->migrations(), 20u);
  for (int i = 0; i < 2; ++i)
    EXPECT_LT(after[i].first, before[i].first) << "thread " << i << ": " << before[i].first << " -> " << after[i].first;
  ASSERT_TRUE(m.idx->verify().ok()) << m.idx->verify().ToString();
  EXPECT_EQ(m.idx->stats().entries, 2 * n);
  ASSERT_TRUE(m.idx->close().ok());
}

}  // namespace
}  // namespace pmindex::tlbtree
