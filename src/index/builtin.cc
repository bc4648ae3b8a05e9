// The index kinds this library builds, named once here. Each name is the
// first argument of the kind's PMINDEX_REGISTER_INDEX. Calling every
// kind's registration function from here is what keeps the kind's object
// file in a program linked with a plain `-lpmindex`: the user API reaches
// Registry::Get(), which calls RegisterBuiltinIndexes, which names every
// kind.
#include "index/registry.h"

// clang-format off
#define PMINDEX_COMMON_KINDS(X) \
  X(null_index)                 \
  X(dram_btree)                 \
  X(skiplist_dram)              \
  X(lbtree)                     \
  X(fptree)                     \
  X(wbtree)                     \
  X(fastfair)                   \
  X(circtree)                   \
  X(nvtree)                     \
  X(lcbtree)                    \
  X(cddstree)                   \
  X(tlbtree)                    \
  X(nobtree)                    \
  X(roart)                      \
  X(pactree)                    \
  X(skiplist_pm)                \
  X(skiplist_divided)
// clang-format on

#define PMINDEX_DECLARE_KIND(ident) extern "C" void pmindex_register_##ident(pmindex::Registry&);
PMINDEX_COMMON_KINDS(PMINDEX_DECLARE_KIND)
#if PMINDEX_HAVE_ABSL
// Built only when Abseil is installed (CMakeLists.txt).
PMINDEX_DECLARE_KIND(absl_btree)
#endif

namespace pmindex {

void RegisterBuiltinIndexes(Registry& registry) {
#define PMINDEX_ADD_KIND(ident) pmindex_register_##ident(registry);
  PMINDEX_COMMON_KINDS(PMINDEX_ADD_KIND)
#if PMINDEX_HAVE_ABSL
  PMINDEX_ADD_KIND(absl_btree)
#endif
#undef PMINDEX_ADD_KIND
}

}  // namespace pmindex
