// Node-visit metering (NOBtree, paper 003 in docs/papers.md): an index that cares where its PM
// nodes live calls MeterVisit(alloc, node) for every PM node it reads or writes. While metering is
// on, the visit counts as local when the node's page belongs to the calling thread's NUMA node
// (Topology::node_of_this_thread) and as remote otherwise (pm::Counters numa_local_visits /
// numa_remote_visits), and a remote visit waits pm::RemoteAccessNs. With
// metering off (the default) a visit costs one predictable branch.
//
// On a machine whose nodes are simulated (Topology::Simulated, pmbench
// --numa-nodes) this is what makes locality measurable: the counters do
// not depend on the machine and the wait stands in for the remote link.
#pragma once

#include <atomic>

#include "alloc/allocator.h"
#include "pm/persist.h"

namespace pmindex::alloc {

namespace detail {
inline std::atomic<bool> g_metering{false};
}  // namespace detail

// Set while no index operation runs (pmbench sets it from its flags).
inline void SetNumaMetering(bool on) { detail::g_metering.store(on, std::memory_order_relaxed); }
inline bool NumaMetering() { return detail::g_metering.load(std::memory_order_relaxed); }

// Counts one visit of the PM node at p (an address in a's pool). Addresses
// outside the pool's owned pages are not counted.
inline void MeterVisit(Allocator& a, const void* p) {
  if (__builtin_expect(!NumaMetering(), 1)) return;
  const int node = a.NodeOfAddress(p);
  if (node < 0) return;
  pm::CountNodeVisit(node != a.topology().node_of_this_thread());
}

}  // namespace pmindex::alloc

namespace pmindex::alloc {

// Counts n visits of nodes that live on NUMA node `node` (structures the
// index places itself, such as a replicated DRAM layer standing for one
// kept on that node's PM).
inline void MeterNodeVisits(Allocator& a, int node, uint32_t n) {
  if (__builtin_expect(!NumaMetering(), 1)) return;
  const bool remote = node != a.topology().node_of_this_thread();
  for (uint32_t i = 0; i < n; ++i) pm::CountNodeVisit(remote);
}

}  // namespace pmindex::alloc
