// A Store whose every operation runs inside one StoreTransaction: the item
// layer (Items) over it runs a group of commands (RESP EXEC) as one
// transaction, unchanged. Conditional writes are decided against what the
// transaction reads, so they never fail for a concurrent writer here;
// Commit does (Aborted), and the caller runs the group again.
//
// An operation that fails because the transaction is doomed (Aborted from
// a read) is remembered: conflict() tells the caller to retry rather than
// report the error. RemoveAll is the flush of this database inside the
// transaction (DbTransaction::Flush) when there is one, else NotSupported.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/store.h"

namespace pmindex::server {

class TxnScope;

class TxnStore final : public Store {
 public:
  // `tx` and `base` (the store the transaction is of, for its limits and
  // Info) must outlive this object. `flush`: what RemoveAll does (empty:
  // NotSupported).
  TxnStore(StoreTransaction& tx, Store& base, std::function<Status()> flush = {})
      : tx_(tx), base_(base), flush_(std::move(flush)) {}

  bool conflict() const { return conflict_; }
  // A step outside this store found the transaction cannot commit.
  void MarkConflict() { conflict_ = true; }
  StoreTransaction& transaction() { return tx_; }
  // The transaction's stores of every database (resp_transaction.h), if
  // it has them.
  TxnScope* scope() const { return scope_; }
  void set_scope(TxnScope* scope) { scope_ = scope; }

  size_t max_key_bytes() const override { return base_.max_key_bytes(); }
  size_t max_value_bytes() const override { return base_.max_value_bytes(); }

  Result<StoredValue> Get(std::string_view key) override { return Note(tx_.Get(key)); }
  Result<StoredPart> GetPart(std::string_view key, HeaderBytesFn header, uint64_t offset,
                             uint64_t length) override {
    return Note(tx_.GetPart(key, header, offset, length));
  }
  Result<WriteOutcome> PatchIfVersion(std::string_view key, uint64_t version,
                                      const std::vector<ByteWrite>& writes) override {
    return Note(tx_.PatchIfVersion(key, version, writes));
  }
  Status Put(std::string_view key, std::string_view value) override {
    return Note(tx_.Put(key, value));
  }
  Status PutMany(const std::vector<std::pair<std::string_view, std::string_view>>& pairs) override {
    for (const auto& [k, v] : pairs) PMINDEX_RETURN_IF_ERROR(Put(k, v));
    return Status::OK();
  }
  Result<WriteOutcome> PutIfAbsent(std::string_view key, std::string_view value) override {
    Result<StoredValue> cur = Get(key);
    if (cur.ok()) return WriteOutcome::kPresent;
    if (!cur.status().is_not_found()) return cur.status();
    PMINDEX_RETURN_IF_ERROR(Put(key, value));
    return WriteOutcome::kDone;
  }
  Result<WriteOutcome> PutIfVersion(std::string_view key, std::string_view value,
                                    uint64_t version) override {
    Result<StoredValue> cur = Get(key);
    if (!cur.ok()) {
      if (cur.status().is_not_found()) return WriteOutcome::kAbsent;
      return cur.status();
    }
    if (cur->version != version) return WriteOutcome::kChanged;
    PMINDEX_RETURN_IF_ERROR(Put(key, value));
    return WriteOutcome::kDone;
  }
  Result<WriteOutcome> Remove(std::string_view key) override { return Note(tx_.Remove(key)); }
  Result<WriteOutcome> RemoveIfVersion(std::string_view key, uint64_t version) override {
    Result<StoredValue> cur = Get(key);
    if (!cur.ok()) {
      if (cur.status().is_not_found()) return WriteOutcome::kAbsent;
      return cur.status();
    }
    if (cur->version != version) return WriteOutcome::kChanged;
    return Remove(key);
  }
  using Store::Range;
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    return tx_.Range(from, to, limit, out);
  }
  Status RemoveAll() override {
    if (!flush_) return Status::NotSupported("a flush inside this transaction");
    return Note(flush_());
  }
  StoreInfo Info() override { return base_.Info(); }
  // No nested transactions.
  std::unique_ptr<StoreTransaction> Begin() override { return nullptr; }

 private:
  template <class R>
  R Note(R r) {
    if constexpr (std::is_same_v<R, Status>) {
      conflict_ |= r.is_aborted();
    } else {
      conflict_ |= !r.ok() && r.status().is_aborted();
    }
    return r;
  }

  StoreTransaction& tx_;
  Store& base_;
  std::function<Status()> flush_;
  bool conflict_ = false;
  TxnScope* scope_ = nullptr;
};

}  // namespace pmindex::server
