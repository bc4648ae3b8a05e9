// Single-threaded scenarios run against every index that stores data:
// empty index, randomized operations against a std::map oracle, sequential
// inserts, bulk loads at several fills, remove-everything-then-reinsert,
// and bad input to the factory and to bulk_load.
#include <cmath>
#include <limits>

#include "scenario_util.h"
#include "support/status.h"

namespace pmindex::scenario {
namespace {

using ::testing::AssertionResult;

class Empty : public ::testing::TestWithParam<IndexParam> {};
class Oracle : public ::testing::TestWithParam<IndexParam> {};
class Sequential : public ::testing::TestWithParam<IndexParam> {};
class BulkLoad : public ::testing::TestWithParam<IndexParam> {};
class RemoveAll : public ::testing::TestWithParam<IndexParam> {};
class Factory : public ::testing::TestWithParam<IndexParam> {};

PMINDEX_SCENARIO_SUITE(Empty, Want::kData);
PMINDEX_SCENARIO_SUITE(Oracle, Want::kData);
PMINDEX_SCENARIO_SUITE(Sequential, Want::kData);
PMINDEX_SCENARIO_SUITE(BulkLoad, Want::kData);
PMINDEX_SCENARIO_SUITE(RemoveAll, Want::kData);
PMINDEX_SCENARIO_SUITE(Factory, Want::kData);

// An index with no keys answers every point operation with "missing" and
// every scan with nothing.
AssertionResult LooksEmpty(Index& idx, Rng& rng) {
  std::vector<Key> probes = {0, 1, UINT64_MAX, UINT64_MAX - 1, uint64_t{1} << 63};
  for (int i = 0; i < 20; ++i) probes.push_back(rng.next());
  for (Key k : probes) {
    if (auto v = idx.lookup(k))
      return ::testing::AssertionFailure() << "lookup(" << k << ") on empty index found " << *v;
    Status s = idx.update(k, 7);
    if (!s.is_not_found())
      return ::testing::AssertionFailure() << "update(" << k << ") on empty index: "
                                           << s.ToString() << ", want NotFound";
    s = idx.remove(k);
    if (!s.is_not_found())
      return ::testing::AssertionFailure() << "remove(" << k << ") on empty index: "
                                           << s.ToString() << ", want NotFound";
    KV out[8] = {};
    size_t c = idx.scan(k, 8, out);
    if (c != 0)
      return ::testing::AssertionFailure() << "scan(" << k << ", 8) on empty index returned " << c;
    if (auto v = idx.lookup(k))
      return ::testing::AssertionFailure() << "lookup(" << k << ") after update/remove on empty index found " << *v;
  }
  KV out[1] = {};
  if (idx.scan(0, 0, out) != 0) return ::testing::AssertionFailure() << "scan(0, 0) returned pairs";
  Status s = idx.verify();
  if (!s.ok()) return ::testing::AssertionFailure() << "verify() on empty index: " << s.ToString();
  IndexStats st = idx.stats();
  if (st.entries != 0)
    return ::testing::AssertionFailure() << "stats().entries = " << st.entries << " on empty index";
  return ::testing::AssertionSuccess();
}

TEST_P(Empty, MissingKeysAndEmptyScans) {
  SeedScope seed;
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  ASSERT_TRUE(LooksEmpty(*t, rng));
  // Emptied again after holding keys (including both ends of the key space).
  MapOracle o(t.idx.get());
  for (Key k : {Key{0}, UINT64_MAX, Key{42}, UINT64_MAX - 1, Key{1}}) ASSERT_TRUE(o.Insert(k, ~k));
  ASSERT_TRUE(o.Verify());
  ASSERT_TRUE(o.FullScan());
  for (Key k : {Key{42}, UINT64_MAX, Key{0}, Key{1}, UINT64_MAX - 1}) ASSERT_TRUE(o.Remove(k));
  ASSERT_TRUE(LooksEmpty(*t, rng));
}

TEST_P(Empty, SingleKeyAtEdges) {
  SeedScope seed;
  for (Key k : {Key{0}, UINT64_MAX, Key{1} << 63}) {
    SCOPED_TRACE("key " + std::to_string(k));
    PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
    MapOracle o(t.idx.get());
    ASSERT_TRUE(o.Insert(k, 5));
    ASSERT_TRUE(o.Insert(k, 6));  // AlreadyExists, keeps 5
    ASSERT_TRUE(o.Scan(0, 1));
    ASSERT_TRUE(o.Scan(0, 10));
    ASSERT_TRUE(o.Scan(k, 1));
    ASSERT_TRUE(o.Scan(UINT64_MAX, 3));
    if (k > 0) {
      ASSERT_TRUE(o.Scan(k - 1, 2));
    }
    if (k < UINT64_MAX) {
      ASSERT_TRUE(o.Scan(k + 1, 2));
    }
    ASSERT_TRUE(o.Update(k, 0));
    ASSERT_TRUE(o.Lookup(k));
    ASSERT_TRUE(o.Upsert(k, UINT64_MAX));
    ASSERT_TRUE(o.Lookup(k));
    ASSERT_TRUE(o.Verify());
    ASSERT_TRUE(o.Remove(k));
    ASSERT_TRUE(o.Remove(k));  // NotFound
    ASSERT_TRUE(o.Scan(0, 4));
    ASSERT_TRUE(o.Verify());
  }
}

// ------------------------------------------------------------------ oracle

struct Mix {
  int insert, update, upsert, remove, lookup, scan;
};
constexpr Mix kBalanced{30, 12, 15, 23, 15, 5};

// Where keys come from: a range [lo, hi], plus occasional edge keys and
// keys already present (so that large ranges still hit present keys).
struct KeySource {
  Key lo = 0, hi = UINT64_MAX;
  Key pick(Rng& r, const std::map<Key, Value>& m) const {
    uint64_t c = r.uniform(100);
    if (c < 3) return EdgeKey(r);
    if (c < 30 && !m.empty()) {
      auto it = m.lower_bound(r.range(lo, hi));
      if (it == m.end()) it = m.begin();
      return it->first;
    }
    return r.range(lo, hi);
  }
};

// Runs n random operations against the oracle; verify() and stats every
// `check_every` operations.
AssertionResult RandomOps(MapOracle& o, Rng& r, const KeySource& keys, size_t n, Mix mix = kBalanced,
                          size_t check_every = 2000) {
  const int total = mix.insert + mix.update + mix.upsert + mix.remove + mix.lookup + mix.scan;
  for (size_t i = 0; i < n; ++i) {
    Key k = keys.pick(r, o.map());
    int c = static_cast<int>(r.uniform(total));
    AssertionResult res = ::testing::AssertionSuccess();
    if ((c -= mix.insert) < 0) {
      res = o.Insert(k, RandomValue(r));
    } else if ((c -= mix.update) < 0) {
      res = o.Update(k, RandomValue(r));
    } else if ((c -= mix.upsert) < 0) {
      res = o.Upsert(k, RandomValue(r));
    } else if ((c -= mix.remove) < 0) {
      res = o.Remove(k);
    } else if ((c -= mix.lookup) < 0) {
      res = o.Lookup(k);
    } else {
      size_t len = r.one_in(4) ? r.uniform(5) : r.uniform(300);
      if (r.one_in(2) && !o.map().empty()) {
        // Start just below, at or just above a present key.
        auto it = o.map().lower_bound(k);
        if (it == o.map().end()) it = o.map().begin();
        Key at = it->first;
        int d = static_cast<int>(r.uniform(3)) - 1;
        if (d < 0 && at > 0) at -= 1;
        if (d > 0 && at < UINT64_MAX) at += 1;
        k = at;
      }
      res = o.Scan(k, len);
    }
    if (!res) return res << " (operation " << i << ")";
    if (check_every != 0 && (i + 1) % check_every == 0) {
      if (auto v = o.Verify(); !v) return v << " (after operation " << i << ")";
    }
  }
  if (auto v = o.Verify(); !v) return v;
  if (auto f = o.FullScan(); !f) return f;
  return o.LookupAll();
}

TEST_P(Oracle, SmallKeyRange) {
  SeedScope seed;
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  MapOracle o(t.idx.get());
  ASSERT_TRUE(RandomOps(o, rng, {0, 63}, Ops(20000, 500), kBalanced, 500));
}

TEST_P(Oracle, MediumKeyRange) {
  SeedScope seed;
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  MapOracle o(t.idx.get());
  ASSERT_TRUE(RandomOps(o, rng, {0, 5000}, Ops(40000, 2000)));
}

TEST_P(Oracle, FullKeyRange) {
  SeedScope seed;
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  MapOracle o(t.idx.get());
  ASSERT_TRUE(RandomOps(o, rng, {0, UINT64_MAX}, Ops(40000, 2000)));
}

// Grow large with an insert-heavy mix, then shrink with a remove-heavy one,
// across the top end of the key space.
TEST_P(Oracle, GrowThenShrink) {
  SeedScope seed;
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  MapOracle o(t.idx.get());
  KeySource top{UINT64_MAX - 100000, UINT64_MAX};
  ASSERT_TRUE(RandomOps(o, rng, top, Ops(30000, 1000), Mix{70, 5, 10, 5, 5, 5}, 5000));
  ASSERT_TRUE(RandomOps(o, rng, top, Ops(40000, 1500), Mix{5, 5, 5, 70, 10, 5}, 5000));
}

// -------------------------------------------------------------- sequential

// Inserts keys in ascending or descending order (splits at one edge), then
// removes every other key, and checks scans that cross leaf boundaries.
void SequentialScenario(const IndexParam& p, Key first, Key step, size_t n, bool descending,
                        uint64_t seed) {
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(p));
  MapOracle o(t.idx.get());
  std::vector<Key> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = first + i * step;
  if (descending) std::reverse(keys.begin(), keys.end());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(o.Insert(keys[i], keys[i] * 3 + 1)) << " (insert " << i << ")";
    if (i % 4096 == 4095) {
      ASSERT_TRUE(o.Verify());
    }
  }
  ASSERT_TRUE(o.Verify());
  ASSERT_TRUE(o.FullScan(97));
  ASSERT_TRUE(o.LookupAll());
  for (Key k : keys) {
    if (((k - first) / step) % 2 == 1) {
      ASSERT_TRUE(o.Remove(k));
    }
  }
  ASSERT_TRUE(o.Verify());
  ASSERT_TRUE(o.FullScan(61));
  // Scans from every key neighbourhood, of lengths around typical node
  // sizes, so that many scans start in one leaf and end in another.
  std::sort(keys.begin(), keys.end());
  const size_t probes = std::min<size_t>(n, Ops(3000, 200));
  for (size_t j = 0; j < probes; ++j) {
    Key k = keys[rng.uniform(n)];
    Key from = k;
    switch (rng.uniform(3)) {
      case 0: if (k > 0) from = k - 1; break;
      case 1: if (k < UINT64_MAX) from = k + 1; break;
      default: break;
    }
    size_t len = 1 + rng.uniform(rng.one_in(2) ? 40 : 400);
    ASSERT_TRUE(o.Scan(from, len));
  }
  // Remove the rest; the index is empty again.
  for (Key k : keys) {
    if (((k - first) / step) % 2 == 0) {
      ASSERT_TRUE(o.Remove(k));
    }
  }
  ASSERT_TRUE(o.Verify());
  ASSERT_TRUE(o.Scan(0, 10));
}

TEST_P(Sequential, Ascending) {
  SeedScope seed;
  SequentialScenario(GetParam(), 0, 1, Ops(40000, 3000), false, seed);
}

TEST_P(Sequential, Descending) {
  SeedScope seed;
  SequentialScenario(GetParam(), 0, 1, Ops(40000, 3000), true, seed);
}

// Ascending up to and including UINT64_MAX.
TEST_P(Sequential, AscendingToMax) {
  SeedScope seed;
  size_t n = Ops(20000, 2000);
  SequentialScenario(GetParam(), UINT64_MAX - (n - 1) * 7, 7, n, false, seed);
}

// Descending down to and including 0, with wide gaps.
TEST_P(Sequential, DescendingToZeroSparse) {
  SeedScope seed;
  size_t n = Ops(20000, 2000);
  SequentialScenario(GetParam(), 0, (UINT64_MAX / n), n, true, seed);
}

// ---------------------------------------------------------------- bulk load

std::vector<KV> SortedPairs(Rng& r, size_t n, bool with_edges) {
  std::set<Key> keys;
  if (with_edges && n >= 2) {
    keys.insert(0);
    keys.insert(UINT64_MAX);
  }
  // Half the keys dense (consecutive runs), half spread over the key space.
  Key dense = r.next() >> 1;
  while (keys.size() < n) keys.insert(r.one_in(2) ? dense + r.uniform(n * 2) : r.next());
  std::vector<KV> out;
  out.reserve(n);
  for (Key k : keys) out.push_back({k, r.next()});
  return out;
}

void LoadFromPairs(MapOracle& o, std::span<const KV> pairs) {
  for (const KV& kv : pairs) o.mutable_map()[kv.key] = kv.value;
}

TEST_P(BulkLoad, FillsThenOracle) {
  SeedScope seed;
  Rng rng(seed);
  const size_t n = Ops(50000, 5000);
  for (double fill : {0.5, 0.7, 0.9, 1.0}) {
    SCOPED_TRACE("fill " + std::to_string(fill));
    PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
    MapOracle o(t.idx.get());
    std::vector<KV> pairs = SortedPairs(rng, n, true);
    PMINDEX_ASSERT_OK(t->bulk_load(pairs, fill));
    LoadFromPairs(o, pairs);
    ASSERT_TRUE(o.Verify());
    ASSERT_TRUE(o.LookupAll());
    ASSERT_TRUE(o.FullScan(333));
    for (int i = 0; i < 300; ++i) {
      Key from = rng.one_in(2) ? pairs[rng.uniform(n)].key + rng.uniform(3) - 1 : rng.next();
      ASSERT_TRUE(o.Scan(from, rng.uniform(500)));
    }
    // Absent keys next to present ones.
    for (int i = 0; i < 1000; ++i) {
      Key k = pairs[rng.uniform(n)].key;
      ASSERT_TRUE(o.Lookup(k + 1));
      ASSERT_TRUE(o.Lookup(k - 1));
    }
    // Further random inserts and removes (full nodes split, sparse ones
    // empty) checked against the oracle.
    KeySource near{pairs.front().key, pairs.back().key};
    ASSERT_TRUE(RandomOps(o, rng, near, Ops(10000, 1000), Mix{35, 10, 10, 30, 10, 5}, 2500));
  }
}

TEST_P(BulkLoad, SmallSizes) {
  SeedScope seed;
  Rng rng(seed);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{257}}) {
    for (double fill : {0.5, 1.0}) {
      SCOPED_TRACE("n " + std::to_string(n) + " fill " + std::to_string(fill));
      PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
      MapOracle o(t.idx.get());
      std::vector<KV> pairs = SortedPairs(rng, n, n % 2 == 0);
      Status s = t->bulk_load(pairs, fill);
      if (n == 0) {
        // Loading nothing may be accepted or refused; either way the index
        // stays empty and usable.
        ASSERT_TRUE(s.ok() || s.is_invalid_argument()) << s.ToString();
      } else {
        PMINDEX_ASSERT_OK(s);
        LoadFromPairs(o, pairs);
      }
      ASSERT_TRUE(o.Verify());
      ASSERT_TRUE(o.FullScan(5));
      ASSERT_TRUE(RandomOps(o, rng, {0, UINT64_MAX}, 300, kBalanced, 50));
    }
  }
}

TEST_P(BulkLoad, BadInput) {
  SeedScope seed;
  Rng rng(seed);
  std::vector<KV> good = SortedPairs(rng, 100, false);
  // Not strictly ascending: swapped pair, duplicate key.
  std::vector<KV> unsorted = good;
  std::swap(unsorted[40], unsorted[41]);
  std::vector<KV> dup = good;
  dup[60].key = dup[59].key;
  std::vector<KV> backwards = {{5, 1}, {3, 2}};
  {
    PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
    MapOracle o(t.idx.get());
    for (const auto* bad : {&unsorted, &dup, &backwards}) {
      Status s = t->bulk_load(*bad, 0.7);
      EXPECT_TRUE(s.is_invalid_argument()) << "unsorted bulk_load: " << s.ToString();
      ASSERT_TRUE(o.Verify());  // still empty
      ASSERT_TRUE(o.FullScan());
    }
    for (double fill : {0.0, -0.5, 1.0001, 2.0, std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity()}) {
      Status s = t->bulk_load(good, fill);
      EXPECT_TRUE(s.is_invalid_argument()) << "bulk_load with fill " << fill << ": " << s.ToString();
      ASSERT_TRUE(o.Verify());
      ASSERT_TRUE(o.FullScan());
    }
    // The index is still usable: a good load works.
    PMINDEX_ASSERT_OK(t->bulk_load(good, 0.8));
    LoadFromPairs(o, good);
    ASSERT_TRUE(o.Verify());
    // Loading into a non-empty index is refused and changes nothing.
    std::vector<KV> more = {{1, 1}, {2, 2}};
    Status s = t->bulk_load(more, 0.8);
    EXPECT_TRUE(s.is_invalid_argument()) << "bulk_load into non-empty index: " << s.ToString();
    ASSERT_TRUE(o.Verify());
    ASSERT_TRUE(o.FullScan());
  }
  {
    // Non-empty because of an insert (not a previous load).
    PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
    MapOracle o(t.idx.get());
    ASSERT_TRUE(o.Insert(UINT64_MAX, 9));
    Status s = t->bulk_load(good, 0.5);
    EXPECT_TRUE(s.is_invalid_argument()) << "bulk_load after insert: " << s.ToString();
    ASSERT_TRUE(o.Verify());
    ASSERT_TRUE(o.FullScan());
  }
}

// ------------------------------------------------------------- remove all

TEST_P(RemoveAll, ThenReinsert) {
  SeedScope seed;
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  MapOracle o(t.idx.get());
  const size_t n = Ops(20000, 2000);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<Key> keys;
    while (o.size() < n) {
      Key k = round == 1 ? rng.uniform(n * 2) : rng.next();
      if (rng.one_in(1000)) k = EdgeKey(rng);
      ASSERT_TRUE(o.Insert(k, rng.next()));
    }
    ASSERT_TRUE(o.Verify());
    for (const auto& kv : o.map()) keys.push_back(kv.first);
    // Round 0 removes in random order, round 1 ascending, round 2 descending.
    if (round == 0) std::shuffle(keys.begin(), keys.end(), std::mt19937_64(rng.next()));
    if (round == 2) std::reverse(keys.begin(), keys.end());
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(o.Remove(keys[i]));
      if (i % 5000 == 4999) {
        ASSERT_TRUE(o.Verify());
      }
    }
    ASSERT_TRUE(o.Verify());
    ASSERT_TRUE(LooksEmpty(*t, rng));
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(o.Lookup(keys[rng.uniform(keys.size())]));
  }
  // After emptying, the index behaves like a new one.
  ASSERT_TRUE(RandomOps(o, rng, {0, 10000}, Ops(10000, 1000)));
}

TEST_P(RemoveAll, AfterBulkLoad) {
  SeedScope seed;
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  MapOracle o(t.idx.get());
  std::vector<KV> pairs = SortedPairs(rng, Ops(20000, 2000), true);
  PMINDEX_ASSERT_OK(t->bulk_load(pairs, 1.0));
  LoadFromPairs(o, pairs);
  ASSERT_TRUE(o.Verify());
  std::shuffle(pairs.begin(), pairs.end(), std::mt19937_64(rng.next()));
  for (const KV& kv : pairs) ASSERT_TRUE(o.Remove(kv.key));
  ASSERT_TRUE(LooksEmpty(*t, rng));
  for (const KV& kv : pairs) ASSERT_TRUE(o.Insert(kv.key, kv.value ^ 1));
  ASSERT_TRUE(o.Verify());
  ASSERT_TRUE(o.FullScan());
}

// ----------------------------------------------------------------- factory

TEST_P(Factory, BadOptionsAndPools) {
  const IndexParam& p = GetParam();
  // An option no index accepts.
  {
    auto r = create_index(p.info->name, "no_such_option_xyz=1", nullptr);
    EXPECT_FALSE(r.ok());
    if (!r.ok()) {
      EXPECT_TRUE(r.status().is_invalid_argument()) << r.status().ToString();
    }
  }
  {
    auto r = create_index(p.info->name, "=,,=", nullptr);
    EXPECT_FALSE(r.ok()) << "malformed option string accepted";
  }
  if (p.info->persistent) {
    // A persistent kind without a pool.
    auto r = create_index(p.info->name, p.config, nullptr);
    EXPECT_FALSE(r.ok()) << "persistent index created without a pool";
    // A pool made for another kind.
    PoolOptions po = TestPoolOptions(p);
    po.kind = p.info->name + "-other";
    auto pool = Pool::CreateInMemory(po);
    PMINDEX_ASSERT_OK(pool);
    auto w = create_index(p.info->name, p.config, pool->get());
    EXPECT_FALSE(w.ok()) << "index created in a pool of kind " << po.kind;
    if (!w.ok()) {
      EXPECT_EQ(w.status().code(), Status::Code::kWrongKind) << w.status().ToString();
    }
  } else {
    // A volatile kind given a pool.
    PoolOptions po = TestPoolOptions(p);
    auto pool = Pool::CreateInMemory(po);
    PMINDEX_ASSERT_OK(pool);
    auto r = create_index(p.info->name, p.config, pool->get());
    EXPECT_FALSE(r.ok()) << "volatile index accepted a pool";
  }
  // The configured options themselves are fine and give an empty index.
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(p));
  EXPECT_EQ(t->kind(), p.info->name);
  EXPECT_EQ(t->persistent(), p.info->persistent);
  if (p.info->persistent) {
    EXPECT_NE(t->allocator(), nullptr);
    EXPECT_EQ(t->pool(), t.pool.get());
  }
}

}  // namespace
}  // namespace pmindex::scenario
