// The reading half of `pmpool salvage` (docs/pool-format.md "pmpool"):
// every entry the index of a damaged pool still reaches, read without
// writing the pool. The tool writes what this returns into a new pool; the
// pool fuzzer (tests/fuzz) runs it on every mutant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "alloc/allocator.h"
#include "pmindex/status.h"
#include "pmindex/types.h"

namespace pmindex {

struct SalvageRead {
  std::string kind, index_options;
  bool clean = false;          // the pool's clean flag
  std::vector<KV> entries;     // strictly ascending keys
  uint64_t repeated = 0;       // keys scanned more than once (the first value kept)
  uint64_t index_entries = 0;  // what the index's stats() counted
  uint64_t cut_subtrees = 0;   // subtrees the kind's salvage open cut off (its stats)
  // The entry count the last clean close recorded (root slot 7, kinds that
  // keep it), 0 if none.
  uint64_t recorded = 0;
  // A clean pool's content record (root slot 6) disagrees with the sum over
  // the entries read: a key or a value changed, or entries are missing.
  bool content_differs = false;
  // A crashed lbtree, fptree or wbtree pool: the leaf floor (root slot 7's
  // node count, docs/layout/lbtree.md) and the leaves the copy holds; fewer
  // leaves than the floor means a part of the list was cut off.
  uint64_t leaf_floor = 0;
  uint64_t leaves = 0;
  // The walk stopped before its end: a scan went backwards, or it reached
  // more entries than the heap can hold (`scan_cut` says which).
  std::string scan_cut;
  alloc::RecoveryReport report;  // what recovery gave back, counted
  Status verify;                 // the recovered copy's verify()
  // Whether anything tells the user that entries may be missing or
  // changed: a recorded count above the entries, a content record that
  // disagrees, leaves below the floor, a cut subtree or walk, a failed
  // verify, unreachable units, or repeats.
  bool ReportsLoss() const;
};

// Maps the pool at `path` (and its segment files) read-only under a shared
// flock, copies it into memory, opens and recovers the index on the copy
// without the recovery bound (ReclaimBound::kNone), and scans every entry.
// Never writes a file. Bounded by construction: the scan goes on only
// while its position strictly increases and stops once it holds more
// entries than the heap could store (16 bytes each). Errors: what Inspect,
// the mapping, the image copy or the index's open refused, with a message;
// `image_opened` (may be null) tells whether the copy opened as a pool (so
// that the error came from the index's open).
Result<SalvageRead> ReadForSalvage(const std::string& path, bool* image_opened = nullptr);

}  // namespace pmindex
