// The content record of a clean close (docs/crash-testing.md; pm::kContentSlot in
// pm/pool_format.h): every persistent kind sums pm::ContentTerm over its
// live pairs when it closes, and compares the same sum, taken by its
// read-only validation, when it opens a cleanly closed pool. A key or a
// value changed while the pool was closed (a flipped bit, overwritten
// bytes), which no structural check can see, is then refused before
// anything is written. docs/crash-testing.md ("Pool fuzzer") says what it
// covers and what not (a pool that crashed).
//
// The same sum carries open_index's pair visitor (index/pair_visitor.h,
// index/pair_visitor.h): a ContentSum made from the IndexEnv of an open tells the
// visitor every pair it adds, so a kind whose read-only validation sums
// the pairs as its repairs will leave them, on the clean and the crashed
// path, visits them with nothing more than passing env through; and
// CheckContentRecord returns the visitor's first error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "index/registry.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/status.h"

namespace pmindex::common {

// Order-independent: add the live pairs in any order. Made from an open's
// IndexEnv, Add also visits the pair (env.pairs; thread-safe, so sums of
// parallel walks may each carry it). Add(const ContentSum&) adds a sum
// only: its pairs were visited when they were added to it.
class ContentSum {
 public:
  ContentSum() = default;
  explicit ContentSum(const IndexEnv& env) : pairs_(env.pairs) {}
  void Add(uint64_t key, uint64_t value) {
    sum_ += pm::ContentTerm(key, value);
    if (pairs_ != nullptr) [[unlikely]] pairs_->Visit(key, value);
  }
  void Add(const ContentSum& other) { sum_ += other.sum_; }
  uint64_t value() const { return sum_; }
  PairVisitor* pairs() const { return pairs_; }

 private:
  uint64_t sum_ = 0;
  PairVisitor* pairs_ = nullptr;
};

// The first error of the sum's pair visitor, else OK unless the pool was
// closed cleanly with a content record that differs from `sum` (salvage
// copies are not checked: they keep what they reach).
inline Status CheckContentRecord(const Pool& pool, bool salvage, const ContentSum& sum,
                                 std::string_view tree) {
  if (sum.pairs() != nullptr) PMINDEX_RETURN_IF_ERROR(sum.pairs()->status());
  if (salvage || !pool.was_clean()) return Status::OK();
  const uint64_t rec = pool.root(pm::kContentSlot);
  if (rec == 0 || rec == pm::ContentRecord(sum.value())) return Status::OK();
  return Status::Corruption(std::string(tree) +
                            ": the keys and values differ from those the pool was closed with "
                            "(content record of root slot 6), so a key or a value was damaged; "
                            "nothing was changed");
}

// close(), no writer running, before the pool's clean flag can be set.
inline void WriteContentRecord(Pool& pool, const ContentSum& sum) {
  const uint64_t rec = pm::ContentRecord(sum.value());
  if (pool.root(pm::kContentSlot) != rec) pool.WriteRoot(pm::kContentSlot, rec);
}

}  // namespace pmindex::common
