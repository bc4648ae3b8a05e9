// What the tests run each index kind with, kept by the tests and not by the
// library's registry: the option strings (configs) of every built-in kind,
// and the kinds that exist only for tests (fixtures), which test code adds
// to the registry through PMINDEX_REGISTER_TEST_INDEX.
//
// The shared scenarios, the per-kind unit tests, pmcrash (`--index all`,
// `--list`) and pool_fuzz read this file; KindTableTest fails when a
// registered kind that is not a fixture has no entry in BuiltinKindTests().
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/registry.h"

namespace pmindex::testing {

struct KindTests {
  std::string kind;
  // Option strings the shared scenarios run, each in turn; pmcrash's
  // `--index all` runs them too, and the tests that run once per kind use
  // the first. Never empty ("" is the kind's defaults).
  std::vector<std::string> configs;
  // Simulated NUMA nodes the scenarios and pmcrash give the kind's pools
  // (alloc::Topology::Simulated; 0: the machine's topology), for kinds
  // whose code paths differ with more than one node.
  int numa_nodes = 0;
};

// Every built-in kind (src/index/builtin.cc), by name.
inline const std::vector<KindTests>& BuiltinKindTests() {
  // The sorted-node engine's configs, shared by fastfair and circtree.
  static const std::vector<std::string> kSortedNode = {
      "node=256", "node=512,sentinel=off", "node=1024,search=binary", "node=512,fingerprints=on"};
  static const std::vector<std::string> kPmLeaf = {"node=256", "node=512", "node=1024"};
  static const std::vector<KindTests> table = {
      {"absl-btree", {""}},
      {"cddstree", {"node=512", "node=4096", "node=256"}},
      {"circtree", kSortedNode},
      {"dram-btree", {"node=4", "node=14", "node=30", "node=62", "node=128"}},
      {"fastfair", kSortedNode},
      {"fptree", kPmLeaf},
      {"lbtree", kPmLeaf},
      {"lcbtree", {"node=512", "node=4096", "node=128"}},
      {"nobtree",
       {"height=2,migrate=inline,sample=1,hot=2", "height=2,migrate=background,sample=1,hot=2",
        "migrate=off"},
       /*numa_nodes=*/4},
      {"null", {""}},
      {"nvtree",
       {"node=512,adaptive=off", "node=4096,adaptive=off", "node=1024,adaptive=aggressive",
        "node=128,pln=64,fanout=3", "node=256,pln=64,fanout=2,adaptive=balanced"}},
      {"pactree", {"", "slots=4"}, /*numa_nodes=*/2},
      {"roart", {"", "leaf_array=4"}},
      {"skiplist-divided", {""}},
      {"skiplist-dram", {""}},
      {"skiplist-pm", {""}},
      {"tlbtree", {"height=2,rebuild=1", "height=2", "height=3,rebuild=2"}},
      {"wbtree", kPmLeaf},
  };
  return table;
}

// The fixtures tests added to the registry, and the lookup of any kind's
// test entry. Fixtures are left out of everything that runs "every kind"
// (the scenarios, pmcrash's `all`, pool_fuzz, the per-kind tests).
class TestKinds {
 public:
  static TestKinds& Get() {
    static TestKinds kinds;
    return kinds;
  }

  // Adds `info` to the library's registry as a fixture run with `configs`.
  // Called from static initializers (PMINDEX_REGISTER_TEST_INDEX), before
  // any thread starts.
  void AddFixture(IndexInfo info, std::vector<std::string> configs) {
    if (configs.empty()) configs.push_back("");
    fixtures_.push_back({info.name, std::move(configs)});
    Registry::Get().Add(std::move(info));
  }

  bool IsFixture(std::string_view kind) const {
    return std::any_of(fixtures_.begin(), fixtures_.end(),
                       [&](const KindTests& t) { return t.kind == kind; });
  }

  // A built-in kind's or a fixture's entry; null for a kind with none.
  const KindTests* Find(std::string_view kind) const {
    for (const KindTests& t : BuiltinKindTests())
      if (t.kind == kind) return &t;
    for (const KindTests& t : fixtures_)
      if (t.kind == kind) return &t;
    return nullptr;
  }

  // The configs of `kind` ({""} for a kind without an entry).
  std::vector<std::string> Configs(std::string_view kind) const {
    const KindTests* t = Find(kind);
    return t != nullptr ? t->configs : std::vector<std::string>{""};
  }

  int NumaNodes(std::string_view kind) const {
    const KindTests* t = Find(kind);
    return t != nullptr ? t->numa_nodes : 0;
  }

  // Registered kinds that are not fixtures, sorted by name.
  std::vector<const IndexInfo*> NonFixtures() const {
    std::vector<const IndexInfo*> out;
    for (const IndexInfo* info : Registry::Get().All())
      if (!IsFixture(info->name)) out.push_back(info);
    return out;
  }

 private:
  std::vector<KindTests> fixtures_;
};

struct FixtureRegistrar {
  FixtureRegistrar(IndexInfo info, std::vector<std::string> configs) {
    TestKinds::Get().AddFixture(std::move(info), std::move(configs));
  }
};

}  // namespace pmindex::testing

// Registers a fixture kind from a static initializer of the test's own
// translation unit: PMINDEX_REGISTER_TEST_INDEX(ident, {"cap=1024"},
// {.name = ..., ...}). Configs that hold a comma go in parentheses:
// ({"a=1", "b=2"}).
#define PMINDEX_REGISTER_TEST_INDEX(ident, configs, ...)               \
  static ::pmindex::testing::FixtureRegistrar pmindex_fixture_##ident( \
      ::pmindex::IndexInfo __VA_ARGS__, std::vector<std::string> configs)
