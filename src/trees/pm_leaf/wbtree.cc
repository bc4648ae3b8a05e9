// "wbtree": WB+-Tree leaves (wbtree_leaf.h) under the routing layer, locks
// and recovery shared with lbtree (trees/pm_leaf/pm_leaf_tree.h). Persistent: the
// leaf list (root slot 0), rebuild hints (slot 1), split micro-logs (slot
// 2). Recovery replays or rolls back logged splits before the leaf walk.
// Options: node=256|512|768|1024, rebuild_threads=N.
#include "trees/pm_leaf/pm_leaf_tree.h"
#include "trees/pm_leaf/split_log.h"
#include "index/registry.h"
#include "trees/pm_leaf/wbtree_leaf.h"

namespace pmindex::wbtree {
namespace {

constexpr char kName[] = "wbtree";
template <size_t kNodeBytes>
using Policy = common::SplitLoggedPolicy<Leaf<kNodeBytes>, kName>;

}  // namespace

PMINDEX_REGISTER_INDEX(wbtree, (common::PmLeafTreeInfo<Policy>(kName)));

}  // namespace pmindex::wbtree
