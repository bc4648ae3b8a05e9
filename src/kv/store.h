// kv::Store: the key-value store's engine over one index in one pool
// (the user API is include/pmindex/kv.h, which wraps it with the
// pool file; the crash simulator and the tests drive it directly on
// in-memory pools and crash images).
//
// Layout and persist order: kv_format.h and docs/layout/kv.md. In short:
//   - the index maps Prefix(key) to a Record (one key), a Bucket (the
//     prefix's keys) or a Directory over Buckets (a copy-on-write B+-tree
//     of the prefix's keys, when they are more than a bucket's fanout); a
//     Record holds the key and a chain of Versions, newest first;
//   - a single Put/Remove/PutIf* is a one-write commit: the new version
//     (and its value block, record and the tree nodes it copies) is
//     flushed and fenced,
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
#include "sync/mutex.h"

namespace pmindex::kv {

struct StoreOptions {
  // Timestamps reserved by each write of root slot 5 (the clock's durable
  // upper bound, docs/layout/kv.md "Clock"): one WriteRoot per this many
  // commits. Tests and the crash simulator use small values so that the
  // reservation's persist points run.
  uint64_t clock_chunk = uint64_t{1} << 20;
  // The most entries a writer puts in one Bucket or Directory of a
  // prefix's tree (docs/layout/kv.md "Many keys under one prefix"); at
  // least 3. 128: YCSB's keys (groups of about 100 per prefix at 1M keys)
  // keep one bucket per prefix, as before there were directories. A writer's policy, not the format: a store opened with another
  // fanout reads every node and reshapes the ones it writes. Tests and the
  // crash simulator use 3 or 4 so that a few keys split, merge and
  // collapse nodes.
  uint32_t fanout = 128;
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
  // Write's look at the newest live value before it is replaced (a view
  // valid during the call, under the key's latch): true refuses the write.
  using ValueTest = std::function<bool(std::string_view value)>;

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
  // version's timestamp is `version`). `refuse` (optional) sees the live
  // value the write would replace, if any, after `cond` passed: true ends
  // the call with AlreadyExists, nothing written. Sizes must be checked by
  // the caller.
  Status Write(std::string_view key, const std::string_view* value, Cond cond, uint64_t version,
               const ValueTest* refuse = nullptr);

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
  // Commits `writes` atomically at a new timestamp unless a written key,
  // or a key of `validated` (keys the transaction read and wants unchanged,
  // written or not), has a version committed after `snapshot` (Aborted).
  // With no writes, only checks. OutOfSpace: nothing changed.
  Status Commit(uint64_t snapshot, const Writes& writes, const std::vector<std::string>& validated = {});

  // ---- checks and figures
  // Every invariant of the index and the store (all latches held).
  Status Verify();
  // O(1): the counters (keys and versions exact while no writer runs).
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
  // One node on the path from a prefix's root to the bucket of a key.
  struct Step {
    uint64_t raw;
    const void* node;  // a Directory, or the Bucket (the path's last step)
    uint32_t count;    // the node's entries
    uint32_t pos;      // Directory: the child taken; Bucket: the key's
                       // entry, or where it would go
  };
  // Where a key is, or would go, under its prefix.
  struct Where {
    uint64_t value = 0;         // the index's value of the prefix; 0: absent
    uint32_t depth = 0;         // steps on the path (0: no tree: a free
                                // prefix, or a prefix of one record)
    Record* rec = nullptr;      // the key's record, if any
    uint64_t rec_raw = 0;
    Record* other = nullptr;    // the prefix's only record, of another key
    uint64_t other_raw = 0;
    Step path[kMaxLevel + 1];   // path[0] the root .. path[depth - 1] the bucket
    const Step& leaf() const { return path[depth - 1]; }
  };

  // An entry of a prefix's tree in DRAM: a bucket's (child 0: the record is
  // the entry) or a directory's (the child and its smallest key's record).
  struct Slot {
    uint64_t next8;
    uint64_t rec;
    uint64_t child;
  };
  // A few node pointers (a change touches a path's nodes, rarely more
  // than 8), without a heap allocation until there are more.
  class NodeList {
   public:
    void push_back(uint64_t raw) {
      if (n_ < kInline) {
        inline_[n_++] = raw;
        return;
      }
      if (n_ == kInline) heap_.assign(inline_, inline_ + kInline);
      heap_.push_back(raw);
      ++n_;
    }
    const uint64_t* begin() const { return n_ <= kInline ? inline_ : heap_.data(); }
    const uint64_t* end() const { return begin() + n_; }
    // Removes raw if present; false if not.
    bool Remove(uint64_t raw) {
      uint64_t* b = n_ <= kInline ? inline_ : heap_.data();
      for (size_t i = 0; i < n_; ++i) {
        if (b[i] != raw) continue;
        b[i] = b[n_ - 1];
        if (n_ > kInline) heap_.pop_back();
        if (--n_ == kInline) std::copy(heap_.begin(), heap_.end(), inline_);
        return true;
      }
      return false;
    }
    void clear() {
      n_ = 0;
      heap_.clear();
    }

   private:
    static constexpr size_t kInline = 8;
    uint64_t inline_[kInline];
    std::vector<uint64_t> heap_;  // all of them, once there are more than kInline
    size_t n_ = 0;
  };
  // A prefix's tree after a key joins or leaves it, built but not linked.
  struct Reshaped {
    uint64_t value = 0;  // the prefix's new index value; 0: none
    NodeList fresh;      // nodes allocated (freed if not linked)
    NodeList old;        // nodes it replaces (retired once linked)
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
    bool was_live = false;  // the key's newest version held a value
  };

  Store(Pool* pool, std::unique_ptr<Index> index, const StoreOptions& opts);

  // Runtime decoding of a pointer the store wrote (validated by recovery):
  // null if it does not fit the pool (the callers answer Corruption).
  template <class T>
  T* At(uint64_t raw, size_t bytes) const;
  Status Locate(std::string_view key, uint64_t prefix, Where* w) const;
  // A Bucket or Directory of a prefix's tree (count >= 1, the whole node
  // in the pool), or null.
  const Bucket* BucketAt(uint64_t raw) const;
  const Directory* DirectoryAt(uint64_t raw) const;
  // The node at raw of a prefix's tree: a Directory of level `want` (*d)
  // or, want 0, a Bucket (*b); want -1: the root, either, of any level.
  Status TreeNode(uint64_t raw, int want, const Directory** d, const Bucket** b) const;
  // Entries of `e` (n of them, ascending) whose key is below `key`, or at
  // or below it if or_equal; reads a record only where next8 ties.
  template <class E>
  Status Rank(const E* e, uint32_t n, std::string_view key, uint64_t n8, bool or_equal, uint32_t* out) const;
  // Every record of the prefix tree at `raw` (a node of level `want`, as
  // TreeNode), ascending, from the first at or above *from (null: all):
  // fn(const Record&) returns false to stop (*stop set).
  template <class Fn>
  Status VisitRecords(uint64_t raw, int want, const std::string_view* from, Fn& fn, bool* stop) const;
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
  // A Bucket (level 0) or Directory of `level` holding slots [0, n),
  // allocated and flushed (the caller's fence makes it durable before the
  // index names it); recorded in r->fresh. Returns its parent's slot.
  Result<Slot> AllocNode(int level, const Slot* s, size_t n, Reshaped* r);
  // Nodes of `level` for `s` (none if s is empty): one, or several of at
  // most the fanout entries if split_ok (append: the first ones full, for
  // keys that arrive in ascending order).
  Status BuildLevel(int level, const std::vector<Slot>& s, bool append, bool split_ok, std::vector<Slot>* out,
                    Reshaped* r);
  // Appends the entries of node raw (of `level`) to *out.
  Status SlotsOf(uint64_t raw, int level, std::vector<Slot>* out) const;
  // The prefix's tree with *add inserted in w's bucket at its position (or,
  // add null, the key at w's position removed): copies the path (merging
  // an underfull node with a neighbour, splitting a full one, collapsing a
  // root of one entry) into r. REQUIRES w.depth >= 1.
  Status Reshape(const Where& w, const Slot* add, bool append, Reshaped* r);
  // Reshape's last step: the root of the new tree over `cur`, the new
  // entries of the old root's `level` (none: the prefix goes; one: the
  // root gives way to its child as often as that holds; more than the
  // fanout: root splits add levels above). r->value names it. `up` is
  // scratch space.
  Status ReshapeRoot(std::vector<Slot>& cur, int level, bool append, std::vector<Slot>& up,
                     Reshaped* r);
  void DropNode(uint64_t raw, Reshaped* r);
  void FreeFresh(Reshaped* r);
  void RetireOld(const Reshaped& r);
  uint64_t Prune(uint64_t head) PMINDEX_REQUIRES(latches_);
  Status PrepareNewKey(std::string_view key, const Where& w, uint64_t rec, Reshaped* r);
  Status MakeNewKey(std::string_view key, const Where& w, const NewVersion& nv, uint64_t* rec, Reshaped* r);
  Status InstallNewKey(uint64_t prefix, const Where& w, const Reshaped& r);
  void FreeNewKey(uint64_t rec, Reshaped* r);
  bool RetireChain(uint64_t ver);
  // Sets live_keys_ and versions_ by a walk (Open; no writer runs).
  void CountAll();
  // Removes a record whose newest version is a tombstone no snapshot can
  // read below (or that has none) from its prefix, whose latch the caller
  // holds.
  enum class PurgeResult { kDone, kLive, kNotYet, kFailed };
  PurgeResult Purge(uint64_t prefix, const Where& w) PMINDEX_REQUIRES(latches_);
  void QueuePurge(std::string_view key);
  void DrainPurges(size_t max_items);
  void Undo(const std::vector<Linked>& linked);
  // Commit's steps (latches held). CheckUnchangedSince: Aborted if k has a
  // version committed after `snapshot` (first committer wins).
  // LinkVersion: a new version of k (val, or a tombstone) sealed as
  // transaction txn's, made durable and linked as k's head (a new record
  // for a new key), described in *out for Undo and the finalizing; *cut:
  // the chain Prune cut off, or 0. On error nothing of it stays linked or
  // allocated.
  Status CheckUnchangedSince(std::string_view k, uint64_t snapshot) PMINDEX_REQUIRES(latches_);
  Status LinkVersion(std::string_view k, const std::optional<std::string>& val, PPtr txn,
                     Linked* out, uint64_t* cut) PMINDEX_REQUIRES(latches_);
  // After the commit point: every linked version's stamp, durable.
  void StampVersions(const std::vector<Linked>& linked, uint64_t stamp) PMINDEX_REQUIRES(latches_);

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
  sync::Mutex reserve_mu_;
  SnapshotTable snapshots_;
  Latches latches_;
  sync::Mutex purge_mu_;
  // Keys whose records may be removable.
  std::deque<std::string> purge_ PMINDEX_GUARDED_BY(purge_mu_);
  std::atomic<size_t> purge_size_{0};
  std::atomic<uint64_t> commits_{0}, aborts_{0}, reclaimed_{0};
  // Keys with a live newest version and versions in chains: counted by a
  // walk at Open, then moved by each writer under its latches (so exact
  // whenever no writer is inside; Verify checks them against its walk).
  std::atomic<int64_t> live_keys_{0}, versions_{0};
  // The content record (pm::kStoreContentSlot, docs/layout/kv.md "Content
  // record"): content_known_ if the open checked the pool's record and
  // repaired nothing, so that the store held content_sum_ at open; changed_
  // once anything may have written a block since (Write, Commit, Purge).
  // While known and unchanged, Verify compares its own sum and Close
  // writes the record without a walk.
  bool content_known_ = false;
  uint64_t content_sum_ = 0;
  std::atomic<bool> changed_{false};
  void MarkChanged() {
    // One load per write once set: the line stays shared between writers.
    if (!changed_.load(std::memory_order_relaxed)) changed_.store(true, std::memory_order_relaxed);
  }
  // The sum the record holds for the store as it is (no writer runs): a
  // walk of every pair, or content_sum_ while known and unchanged.
  Result<uint64_t> ContentSumNow() const;
  CommitStop stop_;
};

}  // namespace pmindex::kv
