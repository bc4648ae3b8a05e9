// The operations pmcrash runs under the tracer (a small generator of its
// own: the shared workloads/ library targets throughput, these target
// persistence paths: splits, deletes, updates, bulk load, recovery).
//
// A workload is a deterministic function of (name, ops, seed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "index/index.h"
#include "pmindex/status.h"

namespace pmindex::crash {

enum class OpType : uint8_t {
  kCreate,    // create_index on the fresh pool (always op 0)
  kInsert,
  kUpdate,
  kUpsert,
  kRemove,
  kLookup,
  kBulkLoad,  // into the empty index
  kReopen,    // the machine restarts: reopen (recover) the persisted image
};

struct Op {
  OpType type = OpType::kInsert;
  Key key = 0;
  Value value = 0;
  std::vector<KV> bulk;  // kBulkLoad
  double fill = 0.7;     // kBulkLoad
};

// "insert k=v", "bulk_load 100 pairs", ...
std::string Describe(const Op& op);

// The workload names MakeWorkload accepts, with a one-line description.
const std::vector<std::pair<std::string, std::string>>& WorkloadNames();

// Op 0 is kCreate. InvalidArgument for an unknown name.
Result<std::vector<Op>> MakeWorkload(std::string_view name, uint64_t ops, uint64_t seed);

// A 64-bit mix (splitmix64), used for values and derived seeds.
uint64_t Mix64(uint64_t x);

}  // namespace pmindex::crash
