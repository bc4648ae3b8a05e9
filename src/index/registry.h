// Self-registering index factories. A tree registers itself with one line
// in its own folder:
//
//   PMINDEX_REGISTER_INDEX(lbtree, {
//       .name = "lbtree", .persistent = true,
//       .options_help = "node=256|512|768|1024 rebuild_threads=N",
//       .test_configs = {"node=256", "node=512", "node=1024"},
//       .validate = ..., .create = ..., .open = ...});
//
// The library is linked whole-archive so every registration is kept.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "index/index.h"
#include "index/options.h"
#include "pm/pool.h"
#include "pmindex/status.h"

namespace pmindex {

// What a factory receives. For volatile indexes pool and alloc are null.
// For `open`, alloc is in recovery: the factory reports every reachable
// block (MarkReachable); open_index then calls FinishRecovery().
struct IndexEnv {
  Pool* pool = nullptr;
  alloc::Allocator* alloc = nullptr;
};

using IndexFactory =
    std::function<Result<std::unique_ptr<Index>>(const IndexEnv&, const Options&)>;

struct IndexInfo {
  std::string name;
  bool persistent = false;
  std::string options_help;               // printed by `pmbench --list`
  std::vector<std::string> test_configs;  // option strings the shared scenarios run
  std::function<Status(const Options&)> validate;  // null = accepts no options
  IndexFactory create;
  IndexFactory open;  // persistent only
  bool test_only = false;     // hidden from --list and scenarios (crash-sim fixtures)
  bool stores_data = true;    // false for `null`: excluded from oracle scenarios
  // `open` writes nothing before it calls env.pool->MarkInUse(), which it
  // does only once everything it reads has been validated; a refused open
  // then leaves a cleanly closed pool byte for byte as it was. When false,
  // open_index clears the clean flag before calling `open`.
  bool marks_in_use = false;
};

class Registry {
 public:
  static Registry& Get();
  void Add(IndexInfo info);
  const IndexInfo* Find(std::string_view name) const;
  // Sorted by name; test-only entries only if asked.
  std::vector<const IndexInfo*> All(bool include_test_only = false) const;

 private:
  std::vector<std::unique_ptr<IndexInfo>> infos_;
};

struct IndexRegistrar {
  explicit IndexRegistrar(IndexInfo info) { Registry::Get().Add(std::move(info)); }
};

}  // namespace pmindex

#define PMINDEX_REGISTER_INDEX(ident, ...) \
  static ::pmindex::IndexRegistrar pmindex_registrar_##ident(::pmindex::IndexInfo __VA_ARGS__)
