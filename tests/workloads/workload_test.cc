// Tests of workloads/: key spaces, distributions, mixes, phase planning and
// the present-key bookkeeping every benchmark check relies on.
#include "workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "support/seed.h"
#include "support/status.h"

namespace pmindex::workload {
namespace {

// These tests run one known seed unless PMINDEX_SEED names another.
uint64_t TestSeed() { return testing::TestSeed(20261122); }

TEST(WorkloadMix, Mix64InverseAndKeySpaceBijection) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  Rng rng(seed);
  for (int i = 0; i < 100000; ++i) {
    uint64_t x = rng.Next();
    ASSERT_EQ(UnMix64(Mix64(x)), x);
  }
  for (uint64_t x : {uint64_t{0}, uint64_t{1}, UINT64_MAX}) EXPECT_EQ(UnMix64(Mix64(x)), x);
  KeySpace ks(KeyKind::kRandom, seed);
  std::set<Key> keys;
  for (uint64_t r = 0; r < 100000; ++r) {
    ASSERT_EQ(ks.rank(ks.key(r)), r);
    keys.insert(ks.key(r));
  }
  EXPECT_EQ(keys.size(), 100000u);
  KeySpace dense(KeyKind::kDense, seed);
  EXPECT_EQ(dense.key(0), 1u);
  EXPECT_EQ(dense.key(41), 42u);
}

TEST(WorkloadDist, ZipfMatchesTheFormula) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  const uint64_t n = 1000;
  const double theta = 0.99;
  Zipf z(n, theta);
  Rng rng(seed);
  std::vector<uint64_t> hist(n);
  const int draws = 2000000;
  for (int i = 0; i < draws; ++i) {
    uint64_t r = z.Next(rng);
    ASSERT_LT(r, n);
    ++hist[r];
  }
  const double zeta = Zipf::Zeta(n, theta);
  // Gray et al.'s method is exact for ranks 0 and 1 and a continuous
  // approximation beyond (as in YCSB): check the head exactly, the mass of
  // the first 100 ranks loosely.
  for (uint64_t r : {0, 1}) {
    double expect = 1.0 / std::pow(static_cast<double>(r + 1), theta) / zeta;
    EXPECT_NEAR(static_cast<double>(hist[r]) / draws, expect, expect * 0.03) << "rank " << r;
  }
  double head = 0, got = 0;
  for (uint64_t r = 0; r < 100; ++r) {
    head += 1.0 / std::pow(static_cast<double>(r + 1), theta) / zeta;
    got += static_cast<double>(hist[r]) / draws;
  }
  EXPECT_NEAR(got, head, head * 0.1);
}

TEST(WorkloadDist, ZetaApproximationIsAccurate) {
  // Exact sum vs. the Euler-Maclaurin tail used beyond 10^6 terms.
  const uint64_t n = 3000000;
  double exact = 0;
  for (uint64_t i = n; i >= 1; --i) exact += std::pow(static_cast<double>(i), -0.99);
  EXPECT_NEAR(Zipf::Zeta(n, 0.99), exact, exact * 1e-9);
  // Growing one step at a time agrees with a fresh generator.
  Zipf grown(10, 0.5), fresh(5000, 0.5);
  for (uint64_t m = 11; m <= 5000; ++m) grown.Grow(m);
  Rng r1(7), r2(7);
  int differ = 0;
  for (int i = 0; i < 10000; ++i) differ += grown.Next(r1) != fresh.Next(r2);
  EXPECT_LE(differ, 2);
}

TEST(WorkloadDist, ParseAcceptsAndRejects) {
  PMINDEX_EXPECT_OK(ParseDistribution("uniform"));
  PMINDEX_EXPECT_OK(ParseDistribution("sequential"));
  PMINDEX_EXPECT_OK(ParseDistribution("latest"));
  auto z = ParseDistribution("zipf:0.8");
  PMINDEX_ASSERT_OK(z);
  EXPECT_EQ(z.value().kind, Distribution::Kind::kZipf);
  EXPECT_DOUBLE_EQ(z.value().theta, 0.8);
  auto h = ParseDistribution("hotspot:0.05");
  PMINDEX_ASSERT_OK(h);
  EXPECT_DOUBLE_EQ(h.value().hot_fraction, 0.05);
  EXPECT_DOUBLE_EQ(h.value().hot_ops, 0.95);
  for (const char* bad : {"zipf:x", "zipf:1", "zipf:0", "hotspot", "hotspot:2", "hotspot:0.1:7",
                          "uniform:3", "gauss", ""}) {
    auto r = ParseDistribution(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_TRUE(r.status().is_invalid_argument()) << bad;
    }
  }
}

TEST(WorkloadMix, ParseWorkloadSequencesAndMixes) {
  auto w = ParseWorkload("insert:1000000,lookup:500000");
  PMINDEX_ASSERT_OK(w);
  ASSERT_EQ(w.value().size(), 2u);
  EXPECT_EQ(w.value()[0].ops, 1000000u);
  EXPECT_EQ(w.value()[1].mix.name, "lookup");
  auto m = ParseWorkload("insert:10,mix:insert=50,lookup=50:2000,scan");
  PMINDEX_ASSERT_OK(m);
  ASSERT_EQ(m.value().size(), 3u);
  EXPECT_EQ(m.value()[1].ops, 2000u);
  EXPECT_EQ(m.value()[1].mix.weight[static_cast<size_t>(OpType::kInsert)], 1u);  // reduced by gcd
  EXPECT_EQ(m.value()[2].ops, 0u);
  auto y = ParseMix("ycsb-b");
  PMINDEX_ASSERT_OK(y);
  EXPECT_EQ(y.value().weight[static_cast<size_t>(OpType::kLookup)], 19u);
  EXPECT_EQ(y.value().weight[static_cast<size_t>(OpType::kUpdate)], 1u);
  EXPECT_TRUE(ParseMix("ycsb-d").value().force_latest);
  EXPECT_TRUE(ParseMix("dense-insert").value().dense_insert);
  for (const char* bad : {"", "ycsb-g", "lookup:abc", "lookup:0", "mix:", "mix:foo=1",
                          "mix:insert=0", "mix:insert=1,insert=2", "mix:insert", ",lookup"}) {
    EXPECT_FALSE(ParseWorkload(bad).ok()) << bad;
  }
}

// Replays generated ops against a std::set oracle: every expectation the
// generator states must hold, and the op counts must match the mix.
void CheckAgainstOracle(WorkloadConfig cfg, unsigned threads) {
  auto made = Workload::Make(cfg);
  PMINDEX_ASSERT_OK(made);
  std::shared_ptr<const Workload> w = made.value();
  std::set<Key> present;
  std::vector<KV> pairs = w->LoadPairs();
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i > 0) {
      ASSERT_LT(pairs[i - 1].key, pairs[i].key);
    }
    ASSERT_EQ(pairs[i].value, ValueFor(pairs[i].key));
    present.insert(pairs[i].key);
  }
  State s = w->InitialState();
  for (size_t p = 1; p <= cfg.phases.size(); ++p) {
    auto plan = w->Plan(s, p, threads, false);
    PMINDEX_ASSERT_OK(plan);
    std::vector<std::unique_ptr<OpStream>> streams;
    std::vector<const OpStream*> sp;
    std::array<uint64_t, kOpTypes> counts{};
    // Streams of one phase never conflict, so replaying them one after
    // another is a valid linearization.
    std::vector<std::vector<Op>> per_thread(threads);
    for (unsigned t = 0; t < threads; ++t) {
      streams.push_back(std::make_unique<OpStream>(w, plan.value(), t));
      Op op;
      while (streams.back()->Next(&op)) per_thread[t].push_back(op);
      sp.push_back(streams.back().get());
    }
    for (unsigned t = 0; t < threads; ++t) {
      for (const Op& op : per_thread[t]) {
        ++counts[static_cast<size_t>(op.type)];
        if (op.type == OpType::kInsert) {
          ASSERT_FALSE(present.count(op.key)) << "insert of a present key, phase " << p;
          present.insert(op.key);
        } else if (op.type == OpType::kDelete) {
          ASSERT_TRUE(present.erase(op.key)) << "delete of an absent key, phase " << p;
        }
      }
    }
    // Reads are checked after all inserts and deletes of the phase were
    // replayed: a read never targets a key deleted in the same phase, and
    // reads of own inserts (latest) come after the insert in the stream.
    for (unsigned t = 0; t < threads; ++t) {
      for (const Op& op : per_thread[t]) {
        if (op.type != OpType::kInsert && op.type != OpType::kDelete) {
          ASSERT_TRUE(present.count(op.key)) << OpTypeName(op.type) << " of an absent key, phase " << p;
        }
      }
    }
    const uint64_t ops = cfg.phases[p - 1].ops ? cfg.phases[p - 1].ops : cfg.default_ops;
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    EXPECT_EQ(total, ops);
    const Mix& mix = cfg.phases[p - 1].mix;
    for (size_t i = 0; i < kOpTypes; ++i) {
      double expect = static_cast<double>(ops) * mix.weight[i] / mix.total();
      EXPECT_NEAR(static_cast<double>(counts[i]), expect, static_cast<double>(threads * mix.total()))
          << OpTypeName(static_cast<OpType>(i)) << " phase " << p;
    }
    w->Commit(&s, plan.value(), sp);
    ASSERT_EQ(s.present.size(), present.size());
    for (uint64_t i = 0; i < s.present.size(); i += 97)
      ASSERT_TRUE(present.count(w->keyspace().key(s.present.at(i))));
  }
}

TEST(WorkloadPlan, OracleSingleThread) {
  WorkloadConfig cfg;
  cfg.seed = TestSeed();
  PMINDEX_SEED_TRACE(cfg.seed);
  cfg.keys = 5000;
  cfg.default_ops = 3000;
  cfg.phases = ParseWorkload("insert,delete,ycsb-a,ycsb-d,ycsb-e,ycsb-f,mix:insert=2,delete=1,lookup=3")
                   .value();
  CheckAgainstOracle(cfg, 1);
}

TEST(WorkloadPlan, OracleThreadsAndDistributions) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  for (const char* dist : {"uniform", "zipf:0.99", "latest", "sequential", "hotspot:0.1"}) {
    SCOPED_TRACE(dist);
    WorkloadConfig cfg;
    cfg.seed = seed;
    cfg.keys = 4000;
    cfg.default_ops = 2500;
    cfg.dist = ParseDistribution(dist).value();
    cfg.phases = ParseWorkload("insert,mix:delete=1,lookup=1,ycsb-b,dense-insert:999,ycsb-d").value();
    CheckAgainstOracle(cfg, 3);
  }
}

TEST(WorkloadPlan, SameSeedSameOpsDifferentSeedDifferentOps) {
  WorkloadConfig cfg;
  cfg.keys = 1000;
  cfg.default_ops = 500;
  cfg.phases = ParseWorkload("ycsb-a,insert").value();
  auto a = GenerateOps(cfg), b = GenerateOps(cfg);
  PMINDEX_ASSERT_OK(a);
  PMINDEX_ASSERT_OK(b);
  ASSERT_EQ(a.value().size(), b.value().size());
  for (size_t i = 0; i < a.value().size(); ++i) ASSERT_EQ(a.value()[i].key, b.value()[i].key);
  cfg.seed = 2;
  auto c = GenerateOps(cfg);
  size_t same = 0;
  for (size_t i = 0; i < a.value().size(); ++i) same += a.value()[i].key == c.value()[i].key;
  EXPECT_LT(same, a.value().size() / 10);
}

TEST(WorkloadPlan, TooFewKeysIsAClearError) {
  WorkloadConfig cfg;
  cfg.keys = 100;
  cfg.default_ops = 101;
  cfg.phases = ParseWorkload("delete").value();
  auto r = GenerateOps(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().is_invalid_argument());
  EXPECT_NE(r.status().message().find("present keys"), std::string_view::npos);
  cfg.keys = 0;
  cfg.phases = ParseWorkload("lookup").value();
  EXPECT_FALSE(GenerateOps(cfg).ok());
  cfg.phases = ParseWorkload("insert:10,lookup:10").value();
  PMINDEX_EXPECT_OK(GenerateOps(cfg));
}

TEST(WorkloadDist, HotspotSendsTheHotShareToTheHotSet) {
  WorkloadConfig cfg;
  cfg.seed = TestSeed();
  PMINDEX_SEED_TRACE(cfg.seed);
  cfg.keys = 10000;
  cfg.key_kind = KeyKind::kDense;  // rank r is key r+1: hot set = keys 1..1000
  cfg.default_ops = 100000;
  cfg.dist = ParseDistribution("hotspot:0.1:0.9").value();
  cfg.phases = ParseWorkload("lookup").value();
  auto ops = GenerateOps(cfg);
  PMINDEX_ASSERT_OK(ops);
  size_t hot = 0;
  for (const Op& op : ops.value()) hot += op.key <= 1000;
  EXPECT_NEAR(static_cast<double>(hot) / 100000, 0.9, 0.01);
}

TEST(WorkloadDist, HotRangeParses) {
  auto h = ParseDistribution("hotrange:0.05");
  PMINDEX_ASSERT_OK(h);
  EXPECT_EQ(h.value().kind, Distribution::Kind::kHotRange);
  EXPECT_DOUBLE_EQ(h.value().hot_fraction, 0.05);
  EXPECT_DOUBLE_EQ(h.value().hot_ops, 0.95);
  EXPECT_DOUBLE_EQ(h.value().hot_start, 0);
  auto h3 = ParseDistribution("hotrange:0.1:1:0.5");
  PMINDEX_ASSERT_OK(h3);
  EXPECT_DOUBLE_EQ(h3.value().hot_ops, 1);
  EXPECT_DOUBLE_EQ(h3.value().hot_start, 0.5);
  EXPECT_EQ(ParseDistribution(h3.value().ToString()).value().hot_start, 0.5);
  for (const char* bad : {"hotrange", "hotrange:0", "hotrange:0.1:2", "hotrange:0.1:1:1.5",
                          "hotrange:0.1:1:x", "hotspot:0.1:1:0.5"}) {
    auto r = ParseDistribution(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

// A random key space: the hot keys of hotrange:F:P:S are the F*n present
// keys at key-order positions [S*n, S*n + F*n): one contiguous key range.
TEST(WorkloadDist, HotRangeIsAContiguousKeyRange) {
  for (double start : {0.0, 0.3, 0.97}) {
    WorkloadConfig cfg;
    cfg.seed = TestSeed();
    SCOPED_TRACE("PMINDEX_SEED=" + std::to_string(cfg.seed) + " start " + std::to_string(start));
    cfg.keys = 20000;
    cfg.default_ops = 100000;
    char d[64];
    std::snprintf(d, sizeof d, "hotrange:0.05:0.9:%g", start);
    cfg.dist = ParseDistribution(d).value();
    cfg.phases = ParseWorkload("lookup").value();
    auto w = Workload::Make(cfg).value();
    std::vector<Key> sorted;
    for (const KV& kv : w->LoadPairs()) sorted.push_back(kv.key);
    // The range is clamped to fit: 0.97 + 0.05 > 1 starts at n - F*n.
    const size_t hot = 1000;
    const size_t first = std::min<size_t>(static_cast<size_t>(start * 20000), 20000 - hot);
    const Key lo = sorted[first], hi = sorted[first + hot - 1];
    auto ops = GenerateOps(cfg);
    PMINDEX_ASSERT_OK(ops);
    std::set<Key> hot_seen;
    size_t in = 0;
    for (const Op& op : ops.value()) {
      ASSERT_TRUE(std::binary_search(sorted.begin(), sorted.end(), op.key));
      if (op.key >= lo && op.key <= hi) {
        ++in;
        hot_seen.insert(op.key);
      }
    }
    EXPECT_NEAR(static_cast<double>(in) / 100000, 0.9, 0.01);
    EXPECT_GT(hot_seen.size(), 990u);  // ~90 draws per hot key: all of them seen
  }
}

TEST(WorkloadDist, ThreadRangeParses) {
  auto d = ParseDistribution("threadrange");
  PMINDEX_ASSERT_OK(d);
  EXPECT_EQ(d.value().kind, Distribution::Kind::kThreadRange);
  EXPECT_DOUBLE_EQ(d.value().hot_ops, 0.95);
  EXPECT_EQ(d.value().shift, 0u);
  auto d2 = ParseDistribution("threadrange:0.8:3");
  PMINDEX_ASSERT_OK(d2);
  EXPECT_DOUBLE_EQ(d2.value().hot_ops, 0.8);
  EXPECT_EQ(d2.value().shift, 3u);
  EXPECT_EQ(ParseDistribution(d2.value().ToString()).value().shift, 3u);
  for (const char* bad : {"threadrange:2", "threadrange:x", "threadrange:0.5:-1", "threadrange:0.5:y",
                          "threadrange:0.5:1.5"}) {
    EXPECT_FALSE(ParseDistribution(bad).ok()) << bad;
  }
}

// threadrange:P:K: with T threads, thread t reads the key-order slice
// (t + K) mod T with probability P; a phase with another K moves every
// thread to another thread's keys (the access-pattern shift of paper 003).
TEST(WorkloadDist, ThreadRangeGivesEachThreadItsOwnSlice) {
  WorkloadConfig cfg;
  cfg.seed = TestSeed();
  PMINDEX_SEED_TRACE(cfg.seed);
  cfg.keys = 30000;
  cfg.default_ops = 60000;
  cfg.phases = ParseWorkload("lookup@threadrange:0.9,lookup@threadrange:0.9:1").value();
  auto w = Workload::Make(cfg).value();
  std::vector<Key> sorted;
  for (const KV& kv : w->LoadPairs()) sorted.push_back(kv.key);
  const unsigned T = 3;
  State st = w->InitialState();
  for (size_t phase = 1; phase <= 2; ++phase) {
    auto plan = w->Plan(st, phase, T, /*time_mode=*/false);
    PMINDEX_ASSERT_OK(plan);
    const PhasePlan& pl = plan.value();
    std::vector<std::unique_ptr<OpStream>> streams;
    for (unsigned t = 0; t < T; ++t) {
      streams.push_back(std::make_unique<OpStream>(w, pl, t));
      const unsigned slice = (t + (phase == 1 ? 0 : 1)) % T;
      const Key lo = sorted[30000 * slice / T], hi = sorted[30000 * (slice + 1) / T - 1];
      Op op;
      size_t n = 0, in = 0;
      while (streams.back()->Next(&op)) {
        ++n;
        ASSERT_TRUE(std::binary_search(sorted.begin(), sorted.end(), op.key));
        in += op.key >= lo && op.key <= hi;
      }
      ASSERT_EQ(n, 20000u);
      // 0.9 of the reads in the slice, plus the uniform draws that land in
      // it (a third of the other 0.1).
      EXPECT_NEAR(static_cast<double>(in) / n, 0.9 + 0.1 / 3, 0.015) << "thread " << t;
    }
    std::vector<const OpStream*> done;
    for (auto& s : streams) done.push_back(s.get());
    w->Commit(&st, pl, done);
  }
}

// "PHASE@DIST" overrides the run's distribution for that phase only: a hot
// range that moves between phases.
TEST(WorkloadDist, PhaseDistributionOverride) {
  auto p = ParseWorkload("update:100@hotrange:0.1:1:0.5,mix:insert=1,lookup=1:50@uniform,lookup");
  PMINDEX_ASSERT_OK(p);
  ASSERT_EQ(p.value().size(), 3u);
  ASSERT_TRUE(p.value()[0].dist.has_value());
  EXPECT_EQ(p.value()[0].ops, 100u);
  EXPECT_EQ(p.value()[0].dist->kind, Distribution::Kind::kHotRange);
  EXPECT_DOUBLE_EQ(p.value()[0].dist->hot_start, 0.5);
  ASSERT_TRUE(p.value()[1].dist.has_value());
  EXPECT_EQ(p.value()[1].ops, 50u);
  EXPECT_EQ(p.value()[1].dist->kind, Distribution::Kind::kUniform);
  EXPECT_FALSE(p.value()[2].dist.has_value());
  for (const char* bad : {"update@", "update:10@zipf:x", "update@hotrange", "@uniform"})
    EXPECT_FALSE(ParseWorkload(bad).ok()) << bad;

  WorkloadConfig cfg;
  cfg.seed = TestSeed();
  PMINDEX_SEED_TRACE(cfg.seed);
  cfg.keys = 10000;
  cfg.key_kind = KeyKind::kDense;  // key order = rank order: positions are keys - 1
  cfg.dist = ParseDistribution("uniform").value();
  cfg.phases = ParseWorkload("update:5000@hotrange:0.1:1:0,update:5000@hotrange:0.1:1:0.5,update:5000")
                   .value();
  auto ops = GenerateOps(cfg);
  PMINDEX_ASSERT_OK(ops);
  ASSERT_EQ(ops.value().size(), 15000u);
  size_t outside_third = 0;
  for (size_t i = 0; i < 15000; ++i) {
    Key k = ops.value()[i].key;
    if (i < 5000) ASSERT_TRUE(k >= 1 && k <= 1000) << k;
    else if (i < 10000) ASSERT_TRUE(k >= 5001 && k <= 6000) << k;
    else outside_third += k > 1000 && (k < 5001 || k > 6000);
  }
  EXPECT_GT(outside_third, 4000u);  // the run's uniform distribution again
}

// hotrange also places inserts: a share P of the fresh keys fall in the
// key interval of the hot present keys (widened to the neighbouring present
// keys), the rest outside; the committed state knows them (a delete of every
// present key afterwards deletes exactly the loaded and inserted keys).
TEST(WorkloadDist, HotRangeInsertsFallInTheHotKeyInterval) {
  for (double p : {1.0, 0.8}) {
    WorkloadConfig cfg;
    cfg.seed = TestSeed();
    SCOPED_TRACE("PMINDEX_SEED=" + std::to_string(cfg.seed) + " P " + std::to_string(p));
    cfg.keys = 20000;
    char ph[160];
    std::snprintf(ph, sizeof ph, "insert:10000@hotrange:0.05:%g:0.5,delete:30000", p);
    cfg.phases = ParseWorkload(ph).value();
    auto w = Workload::Make(cfg).value();
    std::vector<Key> sorted;
    for (const KV& kv : w->LoadPairs()) sorted.push_back(kv.key);
    const Key below = sorted[10000 - 1], above = sorted[10000 + 1000];  // neighbours of the hot set
    auto ops = GenerateOps(cfg);
    PMINDEX_ASSERT_OK(ops);
    ASSERT_EQ(ops.value().size(), 40000u);
    std::set<Key> all(sorted.begin(), sorted.end());
    size_t in = 0;
    for (size_t i = 0; i < 10000; ++i) {
      const Op& op = ops.value()[i];
      ASSERT_EQ(op.type, OpType::kInsert);
      ASSERT_TRUE(all.insert(op.key).second) << "insert of a present key";
      in += op.key > below && op.key < above;
    }
    if (p == 1.0) EXPECT_EQ(in, 10000u);
    else EXPECT_NEAR(static_cast<double>(in) / 10000, p, 0.02);
    std::set<Key> deleted;
    for (size_t i = 10000; i < 40000; ++i) {
      ASSERT_EQ(ops.value()[i].type, OpType::kDelete);
      deleted.insert(ops.value()[i].key);
    }
    EXPECT_EQ(deleted, all);
  }
  // Dense keys and time mode cannot place inserts in a range.
  WorkloadConfig cfg;
  cfg.keys = 100;
  cfg.key_kind = KeyKind::kDense;
  cfg.phases = ParseWorkload("insert:10@hotrange:0.5").value();
  EXPECT_FALSE(GenerateOps(cfg).ok());
}

TEST(WorkloadDist, SequentialIsAscendingPerThread) {
  WorkloadConfig cfg;
  cfg.seed = TestSeed();
  cfg.keys = 1000;
  cfg.default_ops = 999;
  cfg.dist = ParseDistribution("sequential").value();
  cfg.phases = ParseWorkload("lookup").value();
  auto ops = GenerateOps(cfg);
  PMINDEX_ASSERT_OK(ops);
  for (size_t i = 1; i < ops.value().size(); ++i)
    ASSERT_LT(ops.value()[i - 1].key, ops.value()[i].key);
}

// --keys-file / --op-keys: the bulk load is exactly the file's keys, a
// phase with op keys runs exactly the file's keys in file order (split in
// contiguous slices over threads), file deletes leave the present set, and
// generated phases after them read only keys still present.
TEST(WorkloadKeyFile, LoadAndOpsAreTheFilesKeys) {
  const uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  Rng rng(seed);
  auto file = std::make_shared<std::vector<Key>>();
  std::set<Key> distinct;
  while (distinct.size() < 5000) {
    Key k = rng.Next() >> 1;
    if (distinct.insert(k).second) file->push_back(k);
  }
  // Lookups: every 3rd file key but not the deleted ones, deletes: every
  // 7th, inserts: fresh keys.
  auto look = std::make_shared<std::vector<Key>>(), del = std::make_shared<std::vector<Key>>(),
       ins = std::make_shared<std::vector<Key>>();
  for (size_t i = 0; i < file->size(); i += 3)
    if (i % 7 != 0) look->push_back((*file)[i]);
  for (size_t i = 0; i < file->size(); i += 7) del->push_back((*file)[i]);
  while (ins->size() < 300) {
    Key k = rng.Next() >> 1;
    if (distinct.insert(k).second) ins->push_back(k);
  }

  WorkloadConfig cfg;
  cfg.seed = seed;
  cfg.keys = file->size();
  cfg.key_file = file;
  cfg.default_ops = 200;
  cfg.phases = ParseWorkload("lookup:1000,insert:300,delete:500,lookup:400,ycsb-c:2000,delete:200").value();
  cfg.phases[0].op_keys = look;
  cfg.phases[1].op_keys = ins;
  cfg.phases[2].op_keys = del;
  cfg.phases[3].op_keys = look;
  cfg.phases[3].op_keys_begin = 1000;
  auto w = Workload::Make(cfg);
  PMINDEX_ASSERT_OK(w);

  // The load is the file's keys, sorted.
  std::vector<KV> pairs = w.value()->LoadPairs();
  ASSERT_EQ(pairs.size(), file->size());
  std::vector<Key> sorted(file->begin(), file->end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < pairs.size(); ++i) {
    ASSERT_EQ(pairs[i].key, sorted[i]);
    ASSERT_EQ(pairs[i].value, ValueFor(sorted[i]));
  }
  // Ranks and keys of the table are inverse.
  const KeySpace& ks = w.value()->keyspace();
  for (uint64_t r = 0; r < file->size(); ++r) ASSERT_EQ(ks.rank(ks.key(r)), r);
  EXPECT_TRUE(ks.in_table((*file)[17]));
  EXPECT_FALSE(ks.in_table((*ins)[0]));

  for (unsigned threads : {1u, 3u}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    std::set<Key> present(file->begin(), file->end());
    State s = w.value()->InitialState();
    for (size_t p = 1; p <= cfg.phases.size(); ++p) {
      auto plan = w.value()->Plan(s, p, threads, false);
      PMINDEX_ASSERT_OK(plan);
      std::vector<std::unique_ptr<OpStream>> streams;
      std::vector<const OpStream*> sp;
      std::vector<Key> keys;  // in thread order = file order for file phases
      for (unsigned t = 0; t < threads; ++t) {
        streams.push_back(std::make_unique<OpStream>(w.value(), plan.value(), t));
        Op op;
        while (streams.back()->Next(&op)) {
          keys.push_back(op.key);
          if (op.type == OpType::kInsert) {
            ASSERT_TRUE(present.insert(op.key).second);
          } else if (op.type == OpType::kDelete) {
            ASSERT_EQ(present.erase(op.key), 1u) << "phase " << p;
          } else {
            ASSERT_TRUE(present.count(op.key)) << "phase " << p << " key " << op.key;
          }
        }
        sp.push_back(streams.back().get());
      }
      const PhaseSpec& spec = cfg.phases[p - 1];
      if (spec.op_keys) {
        const uint64_t n = spec.ops;
        ASSERT_EQ(keys.size(), n);
        for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(keys[i], (*spec.op_keys)[spec.op_keys_begin + i]);
      }
      w.value()->Commit(&s, plan.value(), sp);
    }
  }
}

TEST(WorkloadKeyFile, BadConfigsAreErrors) {
  auto file = std::make_shared<std::vector<Key>>(std::vector<Key>{5, 9, 1, 9});
  WorkloadConfig cfg;
  cfg.keys = 4;
  cfg.key_file = file;
  cfg.phases = ParseWorkload("lookup:2").value();
  EXPECT_FALSE(Workload::Make(cfg).ok());  // duplicate keys
  (*file)[3] = 7;
  PMINDEX_EXPECT_OK(Workload::Make(cfg));
  cfg.key_kind = KeyKind::kDense;
  EXPECT_FALSE(Workload::Make(cfg).ok());  // table needs the random key space
  cfg.key_kind = KeyKind::kRandom;
  cfg.phases[0].op_keys = std::make_shared<std::vector<Key>>(std::vector<Key>{5});
  EXPECT_FALSE(Workload::Make(cfg).ok());  // op-key file too short
  cfg.phases = ParseWorkload("ycsb-a:2").value();
  cfg.phases[0].op_keys = std::make_shared<std::vector<Key>>(std::vector<Key>{5, 9});
  EXPECT_FALSE(Workload::Make(cfg).ok());  // not a single-type phase
  cfg.phases = ParseWorkload("lookup:2").value();
  cfg.phases[0].op_keys = std::make_shared<std::vector<Key>>(std::vector<Key>{5, 9});
  auto w = Workload::Make(cfg);
  PMINDEX_ASSERT_OK(w);
  EXPECT_FALSE(w.value()->Plan(w.value()->InitialState(), 1, 1, true).ok());  // time mode
}

TEST(WorkloadKeyFile, RemoveRanksKeepsOrder) {
  RankList l;
  l.Append(RankRange{100, 10, 1});
  l.Append(RankRange{0, 5, 2});
  RankList r = RemoveRanks(l, {2, 4, 5, 100, 105, 109});
  std::vector<uint64_t> got;
  for (uint64_t i = 0; i < r.size(); ++i) got.push_back(r.at(i));
  EXPECT_EQ(got, (std::vector<uint64_t>{101, 102, 103, 104, 106, 107, 108, 0, 6, 8}));
}

}  // namespace
}  // namespace pmindex::workload
