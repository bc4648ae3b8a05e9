// kv::Store: the key-value store's engine over one index in one pool
// (issue 11; the user API is include/pmindex/kv.h, which wraps it with the
// pool file; the crash simulator and the tests drive it directly on
// in-memory pools and crash images).
//
// Layout and persist order: kv_format.h and docs/layout/kv.md. In short:
//   - the index maps Prefix(key) to a Record (one key) or a Bucket (all
//     keys of the prefix, copy-on-write); a Record holds the key and a
//     chain of Versions, newest first;
//   - a single Put/Remove/PutIf* is a one-write commit: the new version
//     (and its value block, record and bucket copy) is flushed and fenced,
//     then linked by one NAW of Record::head, or by the index's insert or
//     update of the prefix for a new key;
//   - a Commit links a version per key stamped with its TxnRecord (not yet
//     committed: readers skip it), then one NAW of TxnRecord::commit
//     commits them all, then each stamp is finalized to the timestamp;
//   - recovery (Open) learns every pair through open_index's visitor
//     before the index's first write, marks every store block reachable,
//     then unlinks the versions of transactions that did not commit,
//     finalizes the ones that did, and removes records left without a
//     live version.
//
// Concurrency: readers take no latch and never wait: they read inside an
// allocator EpochGuard with atomic loads, at the clock's visible timestamp
// or at a registered snapshot, and skip versions of transactions not
// committed (or committed after their snapshot). Writers hold the latch of
// each prefix they change (Latches) from their checks to their publish.
// Old versions no registered snapshot can read are unlinked by the writer
// that links a newer one and retired through the allocator's epochs.
//
// Thread safety: every method but Close and the destructor may run from
// any number of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "alloc/allocator.h"
#include "index/index.h"
#include "index/pair_visitor.h"
#include "kv/kv_format.h"
#include "kv/mvcc.h"
#include "pm/pool.h"
#include "pmindex/kv.h"
#include "pmindex/status.h"

namespace pmindex::kv {

struct StoreOptions {
  // Timestamps reserved by each write of root slot 5 (the clock's durable
  // upper bound, docs/layout/kv.md "Clock"): one WriteRoot per this many
  // commits. Tests and the crash simulator use small values so that the
  // reservation's persist points run.
  uint64_t clock_chunk = uint64_t{1} << 20;
};

// Where a Commit stops as a crash would (tests, the crash simulator):
// after `links` of its versions are linked, before its commit word
// (kBeforeCommit), or after its commit word and before finalizing
// (kAfterCommit). The store's DRAM state is then unusable except for
// dropping it (its latches are released); the pool holds what a crash at
// that point leaves, for recovery to repair.
struct CommitStop {
  enum Kind { kNone, kBeforeCommit, kAfterCommit } kind = kNone;
  size_t links = 0;  // kBeforeCommit: versions linked before stopping
};

class Store {
 public:
  // A transaction's buffered writes: key -> value, nullopt = remove.
  using Writes = std::map<std::string, std::optional<std::string>, std::less<>>;
  // Range's callback: one live pair at the snapshot (views valid during
  // the call); false stops the scan.
  using PairFn = std::function<bool(std::string_view key, std::string_view value)>;
  enum class Cond { kNone, kAbsent, kPresent, kVersion };

  // Creates an empty store over a new index of `kind` in `pool`, a new
  // pool flagged pm::kIncompatKvStore.
  static Result<std::unique_ptr<Store>> Create(Pool* pool, std::string_view kind, std::string_view options,
                                               const StoreOptions& opts = {});
  // Opens and recovers the store in `pool` (WrongKind if the pool holds a
  // plain index).
  static Result<std::unique_ptr<Store>> Open(Pool* pool, const StoreOptions& opts = {},
                                             ReclaimBound bound = ReclaimBound::kByCleanFlag);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Clean shutdown of the index (the pool is the caller's). Idempotent.
  // REQUIRES: no other call runs, no snapshot is registered.
  Status Close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // ---- single calls (linearizable)
  // The newest committed version: its value (if want_value) and timestamp.
  Result<VersionedValue> Read(std::string_view key, bool want_value) const;
  // value null: remove. Cond: kAbsent (AlreadyExists if live), kPresent
  // (NotFound if not live), kVersion (NotFound / Aborted unless the newest
  // version's timestamp is `version`). Sizes must be checked by the caller.
  Status Write(std::string_view key, const std::string_view* value, Cond cond, uint64_t version);

  // ---- snapshots and transactions
  struct Snapshot {
    uint64_t ts = 0;
    std::atomic<uint64_t>* slot = nullptr;
  };
  Snapshot AcquireSnapshot();
  void ReleaseSnapshot(Snapshot* s);
  // The value of `key` at snapshot `ts` (nullopt: absent).
  Result<std::optional<std::string>> ReadAt(std::string_view key, uint64_t ts) const;
  // Every live pair at snapshot `ts` with from <= key < to, ascending.
  Status ScanAt(uint64_t ts, std::string_view from, std::optional<std::string_view> to, const PairFn& fn) const;
  // Commits `writes` atomically at a new timestamp unless a written key has
  // a version committed after `snapshot` (Aborted). OutOfSpace: nothing
  // changed.
  Status Commit(uint64_t snapshot, const Writes& writes);

  // ---- checks and figures
  // Every invariant of the index and the store (all latches held).
  Status Verify();
  KvStats Stats();
  // Every block reachable from the index's roots: the index's and the
  // store's (leak checks). No writer may run.
  Status ForEachBlock(const std::function<void(PPtr)>& fn);
  Index* index() const { return index_.get(); }
  alloc::Allocator* allocator() const { return alloc_; }
  Pool* pool() const { return pool_; }
  uint64_t visible_ts() const { return clock_.visible(); }

  // Tests and the crash simulator: the next Commit stops as described.
  void StopNextCommit(CommitStop stop) { stop_ = stop; }

 private:
  // Where a key is, or would go, under its prefix.
  struct Where {
    uint64_t value = 0;         // the index's value of the prefix; 0: absent
    Bucket* bucket = nullptr;   // the prefix's bucket, if it has one
    uint32_t pos = 0;           // in the bucket: the key's entry, or where it would go
    Record* rec = nullptr;      // the key's record, if any
    uint64_t rec_raw = 0;
    Record* other = nullptr;    // the prefix's only record, of another key
    uint64_t other_raw = 0;
  };

  // A version allocated and filled but not linked.
  struct NewVersion {
    PPtr ver;
    Version* v = nullptr;
    PPtr value;             // its value block, if the value is not inline
    uint16_t flags = 0;
    uint32_t len = 0;
    size_t bytes = 0;       // of the version block
  };

  // A version a Commit linked (for Undo and finalizing).
  struct Linked {
    std::string_view key;
    Record* rec = nullptr;
    NewVersion nv;
    uint64_t older = 0;     // the head it replaced
    bool new_record = false;
  };

  Store(Pool* pool, std::unique_ptr<Index> index, const StoreOptions& opts);

  // Runtime decoding of a pointer the store wrote (validated by recovery):
  // null if it does not fit the pool (the callers answer Corruption).
  template <class T>
  T* At(uint64_t raw, size_t bytes) const;
  Status Locate(std::string_view key, uint64_t prefix, Where* w) const;
  uint64_t CommitTsOf(const Version& v) const;
  const Version* VisibleAt(uint64_t head, uint64_t ts, bool* skipped) const;
  Status CopyValue(const Version& v, std::string* out) const;
  Status ValueView(const Version& v, std::string_view* out) const;

  // Timestamps: a reserved one is published when its Ticket goes.
  class Ticket;
  Ticket Reserve();
  void ExtendReservation(uint64_t ts);

  // Writing.
  Result<NewVersion> AllocVersion(const std::string_view* value);
  void SealVersion(const NewVersion& nv, uint64_t stamp, uint64_t older);
  void FreeUnlinked(const NewVersion& nv);
  Result<PPtr> AllocRecord(std::string_view key, uint64_t head);
  Result<PPtr> AllocBucket(const std::vector<Bucket::Entry>& entries);
  uint64_t Prune(uint64_t head);
  Result<uint64_t> PrepareNewKey(std::string_view key, const Where& w, uint64_t rec);
  Status MakeNewKey(std::string_view key, const Where& w, const NewVersion& nv, uint64_t* rec, uint64_t* value);
  Status InstallNewKey(uint64_t prefix, const Where& w, uint64_t value);
  void FreeNewKey(const Where& w, uint64_t rec, uint64_t value);
  bool RetireChain(uint64_t ver);
  // Removes a record whose newest version is a tombstone no snapshot can
  // read below (or that has none) from its prefix. REQUIRES its latch.
  enum class PurgeResult { kDone, kLive, kNotYet, kFailed };
  PurgeResult Purge(uint64_t prefix, const Where& w);
  void QueuePurge(std::string_view key);
  void DrainPurges(size_t max_items);
  void Undo(const std::vector<Linked>& linked);

  // Recovery's repairs (Open), after the allocator's FinishRecovery.
  class Recovery;
  Status Repair(const Recovery& r);

  // Visits every index pair (prefix, value) with fn, in key order.
  Status ForEachPair(const std::function<Status(Key, Value)>& fn) const;

  Pool* pool_;
  std::unique_ptr<Index> index_;
  alloc::Allocator* alloc_;
  StoreOptions opts_;
  std::atomic<bool> closed_{false};
  CommitClock clock_;
  std::atomic<uint64_t> reserved_{0};  // root slot 5: timestamps below it may be handed out
  std::mutex reserve_mu_;
  SnapshotTable snapshots_;
  Latches latches_;
  std::mutex purge_mu_;
  std::deque<std::string> purge_;  // keys whose records may be removable
  std::atomic<size_t> purge_size_{0};
  std::atomic<uint64_t> commits_{0}, aborts_{0}, reclaimed_{0};
  CommitStop stop_;
};

}  // namespace pmindex::kv
