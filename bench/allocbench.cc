// pmallocbench: throughput of the persistent allocator per NUMA placement
// policy (paper 003, section III-E: the NVM storage manager's local,
// round-robin and node-specific modes; issue 10's "allocator throughput per
// policy").
//
// Each of T threads runs --ops operations on its own ring of --live blocks:
// an operation allocates one block of --size bytes and, once the ring is
// full, frees the block allocated --live operations earlier. Pools are in
// memory (a DRAM-backed pool: flushes are issued and counted, not waited
// for); the topology is simulated with --nodes nodes, thread t on node
// t % nodes.
//
// Policies (--policy, comma-separated, all by default):
//   local        AllocOptions::mode = kLocal, Alloc(n)
//   round-robin  kRoundRobin, Alloc(n)
//   node         kGivenNode (node 0 for every thread), Alloc(n)
//   explicit     kLocal, Alloc(n, node) naming node (t + i) % nodes for the
//                i-th allocation: the per-node slabs of each thread cache
//
// Output: one line per policy, the median of --repeat runs of Mops/s, and
// the last run's counters: remote allocations (refills served by another
// node's pages) and page words written (NAWs, two per page taken or given
// back: the only persistent writes of the allocator).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "pm/persist.h"
#include "pm/pool.h"

namespace {

using pmindex::PoolOptions;
using pmindex::PPtr;
using pmindex::alloc::AllocOptions;
using pmindex::alloc::Allocator;
using pmindex::alloc::NumaMode;
using pmindex::alloc::Topology;

struct Args {
  unsigned threads = 2;
  int nodes = 4;
  uint64_t ops = 2000000;
  uint64_t size = 256;
  uint64_t live = 1024;
  unsigned repeat = 3;
  std::string policies = "local,round-robin,node,explicit";
};

struct RunResult {
  double mops = 0;
  uint64_t remote = 0, naws = 0;
};

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "pmallocbench: error: %s\n", why.c_str());
  std::exit(2);
}

RunResult RunOnce(const Args& a, const std::string& policy) {
  AllocOptions opt;
  auto topo = Topology::Simulated(a.nodes);
  opt.topology = topo;
  opt.mode = policy == "round-robin" ? NumaMode::kRoundRobin
             : policy == "node"      ? NumaMode::kGivenNode
                                     : NumaMode::kLocal;
  opt.given_node = 0;
  PoolOptions po;
  const uint64_t need = a.threads * a.live * std::max<uint64_t>(a.size, 64) * 2;
  po.size = std::max<uint64_t>(PoolOptions::kMinSize, need + (64ull << 20));
  po.max_size = po.size * 4;
  auto pool = pmindex::Pool::CreateInMemory(po);
  if (!pool.ok()) Fail(std::string(pool.status().message()));
  auto al = Allocator::Attach(pool.value().get(), /*fresh=*/true, opt);
  if (!al.ok()) Fail(std::string(al.status().message()));
  Allocator& alloc = *al.value();
  const bool explicit_node = policy == "explicit";

  pmindex::pm::ResetCounters();
  std::vector<std::thread> ts;
  std::vector<std::string> errors(a.threads);
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned t = 0; t < a.threads; ++t) {
    ts.emplace_back([&, t] {
      (void)topo->place_this_thread(static_cast<int>(t % static_cast<unsigned>(a.nodes)));
      std::vector<PPtr> ring(a.live);
      for (uint64_t i = 0; i < a.ops; ++i) {
        PPtr& slot = ring[i % a.live];
        if (!slot.is_null()) alloc.Free(slot);
        const int node = explicit_node ? static_cast<int>((t + i) % static_cast<uint64_t>(a.nodes))
                                       : pmindex::alloc::kAnyNode;
        auto r = alloc.Alloc(a.size, node);
        if (!r.ok()) {
          errors[t] = std::string(r.status().message());
          slot = PPtr();
          return;
        }
        slot = r.value();
      }
      for (PPtr p : ring) {
        if (!p.is_null()) alloc.Free(p);
      }
    });
  }
  for (auto& t : ts) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& e : errors) {
    if (!e.empty()) Fail(policy + ": " + e);
  }
  RunResult r;
  r.mops = static_cast<double>(a.ops) * a.threads / s / 1e6;
  r.remote = alloc.stats().remote_allocs;
  r.naws = pmindex::pm::GlobalCounters().naws;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"pmallocbench: persistent allocator throughput per NUMA placement policy"};
  app.add_option("--threads", a.threads, "Threads (thread t on simulated node t % nodes)");
  app.add_option("--nodes", a.nodes, "Simulated NUMA nodes (1..64)");
  app.add_option("--ops", a.ops, "Allocations per thread");
  app.add_option("--size", a.size, "Bytes per allocation");
  app.add_option("--live", a.live, "Blocks each thread keeps live (a ring; the oldest is freed)");
  app.add_option("--repeat", a.repeat, "Runs per policy; the median is reported");
  app.add_option("--policy", a.policies, "Comma-separated: local, round-robin, node, explicit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    Fail(e.what());
  }
  if (a.threads < 1 || a.threads > 256) Fail("bad --threads: must be in [1, 256]");
  if (a.nodes < 1 || a.nodes > 64) Fail("bad --nodes: must be in [1, 64]");
  if (a.ops < 1) Fail("bad --ops: must be >= 1");
  if (a.size < 1 || a.size > (64ull << 20)) Fail("bad --size: must be in [1, 64 MiB]");
  if (a.live < 1 || a.live > (1ull << 24)) Fail("bad --live: must be in [1, 2^24]");
  if (a.repeat < 1 || a.repeat > 100) Fail("bad --repeat: must be in [1, 100]");
  std::vector<std::string> policies;
  std::stringstream ss(a.policies);
  for (std::string p; std::getline(ss, p, ',');) {
    if (p != "local" && p != "round-robin" && p != "node" && p != "explicit") {
      Fail("bad --policy '" + p + "': must be local, round-robin, node or explicit");
    }
    policies.push_back(p);
  }
  if (policies.empty()) Fail("bad --policy: empty");

  std::printf("pmallocbench: %u thread(s), %d simulated node(s), %llu allocs of %llu B per thread, "
              "%llu live per thread, median of %u\n",
              a.threads, a.nodes, static_cast<unsigned long long>(a.ops),
              static_cast<unsigned long long>(a.size), static_cast<unsigned long long>(a.live), a.repeat);
  std::printf("%-12s %10s %13s %10s  %s\n", "policy", "Mops/s", "remote allocs", "page words",
              "runs (Mops/s)");
  for (const std::string& p : policies) {
    std::vector<RunResult> runs;
    for (unsigned r = 0; r < a.repeat; ++r) runs.push_back(RunOnce(a, p));
    std::vector<double> m;
    for (const RunResult& r : runs) m.push_back(r.mops);
    std::vector<double> sorted = m;
    std::sort(sorted.begin(), sorted.end());
    const RunResult& last = runs.back();
    std::string list;
    for (double v : m) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.2f", list.empty() ? "" : " ", v);
      list.append(buf);
    }
    std::printf("%-12s %10.2f %13llu %10llu  %s\n", p.c_str(), sorted[sorted.size() / 2],
                static_cast<unsigned long long>(last.remote), static_cast<unsigned long long>(last.naws),
                list.c_str());
  }
  return 0;
}
