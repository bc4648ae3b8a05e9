// The registry of index kinds. A tree defines its entry in its own folder,
// at namespace scope outside any unnamed namespace:
//
//   PMINDEX_REGISTER_INDEX(lbtree, {
//       .name = "lbtree", .persistent = true,
//       .options_help = "node=256|512|768|1024 rebuild_threads=N",
//       .validate = ..., .create = ..., .open = ...});
//
// and names it once in index/builtin.cc. The macro defines a
// registration function; nothing runs before main(). Registry::Get()
// calls every built-in kind's function once (RegisterBuiltinIndexes), and
// that call is what makes the linker keep each kind's object file, so a
// plain `-lpmindex` links every kind.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "index/index.h"
#include "index/options.h"
#include "index/pair_visitor.h"
#include "pm/pool.h"
#include "pmindex/status.h"

namespace pmindex {

// What a factory receives. For volatile indexes pool and alloc are null.
// For `open`, alloc is in recovery: the factory reports every reachable
// block (MarkReachable); open_index then calls FinishRecovery().
struct IndexEnv {
  Pool* pool = nullptr;
  alloc::Allocator* alloc = nullptr;
  // Set by open_index with ReclaimBound::kNone, which `pmpool salvage`
  // calls on an in-memory copy of a damaged pool: a kind may then cut off
  // what it cannot validate (writing the cut into the copy) instead of
  // refusing the whole pool.
  bool salvage = false;
  // open only, a key-value store's pool only (index/pair_visitor.h): told
  // every live pair before CheckRecoveryBound and the first write. Kinds
  // pass it on through common::ContentSum.
  PairVisitor* pairs = nullptr;
};

using IndexFactory =
    std::function<Result<std::unique_ptr<Index>>(const IndexEnv&, const Options&)>;

struct IndexInfo {
  std::string name;
  bool persistent = false;
  std::string options_help;                        // printed by `pmbench --list`
  std::function<Status(const Options&)> validate;  // null = accepts no options
  IndexFactory create;
  IndexFactory open;  // persistent only
  bool stores_data = true;  // false for `null`: excluded from oracle scenarios
  // `open` writes nothing before it calls env.pool->MarkInUse(), which it
  // does only once everything it reads has been validated; a refused open
  // then leaves a cleanly closed pool byte for byte as it was. When false,
  // open_index clears the clean flag before calling `open`.
  bool marks_in_use = false;
  // Recovery's bound on reclaiming allocated-but-unreachable units (class
  // pages without a reachable block, large blocks, orphan span runs; see
  // alloc::RecoveryReport). After a clean close the index may
  // leave `unreachable_after_clean` of them (nvtree: its snapshot block);
  // after a crash, each thread that may have been writing adds
  // `unreachable_per_writer` (blocks allocated but not linked yet, pages
  // whose blocks sat in its allocator cache or awaited their epoch).
  // open_index refuses (Corruption, nothing written) beyond that.
  uint32_t unreachable_after_clean = 0;
  uint32_t unreachable_per_writer = 4;
  // What `pmpool verify` (ReclaimBound::kAsIfClean) allows on top of
  // unreachable_after_clean when the pool was not closed cleanly: the
  // units one writer's crash leaves in the kind's normal use, beyond an
  // allocation that happens to open a page (kinds that free nothing on
  // their write paths: 0). nvtree: the LNs its splits replaced wait in the
  // writer's allocator cache and epoch list, and with its adaptive LN
  // sizes their pages often hold nothing else (a kill -9 of `pmpool load`
  // left 3).
  uint32_t verify_after_crash = 0;
  // Read visibility (docs/crash-testing.md "Read visibility"): true iff no
  // reader (lookup, scan) can return a write before the write is durable,
  // so that a value a reader saw is never lost by a crash. False where a
  // writer makes a change visible before its write-back ends (lbtree's
  // commit store clears the leaf's lock bit, FAST&FAIR's readers read the
  // stores in place); the writer still returns only once it is durable.
  // The crash simulator fails an image that loses a value a reader saw
  // when this is true, and counts it when false.
  bool reads_see_only_durable = false;
};

class Registry {
 public:
  // The process's registry, holding every built-in kind (registered on the
  // first call, once, whichever thread makes it) and the kinds added since.
  static Registry& Get();
  // Adds a kind; a bad or repeated entry stops the process (a programming
  // error). Tests add their fixture kinds through tests/support/kinds.h.
  void Add(IndexInfo info);
  const IndexInfo* Find(std::string_view name) const;
  // Sorted by name.
  std::vector<const IndexInfo*> All() const;

 private:
  std::vector<std::unique_ptr<IndexInfo>> infos_;
};

// The most allocated-but-unreachable units open_index lets recovery reclaim
// for a pool of this kind (IndexInfo::unreachable_after_clean and
// unreachable_per_writer; was_clean: the pool's clean flag at open).
uint64_t RecoveryBound(const IndexInfo& info, bool was_clean);

// Adds every kind index/builtin.cc names (Registry::Get() calls it
// once, before it returns the registry for the first time).
void RegisterBuiltinIndexes(Registry& registry);

}  // namespace pmindex

// Defines pmindex_register_<ident>(Registry&), which adds the entry.
// C linkage gives the function one name whatever namespace the tree uses,
// so that index/builtin.cc can call it. Ends with a declaration so that the
// use takes a semicolon.
#define PMINDEX_REGISTER_INDEX(ident, ...)                                  \
  extern "C" void pmindex_register_##ident(::pmindex::Registry& registry) { \
    registry.Add(::pmindex::IndexInfo __VA_ARGS__);                         \
  }                                                                         \
  extern "C" void pmindex_register_##ident(::pmindex::Registry& registry)
