// The pair visitor of a recovering open: how a layer above an
// index (the key-value store, src/kv) learns every live (key, value) pair
// while the index's open validates them, so that it can report the blocks
// its values point to as reachable before the allocator's recovery frees
// everything unreported.
//
// Contract with the index kinds (every persistent kind keeps it; see
// common::ContentSum, which carries the visitor, and docs/architecture.md
// section 5):
//   - Visit is called at least once for every pair the index will hold
//     once its recovery's repairs are done, and for no other pair, on the
//     clean and the crashed path alike (not for salvage copies, which a
//     visitor never opens);
//   - every call happens before the kind's open calls
//     Allocator::CheckRecoveryBound() and before its first write, so that
//     the blocks the visitor marks count as reachable in the bound and a
//     refusal still changes no byte;
//   - calls may come from several threads at once (lbtree's parallel
//     recovery walk) and a pair may be visited more than once, but on the
//     clean path (a cleanly closed pool) exactly once: the key-value
//     store's content record sums over the visits, as every kind's own
//     content record sums over the pairs it validates
//     (tests/index/pair_visitor_test.cc checks it per kind);
//   - the kind's open returns status() before its first write (through
//     common::CheckContentRecord; the PM-leaf trees after their own visit
//     of the leaves they keep).
#pragma once

#include "pm/pool.h"
#include "pmindex/status.h"
#include "pmindex/types.h"

namespace pmindex {

namespace alloc {
class Allocator;
}

class PairVisitor {
 public:
  virtual ~PairVisitor() = default;
  // Called by open_index once the allocator is attached (in recovery) and
  // before the kind's open: the allocator the visits mark blocks in.
  virtual void Start(Pool* pool, alloc::Allocator* alloc) = 0;
  // One live pair. Thread-safe. Reads the pool only; a value it cannot
  // validate is recorded (status()) and never dereferenced.
  virtual void Visit(Key key, Value value) = 0;
  // The first error a visit found; OK if none.
  virtual Status status() const = 0;
};

}  // namespace pmindex
