// "fptree": FP-Tree leaves (fptree_leaf.h) under the routing layer, locks
// and recovery shared with lbtree (trees/pm_leaf/pm_leaf_tree.h). Persistent: the
// leaf list (root slot 0), rebuild hints (slot 1), split micro-logs (slot
// 2). Recovery replays or rolls back logged splits before the leaf walk.
// Options: node=256|512|768|1024, rebuild_threads=N.
#include "trees/pm_leaf/pm_leaf_tree.h"
#include "trees/pm_leaf/split_log.h"
#include "index/registry.h"
#include "trees/pm_leaf/fptree_leaf.h"

namespace pmindex::fptree {
namespace {

constexpr char kName[] = "fptree";
template <size_t kNodeBytes>
using Policy = common::SplitLoggedPolicy<Leaf<kNodeBytes>, kName>;

}  // namespace

PMINDEX_REGISTER_INDEX(fptree, (common::PmLeafTreeInfo<Policy>(kName)));

}  // namespace pmindex::fptree
