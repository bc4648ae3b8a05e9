// A Store over std::map and one mutex, for the protocol tests only
// (pmserver ships KvBackedStore alone). Versions count every write from 1,
// so tests can predict them. A small max_value_bytes lets tests reach the
// size limits with short strings.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "server/store.h"

namespace pmindex::server::testing {

class MapStore final : public Store {
 public:
  explicit MapStore(size_t max_value_bytes = size_t{1} << 20, size_t max_key_bytes = 1024)
      : max_value_(max_value_bytes), max_key_(max_key_bytes) {}

  size_t max_key_bytes() const override { return max_key_; }
  size_t max_value_bytes() const override { return max_value_; }

  Result<StoredValue> Get(std::string_view key) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return Status::NotFound();
    return it->second;
  }
  Status Put(std::string_view key, std::string_view value) override {
    std::lock_guard<std::mutex> lock(mu_);
    PMINDEX_RETURN_IF_ERROR(Check(key, value));
    map_[std::string(key)] = StoredValue{std::string(value), ++clock_};
    return Status::OK();
  }
  Status PutMany(const std::vector<std::pair<std::string_view, std::string_view>>& pairs) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : pairs) PMINDEX_RETURN_IF_ERROR(Check(k, v));
    ++clock_;
    for (const auto& [k, v] : pairs) map_[std::string(k)] = StoredValue{std::string(v), clock_};
    return Status::OK();
  }
  Result<WriteOutcome> PutIfAbsent(std::string_view key, std::string_view value) override {
    std::lock_guard<std::mutex> lock(mu_);
    PMINDEX_RETURN_IF_ERROR(Check(key, value));
    auto [it, inserted] = map_.try_emplace(std::string(key));
    if (!inserted) return WriteOutcome::kPresent;
    it->second = StoredValue{std::string(value), ++clock_};
    return WriteOutcome::kDone;
  }
  Result<WriteOutcome> PutIfVersion(std::string_view key, std::string_view value,
                                    uint64_t version) override {
    std::lock_guard<std::mutex> lock(mu_);
    PMINDEX_RETURN_IF_ERROR(Check(key, value));
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return WriteOutcome::kAbsent;
    if (it->second.version != version) return WriteOutcome::kChanged;
    it->second = StoredValue{std::string(value), ++clock_};
    return WriteOutcome::kDone;
  }
  Result<WriteOutcome> Remove(std::string_view key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.erase(std::string(key)) ? WriteOutcome::kDone : WriteOutcome::kAbsent;
  }
  Result<WriteOutcome> RemoveIfVersion(std::string_view key, uint64_t version) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return WriteOutcome::kAbsent;
    if (it->second.version != version) return WriteOutcome::kChanged;
    map_.erase(it);
    return WriteOutcome::kDone;
  }
  size_t Range(std::string_view from, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (auto it = map_.lower_bound(std::string(from)); it != map_.end() && n < limit; ++it, ++n)
      out->emplace_back(it->first, it->second.value);
    return n;
  }
  Status RemoveAll() override {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    return Status::OK();
  }
  StoreInfo Info() override {
    std::lock_guard<std::mutex> lock(mu_);
    return StoreInfo{map_.size(), "map (test)", 0};
  }

 private:
  // The callers (the item layer and the protocols) must keep to the
  // store's limits; a violation is reported as KvStore would.
  Status Check(std::string_view key, std::string_view value) const {
    if (key.empty() || key.size() > max_key_ || value.size() > max_value_)
      return Status::InvalidArgument("key or value size out of range");
    return Status::OK();
  }

  const size_t max_value_;
  const size_t max_key_;
  std::mutex mu_;
  std::map<std::string, StoredValue, std::less<>> map_;
  uint64_t clock_ = 0;
};

}  // namespace pmindex::server::testing
