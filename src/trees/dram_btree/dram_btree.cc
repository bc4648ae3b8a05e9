// dram-btree: the volatile concurrent B+-tree (OlcBTree) behind the Index
// interface. It is the upper bound every persistent tree is measured
// against. Layout and protocol: docs/layout/dram_btree.md.
#include <memory>
#include <string>

#include "common/olc_btree.h"
#include "index/index.h"
#include "index/registry.h"

namespace pmindex {
namespace {

template <int kNode>
class DramBTree final : public Index {
 public:
  Status insert(Key k, Value v) override {
    return tree_.insert(k, v) ? Status::OK() : Status::AlreadyExists();
  }
  Status update(Key k, Value v) override {
    return tree_.update(k, v) ? Status::OK() : Status::NotFound();
  }
  Status upsert(Key k, Value v) override {
    tree_.upsert(k, v);
    return Status::OK();
  }
  std::optional<Value> lookup(Key k) override { return tree_.lookup(k); }
  Status remove(Key k) override { return tree_.remove(k) ? Status::OK() : Status::NotFound(); }
  size_t scan(Key from, size_t n, KV* out) override { return tree_.scan(from, n, out); }

  Status bulk_load(std::span<const KV> sorted, double fill) override {
    if (!(fill > 0.0 && fill <= 1.0)) {
      return Status::InvalidArgument("bulk_load: fill " + std::to_string(fill) +
                                     " is outside (0, 1]");
    }
    if (tree_.size() != 0) return Status::InvalidArgument("bulk_load: the index is not empty");
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i - 1].key >= sorted[i].key) {
        return Status::InvalidArgument("bulk_load: keys not strictly ascending at position " +
                                       std::to_string(i));
      }
    }
    tree_.bulk_load(sorted, fill);
    return Status::OK();
  }

  Status verify() override { return tree_.verify(); }

  IndexStats stats() override {
    IndexStats s;
    s.entries = tree_.size();
    s.height = s.entries == 0 && tree_.height() == 1 ? 0 : tree_.height();
    s.inner_nodes = tree_.inner_nodes();
    s.leaves = tree_.leaves();
    s.dram_bytes = tree_.dram_bytes();
    return s;
  }

 private:
  OlcBTree<kNode, kNode> tree_;
};

// Keys per node. 14, 30 and 62 fill whole cache lines (256 B, 512 B,
// 1 KiB nodes: a 16-byte header, then the arrays). Default 62: on 10M keys
// its inner levels fit in the last-level cache where 512-byte nodes' do
// not, and lookups took 0.67x the time (docs/RESULTS.md).
Result<std::string> NodeOption(const Options& o) {
  return o.get_enum("node", "62", {"4", "14", "16", "30", "32", "62", "64", "128"});
}

Status Validate(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"node"}));
  return NodeOption(o).status();
}

Result<std::unique_ptr<Index>> Create(const IndexEnv&, const Options& o) {
  auto node = NodeOption(o);
  if (!node.ok()) return node.status();
  const std::string& n = node.value();
  std::unique_ptr<Index> idx;
  if (n == "4") {
    idx = std::make_unique<DramBTree<4>>();
  } else if (n == "14") {
    idx = std::make_unique<DramBTree<14>>();
  } else if (n == "16") {
    idx = std::make_unique<DramBTree<16>>();
  } else if (n == "30") {
    idx = std::make_unique<DramBTree<30>>();
  } else if (n == "32") {
    idx = std::make_unique<DramBTree<32>>();
  } else if (n == "64") {
    idx = std::make_unique<DramBTree<64>>();
  } else if (n == "128") {
    idx = std::make_unique<DramBTree<128>>();
  } else {
    idx = std::make_unique<DramBTree<62>>();
  }
  return idx;
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    dram_btree,
    {
        .name = "dram-btree",
        .persistent = false,
        .options_help =
            "node=4|14|16|30|32|62|64|128 (keys per inner node and per leaf; default 62; 14, 30 "
            "and 62 fill 256 B, 512 B and 1 KiB nodes)",
        .validate = Validate,
        .create = Create,
        .open = nullptr,
        .stores_data = true,
    });

}  // namespace pmindex
