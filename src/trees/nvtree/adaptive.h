// NV-Tree workload adaptivity (journal paper, section 5): the choice of the
// size of the two LNs a split creates (Algorithm 3), bounded by the
// analytical model (equations 1-4) with Tr/Tw measured on this machine.
//
// Pure functions of the counters, so unit tests drive them directly.
#pragma once

#include <cstdint>
#include <string_view>

namespace pmindex::nvtree {

enum class Strategy : uint8_t { kOff, kConservative, kAggressive, kBalanced };
const char* StrategyName(Strategy s);
bool ParseStrategy(std::string_view s, Strategy* out);

// Statistics of Table 2: global counts and the counts of the LN that splits.
struct LnStats {
  uint64_t reads = 0;          // nReads_LN[id]
  uint64_t writes = 0;         // nWrites_LN[id] (elements appended)
  uint64_t total_reads = 0;    // nReads
  uint64_t total_writes = 0;   // nWrites
  uint64_t leaves = 1;         // N_LN
};

// Tr(size): ns to search an LN of `size` bytes; Tw(size): ns to write and
// flush `size` bytes. Measured once per process (Measured(): the fastest of
// a few trials per size, made non-decreasing in size) and linearly
// interpolated between the measured sizes.
class CostModel {
 public:
  // The model measured on this machine (first call measures, a few ms). When
  // a PM tracer is installed (crash simulator) nothing is measured and the
  // fixed model is returned, so no flush outside a pool is traced.
  static const CostModel& Measured();
  // Fixed, machine-independent costs (tests).
  static CostModel Fixed(double read_ns_per_line, double write_ns_per_line);

  double Tr(uint32_t bytes) const;
  double Tw(uint32_t bytes) const;

  // Equations 1-2: enlarging from old to new pays off.
  bool EnlargeOk(uint32_t old_bytes, uint32_t new_bytes, const LnStats& s) const;
  // Equations 3-4: shrinking from old to new pays off.
  bool ShrinkOk(uint32_t old_bytes, uint32_t new_bytes, const LnStats& s) const;

 private:
  static constexpr int kPoints = 6;
  uint32_t size_[kPoints] = {};
  double tr_[kPoints] = {};
  double tw_[kPoints] = {};
  static double Interp(const uint32_t* xs, const double* ys, uint32_t x);
};

// Algorithm 3 with the model's limits. Returns the size in bytes (a
// multiple of 64 within [min_bytes, max_bytes]) of each of the two LNs
// that replace an LN of `cur_bytes`. kOff returns cur_bytes.
uint32_t NewLeafSize(Strategy st, uint32_t cur_bytes, const LnStats& s, const CostModel& m,
                     uint32_t min_bytes, uint32_t max_bytes);

}  // namespace pmindex::nvtree
