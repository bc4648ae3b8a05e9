// "wbtree": WB+-Tree leaves (wbtree_leaf.h) under the routing layer, locks
// and recovery shared with lbtree (common/pm_leaf_tree.h). Persistent: the
// leaf list (root slot 0), rebuild hints (slot 1), split micro-logs (slot
// 2). Recovery replays or rolls back logged splits before the leaf walk.
// Options: node=256|512|768|1024, rebuild_threads=N.
#include <string_view>

#include "common/pm_leaf_tree.h"
#include "common/split_log.h"
#include "pmindex/registry.h"
#include "trees/wbtree/wbtree_leaf.h"

namespace pmindex::wbtree {
namespace {

template <size_t kNodeBytes>
struct Policy {
  static constexpr std::string_view kName = "wbtree";
  using LeafT = Leaf<kNodeBytes>;
  static constexpr size_t kMetaBytes = common::SplitLogArea::kBytes;
  common::SplitLogArea logs;

  void InitMeta(void* meta) { common::SplitLogArea::Format(meta); }
  Status RecoverMeta(void* meta, Pool* pool) {
    Status st;
    common::SplitLogArea::ForEachActive(meta, [&](PPtr cur, PPtr fresh) {
      if (!InPool(pool, cur) || !InPool(pool, fresh)) {
        st = Status::Corruption("wbtree: split log points outside the pool");
        return;
      }
      LeafT* l = pool->to_ptr<LeafT>(cur);
      // Linked: replay (drop the moved keys from cur). Not linked: the new
      // leaf is unreachable and the old one unchanged; nothing to undo.
      if (l->next() == fresh) l->ReplaySplit(pool->to_ptr<LeafT>(fresh));
    });
    return st;
  }
  uint64_t Split(LeafT* l, PPtr self, uint64_t k, uint64_t v, LeafT* nl, PPtr nl_ptr, void* meta) {
    return l->SplitInsert(k, v, nl, self, nl_ptr, logs, meta);
  }
  static bool InPool(Pool* pool, PPtr p) {
    return !p.is_null() && p.offset() % 256 == 0 && p.offset() + kNodeBytes <= pool->size();
  }
};

}  // namespace

PMINDEX_REGISTER_INDEX(wbtree, {
    .name = "wbtree",
    .persistent = true,
    .options_help = "node=256|512|768|1024 (leaf bytes; default 256) rebuild_threads=N (default 1)",
    .test_configs = {"node=256", "node=512", "node=1024"},
    .validate = common::ValidatePmLeafTreeOptions,
    .create = [](const IndexEnv& e, const Options& o) { return common::MakePmLeafTree<Policy>(e, o, false); },
    .open = [](const IndexEnv& e, const Options& o) { return common::MakePmLeafTree<Policy>(e, o, true); },
    .test_only = false,
    .stores_data = true,
});

}  // namespace pmindex::wbtree
