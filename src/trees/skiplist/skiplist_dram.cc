// skiplist-dram: paper 000's dram-skiplist (section 4.3, Fig. 9), the
// volatile reference of the two persistent skip lists: every level in
// DRAM, the value in the tower. One reader-writer lock, as absl-btree
// (skiplist_common.h).
#include <memory>
#include <string>

#include "index/index.h"
#include "index/registry.h"
#include "sync/mutex.h"
#include "trees/skiplist/skiplist_common.h"

namespace pmindex::skiplist {
namespace {

constexpr std::string_view kKind = "skiplist-dram";
constexpr uint64_t kHeightSeed = 0x9e3779b97f4a7c15;

class DramSkipList final : public Index {
 public:
  explicit DramSkipList(const Params& p) : list_(p.levels), heights_(p, kHeightSeed) {}

  Status insert(Key k, Value v) override { return Write(Op::kInsert, k, v); }
  Status update(Key k, Value v) override { return Write(Op::kUpdate, k, v); }
  Status upsert(Key k, Value v) override { return Write(Op::kUpsert, k, v); }

  Status remove(Key k) override {
    sync::WriterLock g(mu_);
    Tower* preds[kMaxLevels];
    list_.FloorBelow(k, preds);
    Tower* t = preds[0]->next()[0];
    if (t == nullptr || t->key != k) return Status::NotFound();
    list_.Remove(preds, t);
    return Status::OK();
  }

  std::optional<Value> lookup(Key k) override {
    sync::ReaderLock g(mu_);
    const Tower* t = list_.FloorBelow(k, nullptr)->next()[0];
    if (t == nullptr || t->key != k) return std::nullopt;
    return t->payload;
  }

  size_t scan(Key from, size_t n, KV* out) override {
    sync::ReaderLock g(mu_);
    size_t got = 0;
    for (const Tower* t = list_.FloorBelow(from, nullptr)->next()[0]; t != nullptr && got < n;
         t = t->next()[0])
      out[got++] = KV{t->key, t->payload};
    return got;
  }

  Status bulk_load(std::span<const KV> sorted, double fill) override {
    sync::WriterLock g(mu_);
    if (list_.towers() != 0)
      return Status::InvalidArgument("skiplist-dram: bulk_load needs an empty index");
    PMINDEX_RETURN_IF_ERROR(CheckBulkInput(kKind, sorted, fill));
    TowerList::Appender app(list_);
    for (const KV& kv : sorted) app.Append(kv.key, kv.value, heights_.Next());
    return Status::OK();
  }

  Status verify() override {
    sync::ReaderLock g(mu_);
    return list_.Verify(kKind, [](const Tower*) { return Status::OK(); });
  }

  IndexStats stats() override {
    sync::ReaderLock g(mu_);
    IndexStats s;
    s.entries = list_.towers();
    s.height = list_.used_levels();
    s.leaves = list_.towers();
    s.dram_bytes = list_.dram_bytes();
    // What a search reads, on average over a fixed sample of random keys.
    uint64_t visits = 0;
    for (int i = 0; i < kSearchSamples; ++i) list_.FloorBelow<true>(SampleKey(i), nullptr, &visits);
    s.extra.emplace_back("search_dram_nodes", static_cast<double>(visits) / kSearchSamples);
    s.extra.emplace_back("search_pm_nodes", 0.0);
    return s;
  }

 private:
  using Tower = TowerList::Tower;
  enum class Op : uint8_t { kInsert, kUpdate, kUpsert };

  Status Write(Op op, Key k, Value v) {
    sync::WriterLock g(mu_);
    Tower* preds[kMaxLevels];
    list_.FloorBelow(k, preds);
    Tower* t = preds[0]->next()[0];
    if (t != nullptr && t->key == k) {
      if (op == Op::kInsert) return Status::AlreadyExists();
      t->payload = v;
      return Status::OK();
    }
    if (op == Op::kUpdate) return Status::NotFound();
    list_.Insert(preds, k, v, heights_.Next());
    return Status::OK();
  }

  // Readers share mu_, writers hold it alone.
  mutable sync::SharedMutex mu_;
  TowerList list_ PMINDEX_GUARDED_BY(mu_);
  HeightGen heights_ PMINDEX_GUARDED_BY(mu_);
};

}  // namespace

PMINDEX_REGISTER_INDEX(
    skiplist_dram,
    {
        .name = "skiplist-dram",
        .persistent = false,
        .options_help = std::string(kOptionsHelp),
        .validate = [](const Options& o) -> Status { return ParseParams(o).status(); },
        .create = [](const IndexEnv&, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return std::unique_ptr<Index>(std::make_unique<DramSkipList>(p.value()));
        },
        .open = nullptr,
        .stores_data = true,
    });

}  // namespace pmindex::skiplist
