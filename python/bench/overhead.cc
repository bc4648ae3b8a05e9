// The C++ side of the Python binding's overhead figure (docs/RESULTS.md):
// the same operations as overhead.py, on the same keys, timed the same way,
// so that the difference per operation is what the binding adds.
//
//   overhead_cc [N] [KIND]     (default 1000000 lbtree)
//
// Prints one line per phase: "<phase> <CPU ns per op> <wall ns per op>".
// The CPU time is this thread's (CLOCK_THREAD_CPUTIME_ID), which other
// programs on a shared machine inflate far less than the wall time.
#include <time.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pmindex/db.h"
#include "pmindex/kv.h"

namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

template <class F>
void Phase(const char* name, size_t n, F&& f) {
  const double c0 = ThreadCpuNs();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const auto t1 = std::chrono::steady_clock::now();
  const double c1 = ThreadCpuNs();
  const double ops = static_cast<double>(n);
  std::printf("%s %.1f %.1f\n", name, (c1 - c0) / ops,
              std::chrono::duration<double, std::nano>(t1 - t0).count() / ops);
  std::fflush(stdout);
}

[[noreturn]] void Die(const pmindex::Status& s) {
  std::fprintf(stderr, "overhead_cc: %s\n", s.ToString().c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const std::string kind = argc > 2 ? argv[2] : "lbtree";
  std::vector<uint64_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = SplitMix64(i);
  pmindex::DbOptions big;
  big.size = 1ull << 30;

  auto db = pmindex::Db::CreateInMemory(kind, "", big);
  if (!db.ok()) Die(db.status());
  Phase("db_insert", n, [&] {
    for (uint64_t k : keys)
      if (pmindex::Status s = db.value()->Insert(k, k); !s.ok()) Die(s);
  });
  uint64_t sum = 0;
  Phase("db_get", n, [&] {
    for (uint64_t k : keys) {
      pmindex::Result<pmindex::Value> v = db.value()->Get(k);
      if (!v.ok()) Die(v.status());
      sum += v.value();
    }
  });

  // Keys of the store: "key:" and the decimal key, as overhead.py makes them.
  std::vector<std::string> kv_keys(n);
  for (size_t i = 0; i < n; ++i) kv_keys[i] = "key:" + std::to_string(keys[i]);
  const std::string value(16, 'v');
  auto kv = pmindex::KvStore::CreateInMemory(kind, "", big);
  if (!kv.ok()) Die(kv.status());
  Phase("kv_put", n, [&] {
    for (const std::string& k : kv_keys)
      if (pmindex::Status s = kv.value()->Put(k, value); !s.ok()) Die(s);
  });
  Phase("kv_get", n, [&] {
    for (const std::string& k : kv_keys) {
      pmindex::Result<std::string> v = kv.value()->Get(k);
      if (!v.ok()) Die(v.status());
      sum += v.value().size();
    }
  });
  std::fprintf(stderr, "checksum %" PRIu64 "\n", sum);
  return 0;
}
