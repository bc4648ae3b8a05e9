// Workloads: deterministic, seeded key generators and operation mixes,
// written once and shared by pmbench and the tests (pmcrash has its own,
// crashsim/crash_workload.h; docs/architecture.md section 7).
//
// Model
// -----
// Keys are named by a 64-bit *rank*. A KeySpace maps ranks to keys with a
// bijection, so distinct ranks are distinct keys without any dedup pass:
//   random: key = Permute(rank ^ seed-derived mask), a keyed invertible
//           64-bit mixer (every uint64_t, 0 and UINT64_MAX included, can
//           occur);
//   dense:  key = rank + 1 (1..N are loaded, N+1.. are inserted in order).
// Ranks [0, N) are bulk loaded; inserts take ranks >= N that were never
// used, so an insert never hits a present key. Deletes take present keys
// that no other operation of the phase reads.
//
// A State is the set of present ranks after the bulk load and each phase
// (an ordered list of strided rank ranges, the oldest first). It is a value:
// copy InitialState() for every index and repeat, then Plan() + run +
// Commit() each phase, and every run sees exactly the same operations.
//
// Within a phase every thread has its own OpStream with its own seed
// (seed, phase number, thread number) and its own, disjoint, insert and
// delete reservations, so streams are independent of thread timing.
//
// Operation mixes are integer weights per operation type. Each thread
// draws types in blocks of W = sum of weights operations: every block holds
// exactly weight[i] operations of type i, shuffled. So an N-op phase has
// exactly the requested proportions (to within one block) and the delete
// and insert reservations are exact.
//
// Distributions choose which present key an operation reads (lookup,
// update, read-modify-write, scan start):
//   uniform        every present key equally likely
//   zipf:THETA     YCSB's scrambled zipfian: a zipfian rank z in [0, n)
//                  (Gray et al.'s method, 0 < THETA < 1), then
//                  FNV-1a(z) mod n, so hot keys are spread over the space
//   latest         zipfian over recency: the most recently inserted key is
//                  the most popular (this thread's own inserts of the
//                  running phase first, then the present keys newest first)
//   sequential     ascending key order over the present keys, wrapping;
//                  thread t starts at t*n/T
//   hotspot:F[:P]  a hot set of the first F*n present keys receives a
//                  fraction P of the operations (default P = 0.95), the
//                  other keys share the rest uniformly (random key space:
//                  the hot keys are scattered over the key space)
//   hotrange:F[:P[:S]]
//                  like hotspot, but the hot set is F*n present keys that
//                  are contiguous in KEY order (a key range, as leaves of a
//                  B+-tree see it), starting at the key-order position S*n
//                  (0 <= S <= 1, default 0; clamped so the range fits).
//                  Unlike the others it also places inserts: a share P of
//                  them get fresh keys inside the hot key range, the rest
//                  outside it (random key space, op-count mode only)
//   threadrange[:P[:K]]
//                  every thread has its own hot key range: the present
//                  keys in key order are cut into T slices (T threads of
//                  the phase) and thread t reads slice (t + K) mod T with
//                  probability P (default 0.95, K default 0), any present
//                  key otherwise. Paper 003's threads with distinct
//                  localities; a later phase with another K is the
//                  access-pattern shift that makes nodes migrate
//                  ("lookup:1000000@threadrange,lookup:1000000@threadrange:0.95:1")
// A phase may override the run's distribution: "update:1000@hotrange:0.05"
// (see ParseWorkload), e.g. to move a hot range between phases.
//
// Keys from files (pmbench --keys-file / --op-keys, to feed an index and
// another program identical keys): WorkloadConfig::key_file replaces the
// first `keys` ranks by the file's keys (the KeySpace's table: the sorted,
// distinct file keys in a seeded order, so rank order stays a scrambled key
// order); ranks beyond still map to the random key space (generated inserts).
// A single-type phase (lookup, insert, ...) with PhaseSpec::op_keys takes
// its keys in file order from op_keys[op_keys_begin, +ops) instead of the
// generator; its deletes leave the present set, its inserts are not added
// to it (no generated phase reads them).
// Inserts and deletes do not follow the distribution (except hotrange for
// inserts): they need fresh and present keys respectively (inserts ascend
// in rank; with the random key space that is random key order, with the
// dense one ascending key order).
//
// Thread safety: Workload is immutable after Make() and may be shared;
// State and PhasePlan are plain values; each OpStream belongs to one thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "index/index.h"
#include "pmindex/status.h"

namespace pmindex::workload {

// ----------------------------------------------------------------- random
// SplitMix64 finalizer: a bijection on uint64_t.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
// The inverse of Mix64.
uint64_t UnMix64(uint64_t x);

// RankList minus the ranks in `sorted_ranks` (ascending, distinct), order
// kept. Declared below.
class RankList;
RankList RemoveRanks(const RankList& list, const std::vector<uint64_t>& sorted_ranks);

// FNV-1a over the 8 little-endian bytes of v.
uint64_t Fnv1a64(uint64_t v);

// A small, fast, seedable generator (SplitMix64 sequence).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() { return Mix64(s_ += 0x9e3779b97f4a7c15ull); }
  // Uniform in [0, n). REQUIRES n > 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

// Derives independent seeds: (seed, a, b) -> seed'.
uint64_t DeriveSeed(uint64_t seed, uint64_t a, uint64_t b = 0);

// --------------------------------------------------------------- zipfian
// Zipfian ranks in [0, n) with P(i) proportional to 1/(i+1)^theta, by Gray
// et al. ("Quickly generating billion-record synthetic databases"), the
// method YCSB uses. zeta(n) is computed exactly for the first 10^6 terms
// and by Euler-Maclaurin beyond (relative error < 1e-12), and cached.
class Zipf {
 public:
  // REQUIRES: n >= 1, 0 < theta < 1.
  Zipf(uint64_t n, double theta);
  uint64_t Next(Rng& rng) const;
  // Extends the range to [0, n2), n2 >= n, in O(n2 - n) (cheap when growing
  // one at a time, as "latest" does).
  void Grow(uint64_t n2);
  uint64_t n() const { return n_; }
  static double Zeta(uint64_t n, double theta);

 private:
  void Derive();
  uint64_t n_;
  double theta_, zetan_, zeta2_, alpha_, eta_, half_pow_theta_;
};

// ----------------------------------------------------------------- specs
enum class OpType : uint8_t { kInsert, kLookup, kUpdate, kDelete, kScan, kReadModifyWrite };
inline constexpr size_t kOpTypes = 6;
const char* OpTypeName(OpType t);

struct Distribution {
  enum class Kind : uint8_t { kUniform, kZipf, kLatest, kSequential, kHotspot, kHotRange, kThreadRange };
  Kind kind = Kind::kUniform;
  double theta = 0.99;        // zipf, latest
  double hot_fraction = 0.2;  // hotspot/hotrange: share of keys that are hot
  double hot_ops = 0.95;      // hotspot/hotrange: share of operations on hot keys
  double hot_start = 0;       // hotrange: key-order position of the range, share of n
  uint32_t shift = 0;         // threadrange: thread t reads slice (t + shift) % T
  std::string ToString() const;
};
// "uniform" | "zipf" | "zipf:0.99" | "latest" | "sequential" |
// "hotspot:F" | "hotspot:F:P" | "hotrange:F[:P[:S]]" | "threadrange[:P[:K]]". InvalidArgument
// naming the bad part.
Result<Distribution> ParseDistribution(std::string_view text);

struct Mix {
  std::string name;                        // "lookup", "ycsb-a", "mix:insert=50,lookup=50"
  std::array<uint32_t, kOpTypes> weight{};  // per OpType
  bool dense_insert = false;               // inserts are dense and monotonic across threads
  bool force_latest = false;               // YCSB-D: reads use "latest" whatever --dist says
  uint32_t total() const;
  bool has(OpType t) const { return weight[static_cast<size_t>(t)] != 0; }
  bool reads() const;  // any lookup/update/scan/rmw
};
// insert | lookup | update | delete | scan | rmw | dense-insert |
// ycsb-a .. ycsb-f | mix:TYPE=W,TYPE=W,... (TYPE one of insert, lookup,
// update, delete, scan, rmw; W a non-negative integer, not all zero).
Result<Mix> ParseMix(std::string_view text);

struct PhaseSpec {
  Mix mix;
  uint64_t ops = 0;  // 0 = the run's default (--ops)
  std::optional<Distribution> dist;  // set: overrides the run's distribution
  // Set (single-type phases only): the phase's keys are
  // (*op_keys)[op_keys_begin, op_keys_begin + ops), in this order, split
  // into contiguous slices over the threads. REQUIRES an op count.
  std::shared_ptr<const std::vector<Key>> op_keys;
  uint64_t op_keys_begin = 0;
  // The only op type of a single-type mix, else nullopt.
  std::optional<OpType> single_type() const;
};
// A comma-separated sequence of phases, each MIX, MIX:OPS, MIX@DIST or
// MIX:OPS@DIST ("insert:1000000,lookup:500000",
// "update:200000@hotrange:0.05:1:0.5"). A mix phase takes the TYPE=W items
// after it, and :OPS (then @DIST) after its last weight:
// "insert:1000,mix:insert=50,lookup=50:2000,scan". @DIST is any --dist
// value; it replaces the run's distribution for that phase only.
Result<std::vector<PhaseSpec>> ParseWorkload(std::string_view text);

enum class KeyKind : uint8_t { kRandom, kDense };

// ------------------------------------------------------------- key space
class KeySpace {
 public:
  // `table` (optional, random kind only): distinct keys; ranks
  // [0, table->size()) map to them (in a seeded order: an affine permutation of the sorted keys),
  // ranks beyond to the random key space.
  KeySpace(KeyKind kind, uint64_t seed, std::shared_ptr<const std::vector<Key>> table = nullptr);
  Key key(uint64_t rank) const {
    if (rank < table_n_) return by_rank_[rank];
    return kind_ == KeyKind::kDense ? rank + 1 : Mix64(rank ^ mask_) ^ mask2_;
  }
  // The inverse of key(). With a table, a key of the table gives its rank
  // (binary search); any other key gives its random-space rank.
  uint64_t rank(Key k) const;
  // True if `k` is a table key (its rank is below table_size()).
  bool in_table(Key k) const;
  KeyKind kind() const { return kind_; }
  uint64_t table_size() const { return table_n_; }

 private:
  KeyKind kind_;
  uint64_t mask_, mask2_;
  uint64_t table_n_ = 0;
  std::vector<Key> sorted_;   // the table's keys, ascending
  std::vector<Key> by_rank_;  // by_rank_[r] = sorted_[(a_ * r + b_) mod n]
  uint64_t a_ = 1, a_inv_ = 1, b_ = 0;
};

// The value stored with a key by inserts and the bulk load; updates store
// ValueFor(key) + n for some n >= 1.
inline Value ValueFor(Key k) { return Mix64(k ^ 0x5851f42d4c957f2dull); }

// Ranks start, start+stride, ..., start+(count-1)*stride.
struct RankRange {
  uint64_t start = 0, count = 0, stride = 1;
  uint64_t at(uint64_t i) const { return start + i * stride; }
};

// An ordered multiset of rank ranges (oldest first); position i is the
// i-th rank in concatenation order.
class RankList {
 public:
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint64_t at(uint64_t pos) const;  // REQUIRES pos < size()
  void Append(RankRange r);
  void Append(const RankList& other);
  // Positions [pos, pos+count) as a new list.
  RankList Slice(uint64_t pos, uint64_t count) const;
  const std::vector<RankRange>& ranges() const { return ranges_; }

 private:
  std::vector<RankRange> ranges_;
  std::vector<uint64_t> ends_;  // prefix sums of counts
  uint64_t size_ = 0;
};

// What is present in the index: present ranks plus the next unused rank.
struct State {
  RankList present;
  uint64_t next_rank = 0;
  uint64_t inserted = 0, deleted = 0;  // totals over the committed phases
};

// ----------------------------------------------------------------- ops
struct Op {
  OpType type = OpType::kLookup;
  Key key = 0;
  Value value = 0;        // insert, update, rmw
  uint32_t scan_len = 0;  // scan
  // lookup/update/rmw/scan: the key is present (reads must find it; a scan
  // must start with it); insert: the key is absent; delete: present.
  bool expect_present = true;
};

struct WorkloadConfig {
  uint64_t keys = 1000000;  // bulk-loaded keys (may be 0)
  // Set: the bulk-loaded keys are these (distinct; `keys` must equal the
  // size; key_kind must be kRandom). See "Keys from files" above.
  std::shared_ptr<const std::vector<Key>> key_file;
  KeyKind key_kind = KeyKind::kRandom;
  Distribution dist;
  std::vector<PhaseSpec> phases;
  uint64_t default_ops = 1000000;
  uint32_t scan_len = 100;
  uint64_t seed = 1;
};

class OpStream;

// One phase prepared for T threads: reservations and shared read-only
// tables. Produced by Workload::Plan, consumed by OpStream and Commit.
struct PhasePlan {
  size_t phase_no = 0;  // from 1
  unsigned threads = 1;
  bool time_mode = false;
  Mix mix;
  Distribution dist;
  std::vector<uint64_t> thread_ops;  // op budget per thread (time mode: UINT64_MAX)
  RankList readable;                 // present ranks reads may choose
  std::vector<RankList> deletes;     // per thread: ranks to delete, in order
  std::vector<RankRange> inserts;    // per thread: fresh ranks, in order (count = inserts)
  // hotrange inserts: per thread, the fresh ranks to insert, in order
  // (replacing the ranks of `inserts`); empty otherwise.
  std::vector<std::vector<uint64_t>> insert_ranks;
  uint64_t next_rank_after = 0;
  std::shared_ptr<const std::vector<Key>> sorted_readable;  // sequential, hotrange, threadrange
  uint64_t hot_first = 0, hot_count = 0;  // hotrange: positions in sorted_readable
  std::shared_ptr<const Zipf> zipf;                         // zipf / latest over readable
  uint64_t seed = 0;
  // An op-key-file phase: every op is `file_type` on (*file_keys)[file_begin[t] + i].
  std::shared_ptr<const std::vector<Key>> file_keys;
  OpType file_type = OpType::kLookup;
  std::vector<uint64_t> file_begin;  // per thread
};

class Workload {
 public:
  // Validates the config (InvalidArgument with one line otherwise).
  static Result<std::shared_ptr<const Workload>> Make(WorkloadConfig cfg);

  const WorkloadConfig& config() const { return cfg_; }
  const KeySpace& keyspace() const { return ks_; }

  // The bulk-load pairs: N keys, strictly ascending, values ValueFor(key).
  std::vector<KV> LoadPairs() const;
  State InitialState() const;

  // Prepares phase `phase_no` (from 1) on `state` for `threads` threads.
  // Op-count mode: the phase's op count split over threads. Time mode: each
  // thread runs until the caller stops asking (or its delete reservation
  // runs out). InvalidArgument when the present keys cannot serve the phase
  // (e.g. more deletes than present keys, or reads with no present key).
  Result<PhasePlan> Plan(const State& state, size_t phase_no, unsigned threads,
                         bool time_mode) const;

  // Applies what the streams did (inserts done, deletes done) to `state`.
  // REQUIRES: every op a stream returned was executed.
  void Commit(State* state, const PhasePlan& plan,
              const std::vector<const OpStream*>& streams) const;

 private:
  explicit Workload(WorkloadConfig cfg);
  Status PlanHotInserts(const State& state, PhasePlan* plan) const;
  WorkloadConfig cfg_;
  KeySpace ks_;
};

// The operations of one thread in one phase. Not thread-safe; one per thread.
class OpStream {
 public:
  OpStream(std::shared_ptr<const Workload> w, const PhasePlan& plan, unsigned thread);
  // Fills *op; false when the thread's budget (or delete reservation) is
  // exhausted.
  bool Next(Op* op);
  // Up to n next ops into out (as Next would give them); returns how many
  // (0 = the stream is done).
  size_t Fill(Op* out, size_t n) {
    size_t k = 0;
    while (k < n && Next(&out[k])) ++k;
    return k;
  }
  uint64_t done() const { return done_; }
  uint64_t inserts_done() const { return inserts_done_; }
  uint64_t deletes_done() const { return deletes_done_; }

 private:
  uint64_t PickReadRank();
  uint64_t PickHotRangePos();  // hotrange: a position in plan_->sorted_readable
  uint64_t PickThreadRangePos();  // threadrange: a position in plan_->sorted_readable
  void RefillBlock();

  std::shared_ptr<const Workload> w_;
  const PhasePlan* plan_;
  unsigned thread_;
  Rng rng_;
  uint64_t budget_, done_ = 0;
  std::vector<OpType> block_;
  size_t block_pos_ = 0;
  uint64_t inserts_done_ = 0, deletes_done_ = 0, updates_ = 0;
  uint64_t seq_pos_ = 0;
  std::unique_ptr<Zipf> latest_;  // latest: grows with own inserts
  uint64_t latest_base_ = 0;      // readable.size() at start
};

// Convenience for tests and the crash simulator: a single-threaded phase
// sequence, all ops in one vector (no bulk load unless cfg.keys > 0; the
// loaded pairs are LoadPairs()).
Result<std::vector<Op>> GenerateOps(const WorkloadConfig& cfg);

}  // namespace pmindex::workload
