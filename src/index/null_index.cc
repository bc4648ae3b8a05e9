// The `null` index: every operation does nothing. It measures the cost of
// the benchmark harness itself (key generation, timing, dispatch).
#include "index/index.h"
#include "index/registry.h"

namespace pmindex {
namespace {

class NullIndex final : public Index {
 public:
  Status insert(Key, Value) override { return Status::OK(); }
  Status update(Key, Value) override { return Status::OK(); }
  Status upsert(Key, Value) override { return Status::OK(); }
  std::optional<Value> lookup(Key) override { return std::nullopt; }
  Status remove(Key) override { return Status::OK(); }
  size_t scan(Key, size_t, KV*) override { return 0; }
  Status bulk_load(std::span<const KV>, double) override { return Status::OK(); }
  Status verify() override { return Status::OK(); }
  IndexStats stats() override { return IndexStats{}; }
};

}  // namespace

PMINDEX_REGISTER_INDEX(null_index,
                       {
                           .name = "null",
                           .persistent = false,
                           .options_help = "(no options) does nothing; measures the harness",
                           .validate = nullptr,
                           .create = [](const IndexEnv&,
                                        const Options&) -> Result<std::unique_ptr<Index>> {
                             return std::unique_ptr<Index>(new NullIndex());
                           },
                           .open = nullptr,
                           .stores_data = false,
                       });

}  // namespace pmindex
