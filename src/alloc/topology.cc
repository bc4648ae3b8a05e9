// Topology implementations (allocator.h). The real one asks libnuma when
// the build found it; without libnuma, or when the kernel has no NUMA
// support, the machine is one node.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "alloc/allocator.h"

#ifdef PMINDEX_HAVE_LIBNUMA
#include <numa.h>
#endif

namespace pmindex::alloc {
namespace {

class RealTopology final : public Topology {
 public:
  RealTopology() {
#ifdef PMINDEX_HAVE_LIBNUMA
    if (numa_available() >= 0) nodes_ = std::max(1, numa_max_node() + 1);
#endif
  }
  int nodes() const override { return nodes_; }
  int node_of_this_thread() override {
#ifdef PMINDEX_HAVE_LIBNUMA
    if (nodes_ > 1) {
      int cpu = sched_getcpu();
      int node = cpu < 0 ? -1 : numa_node_of_cpu(cpu);
      if (node >= 0 && node < nodes_) return node;
    }
#endif
    return 0;
  }
  bool simulated() const override { return false; }

 private:
  int nodes_ = 1;
};

class SimulatedTopology final : public Topology {
 public:
  explicit SimulatedTopology(int nodes) : nodes_(nodes) {
    static std::atomic<uint64_t> next_id{1};
    id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  }
  int nodes() const override { return nodes_; }
  int node_of_this_thread() override {
    // (topology id, node) pairs of this thread; ids are never reused.
    thread_local std::vector<std::pair<uint64_t, int>> assigned;
    for (const auto& [id, node] : assigned) {
      if (id == id_) return node;
    }
    int node = static_cast<int>(next_thread_.fetch_add(1, std::memory_order_relaxed) % nodes_);
    assigned.emplace_back(id_, node);
    return node;
  }
  bool simulated() const override { return true; }

 private:
  int nodes_;
  uint64_t id_;
  std::atomic<uint64_t> next_thread_{0};
};

}  // namespace

std::shared_ptr<Topology> Topology::Real() {
  static std::shared_ptr<Topology> real = std::make_shared<RealTopology>();
  return real;
}

std::shared_ptr<Topology> Topology::Simulated(int nodes) {
  return std::make_shared<SimulatedTopology>(std::clamp(nodes, 1, 1024));
}

}  // namespace pmindex::alloc
