#include "pm/persist.h"

#include <cpuid.h>
#include <x86intrin.h>

#include <chrono>
#include <mutex>
#include <vector>

namespace pmindex::pm {

namespace detail {
constinit thread_local ThreadCounterBlock tl_counters;
Tracer* g_tracer = nullptr;
bool g_eadr = false;
uint64_t g_write_ticks_per_line = 0;
uint64_t g_remote_ticks = 0;
bool g_plain_flush = false;  // set by UpdatePlainFlush once the kind is known

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
  std::mutex mu;
  std::vector<ThreadCounterBlock*> live;
  Counters exited;
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
  return c;
}

// Removes the thread's block from the registry when the thread exits.
struct Unregister {
  ~Unregister() {
    Registry& r = Reg();
    std::lock_guard<std::mutex> g(r.mu);
    r.exited += Read(tl_counters);
    std::erase(r.live, &tl_counters);
    // `registered` stays true: PM work in a later thread-exit destructor must
    // not add this block back to the list (this object is gone by then and
    // would never remove it). Counts made after this point are not summed.
    tl_counters.lines_flushed.store(0, std::memory_order_relaxed);
    tl_counters.fences.store(0, std::memory_order_relaxed);
    tl_counters.naws.store(0, std::memory_order_relaxed);
    tl_counters.pm_bytes.store(0, std::memory_order_relaxed);
  }
};
thread_local Unregister* tl_unregister = nullptr;
}  // namespace

FlushKind g_flush_kind = DetectFlushKind();

void UpdatePlainFlush() {
  g_plain_flush = g_tracer == nullptr && !g_eadr && g_write_ticks_per_line == 0 &&
                  g_flush_kind == FlushKind::kClwb;
}
namespace {
// Static initialization after g_flush_kind's (same translation unit,
// definition order).
const bool g_plain_flush_init = (UpdatePlainFlush(), true);
}  // namespace

void TraceFence(Site site) {
  if (g_tracer != nullptr) g_tracer->OnFence(site);
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
}

void RegisterThread() {
  static thread_local Unregister u;  // constructed here, destroyed at thread exit
  tl_unregister = &u;
  Registry& r = Reg();
  std::lock_guard<std::mutex> g(r.mu);
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
  return c;
}

Counters ThreadCounters() { return detail::Read(detail::Mine()); }

Counters GlobalCounters() {
  detail::Registry& r = detail::Reg();
  std::lock_guard<std::mutex> g(r.mu);
  Counters sum = r.exited;
  for (auto* b : r.live) sum += detail::Read(*b);
  return sum;
}

void ResetCounters() {
  detail::Registry& r = detail::Reg();
  std::lock_guard<std::mutex> g(r.mu);
  r.exited = Counters();
  for (auto* b : r.live) {
    b->lines_flushed.store(0, std::memory_order_relaxed);
    b->fences.store(0, std::memory_order_relaxed);
    b->naws.store(0, std::memory_order_relaxed);
    b->pm_bytes.store(0, std::memory_order_relaxed);
    b->numa_local.store(0, std::memory_order_relaxed);
    b->numa_remote.store(0, std::memory_order_relaxed);
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

void SetPmWriteNs(uint32_t ns) {
  g_write_ns = ns;
  detail::g_write_ticks_per_line = ns == 0 ? 0 : static_cast<uint64_t>(ns * TscTicksPerNs() + 0.5);
  detail::UpdatePlainFlush();
}
uint32_t PmWriteNs() { return g_write_ns; }

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
