// Scaffolding the tree tests share:
//   CreateInPool(kind, options, &pool)  a new index in a new in-memory pool
//                                       (the Result carries a refusal, for
//                                       tests of bad options)
//   ReopenBytes(bytes, &reopened)       the bytes of a pool opened as an
//                                       image and its index recovered
//   RunOracle(index, OracleOptions)     random writes, reads and scans
//                                       checked against a std::map
//   RunKeyRangeOracle(pool, index, ...) random writes on a small key range
//                                       checked against a std::map, then
//                                       the pool's bytes reopened
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "index/index.h"
#include "pm/pool.h"
#include "support/pools.h"
#include "support/seed.h"
#include "support/status.h"

namespace pmindex::testing {

// A new index of `kind` with `options` in a new in-memory pool of
// `pool_size` bytes, which *pool keeps (set even when the index is refused).
inline Result<std::unique_ptr<Index>> CreateInPool(const std::string& kind,
                                                   const std::string& options,
                                                   std::unique_ptr<Pool>* pool,
                                                   uint64_t pool_size = 16ull << 20) {
  PoolOptions po;
  po.size = pool_size;
  po.kind = kind;
  po.index_options = options;
  auto p = Pool::CreateInMemory(po);
  if (!p.ok()) return p.status();
  *pool = std::move(p.value());
  return create_index(kind, options, pool->get());
}

// A pool image and the index open_index recovered from it.
struct Reopened {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
};

// Opens `bytes` (a copy of a pool: what a crash or a clean close left) as
// an image and recovers its index into *out; the first error otherwise.
inline Status ReopenBytes(std::span<const std::byte> bytes, Reopened* out) {
  auto img = Pool::OpenImage(bytes);
  if (!img.ok()) return img.status();
  auto idx = open_index(img.value().get());
  if (!idx.ok()) return idx.status();
  out->pool = std::move(img.value());
  out->idx = std::move(idx.value());
  return Status::OK();
}

enum class OracleOp { kInsert, kUpsert, kUpdate, kRemove, kRead };

// The mix of keys and operations RunOracle draws. Op i draws its key, then
// its value, then its operation, from one generator seeded with `seed`;
// ops 0 and 1 use keys 0 and UINT64_MAX.
struct OracleOptions {
  uint64_t seed = 42;
  int ops = 3000;
  // Keys after the first two: by default a third from [0, 500) (so that
  // writes meet existing keys), the rest anywhere.
  std::function<Key(std::mt19937_64&)> key = [](std::mt19937_64& rng) -> Key {
    return rng() % 3 == 0 ? rng() % 500 : rng();
  };
  // The operations, drawn uniformly (repeat one to weight it).
  std::vector<OracleOp> mix = {OracleOp::kInsert, OracleOp::kInsert, OracleOp::kUpsert,
                               OracleOp::kUpdate, OracleOp::kRemove, OracleOp::kRead};
  // If not empty, the first ops / 2 operations are drawn from it instead
  // (a growing phase before the full mix).
  std::vector<OracleOp> first_half_mix;
  // A read is a lookup then a scan from its key of `scan` records, or of
  // 1 + rng() % scan records when random_scan_length.
  size_t scan = 8;
  bool random_scan_length = false;
  // verify() every this many ops (0: only at the end).
  int verify_every = 0;
  // At the end, a lookup of every key the map holds.
  bool lookup_all_at_end = false;
};

// An oracle run's check of the index: verify() passes and, if `entries` is
// given, the index counts that many entries. Call under
// ASSERT_NO_FATAL_FAILURE.
inline void ExpectVerified(Index& t, std::optional<size_t> entries = std::nullopt) {
  const Status s = t.verify();
  PMINDEX_ASSERT_OK(s);
  if (entries) {
    EXPECT_EQ(t.stats().entries, *entries);
  }
}

// Applies o.ops random operations to `t` and to a std::map, asserting
// after each that the index answered as the map does (a remove picks a
// key the map holds three times in four); at the end verify() and the
// entry count. Call under ASSERT_NO_FATAL_FAILURE to stop the test.
inline void RunOracle(Index& t, const OracleOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::map<Key, Value> oracle;
  std::vector<KV> out(o.scan);
  for (int i = 0; i < o.ops; ++i) {
    const Key k = i == 0 ? 0 : i == 1 ? UINT64_MAX : o.key(rng);
    const Value v = rng();
    const std::vector<OracleOp>& mix =
        !o.first_half_mix.empty() && i < o.ops / 2 ? o.first_half_mix : o.mix;
    SCOPED_TRACE(::testing::Message() << "seed " << o.seed << " op " << i << " key " << k);
    switch (mix[rng() % mix.size()]) {
      case OracleOp::kInsert: {
        const bool fresh = oracle.emplace(k, v).second;
        ASSERT_EQ(t.insert(k, v).ok(), fresh);
        break;
      }
      case OracleOp::kUpsert:
        PMINDEX_ASSERT_OK(t.upsert(k, v));
        oracle[k] = v;
        break;
      case OracleOp::kUpdate: {
        auto it = oracle.find(k);
        ASSERT_EQ(t.update(k, v).ok(), it != oracle.end());
        if (it != oracle.end()) it->second = v;
        break;
      }
      case OracleOp::kRemove: {
        const auto next = oracle.lower_bound(k);
        const Key victim = oracle.empty() || rng() % 4 == 0 ? k
                           : next == oracle.end()           ? oracle.begin()->first
                                                            : next->first;
        ASSERT_EQ(t.remove(victim).ok(), oracle.erase(victim) == 1) << "removing " << victim;
        break;
      }
      case OracleOp::kRead: {
        auto it = oracle.find(k);
        ASSERT_EQ(t.lookup(k),
                  it == oracle.end() ? std::nullopt : std::optional<Value>(it->second));
        const size_t want = o.random_scan_length ? 1 + rng() % o.scan : o.scan;
        const size_t n = t.scan(k, want, out.data());
        ASSERT_LE(n, want);
        auto m = oracle.lower_bound(k);
        for (size_t j = 0; j < n; ++j, ++m) {
          ASSERT_NE(m, oracle.end());
          ASSERT_EQ(out[j].key, m->first);
          ASSERT_EQ(out[j].value, m->second);
        }
        ASSERT_TRUE(n == want || m == oracle.end());
        break;
      }
    }
    if (o.verify_every > 0 && i % o.verify_every == 0) {
      ASSERT_NO_FATAL_FAILURE(ExpectVerified(t));
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectVerified(t, oracle.size()));
  if (o.lookup_all_at_end) {
    for (const auto& [k, v] : oracle) ASSERT_EQ(t.lookup(k).value_or(~v), v) << k;
  }
}

// The oracle loop of the all-PM trees with one lock (lcbtree, cddstree):
// `ops` operations, each drawing its key from [0, keys - 1) (keys - 1
// stands for UINT64_MAX), then its value, then insert, update, remove or
// upsert uniformly, from one generator seeded with `seed`; every answer is
// checked against a std::map, verify() runs every `verify_every` ops (and
// with lookup_each a lookup of the key follows each op). At the end:
// verify(), the entry count and one scan of everything against the map;
// then the bytes of `pool` (what a crash leaves with every store durable)
// reopened must verify and hold every pair. Call with
// ASSERT_NO_FATAL_FAILURE.
struct KeyRangeOracle {
  uint64_t seed = 42;
  int ops = 20000;
  Key keys = 2000;
  int verify_every = 4000;
  bool lookup_each = false;
};

inline void RunKeyRangeOracle(const Pool& pool, Index& t, const KeyRangeOracle& o) {
  std::mt19937_64 rng(o.seed);
  std::map<Key, Value> oracle;
  for (int i = 0; i < o.ops; ++i) {
    Key k = rng() % o.keys;
    if (k == o.keys - 1) k = UINT64_MAX;
    const Value v = rng();
    const bool present = oracle.count(k) != 0;
    SCOPED_TRACE(::testing::Message() << "seed " << o.seed << " op " << i << " key " << k);
    switch (rng() % 4) {
      case 0: {
        const Status s = t.insert(k, v);
        ASSERT_EQ(s.ok(), !present) << s.ToString();
        if (!present) oracle[k] = v;
        break;
      }
      case 1:
        ASSERT_EQ(t.update(k, v).ok(), present);
        if (present) oracle[k] = v;
        break;
      case 2:
        ASSERT_EQ(t.remove(k).ok(), present);
        oracle.erase(k);
        break;
      case 3:
        PMINDEX_ASSERT_OK(t.upsert(k, v));
        oracle[k] = v;
        break;
    }
    if (o.lookup_each) {
      ASSERT_EQ(t.lookup(k).has_value(), oracle.count(k) != 0);
    }
    if (o.verify_every > 0 && i % o.verify_every == 0) {
      ASSERT_NO_FATAL_FAILURE(ExpectVerified(t));
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectVerified(t, oracle.size()));
  std::vector<KV> all(oracle.size() + 1);
  ASSERT_EQ(t.scan(0, all.size(), all.data()), oracle.size());
  size_t i = 0;
  for (const auto& [k, v] : oracle) {
    ASSERT_EQ(all[i].key, k);
    ASSERT_EQ(all[i++].value, v);
  }
  Reopened re;
  PMINDEX_ASSERT_OK(ReopenBytes(pool.bytes(), &re));
  PMINDEX_ASSERT_OK(re.idx->verify());
  for (const auto& [k, v] : oracle) ASSERT_EQ(re.idx->lookup(k), v);
}

// RunKeyRangeOracle on a new in-memory index of `kind` for each options
// string of `configs`, seeded with the test seed (support/seed.h).
inline void RunKeyRangeOracleOnConfigs(const std::string& kind,
                                       std::initializer_list<const char*> configs,
                                       KeyRangeOracle o) {
  o.seed = TestSeed();
  PMINDEX_SEED_TRACE(o.seed);
  for (const char* opts : configs) {
    SCOPED_TRACE(opts);
    PoolAndIndex t = MakeInMemory(kind, opts);
    ASSERT_NE(t.idx, nullptr);
    ASSERT_NO_FATAL_FAILURE(RunKeyRangeOracle(*t.pool, *t.idx, o));
  }
}

}  // namespace pmindex::testing
