// NV-Tree unit tests: LN append/visibility rules on plain memory, the
// per-operation flush counts, Algorithm 3 and the size model, and tree
// level behaviour with tiny nodes (split / replace / merge / rebuild),
// recovery from crash images and clean shutdown, corrupt pools.
#include "trees/nvtree/nvtree.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "support/pools.h"
#include "support/seed.h"
#include "trees/nvtree/adaptive.h"
#include "trees/nvtree/leaf.h"

namespace pmindex::nvtree {
namespace {

using testing::TestSeed;

struct LnBuf {
  explicit LnBuf(uint32_t bytes) {
    ln = static_cast<Ln*>(std::aligned_alloc(64, bytes));
    std::memset(static_cast<void*>(ln), 0xAB, bytes);  // garbage, as from the allocator
    LnInit(ln, bytes, 0, 0, nullptr, 0);
  }
  ~LnBuf() { std::free(ln); }
  Ln* ln;
};

void Put(Ln* ln, Key k, Value v, bool negative) {
  LnElement e{k, v};
  LnAppend(ln, &e, &negative, 1);
}

TEST(NvtreeLeaf, NewestElementDecides) {
  LnBuf b(256);
  Ln* ln = b.ln;
  EXPECT_EQ(ln->capacity(), 12u);
  EXPECT_FALSE(LnFind(ln, ln->count_acquire(), 5));
  Put(ln, 5, 50, false);
  Put(ln, 0, 1, false);
  Put(ln, UINT64_MAX, 2, false);
  EXPECT_EQ(LnFind(ln, 3, 5), 50u);
  EXPECT_EQ(LnFind(ln, 3, 0), 1u);
  EXPECT_EQ(LnFind(ln, 3, UINT64_MAX), 2u);
  Put(ln, 5, 50, true);  // delete
  EXPECT_FALSE(LnFind(ln, ln->count_acquire(), 5));
  Put(ln, 5, 51, false);  // re-insert
  EXPECT_EQ(LnFind(ln, ln->count_acquire(), 5), 51u);
  // A reader bounded by an older nElement sees the older state.
  EXPECT_EQ(LnFind(ln, 1, 5), 50u);
  EXPECT_FALSE(LnFind(ln, 4, 5));
  std::vector<KV> live;
  LnLive(ln, ln->count_acquire(), &live);
  ASSERT_EQ(live.size(), 3u);
  EXPECT_EQ(live[0], (KV{0, 1}));
  EXPECT_EQ(live[1], (KV{5, 51}));
  EXPECT_EQ(live[2], (KV{UINT64_MAX, 2}));
}

TEST(NvtreeLeaf, StaleFlagBitIsOverwritten) {
  LnBuf b(256);
  Ln* ln = b.ln;
  Put(ln, 1, 10, false);
  // A crash after the flag of slot 1 persisted but before nElement: the
  // bit is set for an invisible slot.
  ln->flags[0] |= 2;
  EXPECT_EQ(LnFind(ln, ln->count_acquire(), 1), 10u);
  Put(ln, 2, 20, false);
  EXPECT_EQ(LnFind(ln, ln->count_acquire(), 2), 20u);
}

// Algorithm 2: one line for the element, one for nElement; an update's
// two elements share a line or span two.
TEST(NvtreeLeaf, LinesFlushedPerAppend) {
  LnBuf b(1024);
  auto c0 = pm::ThreadCounters();
  Put(b.ln, 1, 1, false);
  auto c1 = pm::ThreadCounters();
  EXPECT_EQ(c1.lines_flushed - c0.lines_flushed, 2u);
  EXPECT_EQ(c1.fences - c0.fences, 2u);
  LnElement e[2] = {{1, 1}, {1, 2}};
  bool neg[2] = {true, false};
  LnAppend(b.ln, e, neg, 2);  // slots 1, 2: same line
  auto c2 = pm::ThreadCounters();
  EXPECT_EQ(c2.lines_flushed - c1.lines_flushed, 2u);
  LnAppend(b.ln, e, neg, 2);  // slots 3, 4: two lines
  auto c3 = pm::ThreadCounters();
  EXPECT_EQ(c3.lines_flushed - c2.lines_flushed, 3u);
  EXPECT_EQ(LnFind(b.ln, b.ln->count_acquire(), 1), 2u);
}

TEST(NvtreeAdaptive, Algorithm3Directions) {
  CostModel m = CostModel::Fixed(10, 100);
  // Write-intensive, hot-write: balanced and aggressive double, the
  // conservative strategy adds one line.
  LnStats hot{.reads = 1, .writes = 1000, .total_reads = 100, .total_writes = 10000, .leaves = 100};
  EXPECT_EQ(NewLeafSize(Strategy::kBalanced, 1024, hot, m, 256, 4160), 2048u);
  EXPECT_EQ(NewLeafSize(Strategy::kAggressive, 1024, hot, m, 256, 4160), 2048u);
  EXPECT_EQ(NewLeafSize(Strategy::kConservative, 1024, hot, m, 256, 4160), 1088u);
  EXPECT_EQ(NewLeafSize(Strategy::kOff, 1024, hot, m, 256, 4160), 1024u);
  // Write-intensive but cold-write: balanced adds a line, conservative keeps.
  LnStats cold{.reads = 1, .writes = 10, .total_reads = 100, .total_writes = 10000, .leaves = 100};
  EXPECT_EQ(NewLeafSize(Strategy::kBalanced, 1024, cold, m, 256, 4160), 1088u);
  EXPECT_EQ(NewLeafSize(Strategy::kConservative, 1024, cold, m, 256, 4160), 1024u);
  // Capped at the maximum.
  EXPECT_EQ(NewLeafSize(Strategy::kAggressive, 4096, hot, m, 256, 4160), 4160u);
  // Read-intensive, hot-read, cold-write: shrinks by one line when the
  // saved searches outweigh the earlier split (equations 3-4).
  LnStats rd{.reads = 100000, .writes = 10, .total_reads = 100000, .total_writes = 100000, .leaves = 100};
  EXPECT_EQ(NewLeafSize(Strategy::kBalanced, 1024, rd, m, 256, 4160), 960u);
  EXPECT_EQ(NewLeafSize(Strategy::kConservative, 1024, rd, m, 256, 4160), 960u);
  EXPECT_EQ(NewLeafSize(Strategy::kAggressive, 1024, rd, m, 256, 4160), 1024u);
  EXPECT_EQ(NewLeafSize(Strategy::kBalanced, 256, rd, m, 256, 4160), 256u);  // floor
}

TEST(NvtreeAdaptive, ModelRefusesEnlargingReadHeavyNodes) {
  CostModel m = CostModel::Fixed(10, 100);
  // Reads barely below writes: Rr/w ~ 1, doubling 1 KB adds 64 element
  // scans per search, far more than one saved split.
  LnStats s{.reads = 999, .writes = 1000, .total_reads = 1000, .total_writes = 1000, .leaves = 1};
  EXPECT_FALSE(m.EnlargeOk(1024, 2048, s));
  EXPECT_EQ(NewLeafSize(Strategy::kAggressive, 1024, s, m, 256, 4160), 1024u);
  LnStats w{.reads = 0, .writes = 1000, .total_reads = 0, .total_writes = 1000, .leaves = 1};
  EXPECT_TRUE(m.EnlargeOk(1024, 2048, w));
  // The measured model is sane whatever the machine's noise: positive, and
  // a bigger LN never costs less to search or to write.
  const CostModel& mm = CostModel::Measured();
  EXPECT_GT(mm.Tr(4096), 0.0);
  for (uint32_t b = 128; b < 4096; b += 64) {
    EXPECT_GE(mm.Tr(b + 64), mm.Tr(b)) << b;
    EXPECT_GE(mm.Tw(b + 64), mm.Tw(b)) << b;
  }
}

TEST(NvtreeAdaptive, XplineModelChargesTheReadsOfAnUncachedLeaf) {
  // By hand: a 128-byte LN is two lines, one random and one sequential
  // read; a 4160-byte LN is 65 lines.
  pm::XplineParams p;
  p.read_ns = 200;
  p.read_seq_ns = 50;
  CostModel m = CostModel::Fixed(10, 100).WithModeledReads(p);
  EXPECT_DOUBLE_EQ(m.Tr(128), 20 + 200 + 50);
  EXPECT_DOUBLE_EQ(m.Tr(4160), 10 * 65 + 200 + 64 * 50);
  EXPECT_DOUBLE_EQ(m.Tw(128), 200);  // writes are left as they were
  // Measured() follows the active model: under xpline it is another model
  // whose searches cost at least the modelled reads more.
  const pm::PmModel before = pm::ActivePmModel();
  pm::SetPmModel(pm::PmModel::kDram);
  const CostModel* dram = &CostModel::Measured();
  pm::SetPmModel(pm::PmModel::kXpline, p);
  const CostModel* xpline = &CostModel::Measured();
  pm::SetPmModel(before);
  EXPECT_NE(dram, xpline);
  EXPECT_GE(xpline->Tr(4160), 200 + 64 * 50);
  EXPECT_GE(xpline->Tr(128), 250);
  EXPECT_LT(dram->Tr(128), 250);  // a 128-byte scan of DRAM takes far less than 250 ns
}

// ------------------------------------------------------------ tree level

using testing::PoolAndIndex;

NvTree* TreeOf(const PoolAndIndex& t) { return static_cast<NvTree*>(&::pmindex::TreeOf(*t.idx)); }

PoolAndIndex Make(const std::string& opts) { return testing::MakeInMemory("nvtree", opts); }

// What a crash leaves with every store durable: a byte copy of the pool.
PoolAndIndex Reopen(Pool* p) { return testing::ReopenImage(p); }

void ExpectSame(Index* idx, const std::map<Key, Value>& oracle) {
  ASSERT_EQ(idx->stats().entries, oracle.size());
  std::vector<KV> all(oracle.size() + 1);
  size_t n = idx->scan(0, all.size(), all.data());
  ASSERT_EQ(n, oracle.size());
  size_t i = 0;
  for (auto& [k, v] : oracle) {
    ASSERT_EQ(all[i].key, k);
    ASSERT_EQ(all[i].value, v);
    ++i;
  }
}

TEST(NvtreeTree, RandomOpsTinyNodesAgainstOracle) {
  uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  for (std::string opts : {"node=128,pln=64,fanout=2,adaptive=off", "node=128,pln=64,fanout=3",
                           "node=256,pln=64,fanout=2,adaptive=aggressive", "node=512"}) {
    SCOPED_TRACE(opts);
    auto t = Make(opts);
    std::mt19937_64 rng(seed);
    std::map<Key, Value> oracle;
    const Key range = 600;
    for (int i = 0; i < 20000; ++i) {
      Key k = rng() % range;
      if (k == range - 1) k = UINT64_MAX;
      Value v = rng();
      bool present = oracle.count(k) != 0;
      switch (rng() % 5) {
        case 0:
        case 1: {
          Status s = t.idx->insert(k, v);
          ASSERT_EQ(s.ok(), !present) << s.ToString();
          if (!present) oracle[k] = v;
          break;
        }
        case 2: {
          Status s = t.idx->update(k, v);
          ASSERT_EQ(s.ok(), present);
          if (present) oracle[k] = v;
          break;
        }
        case 3: {
          Status s = t.idx->remove(k);
          ASSERT_EQ(s.ok(), present);
          oracle.erase(k);
          break;
        }
        case 4: {
          ASSERT_TRUE(t.idx->upsert(k, v).ok());
          oracle[k] = v;
          break;
        }
      }
      auto got = t.idx->lookup(k);
      ASSERT_EQ(got.has_value(), oracle.count(k) != 0) << "op " << i << " key " << k;
      if (got) {
        ASSERT_EQ(*got, oracle[k]);
      }
      if (i % 2000 == 0) {
        Status vs = t.idx->verify();
        ASSERT_TRUE(vs.ok()) << vs.ToString();
      }
    }
    Status vs = t.idx->verify();
    ASSERT_TRUE(vs.ok()) << vs.ToString();
    ExpectSame(t.idx.get(), oracle);
    if (opts.find("node=128") != std::string::npos) {
      EXPECT_GT(TreeOf(t)->splits(), 0u);
      EXPECT_GT(TreeOf(t)->replaces(), 0u);
      EXPECT_GT(TreeOf(t)->merges(), 0u);
      EXPECT_GT(TreeOf(t)->rebuilds(), 0u);
    }
    // Crash image: rebuild-from-LN.
    auto r = Reopen(t.pool.get());
    ASSERT_NE(r.idx, nullptr);
    EXPECT_FALSE(static_cast<NvTree*>(&::pmindex::TreeOf(*r.idx))->recovered_clean());
    ASSERT_TRUE(r.idx->verify().ok());
    ExpectSame(r.idx.get(), oracle);
    // And it keeps working.
    ASSERT_TRUE(r.idx->upsert(7, 7).ok());
    EXPECT_EQ(r.idx->lookup(7), 7u);
  }
}

TEST(NvtreeTree, CleanShutdownIsInstantRecovery) {
  auto t = Make("node=256,pln=64,fanout=2");
  for (Key k = 0; k < 3000; ++k) ASSERT_TRUE(t.idx->insert(k * 7 % 3001, k).ok());
  ASSERT_TRUE(t.idx->close().ok());
  auto r = Reopen(t.pool.get());
  ASSERT_NE(r.idx, nullptr);
  EXPECT_TRUE(static_cast<NvTree*>(&::pmindex::TreeOf(*r.idx))->recovered_clean());
  ASSERT_TRUE(r.idx->verify().ok());
  for (Key k = 0; k < 3000; ++k) ASSERT_EQ(r.idx->lookup(k * 7 % 3001), k);
  // The clean bit was cleared at open: a crash now must rebuild from LNs.
  auto r2 = Reopen(r.pool.get());
  ASSERT_NE(r2.idx, nullptr);
  EXPECT_FALSE(static_cast<NvTree*>(&::pmindex::TreeOf(*r2.idx))->recovered_clean());
  ASSERT_TRUE(r2.idx->verify().ok());
  EXPECT_EQ(r2.idx->stats().entries, 3000u);
}

TEST(NvtreeTree, SnapshotThatDisagreesFallsBackToLns) {
  auto t = Make("node=128,pln=64,fanout=2");
  for (Key k = 0; k < 500; ++k) ASSERT_TRUE(t.idx->insert(k, k).ok());
  ASSERT_TRUE(t.idx->close().ok());
  auto img = Pool::OpenImage(t.pool->bytes());
  ASSERT_TRUE(img.ok());
  uint64_t snap = img.value()->root(1);
  ASSERT_EQ(snap & 1, 1u);
  // Damage one LN pointer of the snapshot.
  uint64_t* rec = img.value()->to_ptr<uint64_t>(PPtr(snap & ~uint64_t{1}));
  rec[4 + 2 * 3 + 1] ^= 64;
  auto idx = open_index(img.value().get());
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_FALSE(static_cast<NvTree*>(&::pmindex::TreeOf(*idx.value()))->recovered_clean());
  ASSERT_TRUE(idx.value()->verify().ok());
  EXPECT_EQ(idx.value()->stats().entries, 500u);
}

TEST(NvtreeTree, UnpublishedAppendIsInvisibleAfterCrash) {
  auto t = Make("node=512");
  ASSERT_TRUE(t.idx->insert(1, 10).ok());
  auto img = Pool::OpenImage(t.pool->bytes());
  ASSERT_TRUE(img.ok());
  // A crash after the element of a second insert was flushed, before
  // nElement moved.
  Ln* head = img.value()->to_ptr<Ln>(PPtr(img.value()->root(0)));
  head->elems[1] = {2, 20};
  auto idx = open_index(img.value().get());
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(idx.value()->lookup(1), 10u);
  EXPECT_FALSE(idx.value()->lookup(2));
  ASSERT_TRUE(idx.value()->insert(2, 21).ok());
  EXPECT_EQ(idx.value()->lookup(2), 21u);
}

TEST(NvtreeTree, CorruptListIsCorruptionNotCrash) {
  auto t = Make("node=128,pln=64,fanout=2");
  for (Key k = 0; k < 200; ++k) ASSERT_TRUE(t.idx->insert(k, k).ok());
  {
    auto img = Pool::OpenImage(t.pool->bytes());
    Ln* head = img.value()->to_ptr<Ln>(PPtr(img.value()->root(0)));
    head->next = 0x1234567;  // wild pointer
    auto idx = open_index(img.value().get());
    ASSERT_FALSE(idx.ok());
    EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
  }
  {
    auto img = Pool::OpenImage(t.pool->bytes());
    Ln* head = img.value()->to_ptr<Ln>(PPtr(img.value()->root(0)));
    Ln* second = img.value()->to_ptr<Ln>(PPtr(head->next));
    second->next = img.value()->root(0);  // cycle
    auto idx = open_index(img.value().get());
    ASSERT_FALSE(idx.ok());
    EXPECT_TRUE(idx.status().is_corruption());
  }
  {
    auto img = Pool::OpenImage(t.pool->bytes());
    Ln* head = img.value()->to_ptr<Ln>(PPtr(img.value()->root(0)));
    head->n_element = 1000;
    auto idx = open_index(img.value().get());
    ASSERT_FALSE(idx.ok());
    EXPECT_TRUE(idx.status().is_corruption());
  }
}

TEST(NvtreeTree, BulkLoadThenOps) {
  auto t = Make("node=256,pln=64,fanout=3");
  std::vector<KV> kv;
  for (Key k = 0; k < 5000; ++k) kv.push_back({k * 2, k});
  ASSERT_TRUE(t.idx->bulk_load(kv, 0.7).ok());
  ASSERT_TRUE(t.idx->verify().ok());
  EXPECT_FALSE(t.idx->bulk_load(kv, 0.7).ok());  // not empty
  for (Key k = 0; k < 5000; ++k) ASSERT_EQ(t.idx->lookup(k * 2), k);
  for (Key k = 0; k < 5000; ++k) ASSERT_TRUE(t.idx->insert(k * 2 + 1, k).ok());
  ASSERT_TRUE(t.idx->verify().ok());
  EXPECT_EQ(t.idx->stats().entries, 10000u);
}

TEST(NvtreeTree, VariableLeafSizesUnderSkewedUpdates) {
  auto t = Make("node=512,pln=64,fanout=4,adaptive=aggressive");
  for (Key k = 0; k < 4000; ++k) ASSERT_TRUE(t.idx->insert(k, k).ok());
  for (int r = 0; r < 40; ++r)
    for (Key k = 0; k < 200; ++k) ASSERT_TRUE(t.idx->update(k, r).ok());
  ASSERT_TRUE(t.idx->verify().ok());
  // Some LN grew beyond the configured 512 B.
  bool bigger = false;
  ASSERT_TRUE(t.idx->for_each_block([&](PPtr p) {
    if (p.raw() == (t.pool->root(1) & ~uint64_t{1})) return;
    bigger |= t.pool->to_ptr<Ln>(p)->size_bytes() > 512;
  }).ok());
  EXPECT_TRUE(bigger);
  auto r = Reopen(t.pool.get());
  ASSERT_TRUE(r.idx->verify().ok());
  for (Key k = 0; k < 200; ++k) ASSERT_EQ(r.idx->lookup(k), 39u);
}

TEST(NvtreeTree, ConcurrentReadersAndWriters) {
  auto t = Make("node=128,pln=64,fanout=2");
  std::atomic<bool> stop{false};
  // Keys < 1000 are inserted once and never removed: readers must always
  // find them once inserted.
  for (Key k = 0; k < 1000; ++k) ASSERT_TRUE(t.idx->insert(k * 2, k).ok());
  std::thread reader([&] {
    while (!stop.load()) {
      for (Key k = 0; k < 1000; k += 7) {
        auto v = t.idx->lookup(k * 2);
        if (!v || *v != k) {
          ADD_FAILURE() << "lost key " << k * 2;
          stop = true;
        }
      }
    }
  });
  std::thread writer([&] {
    for (int r = 0; r < 3; ++r) {
      for (Key k = 0; k < 1000; ++k) ASSERT_TRUE(t.idx->insert(k * 2 + 1, k).ok());
      for (Key k = 0; k < 1000; ++k) ASSERT_TRUE(t.idx->remove(k * 2 + 1).ok());
    }
  });
  for (Key k = 2000; k < 4000; ++k) ASSERT_TRUE(t.idx->upsert(k * 2, k).ok());
  writer.join();
  stop = true;
  reader.join();
  ASSERT_TRUE(t.idx->verify().ok());
  EXPECT_EQ(t.idx->stats().entries, 3000u);
}

TEST(NvtreeOptions, BadOptionsRejected) {
  PoolOptions po;
  po.kind = "nvtree";
  for (std::string bad : {"node=100", "node=8192", "adaptive=maybe", "pln=70", "colour=red"}) {
    po.index_options = bad;
    auto pool = Pool::CreateInMemory(po);
    ASSERT_TRUE(pool.ok());
    auto idx = create_index("nvtree", bad, pool.value().get());
    EXPECT_FALSE(idx.ok()) << bad;
    EXPECT_TRUE(idx.status().is_invalid_argument()) << bad;
  }
}

}  // namespace
}  // namespace pmindex::nvtree
