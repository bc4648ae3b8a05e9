// pmleafbench: the time of one search inside one fixed, full leaf, for the
// three leaf designs of the LB+-Tree paper (section 4.3, "leaf search"):
// fingerprints + SIMD (lbtree, fptree) against the sorted indirection array
// searched by binary search (wbtree).
//
// pmbench cannot isolate this: every pmbench lookup also walks the DRAM
// inner nodes and pays the harness. Here each leaf is built once in a
// 256-byte aligned DRAM buffer by the tree's own bulk-load code (Fill), and
// the timed loop calls the tree's own Find on a shuffled list of keys, so the
// figure is the leaf search alone (plus a loop iteration, which `--leaf none`
// measures).
//
// Usage: pmleafbench [--node 256|512|1024] [--searches N] [--repeat R]
//                    [--miss] [--seed S]
// Output: one line per leaf design, median ns per search over R runs, and
// the runs themselves.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "trees/pm_leaf/fptree_leaf.h"
#include "trees/pm_leaf/lbtree_leaf.h"
#include "trees/pm_leaf/wbtree_leaf.h"

namespace {

using pmindex::KV;
using pmindex::PPtr;

struct Args {
  int node = 256;
  uint64_t searches = 20000000;
  int repeat = 5;
  bool miss = false;
  uint64_t seed = 1;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "pmleafbench: %s\n"
               "usage: pmleafbench [--node 256|512|1024] [--searches N] [--repeat R] [--miss] "
               "[--seed S]\n",
               why.c_str());
  std::exit(2);
}

uint64_t ParseU64(const char* flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
    Usage(std::string("bad value for ") + flag + ": '" + text + "'");
  }
  return v;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Usage(f + " needs a value");
      return argv[++i];
    };
    if (f == "--node") {
      a.node = static_cast<int>(ParseU64("--node", value()));
      if (a.node != 256 && a.node != 512 && a.node != 1024) Usage("--node must be 256, 512 or 1024");
    } else if (f == "--searches") {
      a.searches = ParseU64("--searches", value());
      if (a.searches == 0) Usage("--searches must be > 0");
    } else if (f == "--repeat") {
      a.repeat = static_cast<int>(ParseU64("--repeat", value()));
      if (a.repeat < 1 || a.repeat > 1000) Usage("--repeat must be in 1..1000");
    } else if (f == "--miss") {
      a.miss = true;
    } else if (f == "--seed") {
      a.seed = ParseU64("--seed", value());
    } else if (f == "--help" || f == "-h") {
      std::printf(
          "pmleafbench: ns per search inside one full leaf (lbtree, fptree: fingerprints;\n"
          "wbtree: indirection array + binary search), each built by the tree's own Fill.\n"
          "  --node B      leaf size in bytes: 256, 512 or 1024 (default 256)\n"
          "  --searches N  searches per run (default 20000000)\n"
          "  --repeat R    runs; the median is reported (default 5)\n"
          "  --miss        search keys that are absent (default: present keys)\n"
          "  --seed S      key seed (default 1)\n");
      std::exit(0);
    } else {
      Usage("unknown argument '" + f + "'");
    }
  }
  return a;
}

// A leaf in DRAM, aligned as in the pool.
template <class L>
struct Buffer {
  L* leaf;
  Buffer() {
    void* p = ::operator new(sizeof(L), std::align_val_t{256});
    leaf = static_cast<L*>(p);
  }
  ~Buffer() { ::operator delete(leaf, std::align_val_t{256}); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// The probe list: kProbes keys, shuffled, so the branch predictor cannot
// learn one key's path.
constexpr size_t kProbes = 4096;

struct Run {
  std::string name;
  int slots = 0;
  std::vector<double> ns;
};

template <class L>
Run Measure(const char* name, const Args& a) {
  constexpr int n = L::kSlots;
  std::mt19937_64 rng(a.seed);
  std::vector<KV> kv;
  std::vector<uint64_t> absent;
  while (static_cast<int>(kv.size()) < n) {
    uint64_t k = rng();
    if (k % 2 == 1) continue;  // present keys are even, absent ones odd
    kv.push_back(KV{k, k ^ 0x5555});
  }
  std::sort(kv.begin(), kv.end(), [](const KV& x, const KV& y) { return x.key < y.key; });
  kv.erase(std::unique(kv.begin(), kv.end(), [](const KV& x, const KV& y) { return x.key == y.key; }),
           kv.end());
  Buffer<L> buf;
  L::Fill(buf.leaf, kv.data(), static_cast<int>(kv.size()), PPtr());
  std::vector<uint64_t> probes(kProbes);
  for (size_t i = 0; i < kProbes; ++i) {
    probes[i] = a.miss ? (rng() | 1) : kv[rng() % kv.size()].key;
  }
  Run r;
  r.name = name;
  r.slots = static_cast<int>(kv.size());
  for (int rep = 0; rep < a.repeat + 1; ++rep) {  // run 0 warms up, not counted
    uint64_t found = 0, sum = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < a.searches; ++i) {
      uint64_t v = 0;
      if (buf.leaf->Find(probes[i & (kProbes - 1)], &v)) {
        ++found;
        sum += v;
      }
    }
    auto t1 = std::chrono::steady_clock::now();
    // Every present probe must be found with its own value; no absent one.
    uint64_t want = a.miss ? 0 : a.searches;
    if (found != want) {
      std::fprintf(stderr, "pmleafbench: %s found %llu of %llu probes (expected %llu)\n", name,
                   static_cast<unsigned long long>(found), static_cast<unsigned long long>(a.searches),
                   static_cast<unsigned long long>(want));
      std::exit(1);
    }
    asm volatile("" : : "r"(sum));
    if (rep > 0) {
      r.ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / a.searches);
    }
  }
  return r;
}

// The loop alone: same probe list, a trivial "search".
Run MeasureLoop(const Args& a) {
  std::vector<uint64_t> probes(kProbes);
  std::mt19937_64 rng(a.seed);
  for (auto& p : probes) p = rng();
  Run r;
  r.name = "loop-only";
  for (int rep = 0; rep < a.repeat + 1; ++rep) {
    uint64_t sum = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < a.searches; ++i) {
      uint64_t p = probes[i & (kProbes - 1)];
      asm volatile("" : "+r"(p));
      sum += p;
    }
    auto t1 = std::chrono::steady_clock::now();
    asm volatile("" : : "r"(sum));
    if (rep > 0) r.ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / a.searches);
  }
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

template <int kBlocks, size_t kBytes>
std::vector<Run> MeasureAll(const Args& a) {
  return {Measure<pmindex::lbtree::Leaf<kBlocks>>("lbtree", a),
          Measure<pmindex::fptree::Leaf<kBytes>>("fptree", a),
          Measure<pmindex::wbtree::Leaf<kBytes>>("wbtree", a), MeasureLoop(a)};
}

}  // namespace

int main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  std::vector<Run> runs = a.node == 256   ? MeasureAll<1, 256>(a)
                          : a.node == 512 ? MeasureAll<2, 512>(a)
                                          : MeasureAll<4, 1024>(a);
  std::printf("leaf search, node=%d, %s keys, %llu searches x %d runs (median ns per search)\n",
              a.node, a.miss ? "absent" : "present", static_cast<unsigned long long>(a.searches),
              a.repeat);
  std::printf("%-10s %6s %10s   runs\n", "leaf", "slots", "ns/search");
  for (const Run& r : runs) {
    std::printf("%-10s %6d %10.2f  ", r.name.c_str(), r.slots, Median(r.ns));
    for (double x : r.ns) std::printf(" %.2f", x);
    std::printf("\n");
  }
  return 0;
}
