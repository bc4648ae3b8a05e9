// The key-value store (NV-Store, papers 001 and 000 in docs/papers.md): byte-string
// keys and values in a pool, over any registered persistent index kind,
// with multi-version concurrency control and snapshot-isolation
// transactions.
//
//   auto kv = pmindex::KvStore::Create("/mnt/pmem/kv.pool", "lbtree");
//   if (!kv.ok()) { ... kv.status().ToString() ... }
//   pmindex::Status s = kv.value()->Put("user:42", "{\"name\": \"Ada\"}");
//   pmindex::Result<std::string> v = kv.value()->Get("user:42");
//
//   auto tx = kv.value()->Begin();            // a snapshot of the store
//   auto a = tx->Get("acct:a"), b = tx->Get("acct:b");
//   ... tx->Put("acct:a", ...); tx->Put("acct:b", ...);
//   s = tx->Commit();                         // Aborted: retry
//
// Keys: 1 to kMaxKeyBytes bytes, any bytes (NUL included), ordered
// bytewise (memcmp, a shorter key before its extensions). Values: 0 to
// kMaxValueBytes bytes. Longer keys or values: InvalidArgument.
//
// Durability: a call that changes the store (Put, Remove, PutIf*,
// Transaction::Commit) returns only after the change is durable; after a
// crash, Open recovers every change whose call returned and no part of one
// that did not (a transaction is all or nothing).
//
// Versions and isolation: every committed change gets a commit timestamp
// from one store-wide clock; a key's value at timestamp t is its newest
// version committed at or before t. Single calls (Get, Put, Range, ...)
// are linearizable. A Transaction reads the store as of its snapshot
// timestamp (taken at Begin) plus its own writes, buffers its writes, and
// commits them atomically at a new timestamp if no key it writes was
// committed by another transaction after its snapshot (first committer
// wins), else Commit returns Aborted and changes nothing. Old versions no
// snapshot can read are reclaimed.
//
// Thread safety: every call may run from any number of threads at once;
// one Transaction object is used by one thread at a time. Close and the
// destructor must not run concurrently with anything on the same store,
// and every Transaction must be gone before Close.
//
// Errors (pmindex/status.h): InvalidArgument (bad kind, option, key or
// value size; "the store is closed" after Close), NotFound, AlreadyExists,
// Aborted (transaction conflict; a PutIf* whose condition failed),
// WrongKind (the pool holds a plain index, or a store over another kind),
// Busy, Corruption, NotSupported, OutOfSpace (nothing changed), IOError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmindex/db.h"
#include "pmindex/status.h"

namespace pmindex {

class Transaction;

// A value with the commit timestamp of its version: memcached's "cas
// unique" (KvStore::PutIfVersion).
struct VersionedValue {
  std::string value;
  uint64_t version = 0;
};

struct KvStats {
  uint64_t keys = 0;             // keys with a live newest version
  uint64_t versions = 0;         // versions held (old ones included)
  uint64_t commits = 0;          // since open: committed changes
  uint64_t aborts = 0;           // since open: transactions aborted
  uint64_t reclaimed_versions = 0;
  uint64_t pm_bytes = 0;         // the pool's allocated bytes
  IndexStats index;              // the index under the store
};

class KvStore {
 public:
  static constexpr size_t kMaxKeyBytes = 1024;
  static constexpr size_t kMaxValueBytes = size_t{1} << 20;

  // Creates PATH (which must not exist) holding an empty store over an
  // index of `index_kind` (a persistent kind) with `index_options`.
  [[nodiscard]] static Result<std::unique_ptr<KvStore>> Create(const std::string& path,
                                                               std::string_view index_kind = "lbtree",
                                                               std::string_view index_options = {},
                                                               const DbOptions& db_options = {});
  // Opens an existing store (kind and options from the pool) and recovers
  // after a crash. WrongKind if PATH holds a plain index (Db), and Db::Open
  // of a store's pool is WrongKind likewise. Corruption, with the files
  // unchanged, if the pool is damaged; after a clean close this includes a
  // key, value or version changed since (the store's content record,
  // docs/layout/kv.md), which after a crash goes undetected.
  [[nodiscard]] static Result<std::unique_ptr<KvStore>> Open(const std::string& path);
  // A store in an anonymous-memory pool that lives and dies with the
  // process (tests, benchmarks).
  [[nodiscard]] static Result<std::unique_ptr<KvStore>> CreateInMemory(
      std::string_view index_kind = "lbtree", std::string_view index_options = {},
      const DbOptions& db_options = {});

  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // Clean shutdown; idempotent. Every data call after it returns
  // InvalidArgument "the store is closed" (or an empty answer).
  [[nodiscard]] Status Close();

  // The newest committed value, or NotFound.
  [[nodiscard]] Result<std::string> Get(std::string_view key) const;
  // The same with its version (commit timestamp).
  [[nodiscard]] Result<VersionedValue> GetVersioned(std::string_view key) const;
  [[nodiscard]] bool Exists(std::string_view key) const;
  // Inserts or replaces.
  [[nodiscard]] Status Put(std::string_view key, std::string_view value);
  // Inserts only: AlreadyExists if present (memcached "add").
  [[nodiscard]] Status PutIfAbsent(std::string_view key, std::string_view value);
  // Replaces only: NotFound if absent (memcached "replace").
  [[nodiscard]] Status PutIfPresent(std::string_view key, std::string_view value);
  // Replaces iff the newest version is `version`: NotFound if absent,
  // Aborted if it changed since (memcached "cas").
  [[nodiscard]] Status PutIfVersion(std::string_view key, std::string_view value, uint64_t version);
  // Inserts or replaces, unless the key holds a value for which `refuse`
  // returns true: then AlreadyExists, and nothing changes. One lookup of
  // the key: `refuse` sees the value in place (a view valid during the
  // call, the key's writers held off), so it must be quick and must not
  // call the store. It may note what it sees (the replaced value's
  // header, say).
  [[nodiscard]] Status PutUnless(std::string_view key, std::string_view value,
                                 const std::function<bool(std::string_view value)>& refuse);
  // NotFound if absent.
  [[nodiscard]] Status Remove(std::string_view key);
  // Live keys (walks the store: O(n)).
  [[nodiscard]] uint64_t Count() const;
  // Appends the pairs with from <= key < to (to = nullopt: no bound), in
  // bytewise key order, at most `limit`, read at one snapshot. Returns
  // the number appended.
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) const;

  // A transaction reading at a snapshot taken now.
  [[nodiscard]] std::unique_ptr<Transaction> Begin();

  // Checks every invariant of the store and of its index: Corruption
  // naming the first violation. If nothing was written since an open of a
  // cleanly closed store, also that every key, value and version is as
  // the open found it (reads every value).
  [[nodiscard]] Status Verify() const;
  // The store's counters (keys, versions: exact while no change is in
  // flight), the pool's bytes and the index's statistics: no walk of the
  // keys (the index's part walks its leaves, which hold the keys' 8-byte
  // prefixes, one entry per prefix).
  [[nodiscard]] KvStats Stats() const;
  // As Db::Sync: on a pool that is not on DAX memory, makes every completed
  // change durable against power failure (msync); a no-op on DAX and in
  // memory.
  [[nodiscard]] Status Sync();
  std::string_view index_kind() const;
  std::string_view index_options() const;

  class Impl;

 private:
  explicit KvStore(std::unique_ptr<Impl> impl);
  friend class Transaction;
  std::unique_ptr<Impl> impl_;
};

class Transaction {
 public:
  // Aborts if neither Commit nor Abort was called.
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Reads as of the snapshot, or this transaction's own write.
  [[nodiscard]] Result<std::string> Get(std::string_view key);
  [[nodiscard]] Status Put(std::string_view key, std::string_view value);
  // NotFound if the key is absent at the snapshot (and not written here).
  [[nodiscard]] Status Remove(std::string_view key);
  // As KvStore::Range, at the snapshot, with this transaction's writes.
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out);
  // Makes Commit also return Aborted if another transaction committed `key`
  // after the snapshot, whether or not this one writes it: what was read
  // of `key` is then still its newest value at the commit (serializable
  // for the keys named, as a Redis WATCH; the other reads stay snapshot
  // reads). A transaction without writes commits nothing but checks.
  [[nodiscard]] Status Validate(std::string_view key);
  // Makes every write durable and visible at one new timestamp, or returns
  // Aborted (a written or validated key was committed by another
  // transaction after the snapshot) and changes nothing. OutOfSpace: nothing changed. After
  // Commit or Abort every call returns InvalidArgument.
  [[nodiscard]] Status Commit();
  void Abort();
  uint64_t snapshot() const;

  class Impl;

 private:
  explicit Transaction(std::unique_ptr<Impl> impl);
  friend class KvStore;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pmindex
