// The index interface every tree implements (docs/architecture.md section 5).
//
// Keys and values are 64-bit; every uint64_t is a valid key (0 and
// UINT64_MAX included). Every operation is thread-safe and linearizable.
//
// Results:
//   insert  OK | AlreadyExists (key present, nothing changed) | OutOfSpace
//   update  OK | NotFound
//   upsert  OK | OutOfSpace
//   remove  OK | NotFound | OutOfSpace (only indexes that record a delete
//           by appending, e.g. nvtree's NEGATIVE elements; the key stays)
//   lookup  the value, or nullopt
//   scan    up to n pairs with key >= from, ascending; returns the count
// OutOfSpace leaves the index intact and usable (the operation did not
// happen).
//
// Lifecycle of a persistent index:
//   auto pool = Pool::Create(path, {.kind = "lbtree", .index_options = "node=512"});
//   auto idx  = create_index("lbtree", "node=512", pool->get());
//   ... idx->close(); idx.reset(); pool->Close();
//   auto pool = Pool::Open(path);  auto idx = open_index(pool->get());
// open_index recovers (repairing what the crash left, rebuilding DRAM
// parts, and reporting reachable blocks to the allocator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/options.h"
#include "pm/pool.h"
#include "pmindex/status.h"
#include "pmindex/types.h"

namespace pmindex {

namespace alloc {
class Allocator;
}

struct OpenIndexOptions;
class PairVisitor;

// What a tree implements, and what create_index / open_index return.
//
// A tree derives from Index and holds only its own state: the pool, the
// allocator and the pool's lease belong to the handle the library wraps
// every tree in (index.cc), which also names the kind (kind(),
// persistent() from the registry entry) and is what callers hold. A tree
// writes the operations, verify() and stats(); for_each_block (persistent
// kinds), quiesce and close have defaults.
//
// detail::PointLookup (pmindex/types.h) declares lookup, so that Db::Get
// can be inline in the public header without this interface.
class Index : public detail::PointLookup {
 public:
  virtual ~Index();

  // The registry name and whether the kind is persistent: answered by the
  // library's handle. A tree need not override them (a bare tree answers
  // "" and false).
  virtual std::string_view kind() const { return {}; }
  virtual bool persistent() const { return false; }

  virtual Status insert(Key k, Value v) = 0;
  virtual Status update(Key k, Value v) = 0;
  virtual Status upsert(Key k, Value v) = 0;
  std::optional<Value> lookup(Key k) override = 0;
  virtual Status remove(Key k) = 0;
  virtual size_t scan(Key from, size_t n, KV* out) = 0;

  // Loads strictly ascending pairs into an EMPTY index, filling nodes to
  // `fill` (0 < fill <= 1). InvalidArgument if the index is not empty, the
  // pairs are not strictly ascending, or fill is out of range.
  virtual Status bulk_load(std::span<const KV> sorted, double fill) = 0;

  // Walks the whole structure and checks every invariant. Corruption with
  // a message naming the first violation.
  virtual Status verify() = 0;
  virtual IndexStats stats() = 0;

  // Persistent indexes: calls fn for every PM block reachable from the
  // roots (recovery by reachability, leak checks). NotSupported otherwise
  // (the default).
  virtual Status for_each_block(const std::function<void(PPtr)>& fn);

  // Waits until background work the index started on its own is done and
  // frees the blocks it retired (nobtree: queued migrations). Call while
  // no operation runs (leak checks, benchmarks between phases). Default:
  // nothing to wait for.
  virtual void quiesce() {}

  // Clean shutdown (persist what open would otherwise rebuild, set flags).
  // Idempotent; no operation may follow. The handle calls it if the index is
  // destroyed without it (index.cc); an abandoned() index writes nothing.
  virtual Status close();

  // The allocator the index allocates from and the pool it lives in, held
  // by the library's handle (null for volatile kinds, and for a bare tree).
  virtual alloc::Allocator* allocator() const { return nullptr; }
  virtual Pool* pool() const { return nullptr; }

 protected:
  Index() = default;
  // True when open_index built this index but then refused the pool (e.g.
  // the allocator's FinishRecovery failed): the pool may be damaged and
  // the allocator is still in recovery, so close() must return at once and
  // the destructor must write nothing (a refused open changes no byte).
  bool abandoned() const { return abandoned_; }

 private:
  // The library's handle (index.cc) sets abandoned_ on a refused open.
  friend class IndexHandle;
  bool abandoned_ = false;
};

// The tree inside a handle that create_index / open_index returned (the
// index itself for any other Index): for tests and tools that call a
// kind's own methods, and for hot paths that skip the handle's forwarding
// call (Db::Get, pmbench). The handle keeps ownership.
Index& TreeOf(Index& index);

// Creates an index. Volatile kinds: pool must be null. Persistent kinds:
// pool must be new (Pool::Create / CreateInMemory) with pool->kind() ==
// kind and the same options. Errors: InvalidArgument (unknown kind, bad
// option, the pool already holds an index), WrongKind, Busy (an index
// created or opened on this pool is still alive).
Result<std::unique_ptr<Index>> create_index(std::string_view kind, std::string_view options,
                                            Pool* pool);

// How many allocated-but-unreachable units (alloc::RecoveryReport) recovery
// may give back before open_index refuses the pool (docs/crash-testing.md,
// "Recovery's bound on reclaiming").
enum class ReclaimBound {
  // What the clean flag says (the default): IndexInfo's
  // unreachable_after_clean, plus unreachable_per_writer per assumed
  // writer thread after a crash.
  kByCleanFlag,
  // unreachable_after_clean even after a crash: what a clean close leaves
  // (`pmpool verify`), plus IndexInfo::verify_after_crash for a pool that
  // was not closed cleanly (nvtree's writers leave replaced LNs in their
  // caches). A crashed pool with more is refused unchanged.
  kAsIfClean,
  // No bound: recovery gives back whatever it does not reach. Only for a
  // copy of a damaged pool (`pmpool salvage` opens an in-memory image).
  kNone,
};

// What open_index can be told; a default-constructed one opens a plain
// index's pool bounded by its clean flag.
struct OpenIndexOptions {
  ReclaimBound bound = ReclaimBound::kByCleanFlag;
  // Told every live pair while the kind's open validates them, before the
  // allocator's recovery bound is checked and before the first write
  // (index/pair_visitor.h); its first error refuses the open. Required
  // for, and only accepted with, a pool flagged pm::kIncompatKvStore (a
  // key-value store's pool, whose values point to blocks the index does
  // not know): open_index refuses such a pool without one (WrongKind,
  // nothing written), and a plain pool with one (WrongKind).
  PairVisitor* pairs = nullptr;
};

// Opens the index stored in pool (kind and options from the pool header)
// and recovers it, as `opt` says (OpenIndexOptions above). Busy if an index created or opened on
// this pool is still alive. The pool's clean flag is cleared (Pool::MarkInUse) just before
// recovery's first write: by the index kind itself once it has validated what it read
// (IndexInfo::marks_in_use, every built-in persistent tree), else after the allocator has validated
// the page table; a refused open of a cleanly closed pool then leaves its files unchanged. If
// recovery fails after that, the pool is never marked clean by this Pool object's Close, so the
// next open recovers it again.
Result<std::unique_ptr<Index>> open_index(Pool* pool, const OpenIndexOptions& opt = {});

// Reads at most n pairs with key >= *from into out, keeps them only while
// their keys strictly ascend (a scan racing a writer must still never make
// a caller go backwards), and moves *from past the last pair kept. *more
// becomes false once the index has nothing after the batch. (Db's ranges
// and iterators, the key-value store's scans.)
size_t ScanBatch(Index& index, Key* from, bool* more, size_t n, KV* out);

// Creates a pool file for `kind` with `options` after validating them:
// bad options fail before any file is written.
Result<std::unique_ptr<Pool>> create_pool_for(std::string_view kind, std::string_view options,
                                              const std::string& path, PoolOptions pool_opt);

}  // namespace pmindex
