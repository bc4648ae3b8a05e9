// NOBtree (paper 003; docs/layout/nobtree.md): the two-layer tree of
// trees/two_layer/two_layer.h with NOBtree's NUMA designs switched on: a
// top-layer replica per NUMA node, bottom nodes placed on the nodes in
// turn, leaf migration toward the node that uses a leaf most, and the
// rebuild trigger on the average walk along the chain of roots, and the
// bottom layer's log-free merge of underfull leaves. This file
// holds its options and its registration only.
#include <memory>
#include <string>

#include "index/registry.h"
#include "trees/two_layer/two_layer.h"

namespace pmindex::nobtree {
namespace {

using tlbtree::Migration;
using tlbtree::TwoLayerConfig;
using tlbtree::TwoLayerTree;

Result<TwoLayerConfig> Parse(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"height", "rebuild", "migrate", "sample", "hot", "merge"}));
  TwoLayerConfig c;
  c.replicate_top = true;
  c.placement = tlbtree::Placement::kRoundRobin;
  Result<uint64_t> h = o.get_uint("height", 3, 2, TwoLayerTree::kMaxHeight);
  if (!h.ok()) return h.status();
  Result<double> r = o.get_double("rebuild", 0.5, 0.001, 1e6);
  if (!r.ok()) return r.status();
  Result<std::string> m = o.get_enum("migrate", "background", {"background", "inline", "off"});
  if (!m.ok()) return m.status();
  Result<uint64_t> s = o.get_uint("sample", 10, 1, 1u << 20);
  if (!s.ok()) return s.status();
  Result<uint64_t> hot = o.get_uint("hot", 8, 1, 1u << 20);
  if (!hot.ok()) return hot.status();
  Result<std::string> merge = o.get_enum("merge", "on", {"on", "off"});
  if (!merge.ok()) return merge.status();
  c.height = static_cast<uint32_t>(h.value());
  c.height_given = o.has("height");
  c.rebuild_avg = r.value();
  c.migration = m.value() == "background" ? Migration::kBackground
                : m.value() == "inline"   ? Migration::kInline
                                          : Migration::kOff;
  c.sample = static_cast<uint32_t>(s.value());
  c.hot = static_cast<uint32_t>(hot.value());
  c.merge = merge.value() == "on";
  return c;
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    nobtree,
    {
        .name = "nobtree",
        .persistent = true,
        .options_help =
            "height=N (levels of every bottom-layer subindex, 2..8; default 3; an existing pool "
            "keeps the height it was made with) rebuild=X (rebuild the top layers when a thread's "
            "operations walk more than X subindex roots on average past their top-layer entry; "
            "default 0.5) migrate=background|inline|off (leaf migration by a coordinator thread, "
            "by the operation that judges the leaf, or none; default background) sample=N (every "
            "N-th operation of a thread feeds the access statistics; default 10) hot=N (sampled "
            "accesses after which a node is judged; default 8) merge=on|off (a delete that leaves "
            "a leaf with fewer than 4 records merges it with a neighbour under the same parent "
            "when both fit in 8; the paper's log-free merge; default on)",
        .validate = [](const Options& o) -> Status { return Parse(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<TwoLayerConfig> c = Parse(o);
          if (!c.ok()) return c.status();
          return TwoLayerTree::Create(env, c.value(), "nobtree");
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<TwoLayerConfig> c = Parse(o);
          if (!c.ok()) return c.status();
          return TwoLayerTree::Open(env, c.value(), "nobtree");
        },
        .marks_in_use = true,
    });

}  // namespace pmindex::nobtree
