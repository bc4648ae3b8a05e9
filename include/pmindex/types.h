// Value types shared by the public API (pmindex/db.h) and the index
// interface inside the library (src/index/index.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pmindex {

using Key = uint64_t;
using Value = uint64_t;

struct KV {
  Key key = 0;
  Value value = 0;
  friend bool operator==(const KV&, const KV&) = default;
};

namespace detail {
// The one index call that Db::Get and Db::Exists (pmindex/db.h) make,
// declared here so that they can be inline: a lookup through the handle
// then costs what a lookup through the index costs. The index interface
// inside the library (src/index/index.h) derives from it; it is not part
// of the user API.
class PointLookup {
 public:
  // The value of k, or nullopt.
  virtual std::optional<Value> lookup(Key k) = 0;

 protected:
  ~PointLookup() = default;
};
}  // namespace detail

struct IndexStats {
  uint32_t height = 0;       // levels, leaves included (0 = empty)
  uint64_t entries = 0;
  uint64_t inner_nodes = 0;
  uint64_t leaves = 0;
  uint64_t pm_bytes = 0;     // bytes of PM blocks the index holds
  uint64_t dram_bytes = 0;   // bytes of DRAM structures
  // Optional counters of the index's own (e.g. nvtree: rebuilds,
  // rebuild_s, splits), as (name, value) pairs. Each is a running total
  // since the index object was created or opened, so a benchmark reports a
  // phase as the difference of two calls.
  std::vector<std::pair<std::string, double>> extra;
};

}  // namespace pmindex
