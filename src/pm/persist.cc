#include "pm/persist.h"

#include <cpuid.h>
#include <x86intrin.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "sync/mutex.h"

namespace pmindex::pm {

namespace detail {
constinit thread_local ThreadCounterBlock tl_counters;
Tracer* g_tracer = nullptr;
bool g_eadr = false;
uint64_t g_write_ticks_per_line = 0;
uint64_t g_remote_ticks = 0;
bool g_plain_flush = false;  // set by UpdatePlainFlush once the kind is known
bool g_xpline = false;
bool g_fence_hook = false;

namespace {
FlushKind DetectFlushKind() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    if (b & (1u << 24)) return FlushKind::kClwb;
    if (b & (1u << 23)) return FlushKind::kClflushopt;
  }
  return FlushKind::kClflush;
}

// Live thread blocks and the sum of exited threads.
struct Registry {
  sync::Mutex mu;
  std::vector<ThreadCounterBlock*> live PMINDEX_GUARDED_BY(mu);
  Counters exited PMINDEX_GUARDED_BY(mu);
};
Registry& Reg() {
  static Registry* r = new Registry();  // never destroyed: threads may exit late
  return *r;
}

Counters Read(const ThreadCounterBlock& b) {
  Counters c;
  c.lines_flushed = b.lines_flushed.load(std::memory_order_relaxed);
  c.fences = b.fences.load(std::memory_order_relaxed);
  c.naws = b.naws.load(std::memory_order_relaxed);
  c.pm_bytes_allocated = static_cast<uint64_t>(b.pm_bytes.load(std::memory_order_relaxed));
  c.numa_local_visits = b.numa_local.load(std::memory_order_relaxed);
  c.numa_remote_visits = b.numa_remote.load(std::memory_order_relaxed);
  c.media_blocks_written = b.media_blocks.load(std::memory_order_relaxed);
  c.model_lines_read = b.model_lines.load(std::memory_order_relaxed);
  c.model_read_misses = b.model_misses.load(std::memory_order_relaxed);
  return c;
}

// Removes the thread's block from the registry when the thread exits.
struct Unregister {
  ~Unregister() {
    Registry& r = Reg();
    sync::MutexLock g(r.mu);
    r.exited += Read(tl_counters);
    std::erase(r.live, &tl_counters);
    // `registered` stays true: PM work in a later thread-exit destructor must
    // not add this block back to the list (this object is gone by then and
    // would never remove it). Counts made after this point are not summed.
    tl_counters.lines_flushed.store(0, std::memory_order_relaxed);
    tl_counters.fences.store(0, std::memory_order_relaxed);
    tl_counters.naws.store(0, std::memory_order_relaxed);
    tl_counters.pm_bytes.store(0, std::memory_order_relaxed);
    tl_counters.numa_local.store(0, std::memory_order_relaxed);
    tl_counters.numa_remote.store(0, std::memory_order_relaxed);
    tl_counters.media_blocks.store(0, std::memory_order_relaxed);
    tl_counters.model_lines.store(0, std::memory_order_relaxed);
    tl_counters.model_misses.store(0, std::memory_order_relaxed);
  }
};
thread_local Unregister* tl_unregister = nullptr;
}  // namespace

FlushKind g_flush_kind = DetectFlushKind();

void UpdatePlainFlush() {
  g_plain_flush = g_tracer == nullptr && !g_eadr && g_write_ticks_per_line == 0 && !g_xpline &&
                  g_flush_kind == FlushKind::kClwb;
  g_fence_hook = g_tracer != nullptr || g_xpline;
}
namespace {
// Static initialization after g_flush_kind's (same translation unit,
// definition order).
const bool g_plain_flush_init = (UpdatePlainFlush(), true);
}  // namespace

// ------------------------------------------------------------ xpline model
namespace {
uint64_t g_block_write_ticks = 0;
uint64_t g_read_ticks = 0;
uint64_t g_read_seq_ticks = 0;
uint64_t g_cache_sets = 0;  // 0: no cache (every line misses)
// Bumped by SetPmModel: a thread whose state carries an older generation
// empties it before use.
std::atomic<uint64_t> g_model_generation{1};
constexpr uint32_t kWays = 8;

// The modelled cache, shared by all threads as a last-level cache is:
// kWays tags per set in most-recently-used-first order (tag = line number
// + 1, 0 = empty). Threads update it with relaxed loads and stores and no
// lock: concurrent updates of one set may lose or duplicate a tag, which
// only makes the model a little less exact, never unsafe. Replaced only
// by SetPmModel, while no PM work runs.
std::atomic<uint64_t>* g_cache_tags = nullptr;

// One thread's write-combining window: the blocks it wrote back since its
// last fence (a ring, newest at pending[(next - 1) % N]).
struct XplineThread {
  uint64_t generation = 0;
  uint64_t pending[kXplineCombineBlocks] = {};
  uint32_t n_pending = 0;
  uint32_t next = 0;
};
constinit thread_local XplineThread tl_xpline;

XplineThread& XState() {
  XplineThread& x = tl_xpline;
  const uint64_t gen = g_model_generation.load(std::memory_order_acquire);
  if (x.generation != gen) {
    x.generation = gen;
    x.n_pending = 0;
    x.next = 0;
  }
  return x;
}

// Looks line `line` up in the cache and makes it the most recent of its
// set; true iff it was there.
bool CacheTouch(uint64_t line) {
  if (g_cache_sets == 0) return false;
  const uint64_t tag = line + 1;
  // A multiplicative hash spreads node-aligned addresses over the sets.
  const uint64_t set = ((line * 0x9E3779B97F4A7C15ull) >> 24) % g_cache_sets;
  std::atomic<uint64_t>* w = &g_cache_tags[set * kWays];
  uint32_t i = 0;
  while (i < kWays && w[i].load(std::memory_order_relaxed) != tag) ++i;
  const bool hit = i < kWays;
  if (!hit) i = kWays - 1;  // the least recent way is replaced
  for (; i > 0; --i) {
    w[i].store(w[i - 1].load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  w[0].store(tag, std::memory_order_relaxed);
  return hit;
}

// The write side of flush(): lines [a, end) (a line-aligned) written back.
void XplineFlush(uintptr_t a, uintptr_t end) {
  XplineThread& x = XState();
  uint64_t blocks = 0;
  for (; a < end; a += kCacheLine) {
    CacheTouch(a / kCacheLine);
    const uint64_t block = a / kXplineBlock;
    bool seen = false;
    for (uint32_t j = 0; j < x.n_pending && !seen; ++j) {
      seen = x.pending[(x.next + kXplineCombineBlocks - 1 - j) % kXplineCombineBlocks] == block;
    }
    if (seen) continue;
    ++blocks;
    x.pending[x.next] = block;
    x.next = (x.next + 1) % kXplineCombineBlocks;
    if (x.n_pending < kXplineCombineBlocks) ++x.n_pending;
  }
  if (blocks == 0) return;
  Bump(Mine().media_blocks, blocks);
  if (g_block_write_ticks != 0) SpinTicks(blocks * g_block_write_ticks);
}
}  // namespace

void ModelReadSlow(const void* p, size_t n) {
  if (n == 0) return;
  uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(uintptr_t)(kCacheLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  uint64_t lines = 0, misses = 0;
  for (; a < end; a += kCacheLine, ++lines) {
    if (!CacheTouch(a / kCacheLine)) ++misses;
  }
  ThreadCounterBlock& b = Mine();
  Bump(b.model_lines, lines);
  if (misses == 0) return;
  Bump(b.model_misses, misses);
  const uint64_t ticks = g_read_ticks + (misses - 1) * g_read_seq_ticks;
  if (ticks != 0) SpinTicks(ticks);
}

void FenceHook(Site site) {
  if (g_tracer != nullptr) g_tracer->OnFence(site);
  if (g_xpline) XState().n_pending = 0;
}

void FlushSlow(const void* p, size_t n, Site site) {
  if (g_tracer != nullptr) g_tracer->OnFlush(p, n, site);
  if (g_eadr || n == 0) return;
  uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(uintptr_t)(kCacheLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  uint64_t lines = 0;
  for (; a < end; a += kCacheLine, ++lines) FlushLine(reinterpret_cast<const void*>(a));
  Bump(Mine().lines_flushed, lines);
  if (g_write_ticks_per_line != 0) EmulateWriteLatency(lines);
  if (g_xpline) XplineFlush(reinterpret_cast<uintptr_t>(p) & ~(uintptr_t)(kCacheLine - 1), end);
}

void RegisterThread() {
  static thread_local Unregister u;  // constructed here, destroyed at thread exit
  tl_unregister = &u;
  Registry& r = Reg();
  sync::MutexLock g(r.mu);
  r.live.push_back(&tl_counters);
  tl_counters.registered = true;
}

void SpinTicks(uint64_t ticks) {
  const uint64_t until = __rdtsc() + ticks;
  while (__rdtsc() < until) _mm_pause();
}

void EmulateWriteLatency(uint64_t lines) { SpinTicks(lines * g_write_ticks_per_line); }
}  // namespace detail

const char* FlushKindName(FlushKind k) {
  switch (k) {
    case FlushKind::kClwb: return "clwb";
    case FlushKind::kClflushopt: return "clflushopt";
    case FlushKind::kClflush: return "clflush";
  }
  return "?";
}

Counters& Counters::operator+=(const Counters& o) {
  lines_flushed += o.lines_flushed;
  fences += o.fences;
  naws += o.naws;
  pm_bytes_allocated += o.pm_bytes_allocated;
  numa_local_visits += o.numa_local_visits;
  numa_remote_visits += o.numa_remote_visits;
  media_blocks_written += o.media_blocks_written;
  model_lines_read += o.model_lines_read;
  model_read_misses += o.model_read_misses;
  return *this;
}

Counters Counters::operator-(const Counters& o) const {
  Counters c = *this;
  c.lines_flushed -= o.lines_flushed;
  c.fences -= o.fences;
  c.naws -= o.naws;
  c.pm_bytes_allocated -= o.pm_bytes_allocated;
  c.numa_local_visits -= o.numa_local_visits;
  c.numa_remote_visits -= o.numa_remote_visits;
  c.media_blocks_written -= o.media_blocks_written;
  c.model_lines_read -= o.model_lines_read;
  c.model_read_misses -= o.model_read_misses;
  return c;
}

Counters ThreadCounters() { return detail::Read(detail::Mine()); }

Counters GlobalCounters() {
  detail::Registry& r = detail::Reg();
  sync::MutexLock g(r.mu);
  Counters sum = r.exited;
  for (auto* b : r.live) sum += detail::Read(*b);
  return sum;
}

void ResetCounters() {
  detail::Registry& r = detail::Reg();
  sync::MutexLock g(r.mu);
  r.exited = Counters();
  for (auto* b : r.live) {
    b->lines_flushed.store(0, std::memory_order_relaxed);
    b->fences.store(0, std::memory_order_relaxed);
    b->naws.store(0, std::memory_order_relaxed);
    b->pm_bytes.store(0, std::memory_order_relaxed);
    b->numa_local.store(0, std::memory_order_relaxed);
    b->numa_remote.store(0, std::memory_order_relaxed);
    b->media_blocks.store(0, std::memory_order_relaxed);
    b->model_lines.store(0, std::memory_order_relaxed);
    b->model_misses.store(0, std::memory_order_relaxed);
  }
}

void CountAllocated(int64_t bytes) {
  auto& c = detail::Mine().pm_bytes;
  c.store(c.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
}

void InstallTracer(Tracer* t) {
  detail::g_tracer = t;
  detail::UpdatePlainFlush();
}
Tracer* InstalledTracer() { return detail::g_tracer; }

FlushKind ActiveFlushKind() { return detail::g_flush_kind; }

double TscTicksPerNs() {
  static const double ticks = [] {
    using clk = std::chrono::steady_clock;
    auto t0 = clk::now();
    uint64_t c0 = __rdtsc();
    while (clk::now() - t0 < std::chrono::milliseconds(20)) _mm_pause();
    uint64_t c1 = __rdtsc();
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clk::now() - t0).count();
    return static_cast<double>(c1 - c0) / static_cast<double>(ns);
  }();
  return ticks;
}

static uint32_t g_write_ns = 0;
static PmModel g_model = PmModel::kFixed;
static XplineParams g_xpline_params;

static uint64_t NsToTicks(uint32_t ns) {
  return ns == 0 ? 0 : static_cast<uint64_t>(ns * TscTicksPerNs() + 0.5);
}

// The per-line write delay exists only under the fixed model.
static void UpdateWriteTicks() {
  detail::g_write_ticks_per_line = g_model == PmModel::kFixed ? NsToTicks(g_write_ns) : 0;
  detail::UpdatePlainFlush();
}

void SetPmWriteNs(uint32_t ns) {
  g_write_ns = ns;
  UpdateWriteTicks();
}
uint32_t PmWriteNs() { return g_write_ns; }

const char* PmModelName(PmModel m) {
  switch (m) {
    case PmModel::kDram:
      return "dram";
    case PmModel::kFixed:
      return "fixed";
    case PmModel::kXpline:
      return "xpline";
  }
  return "?";
}

bool ParsePmModel(const char* name, PmModel* out) {
  for (PmModel m : {PmModel::kDram, PmModel::kFixed, PmModel::kXpline}) {
    if (std::strcmp(name, PmModelName(m)) == 0) {
      *out = m;
      return true;
    }
  }
  return false;
}

void SetPmModel(PmModel m, const XplineParams& p) {
  g_model = m;
  g_xpline_params = p;
  detail::g_block_write_ticks = NsToTicks(p.block_write_ns);
  detail::g_read_ticks = NsToTicks(p.read_ns);
  detail::g_read_seq_ticks = NsToTicks(p.read_seq_ns);
  // No PM work runs (the contract), so no thread reads the old cache.
  static std::unique_ptr<std::atomic<uint64_t>[]> cache;
  const uint64_t sets = m == PmModel::kXpline ? p.cache_bytes / kCacheLine / detail::kWays : 0;
  cache.reset(sets == 0 ? nullptr : new std::atomic<uint64_t>[sets * detail::kWays]());
  detail::g_cache_tags = cache.get();
  detail::g_cache_sets = sets;
  detail::g_model_generation.fetch_add(1, std::memory_order_release);
  detail::g_xpline = m == PmModel::kXpline;
  UpdateWriteTicks();
}
PmModel ActivePmModel() { return g_model; }
XplineParams ActiveXplineParams() { return g_xpline_params; }

static uint32_t g_remote_ns = 0;

void CountNodeVisit(bool remote) {
  detail::ThreadCounterBlock& b = detail::Mine();
  if (!remote) {
    detail::Bump(b.numa_local, 1);
    return;
  }
  detail::Bump(b.numa_remote, 1);
  if (detail::g_remote_ticks != 0) detail::SpinTicks(detail::g_remote_ticks);
}

void SetRemoteAccessNs(uint32_t ns) {
  g_remote_ns = ns;
  detail::g_remote_ticks = ns == 0 ? 0 : static_cast<uint64_t>(ns * TscTicksPerNs() + 0.5);
}
uint32_t RemoteAccessNs() { return g_remote_ns; }

void SetEadr(bool on) {
  detail::g_eadr = on;
  detail::UpdatePlainFlush();
}
bool Eadr() { return detail::g_eadr; }

}  // namespace pmindex::pm
