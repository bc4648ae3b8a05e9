// roart beyond one thread: NUMA node-visit metering (each block an
// operation reaches counts one visit, local or remote by the node of the
// block's page on simulated nodes).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"

namespace pmindex {
namespace {

Result<std::unique_ptr<Index>> Make(const std::string& options, std::unique_ptr<Pool>* pool) {
  PoolOptions po;
  po.size = 32ull << 20;
  po.kind = "roart";
  po.index_options = options;
  auto p = Pool::CreateInMemory(po);
  if (!p.ok()) return p.status();
  *pool = std::move(p.value());
  return create_index("roart", options, pool->get());
}

// Pools attached inside the scope see `nodes` simulated NUMA nodes, with
// metering on (both restored after).
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
  SimulatedNodes(const SimulatedNodes&) = delete;
  SimulatedNodes& operator=(const SimulatedNodes&) = delete;
};

// (remote, local) visits the calling thread counted while fn ran.
template <typename F>
std::pair<uint64_t, uint64_t> Visits(F&& fn) {
  const pm::Counters before = pm::ThreadCounters();
  fn();
  const pm::Counters d = pm::ThreadCounters() - before;
  return {d.numa_remote_visits, d.numa_local_visits};
}

// Ten keys that differ in their last byte sit in one leaf array under the
// root: a lookup visits the root, the array and the one leaf whose
// fingerprint matches (3 blocks), a miss in the same array 2, a scan of
// all ten the root, the array and ten leaves. Blocks written by a thread
// on node 0 are on node 0: its visits are local, a thread on node 1 sees
// the same visits as remote. Metering off, nothing is counted.
TEST(RoartNuma, EveryBlockOnThePathIsOneVisit) {
  SimulatedNodes sim(2);
  ASSERT_TRUE(alloc::Topology::Default()->place_this_thread(0).ok());
  std::unique_ptr<Pool> pool;
  auto made = Make("", &pool);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Index& t = *made.value();
  // An insert writes a leaf (and the first one its array) and visits the
  // root and, once it exists, the array.
  const auto ins = Visits([&] {
    for (Key k = 0; k < 10; ++k) ASSERT_TRUE(t.insert(k, k + 100).ok());
  });
  EXPECT_EQ(ins.first, 0u);
  EXPECT_GE(ins.second, 10u * 3);
  const auto local = Visits([&] {
    for (Key k = 0; k < 10; ++k) ASSERT_EQ(t.lookup(k).value_or(0), k + 100);
  });
  EXPECT_EQ(local, std::make_pair(uint64_t{0}, uint64_t{30}));
  EXPECT_EQ(Visits([&] { EXPECT_FALSE(t.lookup(77).has_value()); }),
            std::make_pair(uint64_t{0}, uint64_t{2}));
  KV out[10];
  EXPECT_EQ(Visits([&] { EXPECT_EQ(t.scan(0, 10, out), 10u); }),
            std::make_pair(uint64_t{0}, uint64_t{12}));
  std::pair<uint64_t, uint64_t> remote;
  std::thread([&] {
    ASSERT_TRUE(alloc::Topology::Default()->place_this_thread(1).ok());
    remote = Visits([&] {
      for (Key k = 0; k < 10; ++k) ASSERT_EQ(t.lookup(k).value_or(0), k + 100);
      ASSERT_TRUE(t.remove(3).ok());  // root, array, leaf
    });
  }).join();
  EXPECT_EQ(remote, std::make_pair(uint64_t{33}, uint64_t{0}));
  alloc::SetNumaMetering(false);
  EXPECT_EQ(Visits([&] { EXPECT_TRUE(t.lookup(4).has_value()); }),
            std::make_pair(uint64_t{0}, uint64_t{0}));
  ASSERT_TRUE(t.verify().ok());
}

}  // namespace
}  // namespace pmindex
