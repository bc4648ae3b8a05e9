// Multi-threaded scenarios (suite names start with "Concurrent" so a TSan
// build can select them with `ctest -R Concurrent`):
// - threads on disjoint (interleaved) key sets, each checked exactly
//   against its own std::map, then a final full scan equal to the union;
// - threads on one small overlapping key range writing values that encode
//   (thread, sequence, key), checked for consistency at the end;
// - readers during writers: keys present before the readers start and
//   never removed are always found, scans are ascending without
//   duplicates, and every value read was written for its key.
#include <latch>
#include <mutex>
#include <thread>

#include "scenario_util.h"
#include "support/status.h"

namespace pmindex::scenario {
namespace {

using ::testing::AssertionResult;

class ConcurrentDisjoint : public ::testing::TestWithParam<IndexParam> {};
class ConcurrentOverlap : public ::testing::TestWithParam<IndexParam> {};
class ConcurrentReaders : public ::testing::TestWithParam<IndexParam> {};

PMINDEX_SCENARIO_SUITE(ConcurrentDisjoint, Want::kData);
PMINDEX_SCENARIO_SUITE(ConcurrentOverlap, Want::kData);
PMINDEX_SCENARIO_SUITE(ConcurrentReaders, Want::kData);

// Collects the first failure of any thread and tells the others to stop.
class Failures {
 public:
  bool stop() const { return stop_.load(std::memory_order_relaxed); }
  void Report(int thread, const AssertionResult& r) {
    std::lock_guard<std::mutex> g(mu_);
    if (first_.empty()) first_ = "thread " + std::to_string(thread) + ": " + r.message();
    stop_.store(true, std::memory_order_relaxed);
  }
  AssertionResult Result() const {
    if (first_.empty()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << first_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string first_;
};

// Runs fn(thread) on `threads` threads started together.
template <class Fn>
AssertionResult RunThreads(int threads, Failures& f, Fn fn) {
  std::latch start(threads);
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) {
    ts.emplace_back([&, i] {
      start.arrive_and_wait();
      AssertionResult r = fn(i);
      if (!r) f.Report(i, r);
    });
  }
  for (auto& t : ts) t.join();
  return f.Result();
}

// Checks a scan result: count <= n, keys >= from, strictly ascending.
AssertionResult WellFormedScan(Key from, size_t n, const KV* out, size_t c) {
  if (c > n) return ::testing::AssertionFailure() << "scan(" << from << ", " << n << ") returned " << c;
  for (size_t i = 0; i < c; ++i) {
    if (out[i].key < from)
      return ::testing::AssertionFailure() << "scan(" << from << ") returned smaller key " << out[i].key;
    if (i > 0 && out[i].key <= out[i - 1].key)
      return ::testing::AssertionFailure()
             << "scan(" << from << ", " << n << ") not strictly ascending at " << i << ": "
             << out[i - 1].key << " then " << out[i].key;
  }
  return ::testing::AssertionSuccess();
}

// The largest key a scan result covers: its last key when it was cut off
// at n, else the end of the key space.
Key ScanCovers(size_t n, const KV* out, size_t c) {
  return c == n && c > 0 ? out[c - 1].key : UINT64_MAX;
}

// ---------------------------------------------------------------- disjoint

constexpr int kThreads = 4;

// Thread t owns the keys k with k % 4 == t: dense ones below 4 * dense_range
// (so threads share leaves) and sparse ones spread over the key space.
Key OwnKey(Rng& r, int t, uint64_t dense_range) {
  Key base = r.one_in(2) ? r.uniform(dense_range) * kThreads : (r.next() & ~Key{3});
  if (r.one_in(200)) base = r.one_in(2) ? 0 : (UINT64_MAX & ~Key{3});
  return base | static_cast<Key>(t);
}

AssertionResult DisjointWorker(Index& idx, int t, uint64_t seed, size_t ops,
                               std::map<Key, Value>& m, const Failures& f) {
  Rng r(seed + 1000003 * (t + 1));
  std::vector<KV> buf(260);
  for (size_t i = 0; i < ops && !f.stop(); ++i) {
    Key k = OwnKey(r, t, 4096);
    if (r.one_in(3) && !m.empty()) {
      auto it = m.lower_bound(k);
      if (it != m.end()) k = it->first;
    }
    Value v = r.next();
    auto it = m.find(k);
    bool present = it != m.end();
    switch (r.uniform(10)) {
      case 0: case 1: case 2: {
        Status s = idx.insert(k, v);
        if (present ? !s.is_already_exists() : !s.ok())
          return ::testing::AssertionFailure() << "insert(" << k << ") of a " << (present ? "present" : "missing")
                                               << " key returned " << s.ToString() << " (op " << i << ")";
        if (!present) m[k] = v;
        break;
      }
      case 3: {
        Status s = idx.update(k, v);
        if (present ? !s.ok() : !s.is_not_found())
          return ::testing::AssertionFailure() << "update(" << k << ") of a " << (present ? "present" : "missing")
                                               << " key returned " << s.ToString() << " (op " << i << ")";
        if (present) it->second = v;
        break;
      }
      case 4: case 5: {
        Status s = idx.upsert(k, v);
        if (!s.ok()) return ::testing::AssertionFailure() << "upsert(" << k << "): " << s.ToString();
        m[k] = v;
        break;
      }
      case 6: case 7: {
        Status s = idx.remove(k);
        if (present ? !s.ok() : !s.is_not_found())
          return ::testing::AssertionFailure() << "remove(" << k << ") of a " << (present ? "present" : "missing")
                                               << " key returned " << s.ToString() << " (op " << i << ")";
        if (present) m.erase(it);
        break;
      }
      case 8: {
        auto got = idx.lookup(k);
        if (present != got.has_value() || (present && *got != it->second))
          return ::testing::AssertionFailure()
                 << "lookup(" << k << ") = " << (got ? std::to_string(*got) : "absent") << ", want "
                 << (present ? std::to_string(it->second) : "absent") << " (op " << i << ")";
        break;
      }
      default: {
        // Own keys inside the range a scan covers must be exactly the own
        // model's keys there (no other thread touches them).
        size_t n = 1 + r.uniform(256);
        size_t c = idx.scan(k, n, buf.data());
        if (auto w = WellFormedScan(k, n, buf.data(), c); !w) return w;
        Key hi = ScanCovers(n, buf.data(), c);
        auto mit = m.lower_bound(k);
        for (size_t j = 0; j < c; ++j) {
          if (buf[j].key % kThreads != static_cast<Key>(t)) continue;
          if (mit == m.end() || mit->first != buf[j].key)
            return ::testing::AssertionFailure() << "scan(" << k << ", " << n << ") returned own key "
                                                 << buf[j].key << " the thread does not hold (op " << i << ")";
          if (mit->second != buf[j].value)
            return ::testing::AssertionFailure() << "scan returned (" << buf[j].key << ", " << buf[j].value
                                                 << "), want value " << mit->second;
          ++mit;
        }
        if (mit != m.end() && mit->first <= hi)
          return ::testing::AssertionFailure() << "scan(" << k << ", " << n << ") missed own key " << mit->first
                                               << " (covered up to " << hi << ", op " << i << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

void DisjointScenario(const IndexParam& p, uint64_t seed, bool bulk_preload) {
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(p));
  std::vector<std::map<Key, Value>> models(kThreads);
  if (bulk_preload) {
    Rng r(seed);
    std::map<Key, Value> all;
    for (size_t i = 0; i < Ops(20000, 2000); ++i) {
      int th = static_cast<int>(r.uniform(kThreads));
      Key k = OwnKey(r, th, 4096);
      all[k] = r.next();
    }
    std::vector<KV> pairs;
    for (const auto& [k, v] : all) {
      pairs.push_back({k, v});
      models[k % kThreads][k] = v;
    }
    PMINDEX_ASSERT_OK(t->bulk_load(pairs, 0.9));
  }
  Failures f;
  const size_t ops = Ops(20000, 1000);
  ASSERT_TRUE(RunThreads(kThreads, f, [&](int th) {
    return DisjointWorker(*t, th, seed, ops, models[th], f);
  }));
  MapOracle o(t.idx.get());
  for (auto& m : models) o.mutable_map().insert(m.begin(), m.end());
  ASSERT_TRUE(o.Verify());
  ASSERT_TRUE(o.FullScan());
  ASSERT_TRUE(o.LookupAll());
  if (p.info->persistent) {
    // What the threads left is recoverable, without leaks.
    PMINDEX_ASSERT_OK(t->close());
    std::vector<std::byte> image(t.pool->bytes().begin(), t.pool->bytes().end());
    PMINDEX_ASSERT_OK(t.Close());
    PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex c, OpenImageCopy(image));
    o.set_index(c.idx.get());
    ASSERT_TRUE(o.Verify());
    ASSERT_TRUE(o.FullScan());
    ASSERT_TRUE(NoLeaks(*c));
  }
}

TEST_P(ConcurrentDisjoint, MixedOps) {
  SeedScope seed;
  DisjointScenario(GetParam(), seed, false);
}

TEST_P(ConcurrentDisjoint, AfterBulkLoad) {
  SeedScope seed;
  DisjointScenario(GetParam(), seed, true);
}

// -------------------------------------------------------------- overlapping

// value = thread (4 bits) | sequence (40 bits) | key (20 bits); keys < 2^20.
constexpr int kKeyBits = 20;
Value Encode(int t, uint64_t seq, Key k) {
  return (static_cast<Value>(t) << 60) | (seq << kKeyBits) | k;
}
bool PlausibleFor(Key k, Value v) {
  return (v & ((Value{1} << kKeyBits) - 1)) == k && (v >> 60) < kThreads;
}

TEST_P(ConcurrentOverlap, InsertUpsertRemove) {
  SeedScope seed;
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  const Key range = 2048;
  const size_t ops = Ops(20000, 1000);
  // written[th][seq] = the key thread th wrote with sequence number seq.
  std::vector<std::vector<Key>> written(kThreads);
  Failures f;
  ASSERT_TRUE(RunThreads(kThreads, f, [&](int th) -> AssertionResult {
    Rng r(seed.value() * 31 + th);
    std::vector<KV> buf(128);
    auto& mine = written[th];
    for (size_t i = 0; i < ops && !f.stop(); ++i) {
      Key k = r.uniform(r.one_in(4) ? 64 : range);  // a hot subrange too
      Value v = Encode(th, mine.size(), k);
      switch (r.uniform(8)) {
        case 0: case 1: {
          mine.push_back(k);
          Status s = t->insert(k, v);
          if (!s.ok() && !s.is_already_exists())
            return ::testing::AssertionFailure() << "insert(" << k << "): " << s.ToString();
          break;
        }
        case 2: case 3: {
          mine.push_back(k);
          Status s = t->upsert(k, v);
          if (!s.ok()) return ::testing::AssertionFailure() << "upsert(" << k << "): " << s.ToString();
          break;
        }
        case 4: {
          mine.push_back(k);
          Status s = t->update(k, v);
          if (!s.ok() && !s.is_not_found())
            return ::testing::AssertionFailure() << "update(" << k << "): " << s.ToString();
          break;
        }
        case 5: case 6: {
          Status s = t->remove(k);
          if (!s.ok() && !s.is_not_found())
            return ::testing::AssertionFailure() << "remove(" << k << "): " << s.ToString();
          break;
        }
        default: {
          if (r.one_in(2)) {
            auto got = t->lookup(k);
            if (got && !PlausibleFor(k, *got))
              return ::testing::AssertionFailure() << "lookup(" << k << ") = " << *got
                                                   << ", a value never written for that key";
          } else {
            size_t n = 1 + r.uniform(buf.size());
            size_t c = t->scan(k, n, buf.data());
            if (auto w = WellFormedScan(k, n, buf.data(), c); !w) return w;
            for (size_t j = 0; j < c; ++j)
              if (!PlausibleFor(buf[j].key, buf[j].value) || buf[j].key >= range)
                return ::testing::AssertionFailure()
                       << "scan returned (" << buf[j].key << ", " << buf[j].value
                       << "), a pair never written";
          }
        }
      }
    }
    return ::testing::AssertionSuccess();
  }));
  // Final state: every present pair was written by some thread for that key.
  std::vector<KV> all;
  ASSERT_TRUE(MapOracle::ScanAll(*t, &all, 100));
  for (const KV& kv : all) {
    ASSERT_TRUE(PlausibleFor(kv.key, kv.value)) << "(" << kv.key << ", " << kv.value << ")";
    int th = static_cast<int>(kv.value >> 60);
    uint64_t seq = (kv.value >> kKeyBits) & ((uint64_t{1} << 40) - 1);
    ASSERT_LT(seq, written[th].size()) << "key " << kv.key << " holds a value with an unused sequence";
    ASSERT_EQ(written[th][seq], kv.key) << "value " << kv.value << " was written for another key";
    auto got = t->lookup(kv.key);
    ASSERT_TRUE(got.has_value() && *got == kv.value) << "lookup disagrees with scan at key " << kv.key;
  }
  Status s = t->verify();
  PMINDEX_ASSERT_OK(s);
  ASSERT_EQ(t->stats().entries, all.size());
  // Keys no thread ever wrote are absent.
  std::vector<bool> touched(range, false);
  for (auto& w : written)
    for (Key k : w) touched[k] = true;
  for (const KV& kv : all) ASSERT_TRUE(touched[kv.key]);
  // The index stays usable: a single-threaded oracle run from here.
  MapOracle o(t.idx.get());
  for (const KV& kv : all) o.mutable_map()[kv.key] = kv.value;
  Rng r(seed);
  for (int i = 0; i < 2000; ++i) {
    Key k = r.uniform(range);
    switch (r.uniform(3)) {
      case 0: ASSERT_TRUE(o.Insert(k, i)); break;
      case 1: ASSERT_TRUE(o.Remove(k)); break;
      default: ASSERT_TRUE(o.Upsert(k, i)); break;
    }
  }
  ASSERT_TRUE(o.Verify());
  ASSERT_TRUE(o.FullScan());
}

// ------------------------------------------------------- readers + writers

// Stable keys are 3j (never removed); writer w owns keys 3j + 1 + w.
Value StableValue(Key k) { return k * 0x9e3779b97f4a7c15ull + 12345; }
// Writers' values: the top 44 bits come from the key, the low 20 from a
// sequence number.
Value WriterValue(Key k, uint64_t seq) {
  return ((k * 0xc2b2ae3d27d4eb4full) & ~Value{0xFFFFF}) | (seq & 0xFFFFF);
}
bool WriterPlausible(Key k, Value v) { return (v & ~Value{0xFFFFF}) == (WriterValue(k, 0)); }

TEST_P(ConcurrentReaders, DuringWriters) {
  SeedScope seed;
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  const uint64_t groups = Ops(8000, 1000);  // keys [0, 3 * groups)
  const size_t writer_ops = Ops(30000, 2000);
  std::vector<std::map<Key, Value>> models(2);
  {
    Rng r(seed);
    for (Key j = 0; j < groups; ++j) {
      PMINDEX_ASSERT_OK(t->insert(3 * j, StableValue(3 * j)));
      if (r.one_in(2)) {
        int w = static_cast<int>(r.uniform(2));
        Key k = 3 * j + 1 + w;
        PMINDEX_ASSERT_OK(t->insert(k, WriterValue(k, 0)));
        models[w][k] = WriterValue(k, 0);
      }
    }
  }
  const Key max_stable = 3 * (groups - 1);
  std::atomic<int> writers_left{2};
  std::atomic<uint64_t> reads{0};
  Failures f;
  ASSERT_TRUE(RunThreads(4, f, [&](int th) -> AssertionResult {
    Rng r(seed.value() * 17 + th);
    if (th < 2) {
      // Writer: exact results against its own model.
      auto& m = models[th];
      struct Done {
        std::atomic<int>& left;
        ~Done() { left.fetch_sub(1); }
      } done{writers_left};
      for (size_t i = 0; i < writer_ops && !f.stop(); ++i) {
        Key k = 3 * r.uniform(groups) + 1 + th;
        Value v = WriterValue(k, i + 1);
        bool present = m.count(k) != 0;
        Status s;
        switch (r.uniform(3)) {
          case 0:
            s = t->insert(k, v);
            if (present ? !s.is_already_exists() : !s.ok())
              return ::testing::AssertionFailure() << "insert(" << k << "): " << s.ToString();
            if (!present) m[k] = v;
            break;
          case 1:
            s = t->upsert(k, v);
            if (!s.ok()) return ::testing::AssertionFailure() << "upsert(" << k << "): " << s.ToString();
            m[k] = v;
            break;
          default:
            s = t->remove(k);
            if (present ? !s.ok() : !s.is_not_found())
              return ::testing::AssertionFailure() << "remove(" << k << "): " << s.ToString();
            m.erase(k);
        }
      }
      return ::testing::AssertionSuccess();
    }
    // Reader: runs until both writers are done (and at least a few rounds).
    std::vector<KV> buf(300);
    for (uint64_t i = 0; (writers_left.load() > 0 || i < 200) && !f.stop(); ++i) {
      reads.fetch_add(1, std::memory_order_relaxed);
      Key k = r.uniform(3 * groups);
      if (r.one_in(3)) {
        size_t n = 1 + r.uniform(buf.size());
        size_t c = t->scan(k, n, buf.data());
        if (auto w = WellFormedScan(k, n, buf.data(), c); !w) return w;
        Key hi = std::min(ScanCovers(n, buf.data(), c), max_stable);
        // Every stable key in [k, hi] is there, with its value.
        Key expect = (k + 2) / 3 * 3;
        for (size_t j = 0; j < c; ++j) {
          Key got = buf[j].key;
          if (got % 3 == 0) {
            if (got != expect)
              return ::testing::AssertionFailure()
                     << "scan(" << k << ", " << n << ") skipped stable key " << expect
                     << " (next was " << got << ")";
            if (buf[j].value != StableValue(got))
              return ::testing::AssertionFailure() << "scan: stable key " << got << " has value " << buf[j].value;
            expect += 3;
          } else if (!WriterPlausible(got, buf[j].value)) {
            return ::testing::AssertionFailure() << "scan returned (" << got << ", " << buf[j].value
                                                 << "), a pair never written";
          }
        }
        if (expect <= hi)
          return ::testing::AssertionFailure() << "scan(" << k << ", " << n << ") returned " << c
                                               << " pairs and missed stable key " << expect;
      } else {
        auto got = t->lookup(k);
        if (k % 3 == 0 && k <= max_stable) {
          if (!got || *got != StableValue(k))
            return ::testing::AssertionFailure()
                   << "lookup of stable key " << k << " = " << (got ? std::to_string(*got) : "absent");
        } else if (got && !WriterPlausible(k, *got)) {
          return ::testing::AssertionFailure() << "lookup(" << k << ") = " << *got << ", never written";
        }
      }
    }
    return ::testing::AssertionSuccess();
  }));
  MapOracle o(t.idx.get());
  for (Key j = 0; j < groups; ++j) o.mutable_map()[3 * j] = StableValue(3 * j);
  for (auto& m : models) o.mutable_map().insert(m.begin(), m.end());
  ASSERT_TRUE(o.Verify());
  ASSERT_TRUE(o.FullScan());
  ASSERT_TRUE(o.LookupAll());
}

}  // namespace
}  // namespace pmindex::scenario
