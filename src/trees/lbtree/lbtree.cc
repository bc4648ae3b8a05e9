// Registration of "lbtree": options node=256|512|768|1024, rebuild_threads=N.
#include "trees/lbtree/lbtree.h"

#include "pmindex/registry.h"

namespace pmindex::lbtree {
namespace {

Status Validate(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"node", "rebuild_threads"}));
  auto n = o.get_enum("node", "256", {"256", "512", "768", "1024"});
  if (!n.ok()) return n.status();
  auto t = o.get_uint("rebuild_threads", 1, 1, 256);
  if (!t.ok()) return t.status();
  return Status::OK();
}

Result<std::unique_ptr<Index>> Make(const IndexEnv& env, const Options& o, bool open) {
  PMINDEX_RETURN_IF_ERROR(Validate(o));
  const std::string node = o.get_enum("node", "256", {"256", "512", "768", "1024"}).value();
  const int threads = static_cast<int>(o.get_uint("rebuild_threads", 1, 1, 256).value());
  auto go = [&](auto* tag) -> Result<std::unique_ptr<Index>> {
    using T = std::remove_pointer_t<decltype(tag)>;
    return open ? T::Open(env, threads) : T::Create(env, threads);
  };
  if (node == "512") return go(static_cast<Tree<2>*>(nullptr));
  if (node == "768") return go(static_cast<Tree<3>*>(nullptr));
  if (node == "1024") return go(static_cast<Tree<4>*>(nullptr));
  return go(static_cast<Tree<1>*>(nullptr));
}

}  // namespace

PMINDEX_REGISTER_INDEX(lbtree, {
    .name = "lbtree",
    .persistent = true,
    .options_help = "node=256|512|768|1024 (leaf bytes; default 256) rebuild_threads=N (default 1)",
    .test_configs = {"node=256", "node=512", "node=1024"},
    .validate = Validate,
    .create = [](const IndexEnv& e, const Options& o) { return Make(e, o, false); },
    .open = [](const IndexEnv& e, const Options& o) { return Make(e, o, true); },
    .test_only = false,
    .stores_data = true,
});

}  // namespace pmindex::lbtree
