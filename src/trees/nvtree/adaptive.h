// NV-Tree workload adaptivity (journal paper, section 5): the choice of the
// size of the two LNs a split creates (Algorithm 3), bounded by the
// analytical model (equations 1-4) with Tr/Tw measured on this machine.
//
// Pure functions of the counters, so unit tests drive them directly.
#pragma once

#include <cstdint>
#include <string_view>

#include "pm/persist.h"

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
// flush `size` bytes. Measured once per process and PM model (Measured():
// the fastest of a few trials per size, made non-decreasing in size) and
// linearly interpolated between the measured sizes.
class CostModel {
 public:
  static constexpr int kPoints = 6;  // sizes at which costs are known

  // The model measured on this machine under the active PM model
  // (pm::SetPmModel, pm::SetPmWriteNs): the first call per model measures,
  // a few ms. Writes are measured through pm::flush and pm::fence, so they
  // include what the `fixed` and `xpline` models charge there; the xpline
  // model's read cost, which plain loads of the scratch buffer do not pay,
  // is added by WithModeledReads. When a PM tracer is installed (crash
  // simulator) nothing is measured and the fixed model is used, so no
  // flush outside a pool is traced.
  static const CostModel& Measured();
  // Fixed, machine-independent costs (tests).
  static CostModel Fixed(double read_ns_per_line, double write_ns_per_line);
  // Costs at kPoints sizes (ascending), e.g. measured ones.
  static CostModel FromPoints(const uint32_t* sizes, const double* tr, const double* tw);
  // This model with the xpline model's cost of reading an uncached LN
  // added to Tr: one random read and a sequential read per further line.
  CostModel WithModeledReads(const pm::XplineParams& p) const;

  double Tr(uint32_t bytes) const;
  double Tw(uint32_t bytes) const;

  // Equations 1-2: enlarging from old to new pays off.
  bool EnlargeOk(uint32_t old_bytes, uint32_t new_bytes, const LnStats& s) const;
  // Equations 3-4: shrinking from old to new pays off.
  bool ShrinkOk(uint32_t old_bytes, uint32_t new_bytes, const LnStats& s) const;

 private:
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
