// Shared helpers of the scenario tests: the list of (index, config) pairs
// every scenario runs over, seeds and scaling from the environment, an
// index factory that hides volatile / in-memory / file pools, and a
// std::map oracle that checks an index operation by operation.
//
// Environment:
//   PMINDEX_SEED=<n>             replay one seed (else a fresh seed per test)
//   PMINDEX_SCALE=<x>            multiply operation counts (default 1)
//   PMINDEX_SCENARIO_INDEX=name  run only this index (comma-separated list)
//   PMINDEX_SCENARIO_CONFIGS=first  only the first of each index's test
//                                configs (the ASan+UBSan run of
//                                scripts/test.sh; ctest discovers the
//                                tests when it runs, in this environment)
//
// Every randomized scenario opens with `SeedScope seed;` which adds
// "seed=<n> (replay: PMINDEX_SEED=<n>)" to every failure message.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "alloc/allocator.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/pool.h"
#include "pmindex/status.h"
#include "support/kinds.h"
#include "support/seed.h"
#include "support/status.h"

namespace pmindex::scenario {

// ------------------------------------------------------------ environment

inline double Scale() {
  static const double scale = [] {
    const char* s = std::getenv("PMINDEX_SCALE");
    if (s == nullptr || *s == '\0') return 1.0;
    char* end = nullptr;
    double v = std::strtod(s, &end);
    if (end == s || *end != '\0' || !(v > 0) || v > 1e6) {
      std::fprintf(stderr, "PMINDEX_SCALE='%s' is not a positive number; using 1\n", s);
      return 1.0;
    }
    return v;
  }();
  return scale;
}

// n scaled by PMINDEX_SCALE, never below `floor`.
inline size_t Scaled(size_t n, size_t floor = 1) {
  double v = static_cast<double>(n) * Scale();
  size_t r = v < 1 ? 1 : static_cast<size_t>(v);
  return std::max(r, floor);
}

// Sanitizer builds run fewer operations by default so the suite stays
// within about a minute per index config.
inline bool SanitizerBuild() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}
inline size_t Ops(size_t release_n, size_t floor = 1) {
  return Scaled(SanitizerBuild() ? std::max<size_t>(release_n / 4, floor) : release_n, floor);
}

// The seed (tests/support/seed.h): `SeedScope seed;` opens every
// randomized scenario.
using testing::EnvSeed;
using testing::SeedScope;

// Small fast PRNG (xoshiro256**), seeded by splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    uint64_t r = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, n); n > 0.
  uint64_t uniform(uint64_t n) { return static_cast<uint64_t>((__uint128_t{next()} * n) >> 64); }
  // Uniform in [lo, hi].
  uint64_t range(uint64_t lo, uint64_t hi) {
    return hi - lo == UINT64_MAX ? next() : lo + uniform(hi - lo + 1);
  }
  bool one_in(uint64_t n) { return uniform(n) == 0; }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// ------------------------------------------------------------- parameters

struct IndexParam {
  const IndexInfo* info = nullptr;
  std::string config;  // option string ("" = defaults)
  std::string name;    // [A-Za-z0-9_] test-name suffix, e.g. lbtree_node_512
};

inline std::string SanitizeName(std::string_view s) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  // Collapse runs of '_' and trim them at the ends.
  std::string r;
  for (char c : out) {
    if (c == '_' && (r.empty() || r.back() == '_')) continue;
    r += c;
  }
  while (!r.empty() && r.back() == '_') r.pop_back();
  return r.empty() ? "x" : r;
}

inline bool SelectedByEnv(std::string_view name) {
  const char* s = std::getenv("PMINDEX_SCENARIO_INDEX");
  if (s == nullptr || *s == '\0') return true;
  std::string_view all(s);
  while (!all.empty()) {
    size_t comma = all.find(',');
    std::string_view one = all.substr(0, comma);
    if (one == name) return true;
    if (comma == std::string_view::npos) break;
    all.remove_prefix(comma + 1);
  }
  return false;
}

enum class Want { kData, kPersistent, kNoData };

// Every registered index but the fixtures x its test configs
// (support/kinds.h), filtered.
inline std::vector<IndexParam> Params(Want want) {
  std::vector<IndexParam> out;
  std::set<std::string> names;
  for (const IndexInfo* info : testing::TestKinds::Get().NonFixtures()) {
    if (!SelectedByEnv(info->name)) continue;
    bool keep = false;
    switch (want) {
      case Want::kData: keep = info->stores_data; break;
      case Want::kPersistent: keep = info->stores_data && info->persistent; break;
      case Want::kNoData: keep = !info->stores_data; break;
    }
    if (!keep) continue;
    std::vector<std::string> configs = testing::TestKinds::Get().Configs(info->name);
    const char* which = std::getenv("PMINDEX_SCENARIO_CONFIGS");
    if (which != nullptr && std::string_view(which) == "first") configs.resize(1);
    for (const std::string& c : configs) {
      std::string n = SanitizeName(c.empty() ? info->name : info->name + "_" + c);
      std::string unique = n;
      for (int i = 2; names.count(unique) != 0; ++i) unique = n + "_" + std::to_string(i);
      names.insert(unique);
      out.push_back({info, c, unique});
    }
  }
  return out;
}

inline std::string ParamName(const ::testing::TestParamInfo<IndexParam>& p) {
  return p.param.name;
}

inline void PrintTo(const IndexParam& p, std::ostream* os) {
  *os << p.info->name << "(" << p.config << ")";
}

// Declares the instantiation of a TEST_P suite over the given selection.
// The prefix is empty, so tests are named Suite.Case/index_config.
#define PMINDEX_SCENARIO_SUITE(suite, want)                                    \
  GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(suite);                        \
  INSTANTIATE_TEST_SUITE_P(, suite,                                            \
                           ::testing::ValuesIn(::pmindex::scenario::Params(want)), \
                           ::pmindex::scenario::ParamName)

// --------------------------------------------------------------- factory

// A scratch directory removed (with everything in it) at destruction.
class TempDir {
 public:
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/pmindex-scn-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// An index under test with the pool it lives in (null for volatile kinds).
// Destruction closes the index before the pool.
struct TestIndex {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
  std::string path;  // file pools only

  TestIndex() = default;
  TestIndex(TestIndex&&) = default;
  TestIndex& operator=(TestIndex&& o) {
    Reset();
    pool = std::move(o.pool);
    idx = std::move(o.idx);
    path = std::move(o.path);
    return *this;
  }
  ~TestIndex() { Reset(); }

  Index* operator->() const { return idx.get(); }
  Index& operator*() const { return *idx; }

  // Clean shutdown: close the index, then the pool. Returns the first error.
  Status Close() {
    Status s;
    if (idx) {
      s = idx->close();
      idx.reset();
    }
    if (pool) {
      Status p = pool->Close();
      if (s.ok()) s = p;
      pool.reset();
    }
    return s;
  }
  // Teardown (destructor, move): nothing to report to. Tests that need the
  // close to succeed assert on Close().
  void Reset() { IgnoreError(Close(), "teardown; tests assert on Close()"); }
};

inline PoolOptions TestPoolOptions(const IndexParam& p) {
  PoolOptions o;
  o.size = PoolOptions::kMinSize;  // small first segment: scenarios exercise growth
  o.max_size = 2ull << 30;
  o.kind = p.info->name;
  o.index_options = p.config;
  return o;
}

// For its lifetime, pools attach with the simulated NUMA nodes the kind's
// test entry asks for (support/kinds.h; none: nothing changes). The
// allocator keeps the topology it attached with.
class NumaScope {
 public:
  explicit NumaScope(std::string_view kind) {
    const int nodes = testing::TestKinds::Get().NumaNodes(kind);
    if (nodes <= 0) return;
    prev_ = alloc::Topology::Default();
    alloc::Topology::SetDefault(alloc::Topology::Simulated(nodes));
    set_ = true;
  }
  ~NumaScope() {
    if (set_) alloc::Topology::SetDefault(prev_);
  }
  NumaScope(const NumaScope&) = delete;
  NumaScope& operator=(const NumaScope&) = delete;

 private:
  bool set_ = false;
  std::shared_ptr<alloc::Topology> prev_;
};

// A fresh index: volatile, or persistent in an in-memory pool.
inline Result<TestIndex> MakeIndex(const IndexParam& p, std::optional<PoolOptions> popt = {}) {
  TestIndex t;
  if (p.info->persistent) {
    auto pool = Pool::CreateInMemory(popt ? *popt : TestPoolOptions(p));
    if (!pool.ok()) return pool.status();
    t.pool = std::move(pool.value());
  }
  NumaScope numa(p.info->name);
  auto idx = create_index(p.info->name, p.config, t.pool.get());
  if (!idx.ok()) return idx.status();
  t.idx = std::move(idx.value());
  return t;
}

// A fresh persistent index in a new pool file at `path`.
inline Result<TestIndex> MakeFileIndex(const IndexParam& p, const std::string& path,
                                       std::optional<PoolOptions> popt = {}) {
  TestIndex t;
  auto pool = Pool::Create(path, popt ? *popt : TestPoolOptions(p));
  if (!pool.ok()) return pool.status();
  t.pool = std::move(pool.value());
  t.path = path;
  NumaScope numa(p.info->name);
  auto idx = create_index(p.info->name, p.config, t.pool.get());
  if (!idx.ok()) return idx.status();
  t.idx = std::move(idx.value());
  return t;
}

// Closes t cleanly and opens its pool file again (recovering the index).
inline Result<TestIndex> ReopenFile(TestIndex& t) {
  std::string path = t.path;
  Status s = t.Close();
  if (!s.ok()) return s;
  TestIndex r;
  auto pool = Pool::Open(path);
  if (!pool.ok()) return pool.status();
  r.pool = std::move(pool.value());
  r.path = path;
  NumaScope numa(r.pool->kind());
  auto idx = open_index(r.pool.get());
  if (!idx.ok()) return idx.status();
  r.idx = std::move(idx.value());
  return r;
}

// Opens a copy of a pool image (e.g. the bytes of a live pool, as after a
// crash at a quiescent point) as a new in-memory pool and recovers it.
inline Result<TestIndex> OpenImageCopy(std::span<const std::byte> image) {
  TestIndex r;
  auto pool = Pool::OpenImage(image);
  if (!pool.ok()) return pool.status();
  r.pool = std::move(pool.value());
  NumaScope numa(r.pool->kind());
  auto idx = open_index(r.pool.get());
  if (!idx.ok()) return idx.status();
  r.idx = std::move(idx.value());
  return r;
}

inline std::string CodeName(const Status& s) { return Status::CodeName(s.code()); }

// ---------------------------------------------------------------- oracle

// A std::map model of one index. Each Check* method performs the operation
// on both and returns an assertion failure describing the first difference.
// Operations the index rejects with OutOfSpace are not applied to the model
// when `allow_oos` is set (and are an error otherwise).
class MapOracle {
 public:
  explicit MapOracle(Index* idx) : idx_(idx) {}
  void set_index(Index* idx) { idx_ = idx; }
  void set_allow_out_of_space(bool v) { allow_oos_ = v; }
  const std::map<Key, Value>& map() const { return m_; }
  std::map<Key, Value>& mutable_map() { return m_; }
  size_t size() const { return m_.size(); }
  uint64_t out_of_space_count() const { return oos_; }
  uint64_t remove_out_of_space_count() const { return remove_oos_; }

  ::testing::AssertionResult Insert(Key k, Value v) {
    Status s = idx_->insert(k, v);
    auto it = m_.find(k);
    if (it != m_.end()) {
      if (!s.is_already_exists())
        return Fail("insert", k) << " of a present key returned " << s.ToString()
                                 << ", want AlreadyExists";
      return Check(k, "insert of a present key must keep the old value");
    }
    if (s.is_out_of_space() && allow_oos_) {
      ++oos_;
      return Absent(k, "insert that ran out of space");
    }
    if (!s.ok()) return Fail("insert", k) << " of a missing key returned " << s.ToString();
    m_[k] = v;
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult Update(Key k, Value v) {
    Status s = idx_->update(k, v);
    auto it = m_.find(k);
    if (it == m_.end()) {
      if (!s.is_not_found())
        return Fail("update", k) << " of a missing key returned " << s.ToString()
                                 << ", want NotFound";
      return Absent(k, "update of a missing key must not insert it");
    }
    if (s.is_out_of_space() && allow_oos_) {
      ++oos_;
      return Check(k, "update that ran out of space must keep the old value");
    }
    if (!s.ok()) return Fail("update", k) << " of a present key returned " << s.ToString();
    it->second = v;
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult Upsert(Key k, Value v) {
    Status s = idx_->upsert(k, v);
    if (s.is_out_of_space() && allow_oos_) {
      ++oos_;
      return m_.count(k) ? Check(k, "upsert that ran out of space must keep the old value")
                         : Absent(k, "upsert that ran out of space");
    }
    if (!s.ok()) return Fail("upsert", k) << " returned " << s.ToString();
    m_[k] = v;
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult Remove(Key k) {
    Status s = idx_->remove(k);
    auto it = m_.find(k);
    if (it == m_.end()) {
      if (!s.is_not_found())
        return Fail("remove", k) << " of a missing key returned " << s.ToString()
                                 << ", want NotFound";
      return ::testing::AssertionSuccess();
    }
    if (s.is_out_of_space() && allow_oos_) {
      // Not in index.h's list for remove, but append-only leaves (NV-Tree)
      // may need a new node to record a removal. The key must stay intact.
      ++oos_;
      ++remove_oos_;
      return Check(k, "remove that ran out of space must keep the key");
    }
    if (!s.ok()) return Fail("remove", k) << " of a present key returned " << s.ToString();
    m_.erase(it);
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult Lookup(Key k) { return Check(k, "lookup"); }

  // scan(from, n) must return exactly the model's first n pairs >= from.
  ::testing::AssertionResult Scan(Key from, size_t n) {
    std::vector<KV> got(n + 1, KV{0xdeadbeefull, 0xdeadbeefull});
    size_t c = idx_->scan(from, n, got.data());
    if (c > n) return Fail("scan", from) << " n=" << n << " returned count " << c << " > n";
    if (got[n].key != 0xdeadbeefull || got[n].value != 0xdeadbeefull)
      return Fail("scan", from) << " n=" << n << " wrote past out[n-1]";
    auto it = m_.lower_bound(from);
    size_t i = 0;
    for (; i < n && it != m_.end(); ++i, ++it) {
      if (i >= c)
        return Fail("scan", from) << " n=" << n << " returned " << c << " pairs, want more: pair "
                                  << i << " should be (" << it->first << ", " << it->second << ")";
      if (got[i].key != it->first || got[i].value != it->second)
        return Fail("scan", from) << " n=" << n << " pair " << i << " is (" << got[i].key << ", "
                                  << got[i].value << "), want (" << it->first << ", "
                                  << it->second << ")";
    }
    if (c != i)
      return Fail("scan", from) << " n=" << n << " returned " << c << " pairs, want " << i
                                << "; extra pair (" << got[i].key << ", " << got[i].value << ")";
    return ::testing::AssertionSuccess();
  }

  // The whole index, read with scans of `batch` pairs, equals the model.
  ::testing::AssertionResult FullScan(size_t batch = 1000) {
    std::vector<KV> all;
    if (auto r = ScanAll(*idx_, &all, batch); !r) return r;
    if (all.size() != m_.size()) {
      auto r = ::testing::AssertionFailure()
               << "full scan returned " << all.size() << " pairs, model holds " << m_.size();
      DescribeFirstDifference(all, r);
      return r;
    }
    size_t i = 0;
    for (const auto& [k, v] : m_) {
      if (all[i].key != k || all[i].value != v)
        return ::testing::AssertionFailure() << "full scan pair " << i << " is (" << all[i].key
                                             << ", " << all[i].value << "), want (" << k << ", "
                                             << v << ")";
      ++i;
    }
    return ::testing::AssertionSuccess();
  }

  // verify() passes and stats().entries matches the model.
  ::testing::AssertionResult Verify() {
    Status s = idx_->verify();
    if (!s.ok()) return ::testing::AssertionFailure() << "verify(): " << s.ToString();
    IndexStats st = idx_->stats();
    if (st.entries != m_.size())
      return ::testing::AssertionFailure()
             << "stats().entries = " << st.entries << ", model holds " << m_.size();
    if (!m_.empty() && (st.height == 0 || st.leaves == 0))
      return ::testing::AssertionFailure() << "stats() of a non-empty index: height " << st.height
                                           << ", leaves " << st.leaves;
    if (!m_.empty() && idx_->persistent() && st.pm_bytes == 0)
      return ::testing::AssertionFailure() << "stats().pm_bytes = 0 for a non-empty persistent index";
    return ::testing::AssertionSuccess();
  }

  // Every model key is found with its value (point lookups).
  ::testing::AssertionResult LookupAll() {
    for (const auto& [k, v] : m_) {
      auto got = idx_->lookup(k);
      if (!got || *got != v) return Check(k, "lookup of every model key");
    }
    return ::testing::AssertionSuccess();
  }

  // Reads the whole index with repeated scans, checking they are strictly
  // ascending and continue where the previous batch ended.
  static ::testing::AssertionResult ScanAll(Index& idx, std::vector<KV>* out, size_t batch) {
    out->clear();
    std::vector<KV> buf(batch);
    Key from = 0;
    for (;;) {
      size_t c = idx.scan(from, batch, buf.data());
      if (c > batch) return ::testing::AssertionFailure() << "scan returned count " << c << " > n";
      for (size_t i = 0; i < c; ++i) {
        if (buf[i].key < from)
          return ::testing::AssertionFailure()
                 << "scan(" << from << ") returned key " << buf[i].key << " below from";
        if (!out->empty() && buf[i].key <= out->back().key)
          return ::testing::AssertionFailure() << "scan not strictly ascending: " << buf[i].key
                                               << " after " << out->back().key;
        out->push_back(buf[i]);
      }
      if (c < batch) break;
      if (out->back().key == UINT64_MAX) break;
      from = out->back().key + 1;
    }
    return ::testing::AssertionSuccess();
  }

 private:
  ::testing::AssertionResult Fail(const char* op, Key k) {
    return ::testing::AssertionFailure() << op << "(" << k << ")";
  }
  // The index agrees with the model about key k.
  ::testing::AssertionResult Check(Key k, const char* what) {
    auto got = idx_->lookup(k);
    auto it = m_.find(k);
    if (it == m_.end()) {
      if (got)
        return ::testing::AssertionFailure()
               << what << ": lookup(" << k << ") found " << *got << ", want absent";
      return ::testing::AssertionSuccess();
    }
    if (!got)
      return ::testing::AssertionFailure()
             << what << ": lookup(" << k << ") found nothing, want " << it->second;
    if (*got != it->second)
      return ::testing::AssertionFailure()
             << what << ": lookup(" << k << ") = " << *got << ", want " << it->second;
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult Absent(Key k, const char* what) {
    auto got = idx_->lookup(k);
    if (got)
      return ::testing::AssertionFailure()
             << what << ": lookup(" << k << ") found " << *got << ", want absent";
    return ::testing::AssertionSuccess();
  }
  void DescribeFirstDifference(const std::vector<KV>& all, ::testing::AssertionResult& r) const {
    size_t i = 0;
    auto it = m_.begin();
    for (; i < all.size() && it != m_.end(); ++i, ++it) {
      if (all[i].key != it->first) {
        r << "; first difference at position " << i << ": index has " << all[i].key
          << ", model has " << it->first;
        return;
      }
    }
    if (i < all.size()) r << "; index has extra key " << all[i].key;
    if (it != m_.end()) r << "; index misses key " << it->first;
  }

  Index* idx_;
  std::map<Key, Value> m_;
  bool allow_oos_ = false;
  uint64_t oos_ = 0;
  uint64_t remove_oos_ = 0;
};

// ------------------------------------------------------------ leak check

// After an open, the blocks the allocator has handed out are exactly the
// blocks the index reaches from its roots.
inline ::testing::AssertionResult NoLeaks(Index& idx) {
  if (idx.allocator() == nullptr)
    return ::testing::AssertionFailure() << "persistent index without an allocator";
  idx.quiesce();  // background work done, retired blocks freed
  std::set<uint64_t> live, reached;
  idx.allocator()->ForEachLiveBlock([&](PPtr p, size_t) { live.insert(p.raw()); });
  size_t dup = 0;
  Status s = idx.for_each_block([&](PPtr p) {
    if (!reached.insert(p.raw()).second) ++dup;
  });
  if (!s.ok()) return ::testing::AssertionFailure() << "for_each_block: " << s.ToString();
  if (dup != 0)
    return ::testing::AssertionFailure() << "for_each_block reported " << dup
                                         << " blocks more than once";
  std::vector<uint64_t> leaked, unknown;
  std::set_difference(live.begin(), live.end(), reached.begin(), reached.end(),
                      std::back_inserter(leaked));
  std::set_difference(reached.begin(), reached.end(), live.begin(), live.end(),
                      std::back_inserter(unknown));
  if (!leaked.empty() || !unknown.empty()) {
    auto r = ::testing::AssertionFailure()
             << live.size() << " live blocks, " << reached.size() << " reachable; "
             << leaked.size() << " live but unreachable (leaked), " << unknown.size()
             << " reachable but not allocated";
    if (!leaked.empty()) r << "; first leaked offset " << PPtr(leaked[0]).offset();
    if (!unknown.empty()) r << "; first unallocated offset " << PPtr(unknown[0]).offset();
    return r;
  }
  return ::testing::AssertionSuccess();
}

// -------------------------------------------------------------- key mixes

// Keys that stress the edges of the key space.
inline Key EdgeKey(Rng& r) {
  static constexpr Key kEdges[] = {0, 1, 2, UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 2,
                                   uint64_t{1} << 63, (uint64_t{1} << 63) - 1};
  return kEdges[r.uniform(std::size(kEdges))];
}

// Values: mostly random, sometimes 0 or all ones.
inline Value RandomValue(Rng& r) {
  switch (r.uniform(32)) {
    case 0: return 0;
    case 1: return UINT64_MAX;
    default: return r.next();
  }
}

}  // namespace pmindex::scenario
