// A Store over std::map and one mutex, for the protocol tests only
// (pmserver ships KvBackedStore alone). Versions count every write from 1,
// so tests can predict them. A small max_value_bytes lets tests reach the
// size limits with short strings.
//
// Transactions are optimistic: reads go to the map at once and remember
// the version they saw (0: absent), writes are buffered; Commit, under the
// map's lock, checks that every key read still has the version seen and
// that no key written was written by anyone after Begin, then applies all
// writes at one new version.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/store.h"

namespace pmindex::server::testing {

class MapStore final : public Store {
 public:
  explicit MapStore(size_t max_value_bytes = size_t{1} << 20, size_t max_key_bytes = 1024)
      : max_value_(max_value_bytes), max_key_(max_key_bytes) {}

  // Calls of Get so far (tests count the reads an operation costs).
  uint64_t gets() {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }
  size_t max_key_bytes() const override { return max_key_; }
  size_t max_value_bytes() const override { return max_value_; }

  Result<StoredValue> Get(std::string_view key) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++gets_;
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
  using Store::Range;
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (auto it = map_.lower_bound(from);
         it != map_.end() && n < limit && (!to || it->first < *to); ++it, ++n)
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
    // The bytes of the keys and values held: what maxmemory compares.
    uint64_t bytes = 0;
    for (const auto& [k, v] : map_) bytes += k.size() + v.value.size();
    return StoreInfo{map_.size(), "map (test)", bytes};
  }
  std::unique_ptr<StoreTransaction> Begin() override {
    std::lock_guard<std::mutex> lock(mu_);
    return std::make_unique<Transaction>(*this, clock_);
  }
  // Commits attempted and aborted (tests of retry loops).
  uint64_t aborts() {
    std::lock_guard<std::mutex> lock(mu_);
    return aborts_;
  }

 private:
  // The callers (the item layer and the protocols) must keep to the
  // store's limits; a violation is reported as KvStore would.
  Status Check(std::string_view key, std::string_view value) const {
    if (key.empty() || key.size() > max_key_ || value.size() > max_value_)
      return Status::InvalidArgument("key or value size out of range");
    return Status::OK();
  }

  class Transaction final : public StoreTransaction {
   public:
    Transaction(MapStore& store, uint64_t begin) : store_(store), begin_(begin) {}

    Result<StoredValue> Get(std::string_view key) override {
      if (done_) return Status::InvalidArgument("the transaction is finished");
      auto w = writes_.find(key);
      if (w != writes_.end()) {
        if (!w->second.value) return Status::NotFound();
        return StoredValue{*w->second.value, w->second.version};
      }
      std::lock_guard<std::mutex> lock(store_.mu_);
      auto it = store_.map_.find(key);
      const uint64_t seen = it == store_.map_.end() ? 0 : it->second.version;
      // The first read of a key is the one Commit checks.
      reads_.try_emplace(std::string(key), seen);
      if (it == store_.map_.end()) return Status::NotFound();
      return it->second;
    }
    Status Put(std::string_view key, std::string_view value) override {
      if (done_) return Status::InvalidArgument("the transaction is finished");
      PMINDEX_RETURN_IF_ERROR(store_.Check(key, value));
      writes_.insert_or_assign(std::string(key), Write{std::string(value), NextOwnVersion()});
      return Status::OK();
    }
    Result<WriteOutcome> Remove(std::string_view key) override {
      Result<StoredValue> r = Get(key);
      if (!r.ok()) {
        if (r.status().is_not_found()) return WriteOutcome::kAbsent;
        return r.status();
      }
      writes_.insert_or_assign(std::string(key), Write{std::nullopt, NextOwnVersion()});
      return WriteOutcome::kDone;
    }
    size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
                 std::vector<std::pair<std::string, std::string>>* out) override {
      if (done_) return 0;
      std::map<std::string, std::string, std::less<>> merged;
      {
        std::lock_guard<std::mutex> lock(store_.mu_);
        // Enough stored pairs that `limit` remain after this transaction's
        // removes.
        size_t n = 0;
        for (auto it = store_.map_.lower_bound(from);
             it != store_.map_.end() && n < limit + writes_.size() && (!to || it->first < *to);
             ++it, ++n)
          merged.emplace(it->first, it->second.value);
      }
      for (const auto& [k, w] : writes_) {
        if (k < from || (to && k >= *to)) continue;
        if (w.value) {
          merged.insert_or_assign(k, *w.value);
        } else {
          merged.erase(k);
        }
      }
      size_t n = 0;
      for (auto it = merged.begin(); it != merged.end() && n < limit; ++it, ++n)
        out->emplace_back(it->first, it->second);
      return n;
    }
    Status Commit() override {
      if (done_) return Status::InvalidArgument("the transaction is finished");
      done_ = true;
      std::lock_guard<std::mutex> lock(store_.mu_);
      auto version_of = [&](const std::string& k) -> uint64_t {
        auto it = store_.map_.find(k);
        return it == store_.map_.end() ? 0 : it->second.version;
      };
      bool conflict = false;
      for (const auto& [k, seen] : reads_) conflict |= version_of(k) != seen;
      for (const auto& [k, w] : writes_) conflict |= version_of(k) > begin_;
      if (conflict) {
        ++store_.aborts_;
        return Status::Aborted("a key read or written changed since (map store)");
      }
      if (writes_.empty()) return Status::OK();
      const uint64_t v = ++store_.clock_;
      for (const auto& [k, w] : writes_) {
        if (w.value) {
          store_.map_[k] = StoredValue{*w.value, v};
        } else {
          store_.map_.erase(k);
        }
      }
      return Status::OK();
    }
    void Abort() override { done_ = true; }

   private:
    struct Write {
      std::optional<std::string> value;  // nullopt: removed
      uint64_t version;
    };
    // Versions of own writes: above every store version.
    uint64_t NextOwnVersion() { return (uint64_t{1} << 63) + ++own_writes_; }

    MapStore& store_;
    const uint64_t begin_;
    bool done_ = false;
    uint64_t own_writes_ = 0;
    std::map<std::string, uint64_t, std::less<>> reads_;
    std::map<std::string, Write, std::less<>> writes_;
  };

  const size_t max_value_;
  const size_t max_key_;
  std::mutex mu_;
  std::map<std::string, StoredValue, std::less<>> map_;
  uint64_t clock_ = 0;
  uint64_t gets_ = 0;
  uint64_t aborts_ = 0;
};

}  // namespace pmindex::server::testing
