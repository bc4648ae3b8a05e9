#include "trees/nvtree/adaptive.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>

#include "pm/persist.h"
#include "sync/mutex.h"
#include "trees/nvtree/leaf.h"

namespace pmindex::nvtree {

const char* StrategyName(Strategy s) {
  switch (s) {
    case Strategy::kOff: return "off";
    case Strategy::kConservative: return "conservative";
    case Strategy::kAggressive: return "aggressive";
    case Strategy::kBalanced: return "balanced";
  }
  return "?";
}

bool ParseStrategy(std::string_view s, Strategy* out) {
  for (Strategy c : {Strategy::kOff, Strategy::kConservative, Strategy::kAggressive,
                     Strategy::kBalanced}) {
    if (s == StrategyName(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

namespace {
constexpr uint32_t kSizes[] = {128, 512, 1024, 2048, 3072, Ln::kMaxBytes};
constexpr int kSizePoints = sizeof(kSizes) / sizeof(kSizes[0]);
static_assert(kSizePoints == CostModel::kPoints);
constexpr double kElementBytes = sizeof(LnElement);

double NowNs() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A search of an unsorted LN of `bytes`: compare every key.
__attribute__((noinline)) uint64_t ScanOnce(const LnElement* e, uint32_t n, Key k) {
  uint64_t hits = 0;
  for (uint32_t i = 0; i < n; ++i) hits += (e[i].key == k);
  return hits;
}
}  // namespace

CostModel CostModel::Fixed(double read_ns_per_line, double write_ns_per_line) {
  CostModel m;
  for (int i = 0; i < kPoints; ++i) {
    m.size_[i] = kSizes[i];
    m.tr_[i] = read_ns_per_line * (kSizes[i] / 64.0);
    m.tw_[i] = write_ns_per_line * (kSizes[i] / 64.0);
  }
  return m;
}

CostModel CostModel::WithModeledReads(const pm::XplineParams& p) const {
  // A search of an LN that is not cached reads it from the first line to
  // the last: the xpline model charges one random read for the first line
  // and a sequential read for each further one (pm::ModelRead).
  CostModel m = *this;
  for (int i = 0; i < kPoints; ++i) {
    const double lines = (size_[i] + 63) / 64;
    m.tr_[i] += p.read_ns + (lines - 1) * p.read_seq_ns;
  }
  return m;
}

namespace {
// Writes and flushes measured on this machine (the fastest of a few trials
// per size, made non-decreasing), under whatever write cost the active PM
// model charges at flushes and fences. Reads are plain loads here.
CostModel MeasureOnThisMachine() {
  CostModel model = CostModel::Fixed(2.0, 20.0 + pm::PmWriteNs());
  if (pm::InstalledTracer() != nullptr) return model;
  // A scratch buffer outside every pool: stores here are not PM stores of
  // an index, so plain memcpy is used; only the flush cost is measured
  // through the persistence layer (its latency emulation included).
  // Each size keeps the fastest of a few trials (a trial the scheduler
  // interrupts is slower, never faster), and the costs are then made
  // non-decreasing in size: on a shared machine a preempted trial at a
  // small size could otherwise make a bigger LN look cheaper to search.
  constexpr int kReps = 100;
  constexpr int kTrials = 5;
  auto* buf = static_cast<LnElement*>(std::aligned_alloc(64, Ln::kMaxBytes));
  if (buf == nullptr) return model;
  for (uint32_t i = 0; i < Ln::kMaxBytes / sizeof(LnElement); ++i) buf[i] = {i * 7919u, i};
  volatile uint64_t sink = 0;
  uint32_t sizes[kSizePoints];
  double tr[kSizePoints], tw[kSizePoints];
  for (int p = 0; p < kSizePoints; ++p) {
    uint32_t bytes = kSizes[p];
    uint32_t n = bytes / sizeof(LnElement);
    double r_best = 0, w_best = 0;
    for (int t = 0; t < kTrials; ++t) {
      double t0 = NowNs();
      for (int r = 0; r < kReps; ++r) sink = sink + ScanOnce(buf, n, r);
      double t1 = NowNs();
      for (int r = 0; r < kReps; ++r) {
        buf[r % n].value = r;
        pm::flush(buf, bytes);
        pm::fence();
      }
      double t2 = NowNs();
      r_best = t == 0 ? t1 - t0 : std::min(r_best, t1 - t0);
      w_best = t == 0 ? t2 - t1 : std::min(w_best, t2 - t1);
    }
    sizes[p] = bytes;
    tr[p] = std::max(r_best / kReps, p > 0 ? tr[p - 1] : 0.0);
    tw[p] = std::max(w_best / kReps, p > 0 ? tw[p - 1] : 0.0);
  }
  std::free(buf);
  return CostModel::FromPoints(sizes, tr, tw);
}

// The active PM model and its parameters: a measured CostModel belongs to one.
struct ModelKey {
  pm::PmModel model;
  uint32_t write_ns, block_write_ns, read_ns, read_seq_ns;
  bool operator==(const ModelKey&) const = default;
};

ModelKey ActiveKey() {
  const pm::XplineParams p = pm::ActiveXplineParams();
  return {pm::ActivePmModel(), pm::PmWriteNs(), p.block_write_ns, p.read_ns, p.read_seq_ns};
}
}  // namespace

const CostModel& CostModel::Measured() {
  // One measurement per PM model a process runs under (pmbench may switch
  // models between runs; the model is set only while no PM work runs).
  // Entries are never removed, so a returned reference stays valid.
  static sync::Mutex mu;
  static std::deque<std::pair<ModelKey, CostModel>> measured;
  sync::MutexLock lock(mu);
  const ModelKey key = ActiveKey();
  for (const auto& [k, m] : measured) {
    if (k == key) return m;
  }
  CostModel m = MeasureOnThisMachine();
  if (key.model == pm::PmModel::kXpline) m = m.WithModeledReads(pm::ActiveXplineParams());
  measured.emplace_back(key, m);
  return measured.back().second;
}

CostModel CostModel::FromPoints(const uint32_t* sizes, const double* tr, const double* tw) {
  CostModel m;
  for (int i = 0; i < kPoints; ++i) {
    m.size_[i] = sizes[i];
    m.tr_[i] = tr[i];
    m.tw_[i] = tw[i];
  }
  return m;
}

double CostModel::Interp(const uint32_t* xs, const double* ys, uint32_t x) {
  if (x <= xs[0]) return ys[0] * x / xs[0];
  for (int i = 1; i < kPoints; ++i) {
    if (x <= xs[i]) {
      double f = double(x - xs[i - 1]) / double(xs[i] - xs[i - 1]);
      return ys[i - 1] + f * (ys[i] - ys[i - 1]);
    }
  }
  return ys[kPoints - 1] * x / xs[kPoints - 1];
}

double CostModel::Tr(uint32_t bytes) const { return Interp(size_, tr_, bytes); }
double CostModel::Tw(uint32_t bytes) const { return Interp(size_, tw_, bytes); }

static double ReadWriteRatio(const LnStats& s) {
  return s.writes == 0 ? double(s.reads) : double(s.reads) / double(s.writes);
}

bool CostModel::EnlargeOk(uint32_t old_bytes, uint32_t new_bytes, const LnStats& s) const {
  // Eq. 1: the split that the larger node saves (read the old node, flush
  // two halves).
  double positive = Tr(old_bytes) + 2 * Tw(old_bytes / 2);
  // Eq. 2: every search past the old size scans the extra elements.
  double negative = ((new_bytes - old_bytes) / kElementBytes) * ReadWriteRatio(s) * Tr(old_bytes) * 2;
  return positive > negative;
}

bool CostModel::ShrinkOk(uint32_t old_bytes, uint32_t new_bytes, const LnStats& s) const {
  // Eq. 3: searches saved by the smaller node.
  double positive = ((old_bytes - new_bytes) / kElementBytes) * ReadWriteRatio(s) * Tr(new_bytes) * 2;
  // Eq. 4: the earlier split it causes.
  double negative = Tr(new_bytes) + 2 * Tw(new_bytes / 2);
  return positive > negative;
}

uint32_t NewLeafSize(Strategy st, uint32_t cur, const LnStats& s, const CostModel& m,
                     uint32_t min_bytes, uint32_t max_bytes) {
  if (st == Strategy::kOff) return cur;
  const uint64_t n = std::max<uint64_t>(s.leaves, 1);
  // Hot/cold compare with the averages nWrites/N_LN and nReads/N_LN
  // (multiplied out to stay in integers).
  const bool hot_write = s.writes * n > s.total_writes;
  const bool hot_read = s.reads * n > s.total_reads;
  const bool write_intensive = s.reads < s.writes;  // Rr/w < 1
  int dir = 0;
  if (write_intensive) {
    if ((st == Strategy::kConservative && hot_write && !hot_read) || st == Strategy::kAggressive ||
        st == Strategy::kBalanced)
      dir = 1;
  } else {
    if ((st == Strategy::kConservative && !hot_write && hot_read) ||
        (st == Strategy::kBalanced && hot_read))
      dir = -1;
  }
  if (dir == 0) return cur;
  if (dir < 0) {
    uint32_t next = cur >= min_bytes + 64 ? cur - 64 : cur;
    if (next != cur && m.ShrinkOk(cur, next, s)) return next;
    return cur;
  }
  const bool doubling = (st == Strategy::kBalanced && hot_write) || st == Strategy::kAggressive;
  if (doubling) {
    uint32_t next = std::min(cur * 2, max_bytes);
    if (next > cur && m.EnlargeOk(cur, next, s)) return next;
    // Aggressive stays put when doubling is refused; balanced still tries
    // one cache line (section 6.4).
    if (st == Strategy::kAggressive) return cur;
  }
  uint32_t next = std::min(cur + 64, max_bytes);
  if (next > cur && m.EnlargeOk(cur, next, s)) return next;
  return cur;
}

}  // namespace pmindex::nvtree
