// Registration of "lbtree": options node=256|512|768|1024, rebuild_threads=N.
#include "trees/lbtree/lbtree.h"

#include "pmindex/registry.h"

namespace pmindex::lbtree {

PMINDEX_REGISTER_INDEX(lbtree, {
    .name = "lbtree",
    .persistent = true,
    .options_help = "node=256|512|768|1024 (leaf bytes; default 256) rebuild_threads=N (default 1)",
    .test_configs = {"node=256", "node=512", "node=1024"},
    .validate = common::ValidatePmLeafTreeOptions,
    .create = [](const IndexEnv& e, const Options& o) { return common::MakePmLeafTree<Policy>(e, o, false); },
    .open = [](const IndexEnv& e, const Options& o) { return common::MakePmLeafTree<Policy>(e, o, true); },
    .test_only = false,
    .stores_data = true,
});

}  // namespace pmindex::lbtree
