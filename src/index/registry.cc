#include "index/registry.h"

#include <algorithm>
#include <mutex>

#include "util/check.h"

namespace pmindex {

Registry& Registry::Get() {
  // Function-local statics: safe to use from other translation units'
  // static initializers (tests register fixture kinds from theirs).
  static Registry registry;
  static std::once_flag builtins;
  std::call_once(builtins, [] { RegisterBuiltinIndexes(registry); });
  return registry;
}

void Registry::Add(IndexInfo info) {
  // A bad registration is a programming error that must stop the process
  // with a message, not a Status nobody would check.
  PMINDEX_CHECK(!info.name.empty(), "PMINDEX_REGISTER_INDEX with an empty name");
  PMINDEX_CHECK(Find(info.name) == nullptr, "index kind \"%s\" is registered twice",
                info.name.c_str());
  PMINDEX_CHECK(info.create && (!info.persistent || info.open),
                "index kind \"%s\" registered without %s factory", info.name.c_str(),
                info.create ? "an open" : "a create");
  infos_.push_back(std::make_unique<IndexInfo>(std::move(info)));
}

const IndexInfo* Registry::Find(std::string_view name) const {
  for (const auto& i : infos_) {
    if (i->name == name) return i.get();
  }
  return nullptr;
}

std::vector<const IndexInfo*> Registry::All() const {
  std::vector<const IndexInfo*> out;
  for (const auto& i : infos_) out.push_back(i.get());
  std::sort(out.begin(), out.end(),
            [](const IndexInfo* a, const IndexInfo* b) { return a->name < b->name; });
  return out;
}

}  // namespace pmindex
