// Registration of "lbtree": options node=256|512|768|1024, rebuild_threads=N.
#include "trees/pm_leaf/lbtree.h"

#include "index/registry.h"

namespace pmindex::lbtree {

PMINDEX_REGISTER_INDEX(lbtree, (common::PmLeafTreeInfo<Policy>("lbtree")));

}  // namespace pmindex::lbtree
