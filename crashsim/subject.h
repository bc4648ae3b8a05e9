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
  // A concurrent read at this crash point or an earlier one of the same
  // operation returned the operation's effect (docs/crash-testing.md "Read
  // visibility"): an image that recovers the state before it lost a value
  // a reader saw.
  bool seen = false;
};

// A CheckImage result that is not a failure: the image lost a value a
// reader returned before the crash, which the subject's guarantee allows
// (counted by the session, RunStats::visible_lost).
inline constexpr std::string_view kVisibleLostAllowed = "visible-then-lost (allowed): ";

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

  // Read visibility (docs/crash-testing.md "Read visibility"). ReadInFlight
  // runs on the session's reader thread while the writer is stopped at a
  // crash point inside op i; it reads what op i changes, as a concurrent
  // reader would, and returns true iff the read returned op i's effect
  // (the new value, or the absence a remove makes). False for ops with
  // nothing to observe. Only reads (no PM write, no lock a writer waits on).
  virtual bool ReadInFlight(size_t i) {
    (void)i;
    return false;
  }
  // False when the subject's reads would write PM (then none is made).
  virtual bool MakesReads() const { return true; }
  // The stated guarantee: true iff a reader may return a value before its
  // write is durable (an image that loses a value a reader saw is then
  // counted, not failed).
  virtual bool ReadsMaySeeUndurable() const = 0;
  // Called by Run() once the operation has returned and before the subject
  // frees retired blocks: the session waits there for a reader that was
  // still waiting on the operation.
  std::function<void()> before_reclaim;
  // pmcrash --reads strict: every subject is held to the strict guarantee.
  bool strict_reads = false;
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
