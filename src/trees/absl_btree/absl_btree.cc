// absl-btree: absl::btree_map<uint64_t, uint64_t> (Abseil, Debian
// libabsl-dev) behind the Index interface, a volatile reference index: the
// ceiling every tree can be compared with is then a B-tree everyone knows,
// not only our own dram-btree (issue 14).
//
// Thread safety: absl::btree_map is not thread-safe, so one reader-writer
// lock (std::shared_mutex) guards the whole map: lookups and scans share
// it, writers hold it alone. A single thread pays the uncontended lock and
// unlock (two atomic read-modify-writes per operation); with several
// threads writers serialize, so multi-thread figures of this index measure
// the lock, not the tree.
//
// bulk_load: absl has no fill factor; `fill` is checked for range and then
// ignored. The sorted pairs are inserted one by one with a hint at end(),
// which absl turns into an append to the rightmost leaf (amortized O(1) per
// pair); absl's splits at the right edge then leave nodes about full, as
// its insertions of ascending keys always do.
//
// Memory: the map allocates its nodes through a counting allocator, so
// stats().dram_bytes is the exact number of node bytes the map holds.
#include <absl/container/btree_map.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "pmindex/index.h"
#include "pmindex/registry.h"

namespace pmindex {
namespace {

// std::allocator plus a byte counter the owning index reads in stats().
template <class T>
struct CountingAllocator {
  using value_type = T;
  std::atomic<int64_t>* bytes;

  explicit CountingAllocator(std::atomic<int64_t>* b) : bytes(b) {}
  template <class U>
  CountingAllocator(const CountingAllocator<U>& o) : bytes(o.bytes) {}  // NOLINT

  T* allocate(size_t n) {
    bytes->fetch_add(static_cast<int64_t>(n * sizeof(T)), std::memory_order_relaxed);
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) {
    bytes->fetch_sub(static_cast<int64_t>(n * sizeof(T)), std::memory_order_relaxed);
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const CountingAllocator<U>& o) const {
    return bytes == o.bytes;
  }
};

class AbslBTree final : public Index {
 public:
  AbslBTree() : map_(std::less<Key>(), Alloc(&bytes_)) {}

  std::string_view kind() const override { return "absl-btree"; }
  bool persistent() const override { return false; }

  Status insert(Key k, Value v) override {
    std::unique_lock<std::shared_mutex> g(mu_);
    return map_.try_emplace(k, v).second ? Status::OK() : Status::AlreadyExists();
  }
  Status update(Key k, Value v) override {
    std::unique_lock<std::shared_mutex> g(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return Status::NotFound();
    it->second = v;
    return Status::OK();
  }
  Status upsert(Key k, Value v) override {
    std::unique_lock<std::shared_mutex> g(mu_);
    map_.insert_or_assign(k, v);
    return Status::OK();
  }
  std::optional<Value> lookup(Key k) override {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  Status remove(Key k) override {
    std::unique_lock<std::shared_mutex> g(mu_);
    return map_.erase(k) != 0 ? Status::OK() : Status::NotFound();
  }
  size_t scan(Key from, size_t n, KV* out) override {
    std::shared_lock<std::shared_mutex> g(mu_);
    size_t i = 0;
    for (auto it = map_.lower_bound(from); it != map_.end() && i < n; ++it) out[i++] = KV{it->first, it->second};
    return i;
  }

  Status bulk_load(std::span<const KV> sorted, double fill) override {
    if (!(fill > 0.0 && fill <= 1.0)) {
      return Status::InvalidArgument("bulk_load: fill " + std::to_string(fill) +
                                     " is outside (0, 1]");
    }
    std::unique_lock<std::shared_mutex> g(mu_);
    if (!map_.empty()) return Status::InvalidArgument("bulk_load: the index is not empty");
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i - 1].key >= sorted[i].key) {
        return Status::InvalidArgument("bulk_load: keys not strictly ascending at position " +
                                       std::to_string(i));
      }
    }
    // No fill factor in absl: ascending appends with a hint at end().
    for (const KV& kv : sorted) map_.emplace_hint(map_.end(), kv.key, kv.value);
    return Status::OK();
  }

  Status verify() override {
    std::shared_lock<std::shared_mutex> g(mu_);
    size_t n = 0;
    bool first = true;
    Key prev = 0;
    for (const auto& [k, v] : map_) {
      (void)v;
      if (!first && prev >= k)
        return Status::Corruption("absl-btree: keys not strictly ascending at position " + std::to_string(n));
      first = false;
      prev = k;
      ++n;
    }
    if (n != map_.size())
      return Status::Corruption("absl-btree: size() " + std::to_string(map_.size()) + " but " +
                                std::to_string(n) + " entries iterated");
    return Status::OK();
  }

  IndexStats stats() override {
    std::shared_lock<std::shared_mutex> g(mu_);
    IndexStats s;
    s.entries = map_.size();
    s.dram_bytes = static_cast<uint64_t>(std::max<int64_t>(0, bytes_.load(std::memory_order_relaxed)));
    return s;
  }

 private:
  using Alloc = CountingAllocator<std::pair<const Key, Value>>;
  std::atomic<int64_t> bytes_{0};  // before map_: the allocator points at it
  mutable std::shared_mutex mu_;
  absl::btree_map<Key, Value, std::less<Key>, Alloc> map_;
};

Result<std::unique_ptr<Index>> Create(const IndexEnv&, const Options&) {
  return std::unique_ptr<Index>(std::make_unique<AbslBTree>());
}

}  // namespace

PMINDEX_REGISTER_INDEX(absl_btree, {
    .name = "absl-btree",
    .persistent = false,
    .options_help = "",
    .test_configs = {""},
    .validate = nullptr,
    .create = Create,
    .open = nullptr,
    .test_only = false,
    .stores_data = true,
});

}  // namespace pmindex
