// The production Store: pmindex::KvStore (include/pmindex/kv.h).
//
// Versions are KvStore's commit timestamps (GetVersioned), so a memcached
// cas unique is the version the store itself compares in PutIfVersion.
// Operations KvStore has no single call for use a Transaction: PutMany
// (all pairs in one commit) and RemoveIfVersion (a remove that commits
// only if the key did not change after the version was read); both retry
// when the commit is Aborted by a concurrent writer.
//
// Begin gives a StoreTransaction over a KvStore Transaction: reads at its
// snapshot (plus own writes), writes committed at one timestamp, first
// committer wins. A key read with Get is also validated
// (KvStore's Transaction::Validate), so the commit aborts if anyone
// committed it after the snapshot: the keys read are unchanged at the
// commit. Get reads the newest version to learn its version (KvStore's
// snapshot reads carry none); if that version is newer than the snapshot,
// the commit is doomed and Get returns Aborted at once.
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
  // One lookup: the store looks at the value in place.
  Result<WriteOutcome> PutUnless(std::string_view key, std::string_view value,
                                 const PrefixTest& refuse) override;
  Result<WriteOutcome> Remove(std::string_view key) override;
  Result<WriteOutcome> RemoveIfVersion(std::string_view key, uint64_t version) override;
  using Store::Range;
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override;
  Status RemoveAll() override;
  StoreInfo Info() override;
  std::unique_ptr<StoreTransaction> Begin() override;

 private:
  KvStore& kv_;
};

}  // namespace pmindex::server
