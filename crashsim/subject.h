// What a crash-simulation run drives (docs/crash-testing.md): the
// simulator's session (simulator.cc) owns the pool, the tracer, the crash
// points, the images and the forked checks; a Subject owns the workload,
// the thing under test (an index, or the key-value store over one) and its
// oracle, and checks one recovered crash image.
//
//   IndexSubject (simulator.cc)  the index workloads (mixed, insert, ...)
//   KvSubject    (kv_subject.cc) the store workloads (kv, kv-tx)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "alloc/allocator.h"
#include "pm/pool.h"
#include "pmindex/status.h"
#include "simulator.h"

namespace pmindex::crash {

// What a crash image must recover to, beside the subject's own models
// (its state before and after the operation in flight, both current while
// the images of that operation are checked).
struct Expect {
  size_t op = 0;             // the operation in flight (or just returned)
  bool after_only = false;   // the operation had returned
  bool create_mid = false;   // crash inside the create: opening may fail cleanly
};

class Subject {
 public:
  enum class OpClass { kCreate, kReopen, kOther };

  virtual ~Subject() = default;

  // Builds the workload of cfg (deterministic in its name, ops and seed).
  virtual Status Prepare(const Config& cfg) = 0;
  virtual size_t ops() const = 0;
  virtual OpClass ClassOf(size_t i) const = 0;
  virtual std::string Describe(size_t i) const = 0;
  // The options of the pool the run creates (kind, index options, sizes
  // and poison are the session's; a subject may add flags).
  virtual void AdjustPool(PoolOptions* po) const { (void)po; }

  // The live run. BeginOp(i) computes the model after op i from the one
  // before; then the session runs it (Create, Reopen or Run); EndOp makes
  // the model after it current and says whether it changed.
  virtual void BeginOp(size_t i) = 0;
  virtual Status Create(Pool* pool) = 0;
  virtual Status Reopen(Pool* pool) = 0;
  // Runs op i: "" or why its result disagrees with the oracle.
  virtual std::string Run(size_t i) = 0;
  virtual bool EndOp() = 0;
  // Destroys the live index or store (before its pool goes).
  virtual void Drop() = 0;
  virtual Status Verify() = 0;
  virtual alloc::Allocator* allocator() = 0;
  // Every block reachable from the roots, for leak checks and messages.
  virtual Status ForEachBlock(const std::function<void(PPtr)>& fn) = 0;

  // Recovers the crash image in `pool` and checks it (docs/crash-testing.md
  // "Checks on each image"): "" or the first failure. `seed` seeds the
  // further operations.
  virtual std::string CheckImage(Pool& pool, const Expect& e, uint64_t seed) = 0;
};

std::unique_ptr<Subject> MakeIndexSubject();
std::unique_ptr<Subject> MakeKvSubject();
// True for the workloads of the key-value store (KvSubject).
bool IsKvWorkload(std::string_view name);

// Allocator checks of a recovered image: every reachable block (fn walks
// them) is live, live blocks are disjoint, and (if `leaks`) every live
// block is reachable. Retired blocks are reclaimed first (no other thread
// runs). "" or what is wrong.
std::string CheckBlocks(alloc::Allocator& a, const std::function<Status(const std::function<void(PPtr)>&)>& walk,
                        bool leaks);

std::string Hex(uint64_t v);

}  // namespace pmindex::crash
