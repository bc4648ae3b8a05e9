// TLBtree (paper 003; docs/layout/tlbtree.md): the two-layer tree of
// two_layer.h with one DRAM top layer. This file holds its options and
// its registration only.
#include <memory>
#include <string>

#include "index/registry.h"
#include "trees/two_layer/two_layer.h"

namespace pmindex::tlbtree {
namespace {

Result<TwoLayerConfig> Parse(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"height", "rebuild", "merge"}));
  TwoLayerConfig c;
  Result<uint64_t> h = o.get_uint("height", 2, 2, TwoLayerTree::kMaxHeight);
  if (!h.ok()) return h.status();
  Result<uint64_t> r = o.get_uint("rebuild", 3, 1, 1u << 20);
  if (!r.ok()) return r.status();
  Result<std::string> merge = o.get_enum("merge", "off", {"on", "off"});
  if (!merge.ok()) return merge.status();
  c.merge = merge.value() == "on";
  c.height = static_cast<uint32_t>(h.value());
  c.height_given = o.has("height");
  c.rebuild = static_cast<uint32_t>(r.value());
  return c;
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    tlbtree,
    {
        .name = "tlbtree",
        .persistent = true,
        .options_help =
            "height=N (levels of every bottom-layer subindex, 2..8; default 2, as the authors' "
            "TLBtree; an existing pool keeps the height it was made with) rebuild=N (rebuild the "
            "top layer when an operation walks N or more subindex roots past its top-layer entry, "
            "1..1048576; default 3, the authors' TLBtree rebuilding after a walk of more than 2) "
            "merge=off|on (NOBtree's log-free merge of underfull leaves; default off: the "
            "original TLBtree never merges)",
        .validate = [](const Options& o) -> Status { return Parse(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<TwoLayerConfig> c = Parse(o);
          if (!c.ok()) return c.status();
          return TwoLayerTree::Create(env, c.value(), "tlbtree");
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<TwoLayerConfig> c = Parse(o);
          if (!c.ok()) return c.status();
          return TwoLayerTree::Open(env, c.value(), "tlbtree");
        },
        .marks_in_use = true,
    });

}  // namespace pmindex::tlbtree
