// Persistence-layer tests: flush/fence/NAW counters (per thread and
// global), eADR, write-latency emulation, the tracer hook.
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "pm/persist.h"

namespace pmindex::pm {
namespace {

// A 64-byte aligned buffer of 64 lines.
struct alignas(64) Buffer {
  char bytes[64 * 64];
};

// Restores the global persistence configuration after a test.
class ConfigGuard {
 public:
  ConfigGuard() : ns_(PmWriteNs()), eadr_(Eadr()) {}
  ~ConfigGuard() {
    SetPmWriteNs(ns_);
    SetEadr(eadr_);
  }

 private:
  uint32_t ns_;
  bool eadr_;
};

uint64_t LinesFor(const void* p, size_t n) {
  Counters before = ThreadCounters();
  flush(p, n);
  return (ThreadCounters() - before).lines_flushed;
}

TEST(PersistCounters, FlushCountsEveryOverlappedLine) {
  ConfigGuard guard;
  SetEadr(false);
  SetPmWriteNs(0);
  static Buffer buf;
  char* p = buf.bytes;
  EXPECT_EQ(LinesFor(p, 0), 0u);
  EXPECT_EQ(LinesFor(p, 1), 1u);
  EXPECT_EQ(LinesFor(p + 10, 1), 1u);
  EXPECT_EQ(LinesFor(p, 64), 1u);
  EXPECT_EQ(LinesFor(p + 1, 64), 2u);   // crosses into the second line
  EXPECT_EQ(LinesFor(p + 60, 8), 2u);   // 8 bytes straddling a boundary
  EXPECT_EQ(LinesFor(p + 63, 130), 4u);  // bytes 63..192: lines 0..3
  EXPECT_EQ(LinesFor(p + 64, 128), 2u);
  EXPECT_EQ(LinesFor(p, sizeof(buf.bytes)), 64u);
  EXPECT_EQ(LinesFor(p + 32, sizeof(buf.bytes) - 64), 64u);
}

TEST(PersistCounters, FencesNawsAndPersist) {
  ConfigGuard guard;
  SetEadr(false);
  static Buffer buf;
  Counters before = ThreadCounters();
  fence();
  fence();
  fence();
  Counters d = ThreadCounters() - before;
  EXPECT_EQ(d.fences, 3u);
  EXPECT_EQ(d.lines_flushed, 0u);
  EXPECT_EQ(d.naws, 0u);

  before = ThreadCounters();
  persist(buf.bytes + 100, 100);  // lines 1..3
  d = ThreadCounters() - before;
  EXPECT_EQ(d.lines_flushed, 3u);
  EXPECT_EQ(d.fences, 1u);

  before = ThreadCounters();
  auto* word = reinterpret_cast<uint64_t*>(buf.bytes + 8);
  naw(word, 0xDEADBEEF);
  d = ThreadCounters() - before;
  EXPECT_EQ(*word, 0xDEADBEEFu);
  EXPECT_EQ(d.naws, 1u);
  EXPECT_EQ(d.fences, 1u);
  EXPECT_EQ(d.lines_flushed, 1u);
}

TEST(PersistCounters, StoreHelpersWriteTheBytes) {
  static Buffer buf;
  uint64_t* w = reinterpret_cast<uint64_t*>(buf.bytes);
  store(w, uint64_t{77});
  EXPECT_EQ(*w, 77u);
  struct Big {
    uint64_t a[3];
  };
  store(reinterpret_cast<Big*>(buf.bytes + 64), Big{{1, 2, 3}});
  EXPECT_EQ(reinterpret_cast<Big*>(buf.bytes + 64)->a[2], 3u);
  copy(buf.bytes + 200, "abcdef", 6);
  EXPECT_EQ(std::string(buf.bytes + 200, 6), "abcdef");
  fill(buf.bytes + 300, 0x7F, 10);
  EXPECT_EQ(buf.bytes[309], 0x7F);
  EXPECT_EQ(buf.bytes[310], 0);
}

TEST(PersistCounters, EadrMakesFlushesFree) {
  ConfigGuard guard;
  SetPmWriteNs(1000);  // would cost >= 64 us if it were applied
  SetEadr(true);
  EXPECT_TRUE(Eadr());
  static Buffer buf;
  // The fastest of five tries: one try can be preempted on a busy machine
  // (a CI run measured 40 us once), five in a row cannot all be.
  uint64_t ticks = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    Counters before = ThreadCounters();
    uint64_t t0 = __rdtsc();
    flush(buf.bytes, sizeof(buf.bytes));
    persist(buf.bytes, 100);
    naw(reinterpret_cast<uint64_t*>(buf.bytes), 5);
    ticks = std::min<uint64_t>(ticks, __rdtsc() - t0);
    Counters d = ThreadCounters() - before;
    EXPECT_EQ(d.lines_flushed, 0u);
    EXPECT_EQ(d.fences, 2u);  // fences stay
    EXPECT_EQ(d.naws, 1u);
  }
  // No latency was emulated: far below the 66 us that 66 lines would cost.
  EXPECT_LT(static_cast<double>(ticks) / TscTicksPerNs(), 30000.0);
  Counters before;
  SetEadr(false);
  before = ThreadCounters();
  flush(buf.bytes, 64);
  EXPECT_EQ((ThreadCounters() - before).lines_flushed, 1u);
}

TEST(PersistCounters, PerThreadAndGlobalSums) {
  ConfigGuard guard;
  SetEadr(false);
  SetPmWriteNs(0);
  constexpr int kThreads = 4;
  static Buffer bufs[kThreads];
  ResetCounters();
  EXPECT_EQ(GlobalCounters().lines_flushed, 0u);
  EXPECT_EQ(ThreadCounters().fences, 0u);

  std::barrier sync(kThreads + 1);
  std::atomic<int> wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      // Thread t: (t+1)*10 lines, t+1 fences, t NAWs.
      for (int i = 0; i <= t; ++i) {
        flush(bufs[t].bytes, 10 * 64);
        fence();
      }
      for (int i = 0; i < t; ++i) naw(reinterpret_cast<uint64_t*>(bufs[t].bytes), i);
      Counters mine = ThreadCounters();
      if (mine.lines_flushed != 10u * (t + 1) + t || mine.fences != uint64_t(t + 1 + t) ||
          mine.naws != uint64_t(t)) {
        wrong.fetch_add(1);
      }
      sync.arrive_and_wait();  // main reads the sums of live threads
      sync.arrive_and_wait();
    });
  }
  sync.arrive_and_wait();
  // Lines: sum 10(t+1) + t = 100 + 6; fences: sum (2t+1) = 16; NAWs: 6.
  Counters live = GlobalCounters();
  EXPECT_EQ(live.lines_flushed, 106u);
  EXPECT_EQ(live.fences, 16u);
  EXPECT_EQ(live.naws, 6u);
  EXPECT_EQ(ThreadCounters().lines_flushed, 0u);  // the main thread did nothing
  sync.arrive_and_wait();
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // Exited threads still count.
  Counters after = GlobalCounters();
  EXPECT_EQ(after.lines_flushed, 106u);
  EXPECT_EQ(after.fences, 16u);
  EXPECT_EQ(after.naws, 6u);

  ResetCounters();
  Counters zero = GlobalCounters();
  EXPECT_EQ(zero.lines_flushed, 0u);
  EXPECT_EQ(zero.fences, 0u);
  EXPECT_EQ(zero.naws, 0u);
}

TEST(PersistCounters, AllocatedBytesAreNet) {
  ResetCounters();
  CountAllocated(1000);
  CountAllocated(-300);
  EXPECT_EQ(ThreadCounters().pm_bytes_allocated, 700u);
  std::thread([] { CountAllocated(50); }).join();
  EXPECT_EQ(GlobalCounters().pm_bytes_allocated, 750u);
  ResetCounters();
  EXPECT_EQ(GlobalCounters().pm_bytes_allocated, 0u);
}

TEST(PersistLatency, EmulatedWriteLatencyIsALowerBound) {
  ConfigGuard guard;
  SetEadr(false);
  SetPmWriteNs(1000);
  EXPECT_EQ(PmWriteNs(), 1000u);
  ASSERT_GT(TscTicksPerNs(), 0.0);
  static Buffer buf;
  auto wall0 = std::chrono::steady_clock::now();
  uint64_t t0 = __rdtsc();
  for (int i = 0; i < 1000 / 64 + 1; ++i) flush(buf.bytes, sizeof(buf.bytes));  // 1024 lines
  uint64_t ticks = __rdtsc() - t0;
  auto wall = std::chrono::steady_clock::now() - wall0;
  double ns = static_cast<double>(ticks) / TscTicksPerNs();
  // 1024 lines at 1000 ns each; allow 5% for TSC calibration error.
  EXPECT_GE(ns, 0.95 * 1024 * 1000) << "TSC ns: " << ns;
  double wall_ns = std::chrono::duration<double, std::nano>(wall).count();
  EXPECT_GE(wall_ns, 0.9 * 1024 * 1000);
  SetPmWriteNs(0);
  EXPECT_EQ(PmWriteNs(), 0u);
}

TEST(PersistFlushKind, ActiveKindHasAName) {
  std::string name = FlushKindName(ActiveFlushKind());
  EXPECT_TRUE(name == "clwb" || name == "clflushopt" || name == "clflush") << name;
}

// Records what the tracer hook sees.
class RecordingTracer : public Tracer {
 public:
  void OnStore(const void*, size_t) override { ++stores; }
  void OnFlush(const void* addr, size_t n, const Site& site) override {
    last_addr = addr;
    last_n = n;
    flush_line = site.line();
    ++flushes;
  }
  void OnFence(const Site& site) override {
    fence_line = site.line();
    ++fences;
  }
  int stores = 0, flushes = 0, fences = 0;
  const void* last_addr = nullptr;
  size_t last_n = 0;
  unsigned flush_line = 0, fence_line = 0;
};

TEST(PersistTracer, SeesFlushesAndFencesWithTheirSites) {
  static Buffer buf;
  RecordingTracer tr;
  InstallTracer(&tr);
  ASSERT_EQ(InstalledTracer(), &tr);
  flush(buf.bytes + 3, 70);
  fence();
  unsigned naw_line = __LINE__ + 1;
  naw(reinterpret_cast<uint64_t*>(buf.bytes), 1);
  InstallTracer(nullptr);
  EXPECT_EQ(InstalledTracer(), nullptr);
  EXPECT_EQ(tr.flushes, 2);
  EXPECT_EQ(tr.fences, 2);
  EXPECT_EQ(tr.last_addr, buf.bytes);
  EXPECT_EQ(tr.last_n, 8u);
  EXPECT_EQ(tr.flush_line, naw_line);
  EXPECT_EQ(tr.fence_line, naw_line);
#ifdef PMINDEX_TRACED
  EXPECT_GE(tr.stores, 1);
#else
  EXPECT_EQ(tr.stores, 0);  // stores are traced only in the traced library
#endif
  flush(buf.bytes, 64);  // no tracer: nothing recorded
  EXPECT_EQ(tr.flushes, 2);
}

TEST(PersistTracer, FirstFlushSiteIsItsCallLine) {
  static Buffer buf;
  RecordingTracer tr;
  InstallTracer(&tr);
  unsigned line = __LINE__ + 1;
  flush(buf.bytes, 1);
  unsigned fline = __LINE__ + 1;
  fence();
  InstallTracer(nullptr);
  EXPECT_EQ(tr.flush_line, line);
  EXPECT_EQ(tr.fence_line, fline);
}

}  // namespace
}  // namespace pmindex::pm
