// How many keys each database namespace holds, and how many of them have
// an expiry, kept up to date by the writes themselves (DBSIZE and INFO's
// keyspace section without a walk; docs/server.md "Key encoding and
// databases").
//
// KeyCountingStore sits between Databases and the store under it, so it
// sees every write of every path (the views, the transactions, the
// background expiry, the collections' and cluster mode's writes through
// Databases::base()). It counts the stored keys that are a key's record:
// [namespace != 0][slot < the collections' element region][kind 0][key]
// (databases.h); element, garbage and namespace-0 records are not keys.
//
// Exactness: a write learns whether it inserts or replaces (and whether
// the old record had an expiry) by reading the key first, and then writes
// only if the key is still as read (PutIfAbsent, PutIfVersion,
// RemoveIfVersion; retried otherwise), so concurrent writes never count a
// key twice or miss one. In a transaction the read is the transaction's
// own (validated at commit), and the counts move only when Commit
// succeeds. A record is a key with an expiry iff item_codec or
// collection_codec says so from its header.
//
// The counts live in DRAM: Databases recounts the served namespaces once
// when it opens the store (a walk of each, Set) and forgets a namespace
// when it reclaims it (Drop). A namespace never counted is empty (a new
// one, after a flush). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/store.h"
#include "sync/mutex.h"

namespace pmindex::server {

struct KeyCounts {
  int64_t keys = 0;
  int64_t expires = 0;
};

class KeyCountingStore final : public Store {
 public:
  explicit KeyCountingStore(Store& base) : base_(base) {}

  // Whether `stored` is a key's record; its namespace in *ns.
  static bool IsKeyRecord(std::string_view stored, uint32_t* ns);
  // Whether a key's record has an expiry (an item's or a collection's).
  static bool HasExpiry(std::string_view value);

  KeyCounts Of(uint32_t ns) const;
  void Set(uint32_t ns, KeyCounts counts);
  void Drop(uint32_t ns);
  // Adds to namespace ns's counts (a committed change).
  void Add(uint32_t ns, int64_t keys, int64_t expires);
  // The keys with an expiry in every namespace counted (served or waiting
  // to be reclaimed): 0 means no key can expire.
  int64_t TotalExpires() const { return total_expires_.load(std::memory_order_relaxed); }
  // The store under it, for writes that need no count (the reclamation of
  // a namespace nobody counts any more).
  Store& uncounted() { return base_; }

  size_t max_key_bytes() const override { return base_.max_key_bytes(); }
  size_t max_value_bytes() const override { return base_.max_value_bytes(); }
  Result<StoredValue> Get(std::string_view key) override { return base_.Get(key); }
  Status Put(std::string_view key, std::string_view value) override;
  Status PutMany(const std::vector<std::pair<std::string_view, std::string_view>>& pairs) override;
  Result<WriteOutcome> PutIfAbsent(std::string_view key, std::string_view value) override;
  Result<WriteOutcome> PutIfVersion(std::string_view key, std::string_view value,
                                    uint64_t version) override;
  Result<WriteOutcome> PutIfRead(std::string_view key, std::string_view value,
                                 const StoredValue& read) override;
  Result<WriteOutcome> RemoveIfRead(std::string_view key, const StoredValue& read) override;
  Result<WriteOutcome> PutUnless(std::string_view key, std::string_view value,
                                 const PrefixTest& refuse) override;
  Result<WriteOutcome> Remove(std::string_view key) override;
  Result<WriteOutcome> RemoveIfVersion(std::string_view key, uint64_t version) override;
  using Store::Range;
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    return base_.Range(from, to, limit, out);
  }
  Status RemoveAll() override;
  StoreInfo Info() override { return base_.Info(); }
  std::unique_ptr<StoreTransaction> Begin() override;

 private:
  class Transaction;
  struct Counter {
    std::atomic<int64_t> keys{0};
    std::atomic<int64_t> expires{0};
  };

  Store& base_;
  mutable sync::SharedMutex mu_;  // guards the map; the counters are atomic
  std::unordered_map<uint32_t, std::unique_ptr<Counter>> counts_ PMINDEX_GUARDED_BY(mu_);
  std::atomic<int64_t> total_expires_{0};  // the sum of counts_' expires
};

}  // namespace pmindex::server
