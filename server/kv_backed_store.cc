#include "server/kv_backed_store.h"

#include <map>
#include <memory>

namespace pmindex::server {

namespace {
bool IsAborted(const Status& s) { return s.code() == Status::Code::kAborted; }
}  // namespace

Result<StoredValue> KvBackedStore::Get(std::string_view key) {
  Result<VersionedValue> r = kv_.GetVersioned(key);
  if (!r.ok()) return r.status();
  return StoredValue{std::move(r->value), r->version};
}

Status KvBackedStore::Put(std::string_view key, std::string_view value) {
  return kv_.Put(key, value);
}

Status KvBackedStore::PutMany(
    const std::vector<std::pair<std::string_view, std::string_view>>& pairs) {
  for (;;) {
    std::unique_ptr<Transaction> tx = kv_.Begin();
    for (const auto& [k, v] : pairs) PMINDEX_RETURN_IF_ERROR(tx->Put(k, v));
    Status s = tx->Commit();
    if (!IsAborted(s)) return s;
  }
}

Result<WriteOutcome> KvBackedStore::PutIfAbsent(std::string_view key, std::string_view value) {
  Status s = kv_.PutIfAbsent(key, value);
  if (s.ok()) return WriteOutcome::kDone;
  if (s.is_already_exists()) return WriteOutcome::kPresent;
  return s;
}

Result<WriteOutcome> KvBackedStore::PutIfVersion(std::string_view key, std::string_view value,
                                                 uint64_t version) {
  Status s = kv_.PutIfVersion(key, value, version);
  if (s.ok()) return WriteOutcome::kDone;
  if (s.is_not_found()) return WriteOutcome::kAbsent;
  if (IsAborted(s)) return WriteOutcome::kChanged;
  return s;
}

Result<WriteOutcome> KvBackedStore::PutUnless(std::string_view key, std::string_view value,
                                              const PrefixTest& refuse) {
  refuse(std::nullopt);  // the look below calls it again if it finds the key
  Status s = kv_.PutUnless(key, value, [&refuse](std::string_view v) { return refuse(v); });
  if (s.ok()) return WriteOutcome::kDone;
  if (s.is_already_exists()) return WriteOutcome::kPresent;
  return s;
}

Result<WriteOutcome> KvBackedStore::Remove(std::string_view key) {
  Status s = kv_.Remove(key);
  if (s.ok()) return WriteOutcome::kDone;
  if (s.is_not_found()) return WriteOutcome::kAbsent;
  return s;
}

Result<WriteOutcome> KvBackedStore::RemoveIfVersion(std::string_view key, uint64_t version) {
  for (;;) {
    // The snapshot is taken before the version is read: if the version
    // read was committed after the snapshot, the transaction's Remove sees
    // an older state and its commit aborts (first committer wins), and the
    // next round takes a later snapshot. So a commit removes exactly
    // `version`.
    std::unique_ptr<Transaction> tx = kv_.Begin();
    Result<VersionedValue> cur = kv_.GetVersioned(key);
    if (!cur.ok()) {
      if (cur.status().is_not_found()) return WriteOutcome::kAbsent;
      return cur.status();
    }
    if (cur->version != version) return WriteOutcome::kChanged;
    Status s = tx->Remove(key);
    if (s.ok()) s = tx->Commit();
    if (s.ok()) return WriteOutcome::kDone;
    // NotFound: the key was created after the snapshot; Aborted: it
    // changed after it. Either way, look again.
    if (!s.is_not_found() && !IsAborted(s)) return s;
  }
}

size_t KvBackedStore::Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
                            std::vector<std::pair<std::string, std::string>>* out) {
  return kv_.Range(from, to, limit, out);
}

Status KvBackedStore::RemoveAll() {
  std::string from;
  std::vector<std::pair<std::string, std::string>> batch;
  for (;;) {
    batch.clear();
    if (kv_.Range(from, std::nullopt, 1024, &batch) == 0) return Status::OK();
    for (const auto& kv : batch) {
      Status s = kv_.Remove(kv.first);
      if (!s.ok() && !s.is_not_found()) return s;
    }
    // Past the last key of the batch: keys written behind the walk stay.
    from = batch.back().first;
    if (!KeySuccessor(&from, KvStore::kMaxKeyBytes)) return Status::OK();
  }
}

namespace {

class KvTransaction final : public StoreTransaction {
 public:
  explicit KvTransaction(KvStore& kv) : kv_(kv), tx_(kv.Begin()) {}

  Result<StoredValue> Get(std::string_view key) override {
    auto own = own_.find(key);
    if (own != own_.end()) {
      Result<std::string> v = tx_->Get(key);
      if (!v.ok()) return v.status();
      return StoredValue{std::move(*v), own->second};
    }
    // The newest version: if it is the snapshot's, its version is the
    // snapshot's too; if it is newer, the validated commit cannot succeed.
    Result<VersionedValue> newest = kv_.GetVersioned(key);
    if (newest.ok() && newest->version > tx_->snapshot()) return Changed();
    if (!newest.ok()) {
      if (!newest.status().is_not_found()) return newest.status();
      // Absent now: present at the snapshot means removed since.
      Result<std::string> at_snapshot = tx_->Get(key);
      if (at_snapshot.ok()) return Changed();
      if (!at_snapshot.status().is_not_found()) return at_snapshot.status();
    }
    PMINDEX_RETURN_IF_ERROR(tx_->Validate(key));
    if (!newest.ok()) return Status::NotFound();
    return StoredValue{std::move(newest->value), newest->version};
  }
  Status Put(std::string_view key, std::string_view value) override {
    PMINDEX_RETURN_IF_ERROR(tx_->Put(key, value));
    own_.insert_or_assign(std::string(key), NextOwnVersion());
    return Status::OK();
  }
  Result<WriteOutcome> Remove(std::string_view key) override {
    Result<StoredValue> r = Get(key);
    if (!r.ok()) {
      if (r.status().is_not_found()) return WriteOutcome::kAbsent;
      return r.status();
    }
    PMINDEX_RETURN_IF_ERROR(tx_->Remove(key));
    own_.insert_or_assign(std::string(key), NextOwnVersion());
    return WriteOutcome::kDone;
  }
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    return tx_->Range(from, to, limit, out);
  }
  Status Commit() override { return tx_->Commit(); }
  void Abort() override { tx_->Abort(); }

 private:
  static Status Changed() {
    return Status::Aborted("a key read was written by another client after the snapshot");
  }
  // Versions of own writes: above every commit timestamp.
  uint64_t NextOwnVersion() { return (uint64_t{1} << 63) + ++own_writes_; }

  KvStore& kv_;
  std::unique_ptr<Transaction> tx_;
  uint64_t own_writes_ = 0;
  std::map<std::string, uint64_t, std::less<>> own_;
};

}  // namespace

std::unique_ptr<StoreTransaction> KvBackedStore::Begin() {
  return std::make_unique<KvTransaction>(kv_);
}

StoreInfo KvBackedStore::Info() {
  const KvStats s = kv_.Stats();
  StoreInfo info;
  info.keys = s.keys;
  info.pm_bytes = s.pm_bytes;
  info.engine = "kvstore " + std::string(kv_.index_kind());
  return info;
}

}  // namespace pmindex::server
