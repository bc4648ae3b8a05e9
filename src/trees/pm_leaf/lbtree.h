// LB+-Tree (paper 000_eb283a9b9c5be096): PM leaves of node= 256/512/768/1024
// bytes (lbtree_leaf.h), DRAM routing layer and leaf list machinery shared
// with fptree and wbtree (trees/pm_leaf/pm_leaf_tree.h).
//
// Contract
// - Persistent: the leaf list (root slot 0 = head), the rebuild hints (root
//   slot 1). Layout and persist order of every operation: lbtree_leaf.h and
//   docs/layout/lbtree.md. No log anywhere: every change of a leaf is one
//   NAW section; a split is one NAW section on the old leaf (the new leaf is
//   unused space until then).
// - Locks: per leaf, the DRAM version lock of its LeafRef (writers), with the
//   paper's persistent lock bit mirrored in the leaf; readers validate
//   versions (no HTM).
// - Recovery: walks the list (in parallel over the hinted segments with
//   rebuild_threads=N), clears stale lock bits, unlinks empty leaves other
//   than the head, reports every leaf to the allocator, rebuilds the DRAM
//   layer.
#pragma once

#include <string_view>

#include "trees/pm_leaf/pm_leaf_tree.h"
#include "trees/pm_leaf/lbtree_leaf.h"

namespace pmindex::lbtree {

template <size_t kNodeBytes>
struct Policy {
  static_assert(kNodeBytes % 256 == 0);
  static constexpr std::string_view kName = "lbtree";
  using LeafT = Leaf<static_cast<int>(kNodeBytes / 256)>;
  static constexpr size_t kMetaBytes = 0;
  void InitMeta(void*) {}
  Status CheckMeta(const void*, const Pool*, std::vector<common::MetaDrop>*) const { return Status::OK(); }
  void RepairMeta(void*, Pool*) {}
  template <typename Route>
  uint64_t SplitRouted(LeafT* l, PPtr, uint64_t k, uint64_t v, LeafT* nl, PPtr nl_ptr, void*,
                       Route&& route) {
    return l->SplitInsert(k, v, nl, nl_ptr, route);
  }
};

template <size_t kNodeBytes>
using Tree = common::PmLeafTree<Policy<kNodeBytes>>;

}  // namespace pmindex::lbtree
