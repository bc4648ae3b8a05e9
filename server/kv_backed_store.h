// The production Store: pmindex::KvStore (include/pmindex/kv.h).
//
// Versions are KvStore's commit timestamps (GetVersioned), so a memcached
// cas unique is the version the store itself compares in PutIfVersion.
// Operations KvStore has no single call for use a Transaction: PutMany
// (all pairs in one commit) and RemoveIfVersion (a remove that commits
// only if the key did not change after the version was read); both retry
// when the commit is Aborted by a concurrent writer.
#pragma once

#include "pmindex/kv.h"
#include "server/store.h"

namespace pmindex::server {

class KvBackedStore final : public Store {
 public:
  // `kv` must outlive this object.
  explicit KvBackedStore(KvStore& kv) : kv_(kv) {}

  size_t max_key_bytes() const override { return KvStore::kMaxKeyBytes; }
  size_t max_value_bytes() const override { return KvStore::kMaxValueBytes; }

  Result<StoredValue> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string_view value) override;
  Status PutMany(const std::vector<std::pair<std::string_view, std::string_view>>& pairs) override;
  Result<WriteOutcome> PutIfAbsent(std::string_view key, std::string_view value) override;
  Result<WriteOutcome> PutIfVersion(std::string_view key, std::string_view value,
                                    uint64_t version) override;
  Result<WriteOutcome> Remove(std::string_view key) override;
  Result<WriteOutcome> RemoveIfVersion(std::string_view key, uint64_t version) override;
  size_t Range(std::string_view from, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override;
  Status RemoveAll() override;
  StoreInfo Info() override;

 private:
  KvStore& kv_;
};

}  // namespace pmindex::server
