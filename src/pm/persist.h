// The persistence layer: the only place in pmindex that issues cache-line
// write-back (clwb / clflushopt / clflush) and store-fence instructions.
//
// Contract (docs/persistence-model.md):
// - flush(p, n) writes back every cache line overlapping [p, p+n). It does
//   not order anything by itself.
// - fence() orders: every line flushed before it is durable after it.
// - persist(p, n) = flush + fence.
// - naw(p, v): an "NVM atomic write" — aligned 8-byte store, flush, fence.
// - PM stores in index code go through store()/copy()/fill() so that the
//   crash simulator's tracer sees them. In the ordinary library these
//   compile to plain stores; in the traced library (PMINDEX_TRACED) they
//   report to the installed Tracer.
// - Counters are per thread, always on, and summed over all threads on
//   request. They are the machine-independent cost figures of benchmarks.
// - Write-latency emulation adds a TSC busy-wait of N ns per flushed line
//   (the fixed cost model); the xpline model charges 256-byte media blocks
//   and reads reported by ModelRead instead (PmModel below).
// - eADR mode: flush becomes a no-op (nothing counted, no latency); fences
//   stay.
//
// Every flush/fence call carries its call site (std::source_location), the
// identity the crash simulator's mutation mode uses to remove one site. The
// inline helpers take it by value (one pointer, kept in a register) and are
// always inlined: on a write path every store issued after a fence waits in
// the store queue for the fence's write-backs, and a full queue stalls the
// next operation (docs/RESULTS.md, issue 14), so no stack spill or call
// frame belongs here.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "pm/site.h"

namespace pmindex::pm {

inline constexpr size_t kCacheLine = 64;

enum class FlushKind : uint8_t { kClwb, kClflushopt, kClflush };
const char* FlushKindName(FlushKind k);

// Counters of the calling thread, or summed over all threads (live and
// exited since the last reset).
struct Counters {
  uint64_t lines_flushed = 0;
  uint64_t fences = 0;
  uint64_t naws = 0;
  uint64_t pm_bytes_allocated = 0;  // net bytes (allocations minus frees)
  // PM nodes visited on the calling thread's own NUMA node and on another
  // one, counted where an index meters its visits (alloc/numa_meter.h) while
  // metering is on. Zero otherwise.
  uint64_t numa_local_visits = 0;
  uint64_t numa_remote_visits = 0;
  // The xpline cost model (SetPmModel): 256-byte media blocks written back
  // (distinct blocks between two fences of a thread), PM cache lines read at
  // node visits (ModelRead), and those of them not in the modelled cache.
  // Zero under the other models.
  uint64_t media_blocks_written = 0;
  uint64_t model_lines_read = 0;
  uint64_t model_read_misses = 0;
  Counters& operator+=(const Counters& o);
  Counters operator-(const Counters& o) const;
};
Counters ThreadCounters();
Counters GlobalCounters();
void ResetCounters();  // all threads; call while no PM work is running

// Called by the allocator.
void CountAllocated(int64_t bytes);

// Observes PM traffic. Installed by the crash simulator; at most one at a
// time, installed and removed while no other thread touches PM.
class Tracer {
 public:
  virtual ~Tracer() = default;
  // After a store of n bytes at addr (addr's live content is the new value).
  virtual void OnStore(const void* addr, size_t n) = 0;
  // When flush(addr, n) is called, before the write-back.
  virtual void OnFlush(const void* addr, size_t n, const Site& site) = 0;
  // When fence() is called, before it takes effect.
  virtual void OnFence(const Site& site) = 0;
};
void InstallTracer(Tracer* t);  // nullptr removes
Tracer* InstalledTracer();

// Global configuration (set before the run, read on every flush).
FlushKind ActiveFlushKind();
void SetPmWriteNs(uint32_t ns);  // 0 disables emulation
uint32_t PmWriteNs();
void SetEadr(bool on);
bool Eadr();
// Remote-access emulation: a TSC busy-wait of N ns per remote node visit
// (CountNodeVisit), so that locality shows in timings on a machine whose
// NUMA nodes are simulated. 0 disables it.
void SetRemoteAccessNs(uint32_t ns);
uint32_t RemoteAccessNs();
double TscTicksPerNs();  // calibrated once, on first use

// ------------------------------------------------------------ cost model
// What a PM access costs on top of this machine's DRAM (docs/
// persistence-model.md, "Cost models"):
// - kDram: nothing.
// - kFixed (the default): PmWriteNs per flushed 64-byte line, reads free.
// - kXpline: Optane's 256-byte internal write unit and its read latency.
//   A write costs block_write_ns per distinct 256-byte block that a thread
//   writes back between two of its fences (lines flushed into one block
//   before a fence combine into one media write; kXplineCombineBlocks
//   distinct blocks at most are held). A read costs, per ModelRead call (a
//   node visit), read_ns for the first line missing from a modelled cache
//   of cache_bytes and read_seq_ns for every further missing line; lines
//   flushed are put in that cache, as clwb leaves them cached. The cache
//   is shared by all threads; the combining window is per thread.
enum class PmModel : uint8_t { kDram, kFixed, kXpline };
const char* PmModelName(PmModel m);
bool ParsePmModel(const char* name, PmModel* out);  // "dram", "fixed", "xpline"
struct XplineParams {
  uint32_t block_write_ns = 111;  // 256 B at one Optane DIMM's 2.3 GB/s media write rate
  uint32_t read_ns = 224;         // Optane random read 305 ns minus DRAM's 81 ns
  uint32_t read_seq_ns = 90;      // Optane sequential read 169 ns minus DRAM's 79 ns
  uint64_t cache_bytes = uint64_t{39} << 20;  // paper 000's machine: 39 MB L3
};
inline constexpr size_t kXplineBlock = 256;
inline constexpr uint32_t kXplineCombineBlocks = 64;  // 16 KiB, one DIMM's XPBuffer
// Set while no PM work runs. Empties every thread's modelled cache and
// pending blocks. The default is kFixed.
void SetPmModel(PmModel m, const XplineParams& p = XplineParams());
PmModel ActivePmModel();
XplineParams ActiveXplineParams();

namespace detail {
struct alignas(64) ThreadCounterBlock {
  std::atomic<uint64_t> lines_flushed{0};
  std::atomic<uint64_t> fences{0};
  std::atomic<uint64_t> naws{0};
  std::atomic<int64_t> pm_bytes{0};
  std::atomic<uint64_t> numa_local{0};
  std::atomic<uint64_t> numa_remote{0};
  std::atomic<uint64_t> media_blocks{0};
  std::atomic<uint64_t> model_lines{0};
  std::atomic<uint64_t> model_misses{0};
  bool registered = false;
};
// constinit: no dynamic initialization, so other translation units reach
// it with one %fs-relative access instead of a call to a TLS wrapper.
extern constinit thread_local ThreadCounterBlock tl_counters;
void RegisterThread();  // slow path: adds tl_counters to the global list

[[gnu::always_inline]] inline ThreadCounterBlock& Mine() {
  ThreadCounterBlock& b = tl_counters;
  if (__builtin_expect(!b.registered, 0)) RegisterThread();
  return b;
}
[[gnu::always_inline]] inline void Bump(std::atomic<uint64_t>& c, uint64_t by) {
  // Only the owning thread writes; readers sum with relaxed loads.
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

extern Tracer* g_tracer;
extern FlushKind g_flush_kind;
extern bool g_eadr;
extern uint64_t g_write_ticks_per_line;  // 0 = no emulation
extern uint64_t g_remote_ticks;          // 0 = no remote-access emulation
void SpinTicks(uint64_t ticks);
// True iff the xpline model is on: ModelRead and fence() take their slow
// paths (fence() also for an installed tracer: g_fence_hook).
extern bool g_xpline;
extern bool g_fence_hook;
void ModelReadSlow(const void* p, size_t n);
}  // namespace detail

// A node visit of index code: the operation reads the PM bytes [p, p+n).
// Costs one predictable branch unless the xpline model is on, which then
// charges the lines of the range missing from its cache (see PmModel).
// Ranges in DRAM must not be reported.
[[gnu::always_inline]] inline void ModelRead(const void* p, size_t n) {
  if (__builtin_expect(detail::g_xpline, 0)) detail::ModelReadSlow(p, n);
}

// Counts one visit of a PM node on the calling thread's NUMA node (remote
// false) or on another one, and waits RemoteAccessNs for a remote one.
// Called by alloc::MeterVisit, not by index code directly.
// Out of line (persist.cc): it runs only while metering is on, and GCC
// 12's UBSan took the thread-local block for a null pointer when this was
// inlined into the index code of the ASan+UBSan build.
void CountNodeVisit(bool remote);

// Two of the calling thread's counters, each read with one inline 8-byte
// load, for code that measures its own cost on a write path (the split
// counters of pm_leaf_tree.h). ThreadCounters() returns the block by value
// and its difference reads it back 16 bytes at a time: such a load cannot
// be served from the 8-byte counter stores still in the store queue, so it
// waits until they leave it, i.e. behind every store that waits for a
// write-back (about 400 ns after a split, docs/RESULTS.md issue 14).
[[gnu::always_inline]] inline uint64_t ThreadLinesFlushed() {
  return detail::Mine().lines_flushed.load(std::memory_order_relaxed);
}
[[gnu::always_inline]] inline uint64_t ThreadFences() {
  return detail::Mine().fences.load(std::memory_order_relaxed);
}

namespace detail {
// True iff flush() can take its inline fast path: clwb, no tracer, no eADR,
// no latency emulation. Recomputed by every setter of those four.
extern bool g_plain_flush;
void UpdatePlainFlush();

void EmulateWriteLatency(uint64_t lines);
// flush() when g_plain_flush is false (tracer, eADR, emulation, or an
// instruction other than clwb).
void FlushSlow(const void* p, size_t n, Site site);
// fence()'s report to the installed tracer and the end of the xpline
// model's combining window (out of line: the hot path passes the site in a
// register and stores nothing for it).
void FenceHook(Site site);

[[gnu::always_inline]] inline void FlushLine(const void* p) {
  switch (g_flush_kind) {
    case FlushKind::kClwb:
      asm volatile("clwb %0" : "+m"(*(volatile char*)p));
      break;
    case FlushKind::kClflushopt:
      asm volatile("clflushopt %0" : "+m"(*(volatile char*)p));
      break;
    case FlushKind::kClflush:
      asm volatile("clflush %0" : "+m"(*(volatile char*)p));
      break;
  }
}

[[gnu::always_inline]] inline void TraceStore(const void* p, size_t n) {
#ifdef PMINDEX_TRACED
  if (g_tracer != nullptr) g_tracer->OnStore(p, n);
#else
  (void)p;
  (void)n;
#endif
}
}  // namespace detail

// ---------------------------------------------------------------- flushes
// The common case (clwb, nothing installed) is inline and short: flushes
// sit on every write path, and a call plus four configuration checks per
// flush were a measurable part of an insert (docs/RESULTS.md, issue 14).
[[gnu::always_inline]] inline void flush(const void* p, size_t n, Site site = Site::current()) {
  if (__builtin_expect(!detail::g_plain_flush, 0)) {
    detail::FlushSlow(p, n, site);
    return;
  }
  if (n == 0) return;
  uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(uintptr_t)(kCacheLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  // An empty asm hides where `a` came from: GCC 12 otherwise tracks the
  // rounded-down address back to the caller's object and reports false
  // -Wstringop-overflow warnings on the caller's stores. No instruction.
  asm("" : "+r"(a));
  uint64_t lines = 0;
  for (; a < end; a += kCacheLine, ++lines) {
    asm volatile("clwb %0" : "+m"(*(volatile char*)a));
  }
  detail::Bump(detail::Mine().lines_flushed, lines);
}

[[gnu::always_inline]] inline void fence(Site site = Site::current()) {
  if (__builtin_expect(detail::g_fence_hook, 0)) detail::FenceHook(site);
  asm volatile("sfence" ::: "memory");
  detail::Bump(detail::Mine().fences, 1);
}

[[gnu::always_inline]] inline void persist(const void* p, size_t n, Site site = Site::current()) {
  flush(p, n, site);
  fence(site);
}

// ----------------------------------------------------------------- stores
// A PM store of a trivially copyable T. T of 1/2/4/8 bytes, naturally
// aligned, is a single atomic store (readers may load it concurrently);
// memory order as given.
template <class T>
[[gnu::always_inline]] inline void store(T* dst, T v, std::memory_order mo = std::memory_order_relaxed) {
  static_assert(std::is_trivially_copyable_v<T>);
  if constexpr (sizeof(T) <= 8 && (sizeof(T) & (sizeof(T) - 1)) == 0) {
    std::atomic_ref<T>(*dst).store(v, mo);
  } else {
    std::memcpy(static_cast<void*>(dst), &v, sizeof(T));
  }
  detail::TraceStore(dst, sizeof(T));
}

// A PM compare-and-swap of a naturally aligned word of 1/2/4/8 bytes:
// true iff *dst held `expected` and now holds `desired` (a store the crash
// simulator sees); false leaves *dst alone and puts what it held in
// `expected`. Memory order as given (the failure order derived from it).
template <class T>
[[gnu::always_inline]] inline bool compare_exchange(T* dst, T& expected, T desired,
                                                    std::memory_order mo = std::memory_order_acq_rel) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8 && (sizeof(T) & (sizeof(T) - 1)) == 0);
  if (!std::atomic_ref<T>(*dst).compare_exchange_strong(expected, desired, mo)) return false;
  detail::TraceStore(dst, sizeof(T));
  return true;
}

// A PM memcpy (no atomicity beyond what memcpy gives).
inline void copy(void* dst, const void* src, size_t n) {
  if (n == 0) return;  // memcpy with a null pointer is undefined even for 0 bytes
  std::memcpy(dst, src, n);
  detail::TraceStore(dst, n);
}

// A PM memset.
inline void fill(void* dst, int byte, size_t n) {
  if (n == 0) return;
  std::memset(dst, byte, n);
  detail::TraceStore(dst, n);
}

// NVM atomic write: aligned 8-byte store (release), flush, fence.
[[gnu::always_inline]] inline void naw(uint64_t* p, uint64_t v, Site site = Site::current()) {
  store(p, v, std::memory_order_release);
  flush(p, sizeof(uint64_t), site);
  fence(site);
  detail::Bump(detail::Mine().naws, 1);
}

// An NAW of *p = v that also stores *also = also_v (release) after it and
// before the write-back (nothing when `also` is null); only *p is flushed.
// For a lock word released by the operation the NAW commits: a store to a line whose write-back is in
// flight waits for the write-back to finish (tens of ns on the machines we
// measured, docs/RESULTS.md issue 14), so the release must not follow the
// flush.
[[gnu::always_inline]] inline void naw(uint64_t* p, uint64_t v, uint64_t* also, uint64_t also_v,
                Site site = Site::current()) {
  store(p, v, std::memory_order_release);
  if (also != nullptr) store(also, also_v, std::memory_order_release);
  flush(p, sizeof(uint64_t), site);
  fence(site);
  detail::Bump(detail::Mine().naws, 1);
}

}  // namespace pmindex::pm
