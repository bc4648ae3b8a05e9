// kv::Store::Open: recovery by reachability through the index's values
// (docs/layout/kv.md "Recovery").
//
// 1. open_index opens the index with a pair visitor (Store::Recovery).
//    Every kind tells it every pair its repairs will keep, before its
//    allocator bound check and its first write (index/pair_visitor.h); the
//    visitor walks each value with the validating walk (walk.h), marks
//    every block reachable and records what needs repair. A damaged value
//    refuses the open before anything is written.
// 2. The allocator's FinishRecovery frees every block nobody marked:
//    versions, values, records and buckets allocated and not linked at the
//    crash, versions cut off a chain and not yet freed.
// 3. Store::Repair, before any other call: the head versions of
//    transactions that committed get their timestamp (then the
//    transaction records are freed); those of transactions that did not
//    are unlinked and freed; records without a live version are queued for
//    removal by the first writes.
//    Each step is crash-safe and idempotent: a crash during it leaves a
//    state the next recovery repairs the same way.
// (Between 2 and 3: the clock restarts at root slot 5, above every
// timestamp the pool holds, and the next reservation is written there.)
#include <algorithm>

#include "common/content_record.h"
#include "kv/store.h"
#include "kv/walk.h"
#include "pm/persist.h"
#include "pm/pool_format.h"
#include "sync/mutex.h"

namespace pmindex::kv {

class Store::Recovery final : public PairVisitor {
 public:
  struct Pending {
    uint64_t rec = 0, ver = 0, txn = 0;
    uint64_t commit_ts = 0;  // 0: the transaction did not commit
  };

  void Start(Pool* pool, alloc::Allocator* alloc) override {
    pool_ = pool;
    alloc_ = alloc;
    clock_ = pool->root(pm::kStoreSlot);
    rules_.ts_limit = clock_;
    rules_.allow_pending = true;
    // A clean pool whose content record its last close wrote (not one an
    // older build left before opening it again): the walks digest every
    // block, and status() compares the sum before the index's first write.
    record_ = pool->root(pm::kStoreContentSlot);
    check_content_ = pool->was_clean() && pm::StoreContentRecordCurrent(record_, clock_);
    rules_.content = check_content_;
  }

  void Visit(Key key, Value value) override {
    Sink sink(*alloc_);
    uint64_t max_ts = 0;
    Status s;
    if (clock_ == 0) {
      s = Status::Corruption(
          "kv: the index holds pairs but the store's clock (root slot 5) was never written");
    } else {
      s = WalkValue(*pool_, key, value, rules_, sink, &max_ts);
    }
    sync::MutexLock g(mu_);
    ++pairs_;
    if (!s.ok() && first_.ok()) first_ = s;
    content_.Add(key, sink.digest.value());
    keys_ += sink.keys;
    versions_ += sink.versions;
    pending_.insert(pending_.end(), sink.pending.begin(), sink.pending.end());
    dead_.insert(dead_.end(), sink.dead.begin(), sink.dead.end());
  }

  // The first walk's error; else, on a clean pool with a current content
  // record, Corruption if the visits' sum differs from it. The kinds call
  // it once every pair was visited, before their first write.
  Status status() const override {
    sync::MutexLock g(mu_);
    if (!first_.ok() || !check_content_) return first_;
    if (pm::StoreContentRecord(content_.value(), clock_) == record_) return first_;
    return Status::Corruption(
        "kv: the keys, values or versions differ from those the store was closed with (content "
        "record of root slot 4), so one of them was damaged; nothing was changed");
  }

  // Whether the pool's content record was checked (and matched, if the
  // open went on): every pair was then visited exactly once, as the close
  // summed them, so the visits' sum and counts are the store's.
  bool content_checked() const { return check_content_; }
  // The accessors below run once the visits are done; they lock anyway
  // (uncontended), so that every read of the visits' state is checked.
  uint64_t content_sum() const {
    sync::MutexLock g(mu_);
    return content_.value();
  }
  uint64_t keys() const {
    sync::MutexLock g(mu_);
    return keys_;
  }
  uint64_t versions() const {
    sync::MutexLock g(mu_);
    return versions_;
  }

  uint64_t clock() const { return clock_; }
  uint64_t pairs() const {
    sync::MutexLock g(mu_);
    return pairs_;
  }
  // Heads of transactions not finalized, one per record.
  std::vector<Pending> pending() const {
    std::vector<Pending> p;
    {
      sync::MutexLock g(mu_);
      p = pending_;
    }
    std::sort(p.begin(), p.end(), [](const Pending& a, const Pending& b) { return a.rec < b.rec; });
    p.erase(std::unique(p.begin(), p.end(), [](const Pending& a, const Pending& b) { return a.rec == b.rec; }),
            p.end());
    return p;
  }
  // Records without a live committed version (tombstone or none).
  std::vector<uint64_t> dead() const {
    std::vector<uint64_t> d;
    {
      sync::MutexLock g(mu_);
      d = dead_;
    }
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    return d;
  }

 private:
  // One pair's walk: marks every block and keeps what needs repair.
  class Sink final : public WalkSink {
   public:
    explicit Sink(alloc::Allocator& a) : a_(a) {}
    Status Block(PPtr p, size_t bytes) override {
      a_.MarkReachable(p);
      if (!a_.IsLive(p))
        return Status::Corruption("kv: block " + HexWord(p.raw()) + " is not an allocated block");
      if (a_.BlockSize(p) < bytes)
        return Status::Corruption("kv: block " + HexWord(p.raw()) + " is smaller than the " +
                                  std::to_string(bytes) + " bytes it holds");
      return Status::OK();
    }
    void PendingHead(uint64_t rec, uint64_t ver, uint64_t txn, uint64_t commit_ts) override {
      pending.push_back(Pending{rec, ver, txn, commit_ts});
    }
    void RecordDone(uint64_t rec, const Record&, bool live, uint64_t versions) override {
      if (!live) dead.push_back(rec);
      keys += live ? 1 : 0;
      this->versions += versions;
    }
    void Content(const void* p, size_t n) override { digest.Add(p, n); }
    std::vector<Pending> pending;
    std::vector<uint64_t> dead;
    ContentDigest digest;
    uint64_t keys = 0, versions = 0;

   private:
    alloc::Allocator& a_;
  };

  Pool* pool_ = nullptr;
  alloc::Allocator* alloc_ = nullptr;
  uint64_t clock_ = 0;
  WalkRules rules_;
  uint64_t record_ = 0;
  bool check_content_ = false;
  // Visits may come from several threads (a kind may recover in parallel).
  mutable sync::Mutex mu_;
  Status first_ PMINDEX_GUARDED_BY(mu_);
  uint64_t pairs_ PMINDEX_GUARDED_BY(mu_) = 0;
  common::ContentSum content_ PMINDEX_GUARDED_BY(mu_);
  uint64_t keys_ PMINDEX_GUARDED_BY(mu_) = 0;
  uint64_t versions_ PMINDEX_GUARDED_BY(mu_) = 0;
  std::vector<Pending> pending_ PMINDEX_GUARDED_BY(mu_);
  std::vector<uint64_t> dead_ PMINDEX_GUARDED_BY(mu_);
};

Result<std::unique_ptr<Store>> Store::Open(Pool* pool, const StoreOptions& opts, ReclaimBound bound) {
  if (pool == nullptr) return Status::InvalidArgument("kv: no pool given");
  if ((pool->incompat_flags() & pm::kIncompatKvStore) == 0) {
    return Status::WrongKind("pool holds a plain index of kind \"" + std::string(pool->kind()) +
                             "\", not a key-value store: open it with Db::Open");
  }
  Recovery rec;
  OpenIndexOptions oo;
  oo.bound = bound;
  oo.pairs = &rec;
  auto idx = open_index(pool, oo);
  if (!idx.ok()) return idx.status();
  std::unique_ptr<Store> s(new Store(pool, std::move(idx).value(), opts));
  // Every timestamp in the pool is below root slot 5 (the walk checked):
  // the clock restarts there (1 for a store whose create stopped before
  // slot 5 was written; the walk then found no pair).
  const uint64_t next = rec.clock() == 0 ? 1 : rec.clock();
  s->clock_.Reset(next);
  const uint64_t r = next + s->opts_.clock_chunk;
  pool->WriteRoot(pm::kStoreSlot, r);
  s->reserved_.store(r, std::memory_order_release);
  PMINDEX_RETURN_IF_ERROR(s->Repair(rec));
  // The counters Stats reports. A pair may be visited more than once in
  // general, so the visits cannot count; but a content record that matched
  // says each was visited once, and with no transaction to repair the
  // visits saw the store as it is now: then no second walk.
  const bool known = rec.content_checked() && rec.pending().empty();
  if (known) {
    s->live_keys_.store(static_cast<int64_t>(rec.keys()), std::memory_order_relaxed);
    s->versions_.store(static_cast<int64_t>(rec.versions()), std::memory_order_relaxed);
  } else {
    s->CountAll();
  }
  // The store's contents are those of the record while nothing is written
  // (Verify compares, and Close need not walk again to write it).
  s->content_known_ = known;
  s->content_sum_ = rec.content_sum();
  return s;
}

Status Store::Repair(const Recovery& r) {
  const std::vector<Recovery::Pending> pending = r.pending();
  // Committed transactions: their versions take the timestamp, durable
  // before their transaction records are freed (and may be reused).
  bool finalized = false;
  for (const auto& p : pending) {
    if (p.commit_ts == 0) continue;
    Version* v = pool_->to_ptr<Version>(PPtr(p.ver));
    pm::store(&v->stamp, CommittedStamp(p.commit_ts), std::memory_order_release);
    pm::flush(&v->stamp, sizeof(uint64_t));
    finalized = true;
  }
  if (finalized) pm::fence();
  // Transactions that did not commit: their versions leave their chains
  // (one NAW each: the record's head back to the version below), then go.
  for (const auto& p : pending) {
    if (p.commit_ts != 0) continue;
    Record* rec = pool_->to_ptr<Record>(PPtr(p.rec));
    Version* v = pool_->to_ptr<Version>(PPtr(p.ver));
    pm::naw(&rec->head, v->older);
    if (v->separate()) alloc_->Free(PPtr(v->value));
    alloc_->Free(PPtr(p.ver));
  }
  std::vector<uint64_t> txns;
  for (const auto& p : pending) txns.push_back(p.txn);
  std::sort(txns.begin(), txns.end());
  txns.erase(std::unique(txns.begin(), txns.end()), txns.end());
  for (uint64_t t : txns) alloc_->Free(PPtr(t));
  // Records left without a live version (a tombstone, a transaction's new
  // key that did not commit, a purge a crash cut short) go to the purge
  // queue: the first writes remove them from the index (and Close removes
  // the rest). Recovery itself changes no index entry, so the index is
  // exactly as its own recovery left it.
  for (uint64_t raw : r.dead()) QueuePurge(pool_->to_ptr<const Record>(PPtr(raw))->key());
  alloc_->Reclaim();
  return Status::OK();
}

}  // namespace pmindex::kv
