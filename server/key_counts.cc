#include "server/key_counts.h"

#include <limits>
#include <mutex>

#include "server/collections.h"
#include "server/items.h"

namespace pmindex::server {

namespace {

// The stored key's layout (databases.h): namespace (4 bytes, big endian),
// slot (2), kind (1), then the client's key (at least 1 byte).
constexpr size_t kHeaderBytes = 7;
constexpr uint8_t kKindKey = 0;

// A record's contribution to its namespace's counts.
KeyCounts Weight(const Result<StoredValue>& r) {
  if (!r.ok()) return {};
  return {1, KeyCountingStore::HasExpiry(r->value) ? 1 : 0};
}
KeyCounts Weight(std::string_view value) { return {1, KeyCountingStore::HasExpiry(value) ? 1 : 0}; }

}  // namespace

bool KeyCountingStore::IsKeyRecord(std::string_view stored, uint32_t* ns) {
  if (stored.size() <= kHeaderBytes) return false;
  uint32_t n = 0;
  for (size_t i = 0; i < 4; ++i) n = (n << 8) | static_cast<uint8_t>(stored[i]);
  const auto slot = static_cast<uint16_t>((static_cast<uint8_t>(stored[4]) << 8) |
                                          static_cast<uint8_t>(stored[5]));
  if (n == 0 || slot >= collection_keys::kElementRegion ||
      static_cast<uint8_t>(stored[6]) != kKindKey)
    return false;
  *ns = n;
  return true;
}

bool KeyCountingStore::HasExpiry(std::string_view value) {
  // Both read the header only; an expiry is "at or before" the end of time.
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  return item_codec::ExpiredAt(value, kEnd) || collection_codec::ExpiredAt(value, kEnd);
}

KeyCounts KeyCountingStore::Of(uint32_t ns) const {
  sync::ReaderLock lock(mu_);
  auto it = counts_.find(ns);
  if (it == counts_.end()) return {};
  return {it->second->keys.load(std::memory_order_relaxed),
          it->second->expires.load(std::memory_order_relaxed)};
}

void KeyCountingStore::Set(uint32_t ns, KeyCounts counts) {
  sync::WriterLock lock(mu_);
  std::unique_ptr<Counter>& c = counts_[ns];
  if (c == nullptr) c = std::make_unique<Counter>();
  c->keys.store(counts.keys, std::memory_order_relaxed);
  total_expires_.fetch_add(counts.expires - c->expires.exchange(counts.expires),
                           std::memory_order_relaxed);
}

void KeyCountingStore::Drop(uint32_t ns) {
  sync::WriterLock lock(mu_);
  auto it = counts_.find(ns);
  if (it == counts_.end()) return;
  total_expires_.fetch_sub(it->second->expires.load(), std::memory_order_relaxed);
  counts_.erase(it);
}

void KeyCountingStore::Add(uint32_t ns, int64_t keys, int64_t expires) {
  if (keys == 0 && expires == 0) return;
  total_expires_.fetch_add(expires, std::memory_order_relaxed);
  {
    sync::ReaderLock lock(mu_);
    auto it = counts_.find(ns);
    if (it != counts_.end()) {
      it->second->keys.fetch_add(keys, std::memory_order_relaxed);
      it->second->expires.fetch_add(expires, std::memory_order_relaxed);
      return;
    }
  }
  sync::WriterLock lock(mu_);
  std::unique_ptr<Counter>& c = counts_[ns];
  if (c == nullptr) c = std::make_unique<Counter>();
  c->keys.fetch_add(keys, std::memory_order_relaxed);
  c->expires.fetch_add(expires, std::memory_order_relaxed);
}

Status KeyCountingStore::Put(std::string_view key, std::string_view value) {
  uint32_t ns = 0;
  if (!IsKeyRecord(key, &ns)) return base_.Put(key, value);
  // Insert if absent, else replace the record read (each counts what it
  // changes): retried until one of them finds the key as read.
  for (;;) {
    Result<StoredValue> old = base_.Get(key);
    if (!old.ok() && !old.status().is_not_found()) return old.status();
    Result<WriteOutcome> w = old.ok() ? PutIfRead(key, value, *old) : PutIfAbsent(key, value);
    if (!w.ok()) return w.status();
    if (*w == WriteOutcome::kDone) return Status::OK();
  }
}

Status KeyCountingStore::PutMany(
    const std::vector<std::pair<std::string_view, std::string_view>>& pairs) {
  // One transaction (all or none, as the base's PutMany), which counts.
  for (;;) {
    std::unique_ptr<StoreTransaction> t = Begin();
    Status s;
    for (const auto& [k, v] : pairs) {
      s = t->Put(k, v);
      if (!s.ok()) break;
    }
    if (s.ok()) s = t->Commit();
    if (!s.is_aborted()) return s;
  }
}

Result<WriteOutcome> KeyCountingStore::PutIfAbsent(std::string_view key, std::string_view value) {
  Result<WriteOutcome> w = base_.PutIfAbsent(key, value);
  uint32_t ns = 0;
  if (w.ok() && *w == WriteOutcome::kDone && IsKeyRecord(key, &ns)) {
    const KeyCounts now = Weight(value);
    Add(ns, now.keys, now.expires);
  }
  return w;
}

Result<WriteOutcome> KeyCountingStore::PutIfVersion(std::string_view key, std::string_view value,
                                                    uint64_t version) {
  uint32_t ns = 0;
  if (!IsKeyRecord(key, &ns)) return base_.PutIfVersion(key, value, version);
  // A success replaces exactly the record of `version`: read it first
  // (versions never come back, so if the write succeeds, the read saw it).
  Result<StoredValue> old = base_.Get(key);
  if (!old.ok() && !old.status().is_not_found()) return old.status();
  if (old.ok() && old->version == version) return PutIfRead(key, value, *old);
  return base_.PutIfVersion(key, value, version);  // kAbsent or kChanged
}

Result<WriteOutcome> KeyCountingStore::PutIfRead(std::string_view key, std::string_view value,
                                                 const StoredValue& read) {
  Result<WriteOutcome> w = base_.PutIfVersion(key, value, read.version);
  uint32_t ns = 0;
  if (w.ok() && *w == WriteOutcome::kDone && IsKeyRecord(key, &ns))
    Add(ns, 0, Weight(value).expires - Weight(read.value).expires);
  return w;
}

Result<WriteOutcome> KeyCountingStore::PutUnless(std::string_view key, std::string_view value,
                                                 const PrefixTest& refuse) {
  uint32_t ns = 0;
  if (!IsKeyRecord(key, &ns)) return base_.PutUnless(key, value, refuse);
  // The base's test sees the record replaced, if any (its last call): its
  // weight is noted there, in the same look as the write's.
  KeyCounts before;
  Result<WriteOutcome> w = base_.PutUnless(key, value, [&](std::optional<std::string_view> old) {
    before = old ? Weight(*old) : KeyCounts{};
    return old && refuse(old);
  });
  if (w.ok() && *w == WriteOutcome::kDone) {
    const KeyCounts now = Weight(value);
    Add(ns, now.keys - before.keys, now.expires - before.expires);
  }
  return w;
}

Result<WriteOutcome> KeyCountingStore::RemoveIfRead(std::string_view key, const StoredValue& read) {
  Result<WriteOutcome> w = base_.RemoveIfVersion(key, read.version);
  uint32_t ns = 0;
  if (w.ok() && *w == WriteOutcome::kDone && IsKeyRecord(key, &ns)) {
    const KeyCounts before = Weight(read.value);
    Add(ns, -before.keys, -before.expires);
  }
  return w;
}

Result<WriteOutcome> KeyCountingStore::Remove(std::string_view key) {
  uint32_t ns = 0;
  if (!IsKeyRecord(key, &ns)) return base_.Remove(key);
  for (;;) {
    Result<StoredValue> old = base_.Get(key);
    if (!old.ok()) {
      if (old.status().is_not_found()) return WriteOutcome::kAbsent;
      return old.status();
    }
    Result<WriteOutcome> w = RemoveIfRead(key, *old);
    if (!w.ok() || *w == WriteOutcome::kDone) return w;
  }
}

Result<WriteOutcome> KeyCountingStore::RemoveIfVersion(std::string_view key, uint64_t version) {
  uint32_t ns = 0;
  if (!IsKeyRecord(key, &ns)) return base_.RemoveIfVersion(key, version);
  Result<StoredValue> old = base_.Get(key);
  if (!old.ok() && !old.status().is_not_found()) return old.status();
  if (old.ok() && old->version == version) return RemoveIfRead(key, *old);
  return base_.RemoveIfVersion(key, version);  // kAbsent or kChanged
}

Status KeyCountingStore::RemoveAll() {
  Status s = base_.RemoveAll();
  sync::WriterLock lock(mu_);
  counts_.clear();
  total_expires_.store(0, std::memory_order_relaxed);
  return s;
}

// A transaction of the base store that counts its writes and adds them to
// the namespaces' counts when it commits.
class KeyCountingStore::Transaction final : public StoreTransaction {
 public:
  Transaction(KeyCountingStore& store, std::unique_ptr<StoreTransaction> t)
      : store_(store), t_(std::move(t)) {}

  Result<StoredValue> Get(std::string_view key) override { return t_->Get(key); }
  Status Put(std::string_view key, std::string_view value) override {
    uint32_t ns = 0;
    if (!IsKeyRecord(key, &ns)) return t_->Put(key, value);
    Result<StoredValue> old = t_->Get(key);
    if (!old.ok() && !old.status().is_not_found()) return old.status();
    PMINDEX_RETURN_IF_ERROR(t_->Put(key, value));
    const KeyCounts before = Weight(old), now = Weight(value);
    Note(ns, now.keys - before.keys, now.expires - before.expires);
    return Status::OK();
  }
  Result<WriteOutcome> Remove(std::string_view key) override {
    uint32_t ns = 0;
    if (!IsKeyRecord(key, &ns)) return t_->Remove(key);
    Result<StoredValue> old = t_->Get(key);
    if (!old.ok() && !old.status().is_not_found()) return old.status();
    Result<WriteOutcome> w = t_->Remove(key);
    if (w.ok() && *w == WriteOutcome::kDone && old.ok()) {
      const KeyCounts before = Weight(old);
      Note(ns, -before.keys, -before.expires);
    }
    return w;
  }
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    return t_->Range(from, to, limit, out);
  }
  Status Commit() override {
    Status s = t_->Commit();
    if (s.ok()) {
      for (const auto& [ns, c] : pending_) store_.Add(ns, c.keys, c.expires);
    }
    pending_.clear();
    return s;
  }
  void Abort() override {
    pending_.clear();
    t_->Abort();
  }

 private:
  void Note(uint32_t ns, int64_t keys, int64_t expires) {
    for (auto& [n, c] : pending_) {
      if (n == ns) {
        c.keys += keys;
        c.expires += expires;
        return;
      }
    }
    pending_.push_back({ns, {keys, expires}});
  }

  KeyCountingStore& store_;
  std::unique_ptr<StoreTransaction> t_;
  // Changes to the counts, by namespace (a transaction touches few).
  std::vector<std::pair<uint32_t, KeyCounts>> pending_;
};

std::unique_ptr<StoreTransaction> KeyCountingStore::Begin() {
  std::unique_ptr<StoreTransaction> t = base_.Begin();
  if (t == nullptr) return nullptr;
  return std::make_unique<Transaction>(*this, std::move(t));
}

}  // namespace pmindex::server
