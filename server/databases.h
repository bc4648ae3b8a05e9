// Databases 0..N-1 (Redis's SELECT) over one Store, with logical flushes
// and SWAPDB, and the background work they need (docs/server.md "Key
// encoding and databases").
//
// Key encoding: a key K of database i is stored in the underlying Store as
//
//   [namespace: 4 bytes, big endian][slot: 2 bytes, big endian][kind: 1 byte][K]
//
// where the namespace is database i's current one (the table below), the
// slot is K's Redis Cluster hash slot (key_slot.h, below 0x4000), and kind
// 0 is the key's record (an item, or a collection's metadata). So a
// database is one range of the store, one slot of a database is one range
// too, and a database can be flushed or walked without touching the
// others. The 2-byte field's values from 0x4000 on are the collections'
// regions (collections.h): element records under 0x4000 | slot, garbage
// records under 0x8000; the views' item ranges (Range, KeyCount,
// ExpireStep) stop before them and never walk elements. Namespace 0 holds
// the table under kTableKey and the generation counter under
// kGenerationKey.
//
// Large values: the views store a value larger than the base store's
// value limit as a head record and pieces (chunked_values.h), written in
// one transaction of the base store; their Get, Range and the
// transactions' reads return the whole value, so nothing above them sees
// pieces. A write over a head garbage-lists its pieces; a patch
// (PatchIfVersion) rewrites only the pieces it touches, with the head, in
// one transaction, and GetPart reads only the pieces asked for (both in
// the views and in their transactions).
//
// The table of databases (one value, written whole): each database's
// namespace, the next unused namespace, and the namespaces whose keys are
// garbage (being reclaimed). Flush(i) gives database i a fresh namespace
// and lists the old one as garbage; Swap(i, j) exchanges two namespaces;
// each is one durable write of the table, then published in DRAM, so it
// is atomic: an operation sees the whole database before or none of it
// after. Nothing else is written: a flush costs O(databases), whatever the
// number of keys. ReclaimStep removes the garbage namespaces' keys in the
// background, a bounded batch per call, and ExpireStep removes expired
// items nobody reads.
//
// Concurrency: every operation of a database's view (db(i)) and every
// transaction (Begin) reads the namespace it uses inside an epoch guard
// (OpEpochs); before ReclaimStep finishes a garbage namespace it waits
// until every operation that might still write into it has ended, so no
// write can land in a namespace after it was reclaimed. Flush, Swap and
// the table are serialized by one mutex; the operations never take it.
//
// A store written by a pmserver without databases (keys stored raw) is
// refused by Open (NotSupported, naming the reason): its keys would
// otherwise look like garbage and the data would seem gone.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/key_counts.h"
#include "server/store.h"
#include "sync/mutex.h"

namespace pmindex::server {

// Guards that operations take around a read of shared state, and a wait
// for every guard taken before it to be released (a grace period, as in
// read-copy-update). Enter is two atomic increments on a counter of the
// calling thread's stripe; Synchronize may wait, and must not be called
// while the caller holds a guard.
class OpEpochs {
 public:
  class Guard {
   public:
    Guard() = default;
    explicit Guard(std::atomic<uint64_t>* c) : c_(c) {}
    Guard(Guard&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    Guard& operator=(Guard&& o) noexcept {
      Release();
      c_ = std::exchange(o.c_, nullptr);
      return *this;
    }
    ~Guard() { Release(); }
    void Release() {
      if (c_ != nullptr) c_->fetch_sub(1, std::memory_order_release);
      c_ = nullptr;
    }

   private:
    std::atomic<uint64_t>* c_ = nullptr;
  };

  Guard Enter();
  // Returns once every guard entered before the call is released.
  void Synchronize();

 private:
  static constexpr size_t kStripes = 32;
  struct alignas(64) Stripe {
    std::array<std::atomic<uint64_t>, 2> active{};
  };
  std::array<Stripe, kStripes> stripes_;
  std::atomic<uint64_t> epoch_{0};
  sync::Mutex sync_mu_;
};

class Databases;

// A transaction over any of the databases (Databases::Begin): db(i) is
// database i's view of one underlying StoreTransaction, so one Commit
// applies the writes to every database at once. The namespaces are the
// ones of Begin's moment (a flush or swap after Begin does not move the
// transaction's keys: the transaction is ordered before it).
class DbTransaction {
 public:
  ~DbTransaction();
  DbTransaction(const DbTransaction&) = delete;
  DbTransaction& operator=(const DbTransaction&) = delete;

  // REQUIRES: 0 <= i < Databases::count().
  StoreTransaction& db(int i);
  // The namespace database i has in this transaction (Begin's, unless the
  // transaction flushed or swapped it).
  uint32_t ns(int i) const { return ns_[static_cast<size_t>(i)]; }
  int count() const { return static_cast<int>(ns_.size()); }
  // FLUSHDB, FLUSHALL and SWAPDB as part of the transaction: its later
  // reads see the result at once; the table of databases is written by
  // Commit, with the rest, all or nothing. Aborted: the table changed
  // since Begin (the transaction cannot commit; run it again).
  [[nodiscard]] Status Flush(int i);
  [[nodiscard]] Status FlushAll();
  [[nodiscard]] Status Swap(int i, int j);
  [[nodiscard]] Status Commit();
  void Abort();
  // The underlying transaction over the whole store, addressed by stored
  // keys: for the collections' element and garbage records
  // (collections.h), which the views do not address. Writes through it
  // must stay inside this transaction's namespaces (ns(i)).
  StoreTransaction& base() { return *tx_; }
  Databases& databases() { return dbs_; }

 private:
  friend class Databases;
  class View;
  DbTransaction(Databases& dbs, OpEpochs::Guard guard, std::vector<uint32_t> ns,
                std::unique_ptr<StoreTransaction> tx);
  // Copies the table on the first change (Aborted if it no longer matches
  // Begin's namespaces).
  Status StartTableChange();

  Databases& dbs_;
  OpEpochs::Guard guard_;
  std::vector<uint32_t> ns_;
  std::unique_ptr<StoreTransaction> tx_;
  std::vector<std::unique_ptr<View>> views_;
  // The table as this transaction changes it (next_ns, ns of every
  // database, garbage), and the table's install count it was copied at.
  bool table_changed_ = false;
  uint32_t next_ns_ = 0;
  std::vector<uint32_t> table_ns_;
  std::vector<uint32_t> garbage_;
  uint64_t installs_at_copy_ = 0;
};

class Databases {
 public:
  static constexpr size_t kHeaderBytes = 7;  // namespace, slot, kind
  // The largest value a database's view stores: values over the base
  // store's limit are stored in pieces (chunked_values.h). 1 TiB, the
  // upper bound of --proto-max-bulk-len, plus room for an item's header;
  // the protocols enforce their own, lower limits.
  static constexpr size_t kMaxValueBytes = (size_t{1} << 40) + 64;
  static constexpr int kMaxDatabases = 1 << 16;
  // Namespace 0's only key.
  static constexpr std::string_view kTableKey{"\0\0\0\0pmserver-databases", 22};
  static_assert(sizeof("\0\0\0\0pmserver-databases") == 22 + 1);

  // Reads the table of databases from `base` (which must outlive the
  // result), creating it in an empty store and extending it to `count`
  // databases if it has fewer (a table with more keeps them, unserved).
  // NotSupported: the store holds keys but no table (written by a
  // pmserver without databases). Corruption: the table does not decode.
  [[nodiscard]] static Result<std::unique_ptr<Databases>> Open(Store& base, int count);
  ~Databases();

  int count() const { return count_; }
  // Database i's view: a Store whose keys are the clients' keys (at most
  // base max_key_bytes() - kHeaderBytes bytes) and values up to
  // kMaxValueBytes, ordered by (slot, key). RemoveAll is Flush(i); Begin
  // a transaction over this database alone; Info counts the store's keys
  // (all databases, garbage and pieces included) less the table.
  // REQUIRES: 0 <= i < count().
  Store& db(int i);
  Store& base() { return base_; }

  // Logical flush of database i, or of every database (FLUSHALL) in one
  // write; durable when it returns.
  [[nodiscard]] Status Flush(int i);
  [[nodiscard]] Status FlushAll();
  // Exchanges databases i and j (SWAPDB); durable when it returns.
  [[nodiscard]] Status Swap(int i, int j);
  // Keys stored in database i, expired items not yet removed included,
  // and how many of them have an expiry: counters kept by the writes
  // (key_counts.h), O(1).
  uint64_t KeyCount(int i) { return static_cast<uint64_t>(std::max<int64_t>(0, Counts(i).keys)); }
  KeyCounts Counts(int i) const { return counted_->Of(ns(i)); }
  // The same by a walk of the database (O(its keys)): what the counters
  // are set from at open, and what tests compare them with.
  KeyCounts CountByWalk(int i);
  // Appends to *keys up to `limit` keys of database i stored under hash
  // slot `slot`, in bytewise order, from the first key after `after` (""
  // = the slot's first key); returns how many. One range of the store:
  // O(log n + limit), whatever the other slots hold. Expired items not yet
  // removed are listed.
  size_t SlotKeys(int i, uint16_t slot, std::string_view after, size_t limit,
                  std::vector<std::string>* keys);
  // The current namespace of database i (WATCH compares it).
  uint32_t ns(int i) const {
    return live_ns_[static_cast<size_t>(i)].load(std::memory_order_acquire);
  }

  // A transaction over all databases (DbTransaction).
  std::unique_ptr<DbTransaction> Begin();

  // Background work; each call does a bounded amount and returns how much
  // (keys removed). Neither may be called while the caller holds a
  // transaction (ReclaimStep may wait for running operations to end).
  // Removes up to `budget` keys of the oldest garbage namespace; when it
  // has none left, drops it from the table.
  size_t ReclaimStep(size_t budget);
  bool reclaim_pending();
  // Examines up to `budget` stored items of the served databases, from
  // where the last call stopped (wrapping around at the end), and removes
  // those `expired` says are expired, each only if unchanged since it was
  // examined (RemoveIfVersion).
  size_t ExpireStep(size_t budget, const std::function<bool(std::string_view value)>& expired);
  // False when no stored key has an expiry (the counters of key_counts.h):
  // the background sweep then has nothing to look for.
  bool AnyExpiry() const { return counted_->TotalExpires() > 0; }

  // Collections (collections.h). A generation number never handed out
  // before in the life of the store: numbers are reserved a block of
  // kGenerationBlock at a time by one durable write of the counter record
  // (kGenerationKey, namespace 0) and handed out from DRAM, so a restart
  // skips at most the rest of a block. Thread-safe.
  static constexpr uint64_t kGenerationBlock = 1 << 16;
  static constexpr std::string_view kGenerationKey{"\0\0\0\0pmserver-generations", 24};
  [[nodiscard]] Result<uint64_t> NewGeneration();
  // Removes up to `budget` element records of garbage-listed generations
  // in the served databases' namespaces, and the garbage record of a
  // generation once none of its elements is left; returns the records
  // removed. Element records of a garbage generation are never written
  // again (no metadata refers to it), so this needs no transaction.
  size_t ReclaimGarbageStep(size_t budget);

  // Pieces of large values read so far (chunked_values.h), by every read
  // path: what tests check a partial read against.
  uint64_t pieces_read() const { return pieces_read_.load(std::memory_order_relaxed); }
  // Pieces written so far by patches (Store::PatchIfVersion of a large
  // value): what tests check APPEND, SETRANGE and SETBIT against.
  uint64_t pieces_written() const { return pieces_written_.load(std::memory_order_relaxed); }

  // The stored form of `key` in namespace `ns` (the layout above:
  // namespace, slot, kind, key); the prefix of a namespace.
  static std::string Encode(uint32_t ns, std::string_view key);
  static std::string NamespacePrefix(uint32_t ns);
  // Encode's bytes without a heap allocation for keys of up to
  // kInlineBytes: what every command's lookup builds.
  class StoredKey {
   public:
    static constexpr size_t kInlineBytes = 64 - kHeaderBytes;
    StoredKey(uint32_t ns, std::string_view key);
    StoredKey(const StoredKey&) = delete;
    StoredKey& operator=(const StoredKey&) = delete;
    std::string_view view() const { return {data_, size_}; }
    operator std::string_view() const { return view(); }  // NOLINT: a key is its bytes

   private:
    std::unique_ptr<char[]> heap_;  // beyond kInlineBytes
    char* data_;
    size_t size_;
    char inline_[kHeaderBytes + kInlineBytes];
  };

 private:
  class View;
  friend class DbTransaction;
  struct Table {
    uint32_t next_ns = 1;
    std::vector<uint32_t> ns;       // per database
    std::vector<uint32_t> garbage;  // oldest first
  };
  static std::string EncodeTable(const Table& t);
  static Status DecodeTable(std::string_view v, Table* t);

  Databases(Store& base, int count, Table table);
  // Removes an expired collection's metadata record or an expired large
  // value's head (a stored key) and garbage-lists its generation, in one
  // transaction; 1 if done.
  size_t ExpireCollection(std::string_view stored_key,
                          const std::function<bool(std::string_view value)>& expired);
  // Writes `next` as the table and publishes it.
  Status Install(Table next) PMINDEX_REQUIRES(meta_mu_);
  // Publishes `next`, already durable.
  void Publish(Table next) PMINDEX_REQUIRES(meta_mu_);
  // Every database's namespace, read as one consistent set.
  std::vector<uint32_t> Snapshot() const;

  // The store under the databases, through the key counters: every
  // write of the databases goes through base_.
  std::unique_ptr<KeyCountingStore> counted_;
  Store& base_;
  const int count_;
  OpEpochs epochs_;
  std::atomic<uint64_t> pieces_read_{0};
  std::atomic<uint64_t> pieces_written_{0};
  sync::Mutex meta_mu_;
  Table table_ PMINDEX_GUARDED_BY(meta_mu_);
  uint64_t installs_ PMINDEX_GUARDED_BY(meta_mu_) = 0;  // tables installed since open
  // The published namespaces; seq_ is odd while Install changes them.
  std::unique_ptr<std::atomic<uint32_t>[]> live_ns_;
  std::atomic<uint64_t> seq_{0};
  size_t served_ = 0;  // entries of live_ns_ (the table's databases)
  std::vector<std::unique_ptr<View>> views_;

  sync::Mutex reclaim_mu_;
  // Garbage namespaces past a grace period.
  std::set<uint32_t> quiesced_ PMINDEX_GUARDED_BY(reclaim_mu_);
  sync::Mutex expire_mu_;
  std::string expire_cursor_ PMINDEX_GUARDED_BY(expire_mu_);

  sync::Mutex gen_mu_;
  uint64_t gen_next_ PMINDEX_GUARDED_BY(gen_mu_) = 0;   // next number to hand out
  uint64_t gen_limit_ PMINDEX_GUARDED_BY(gen_mu_) = 0;  // end of the reserved block
  sync::Mutex garbage_mu_;                              // one ReclaimGarbageStep at a time
};

}  // namespace pmindex::server
