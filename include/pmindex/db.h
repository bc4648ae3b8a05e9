// The user API: one owning handle on an index and the pool it lives in.
//
//   auto db = pmindex::Db::Create("/mnt/pmem/idx.pool", "lbtree", "node=256");
//   if (!db.ok()) { ... db.status().ToString() ... }
//   pmindex::Status s = db.value()->Insert(42, 4200);
//   pmindex::Result<pmindex::Value> v = db.value()->Get(42);
//   s = db.value()->Close();          // or let the handle go: it closes
//
//   auto again = pmindex::Db::Open("/mnt/pmem/idx.pool");  // kind and options
//                                                            // come from the pool
//
// A Db owns the pool, the allocator and the index, and closes them in that
// order's reverse. Open recovers whatever a crash left (the index's repair
// pass, then the allocator's reachability pass) before it returns.
//
// Keys and values are 64-bit; every uint64_t is a valid key (0 and
// UINT64_MAX included).
//
// Thread safety: every data operation (Insert .. Verify, iterators) may run
// from any number of threads at once and is linearizable; Close and the
// destructor must not run concurrently with anything on the same Db.
//
// Errors are Status codes (pmindex/status.h): InvalidArgument (bad kind or
// option), NotFound, AlreadyExists, WrongKind, Busy (the pool is open in
// another process), Corruption (a damaged pool: refused, no byte changed),
// NotSupported (a pool of a newer format), OutOfSpace (pool or disk full:
// the operation did not happen and the index stays usable), IOError; and
// InvalidArgument "the Db is closed" from every data call after Close().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pmindex/status.h"
#include "pmindex/types.h"
#include "pmindex/version.h"

namespace pmindex {

class Index;
class Pool;

// How a new pool file is laid out. Every field has a working default.
struct DbOptions {
  // Bytes of the first pool file (PATH). At least 4 MiB.
  uint64_t size = 64ull << 20;
  // Upper bound of the pool over all its files; it grows by adding segment
  // files PATH.1, PATH.2, ... when full, up to this size (then OutOfSpace).
  uint64_t max_size = 64ull << 30;
  // Bytes of each added segment file; 0 = the same as `size`.
  uint64_t segment_size = 0;
  // Stored in the top 16 bits of every persistent pointer into the pool, so
  // that a pointer names its pool. Any value works while an index lives in
  // one pool, as every index does today.
  uint16_t pool_id = 1;
};

// One registered index kind, as Db::Kinds() lists them.
struct KindInfo {
  std::string name;          // e.g. "lbtree"
  bool persistent = false;   // false: DRAM only (CreateInMemory only)
  std::string options_help;  // e.g. "node=256|512|768|1024 rebuild_threads=N"
};

class Iterator;

class Db {
 public:
  // Creates PATH (which must not exist) holding an empty index of `kind`
  // configured by `options` ("key=value,key=value"; "" = the kind's
  // defaults). Kind, options and DbOptions are validated before any file
  // is written, and a pool whose index could not be created in it is
  // removed again. Errors: InvalidArgument (unknown or volatile kind, bad
  // option, bad DbOptions), AlreadyExists (PATH exists: left unchanged),
  // OutOfSpace, IOError.
  [[nodiscard]] static Result<std::unique_ptr<Db>> Create(const std::string& path, std::string_view kind,
                                                          std::string_view options = {},
                                                          const DbOptions& db_options = {});

  // Opens an existing pool; the kind and options are read from it. If
  // `expected_kind` is not empty and differs: WrongKind. Recovers after a
  // crash. Errors: NotFound, Corruption, NotSupported, WrongKind, Busy,
  // OutOfSpace, IOError; each leaves the pool's files unchanged.
  [[nodiscard]] static Result<std::unique_ptr<Db>> Open(const std::string& path,
                                                        std::string_view expected_kind = {});

  // An index that lives and dies with the process: a volatile kind
  // (dram-btree, absl-btree), or a persistent kind in an anonymous-memory
  // pool sized by `db_options` (volatile kinds have no pool and ignore it).
  // Errors: InvalidArgument (unknown kind, bad option, bad DbOptions),
  // OutOfSpace.
  [[nodiscard]] static Result<std::unique_ptr<Db>> CreateInMemory(std::string_view kind,
                                                                  std::string_view options = {},
                                                                  const DbOptions& db_options = {});

  // Every kind this build knows, sorted by name.
  static std::vector<KindInfo> Kinds();

  // Closes if Close() was not called (its Status is then lost).
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Persists what Open would otherwise rebuild, closes the index and marks
  // the pool cleanly closed; returns the first error of the two. Idempotent
  // (a second call returns OK). The accessors kind() .. durability() keep
  // their values. Every data call after it fails without touching the pool:
  // Insert, Upsert, Update, Remove, BulkLoad, Verify and Sync return
  // InvalidArgument ("the Db is closed"), Get returns that status, Exists
  // is false, Count and Range are 0 (Range appends nothing), Stats is all
  // zero, and NewIterator gives an iterator that is !Valid() with that
  // status(); an iterator made before Close ends the same way at its next
  // Seek, SeekToFirst or Next.
  [[nodiscard]] Status Close();

  // insert: AlreadyExists if k is present (nothing changes).
  [[nodiscard]] Status Insert(Key k, Value v);
  // Inserts or replaces.
  [[nodiscard]] Status Upsert(Key k, Value v);
  // Replaces: NotFound if k is absent.
  [[nodiscard]] Status Update(Key k, Value v);
  // NotFound if k is absent. (nvtree may answer OutOfSpace: it records a
  // delete by appending; the key then stays.)
  [[nodiscard]] Status Remove(Key k);
  // The value, or NotFound.
  [[nodiscard]] Result<Value> Get(Key k) const;
  [[nodiscard]] bool Exists(Key k) const;
  // Entries in the index (walks the index: O(n)).
  [[nodiscard]] uint64_t Count() const;

  // Appends to *out the pairs with from <= key < to in ascending key order,
  // at most `limit` of them; to = nullopt: no upper bound. Returns the
  // number appended. Each pair was present at some instant of the call.
  size_t Range(Key from, std::optional<Key> to, size_t limit, std::vector<KV>* out) const;

  // An iterator over the index in ascending key order, unpositioned (call
  // Seek or SeekToFirst). It reads in batches: with concurrent writers it
  // never fails and never goes backwards, and every pair it yields was in
  // the index at some instant after the iterator was last positioned; a
  // key inserted or removed while it runs may or may not be seen. It must
  // not outlive the Db (after Close it ends: see Close).
  [[nodiscard]] std::unique_ptr<Iterator> NewIterator() const;

  // Loads strictly ascending pairs into an EMPTY index, nodes filled to
  // `fill` (0 < fill <= 1). InvalidArgument otherwise.
  [[nodiscard]] Status BulkLoad(std::span<const KV> sorted, double fill = 1.0);

  // Walks the whole structure and checks every invariant: Corruption
  // naming the first violation. REQUIRES: no concurrent writer.
  [[nodiscard]] Status Verify() const;
  // Shape and size; pm_bytes falls back to the allocator's bytes in use
  // for kinds that do not count their own PM blocks. Walks the index.
  [[nodiscard]] IndexStats Stats() const;

  // On a pool that is not on DAX memory, makes every completed write
  // durable against power failure (msync). A no-op on DAX and in memory.
  [[nodiscard]] Status Sync();

  [[nodiscard]] std::string_view kind() const;
  [[nodiscard]] std::string options() const;  // as stored, "key=value,..."
  [[nodiscard]] bool persistent() const;
  [[nodiscard]] const std::string& path() const;  // empty in memory
  // "power-failure" (DAX, MAP_SYNC), "process-crash" (an ordinary file
  // mapping: Sync() for power failure), or "volatile".
  [[nodiscard]] std::string_view durability() const;

 private:
  Db();
  // Takes a pool (null for volatile kinds) and the index created or opened
  // on it.
  static std::unique_ptr<Db> Wrap(std::unique_ptr<Pool> pool, std::unique_ptr<Index> index);
  // Get's answer after Close (src/api/db.cc): out of line and cold, so that the
  // inline Get costs one compare of lookup_ more than the index's lookup.
  [[gnu::cold]] static Result<Value> GetAfterClose();

  std::unique_ptr<Pool> pool_;    // null for volatile kinds
  std::unique_ptr<Index> index_;  // destroyed before pool_
  // index_, for the inline Get/Exists; null once closed (their one check).
  detail::PointLookup* lookup_ = nullptr;
  // Copied at creation, so that the accessors below stay valid after Close.
  std::string kind_;
  std::string options_;
  std::string path_;
  std::string_view durability_;
  bool persistent_ = false;
  bool closed_ = false;
};

inline Result<Value> Db::Get(Key k) const {
  if (lookup_ == nullptr) [[unlikely]] return GetAfterClose();
  std::optional<Value> v = lookup_->lookup(k);
  if (!v) return Status::NotFound();
  return *v;
}

inline bool Db::Exists(Key k) const {
  return lookup_ != nullptr && lookup_->lookup(k).has_value();
}

// Ascending iteration; see Db::NewIterator.
class Iterator {
 public:
  virtual ~Iterator() = default;
  // Positions at the first key >= k.
  virtual void Seek(Key k) = 0;
  virtual void SeekToFirst() = 0;
  [[nodiscard]] virtual bool Valid() const = 0;
  // REQUIRES: Valid().
  virtual void Next() = 0;
  [[nodiscard]] virtual Key key() const = 0;
  [[nodiscard]] virtual Value value() const = 0;
  // Why the iterator is !Valid(): OK at the end of the index (and while
  // Valid()); InvalidArgument "the Db is closed" once its Db was closed.
  [[nodiscard]] virtual Status status() const = 0;
};

}  // namespace pmindex
