// absl-btree: absl::btree_map<uint64_t, uint64_t> (Abseil, Debian
// libabsl-dev) behind the Index interface, a volatile reference index: the
// ceiling every tree can be compared with is then a B-tree everyone knows,
// not only our own dram-btree.
//
// Thread safety: absl::btree_map is not thread-safe, so one reader-writer
// lock (sync::SharedMutex) guards the whole map: lookups and scans share
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
// stats(): the absl tree's own height, leaf and internal node counts and
// bytes_used() (a walk over every node: not for hot paths).
#include <absl/container/btree_map.h>

#include <cstdint>
#include <memory>
#include <string>

#include "index/index.h"
#include "index/registry.h"
#include "sync/mutex.h"

namespace pmindex {
namespace {

// absl::btree_map with its tree's own statistics (height, node counts,
// bytes used), which the map keeps in its protected member tree_.
class Map : public absl::btree_map<Key, Value> {
 public:
  size_t tree_height() const { return this->tree_.height(); }
  size_t leaf_nodes() const { return this->tree_.leaf_nodes(); }
  size_t internal_nodes() const { return this->tree_.internal_nodes(); }
  size_t bytes_used() const { return this->tree_.bytes_used(); }
};

class AbslBTree final : public Index {
 public:
  Status insert(Key k, Value v) override {
    sync::WriterLock g(mu_);
    return map_.try_emplace(k, v).second ? Status::OK() : Status::AlreadyExists();
  }
  Status update(Key k, Value v) override {
    sync::WriterLock g(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return Status::NotFound();
    it->second = v;
    return Status::OK();
  }
  Status upsert(Key k, Value v) override {
    sync::WriterLock g(mu_);
    map_.insert_or_assign(k, v);
    return Status::OK();
  }
  std::optional<Value> lookup(Key k) override {
    sync::ReaderLock g(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  Status remove(Key k) override {
    sync::WriterLock g(mu_);
    return map_.erase(k) != 0 ? Status::OK() : Status::NotFound();
  }
  size_t scan(Key from, size_t n, KV* out) override {
    sync::ReaderLock g(mu_);
    size_t i = 0;
    for (auto it = map_.lower_bound(from); it != map_.end() && i < n; ++it) out[i++] = KV{it->first, it->second};
    return i;
  }

  Status bulk_load(std::span<const KV> sorted, double fill) override {
    if (!(fill > 0.0 && fill <= 1.0)) {
      return Status::InvalidArgument("bulk_load: fill " + std::to_string(fill) +
                                     " is outside (0, 1]");
    }
    sync::WriterLock g(mu_);
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
    sync::ReaderLock g(mu_);
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
    sync::ReaderLock g(mu_);
    IndexStats s;
    s.entries = map_.size();
    s.height = static_cast<uint32_t>(map_.tree_height());
    s.leaves = map_.leaf_nodes();
    s.inner_nodes = map_.internal_nodes();
    s.dram_bytes = map_.bytes_used();
    return s;
  }

 private:
  mutable sync::SharedMutex mu_;
  Map map_ PMINDEX_GUARDED_BY(mu_);
};

Result<std::unique_ptr<Index>> Create(const IndexEnv&, const Options&) {
  return std::unique_ptr<Index>(std::make_unique<AbslBTree>());
}

}  // namespace

PMINDEX_REGISTER_INDEX(absl_btree, {
                                       .name = "absl-btree",
                                       .persistent = false,
                                       .options_help = "",
                                       .validate = nullptr,
                                       .create = Create,
                                       .open = nullptr,
                                       .stores_data = true,
                                   });

}  // namespace pmindex
