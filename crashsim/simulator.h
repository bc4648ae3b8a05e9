// The crash simulator's driver (docs/crash-testing.md).
//
// Run() executes a workload on a fresh in-memory pool (poisoned) under a
// CrashTracer. At every crash point (before each fence, at the end of each
// operation) it enumerates crash images and checks each one in a forked
// child (so a recovery that crashes or hangs is reported, not fatal):
//   - the image opens as a pool at a new address and open_index recovers;
//   - verify() passes;
//   - every completed operation is visible, the in-flight one entirely or
//     not at all (update: old or new value), nothing never written is;
//   - the allocator's live blocks are exactly the reachable ones, disjoint;
//   - `further_ops` more random operations agree with the oracle, then
//     verify, contents, allocator again, and a clean close + reopen.
// Each failure carries a replay command for exactly that image.
//
// RunMutation() repeats the run with one flush/fence call site mutated at a
// time and reports which mutants the checks kill.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tracer.h"

namespace pmindex::crash {

struct Config {
  std::string index;
  std::string options;         // index options ("k=v,...")
  std::string workload = "mixed";
  uint64_t ops = 100;
  uint64_t seed = 1;
  Mode mode = Mode::kPrefix;
  uint64_t budget = 64;        // images per crash point at most
  uint64_t pool_mb = 4;        // pool size (also its maximum)
  int further_ops = 64;        // random operations after each recovery
  int timeout_s = 20;          // per image, in the child
  bool fork = true;            // false: check in process (debugging)
  uint64_t stop_after = 0;     // stop after this many failing images (0 = never)
  size_t keep_failures = 20;   // failures kept with details
  std::optional<std::pair<uint64_t, uint64_t>> replay;  // point, image
  Mutation mutation;
  bool verbose = false;
  // Read visibility (docs/crash-testing.md "Read visibility"): a concurrent
  // read at every crash point inside an operation (kOn); none (kOff); or
  // kStrict, which holds every subject to the strict guarantee (a value a
  // reader saw must survive any crash), to show what a kind allows.
  enum class Reads : uint8_t { kOn, kOff, kStrict };
  Reads reads = Reads::kOn;
};

struct Failure {
  uint64_t point = 0;  // 0 = the live run itself
  uint64_t image = 0;
  std::string where;    // "op #12 insert 5=7, before fence src/x.cc:40 (f)"
  std::string message;  // one line
  std::string replay;   // one command
};

struct RunStats {
  uint64_t ops = 0;
  uint64_t crash_points = 0;
  uint64_t checked_points = 0;  // crash points whose images were checked
  uint64_t sampled_points = 0;  // ... with a sampled (not exhaustive) image set
  // Mutant runs: crash points before the mutated site was first called,
  // not checked (their images are the baseline's).
  uint64_t unmutated_points = 0;
  uint64_t images = 0;
  uint64_t failing_images = 0;
  uint64_t max_lines_in_play = 0;
  // Read visibility (docs/crash-testing.md "Read visibility"): concurrent
  // reads made at crash points inside operations, those that waited for
  // the writer (no result), those that returned the operation's effect, and
  // images that lost a value a read had returned where the subject's
  // guarantee allows it (where it forbids it, each is a failure).
  uint64_t reads = 0;
  uint64_t reads_blocked = 0;
  uint64_t reads_saw = 0;
  uint64_t visible_lost = 0;
  double seconds = 0;
  std::string setup_error;  // the run could not start or the live run failed
  std::vector<Failure> failures;
  std::vector<std::string> bypasses;  // one line per line written outside the helpers
  std::map<std::string, SiteInfo> sites;  // "flush@file:line:col" -> info
  bool ok() const { return setup_error.empty() && failing_images == 0 && bypasses.empty(); }
  double images_per_s() const { return seconds > 0 ? images / seconds : 0; }
};

RunStats Run(const Config& cfg);
std::string ReplayCommand(const Config& cfg, uint64_t point, uint64_t image);

struct MutantResult {
  Mutation mutation;
  std::string site;     // SiteInfo::Pretty()
  bool killed = false;
  bool redundant = false;  // survived, explained by `reason`
  bool declared = false;   // ... by a pmcrash-redundant declaration at the site
  bool stale = false;      // killed although the site declares it redundant
  std::string reason;      // killer (first failure) or why it is redundant
};

struct MutationReport {
  RunStats baseline;
  std::vector<MutantResult> mutants;
  uint64_t killed = 0, redundant = 0, unexplained = 0;
  uint64_t stale = 0;  // killed mutants of sites declared redundant (counted in killed too)
  bool ok() const { return baseline.ok() && unexplained == 0 && stale == 0; }
};

// A survivor the simulator cannot decide by itself may be declared in the
// source, in the comment block directly above the flush/fence call:
//   // pmcrash-redundant: <reason, may go on over the next comment lines>
//   // pmcrash-redundant(drop-fence,flush-late): <reason>   (only those kinds)
// A surviving mutant of a declared site is then redundant ("declared:
// reason"); a killed one is a STALE declaration and fails the run.
struct RedundantDecl {
  uint32_t line = 0;          // of the declaration
  std::vector<MutKind> kinds;  // empty = every kind
  std::string reason;
};
std::optional<RedundantDecl> FindRedundantDecl(const SiteInfo& s);

// Sites eligible for mutation: index code (src/trees/, which holds the
// leaf-tree machinery and split log of the pm_leaf family, and src/common/,
// the pieces trees of different families share), the key-value
// store (src/kv/), fixtures (crashsim/fixtures/, tests/crash/), and
// src/alloc/ when `with_alloc`. `kv_only` (every workload a key-value store
// workload): src/kv/ only, and src/alloc/ when `with_alloc`.
bool MutableSite(const SiteInfo& s, bool with_alloc, bool kv_only = false);

// Runs every (seed, workload) pair of `seeds` x `workloads` (cfg.seed and
// cfg.workload when empty) unmodified, then each mutant of the sites they
// reached, pair after pair until one kills it. One seed's workload may miss
// the path a persist point protects (e.g. a split whose new key goes to the
// new leaf), so a survivor is judged over all of them. `progress` (may be
// null) gets one line per mutant.
MutationReport RunMutation(const Config& cfg, bool with_alloc, std::ostream* progress,
                           const std::vector<std::string>& workloads = {},
                           const std::vector<uint64_t>& seeds = {});

}  // namespace pmindex::crash
