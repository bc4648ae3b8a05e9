// Topology implementations (allocator.h). The real one asks libnuma when
// the build found it; without libnuma, or when the kernel has no NUMA
// support, the machine is one node.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "alloc/allocator.h"
#include "sync/mutex.h"

#ifdef PMINDEX_HAVE_LIBNUMA
#include <numa.h>
#include <numaif.h>
#endif

#include <cerrno>
#include <cstring>
#include <string>

namespace pmindex::alloc {
namespace {

Status NodeOutside(int node, int nodes) {
  return Status::InvalidArgument("NUMA node " + std::to_string(node) + " is not in [0, " +
                                 std::to_string(nodes) + ")");
}

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

  Status place_this_thread(int node) override {
    if (node < 0 || node >= nodes_) return NodeOutside(node, nodes_);
#ifdef PMINDEX_HAVE_LIBNUMA
    if (numa_available() >= 0 && numa_run_on_node(node) != 0) {
      return Status::IOError(std::string("numa_run_on_node: ") + std::strerror(errno));
    }
#endif
    return Status::OK();
  }

  Status bind(void* addr, size_t len, int node) override {
    if (node < 0 || node >= nodes_) return NodeOutside(node, nodes_);
#ifdef PMINDEX_HAVE_LIBNUMA
    if (numa_available() < 0) return Status::IOError("mbind: the kernel has no NUMA support");
    // One bit per node; maxnode counts bits (the kernel reads maxnode - 1).
    std::vector<unsigned long> mask(static_cast<size_t>(node) / (8 * sizeof(unsigned long)) + 1, 0);
    mask[static_cast<size_t>(node) / (8 * sizeof(unsigned long))] |=
        1ul << (static_cast<unsigned>(node) % (8 * sizeof(unsigned long)));
    const unsigned long maxnode = mask.size() * 8 * sizeof(unsigned long) + 1;
    if (mbind(addr, len, MPOL_PREFERRED, mask.data(), maxnode, MPOL_MF_MOVE) != 0) {
      return Status::IOError(std::string("mbind: ") + std::strerror(errno));
    }
    return Status::OK();
#else
    (void)addr;
    (void)len;
    return Status::IOError("mbind: built without libnuma");
#endif
  }

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
    for (const auto& [id, node] : Assigned()) {
      if (id == id_) return node;
    }
    int node = static_cast<int>(next_thread_.fetch_add(1, std::memory_order_relaxed) % nodes_);
    Assigned().emplace_back(id_, node);
    return node;
  }
  bool simulated() const override { return true; }

  Status place_this_thread(int node) override {
    if (node < 0 || node >= nodes_) return NodeOutside(node, nodes_);
    for (auto& [id, n] : Assigned()) {
      if (id == id_) {
        n = node;
        return Status::OK();
      }
    }
    Assigned().emplace_back(id_, node);
    return Status::OK();
  }

  Status bind(void*, size_t, int) override { return Status::OK(); }

 private:
  // (topology id, node) pairs of the calling thread; ids are never reused.
  static std::vector<std::pair<uint64_t, int>>& Assigned() {
    thread_local std::vector<std::pair<uint64_t, int>> assigned;
    return assigned;
  }
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

namespace {
sync::Mutex g_default_mu;
std::shared_ptr<Topology> g_default PMINDEX_GUARDED_BY(g_default_mu);
}  // namespace

std::shared_ptr<Topology> Topology::Default() {
  sync::MutexLock lock(g_default_mu);
  return g_default ? g_default : Real();
}

void Topology::SetDefault(std::shared_ptr<Topology> t) {
  sync::MutexLock lock(g_default_mu);
  g_default = std::move(t);
}

}  // namespace pmindex::alloc
