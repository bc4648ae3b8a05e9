// LB+-Tree unit tests: leaf-level algorithms on plain aligned memory
// (Algorithm 2 line writes and entry moving, Algorithm 3 split, delete by
// one NAW, multi-256B blocks, fingerprints), a flush-image crash check of
// every NAW section, and tree-level recovery of hand-crafted crash states.
#include "trees/pm_leaf/lbtree.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "alloc/allocator.h"
#include "common/fingerprint.h"
#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "support/pools.h"
#include "support/seed.h"
#include "support/status.h"
#include "trees/pm_leaf/lbtree_leaf.h"
#include "trees/pm_leaf/pm_image_tracer.h"

namespace pmindex::lbtree {
namespace {

using testing::TestSeed;

template <int M>
struct LeafBuf {
  LeafBuf() {
    mem = static_cast<Leaf<M>*>(std::aligned_alloc(256, Leaf<M>::kBytes));
    Leaf<M>::Format(mem, PPtr());
  }
  ~LeafBuf() { std::free(mem); }
  Leaf<M>* operator->() { return mem; }
  Leaf<M>* mem;
};

template <int M>
std::map<uint64_t, uint64_t> Contents(const Leaf<M>* l) {
  KV buf[Leaf<M>::kSlots];
  int n = l->Collect(buf);
  std::map<uint64_t, uint64_t> m;
  for (int i = 0; i < n; ++i) m[buf[i].key] = buf[i].value;
  return m;
}

TEST(LbtreeFingerprint, SimdMatchesScalar) {
  uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (int it = 0; it < 2000; ++it) {
    uint8_t bytes[64];
    for (auto& b : bytes) b = static_cast<uint8_t>(rng() % 4);  // many matches
    uint8_t fp = static_cast<uint8_t>(rng() % 4);
    for (int n : {14, 16, 28, 32, 33, 56, 64}) {
      ASSERT_EQ(common::MatchMask(bytes, n, fp), common::MatchMaskScalar(bytes, n, fp)) << n;
    }
    ASSERT_EQ(common::MatchMask16(bytes, fp), common::MatchMaskScalar(bytes, 16, fp));
    ASSERT_EQ(common::MatchMask32(bytes, fp), common::MatchMaskScalar(bytes, 32, fp));
  }
}

// Algorithm 2: a slot in line 0 costs one line; otherwise two, and entry
// moving empties line 0 so that the next inserts cost one line again.
TEST(LbtreeLeaf, EntryMovingLineWrites) {
  LeafBuf<1> l;
  auto lines = [] { return pm::ThreadCounters().lines_flushed; };
  std::vector<uint64_t> cost;
  for (uint64_t k = 1; k <= 14; ++k) {
    uint64_t before = lines();
    l->Insert(k * 10, k);
    cost.push_back(lines() - before);
  }
  // Slots 0..2 (line 0): 1 line each. 4th: line 1, moves the 3 entries of
  // line 0 into line 1 (2 lines). 5th..7th: line 0 again. 8th: line 2 with
  // moving, and so on.
  std::vector<uint64_t> want = {1, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1, 2, 1, 1};
  EXPECT_EQ(cost, want);
  EXPECT_TRUE(l->Full());
  EXPECT_EQ(l->Check(), "");
  for (uint64_t k = 1; k <= 14; ++k) {
    uint64_t v = 0;
    ASSERT_TRUE(l->Find(k * 10, &v)) << k;
    EXPECT_EQ(v, k);
  }
  uint64_t v;
  EXPECT_FALSE(l->Find(5, &v));
}

TEST(LbtreeLeaf, EdgeKeysAndDeleteIsOneNaw) {
  LeafBuf<1> l;
  l->Insert(0, 100);
  l->Insert(UINT64_MAX, 200);
  uint64_t v = 0;
  ASSERT_TRUE(l->Find(0, &v));
  EXPECT_EQ(v, 100u);
  ASSERT_TRUE(l->Find(UINT64_MAX, &v));
  EXPECT_EQ(v, 200u);
  pm::Counters before = pm::ThreadCounters();
  int id = l->Locate(0);
  ASSERT_GE(id, 0);
  l->RemoveSlot(id);
  pm::Counters d = pm::ThreadCounters() - before;
  EXPECT_EQ(d.naws, 1u);
  EXPECT_EQ(d.lines_flushed, 1u);
  EXPECT_EQ(d.fences, 1u);
  EXPECT_FALSE(l->Find(0, &v));
  EXPECT_EQ(l->Count(), 1);
}

template <int M>
void SplitCase(bool new_key_high) {
  LeafBuf<M> l;
  LeafBuf<M> nl;
  std::map<uint64_t, uint64_t> all;
  for (int i = 0; i < Leaf<M>::kSlots; ++i) {
    uint64_t k = 1000 + 10 * i;
    l->Insert(k, k + 1);
    all[k] = k + 1;
  }
  ASSERT_TRUE(l->Full());
  const bool alt_before = l->alt();
  uint64_t k = new_key_high ? 1000 + 10 * Leaf<M>::kSlots + 5 : 1003;
  all[k] = 7;
  PPtr fake = PPtr::Make(1, 0x40000);
  uint64_t split = l->SplitInsert(k, 7, nl.mem, fake);
  EXPECT_NE(l->alt(), alt_before);
  EXPECT_EQ(l->next(), fake);
  EXPECT_TRUE(nl->next().is_null());
  EXPECT_EQ(l->Check(), "");
  EXPECT_EQ(nl->Check(), "");
  auto a = Contents(l.mem), b = Contents(nl.mem);
  EXPECT_EQ(a.size() + b.size(), all.size());
  for (auto& [key, val] : a) EXPECT_LT(key, split);
  for (auto& [key, val] : b) EXPECT_GE(key, split);
  std::map<uint64_t, uint64_t> merged = a;
  merged.insert(b.begin(), b.end());
  EXPECT_EQ(merged, all);
  // Moved entries sit in slots 7..13 of every block of the new leaf, so
  // its line 0 is free: the next insert there costs one line.
  EXPECT_EQ(nl->blk[0].hdr[0] & 0x7, 0u);
  uint64_t before = pm::ThreadCounters().lines_flushed;
  nl->Insert(UINT64_MAX, 1);
  EXPECT_EQ(pm::ThreadCounters().lines_flushed - before, 1u);
  // The old leaf keeps working across its switched headers.
  for (int i = 0; i < 5; ++i) {
    if (l->Full()) break;
    l->Insert(1001 + 10 * i, 9);
  }
  EXPECT_EQ(l->Check(), "");
}

TEST(LbtreeLeaf, Split256NewKeyHigh) { SplitCase<1>(true); }
TEST(LbtreeLeaf, Split256NewKeyLow) { SplitCase<1>(false); }
TEST(LbtreeLeaf, Split512) { SplitCase<2>(true); SplitCase<2>(false); }
TEST(LbtreeLeaf, Split768) { SplitCase<3>(true); SplitCase<3>(false); }
TEST(LbtreeLeaf, Split1024) { SplitCase<4>(true); SplitCase<4>(false); }

// A bulk-loaded full leaf (Fill: each block's entries in descending order
// from its first packed slot) splits so that the moved half frees block
// 0's header line: a new key that stays in the old leaf commits in the
// split's own write-back (2 fences in all, as for a key that goes to the
// new leaf), and the next insert into the old leaf costs one line.
template <int M>
void FullFilledLeafSplit(bool new_key_high) {
  constexpr int kN = Leaf<M>::kSlots;
  LeafBuf<M> l;
  LeafBuf<M> nl;
  std::vector<KV> e(kN);
  std::map<uint64_t, uint64_t> all;
  for (int i = 0; i < kN; ++i) {
    e[i] = {uint64_t{1000} + 10 * i, uint64_t{1} + i};
    all[e[i].key] = e[i].value;
  }
  Leaf<M>::Fill(l.mem, e.data(), kN, PPtr());
  ASSERT_EQ(l->Check(), "");
  ASSERT_EQ(Contents(l.mem), all);
  // Block 0's header line holds its largest entries, all in the upper half.
  for (int s = 0; s < 3; ++s) EXPECT_GE(l->blk[0].slot[s].key, e[kN / 2].key) << s;
  const uint64_t k = new_key_high ? 1000 + 10 * kN + 5 : 1003;
  all[k] = 7;
  const pm::Counters before = pm::ThreadCounters();
  const uint64_t split = l->SplitInsert(k, 7, nl.mem, PPtr::Make(1, 0x40000));
  const pm::Counters d = pm::ThreadCounters() - before;
  EXPECT_EQ(d.fences, 2u);
  EXPECT_EQ(split, e[kN / 2].key);
  EXPECT_EQ(l->Check(), "");
  EXPECT_EQ(nl->Check(), "");
  auto a = Contents(l.mem), b = Contents(nl.mem);
  std::map<uint64_t, uint64_t> merged = a;
  merged.insert(b.begin(), b.end());
  EXPECT_EQ(merged, all);
  for (auto& [key, val] : a) EXPECT_LT(key, split);
  if (!new_key_high) {
    EXPECT_EQ(l->Locate(k) / Leaf<M>::kSlotsPerBlock, 0);  // block 0 ...
    EXPECT_LT(l->Locate(k) % Leaf<M>::kSlotsPerBlock, 3);  // ... header line
  }
  const uint64_t lines = pm::ThreadCounters().lines_flushed;
  l->Insert(1001, 9);
  EXPECT_EQ(pm::ThreadCounters().lines_flushed - lines, 1u);
  EXPECT_EQ(l->Check(), "");
}
TEST(LbtreeLeaf, FullFilledLeafSplitsInTwoFences) {
  for (bool high : {false, true}) {
    SCOPED_TRACE(high ? "new key high" : "new key low");
    FullFilledLeafSplit<1>(high);
    FullFilledLeafSplit<2>(high);
    FullFilledLeafSplit<3>(high);
    FullFilledLeafSplit<4>(high);
  }
}

// Two splits in a row flip alt twice: blocks 1.. go front -> back -> front.
TEST(LbtreeLeaf, RepeatedSplitsSwitchHeadersBackAndForth) {
  LeafBuf<2> l;
  std::vector<std::unique_ptr<LeafBuf<2>>> news;
  std::map<uint64_t, uint64_t> model;
  uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 400; ++i) {
    uint64_t k = rng() % 64;  // keep everything in the old leaf's range
    if (model.count(k)) {
      int id = l->Locate(k);
      ASSERT_GE(id, 0);
      l->RemoveSlot(id);
      model.erase(k);
    } else if (!l->Full()) {
      l->Insert(k, i);
      model[k] = i;
    } else {
      news.push_back(std::make_unique<LeafBuf<2>>());
      uint64_t split = l->SplitInsert(k, i, news.back()->mem, PPtr::Make(1, 0x40000));
      model[k] = i;
      // Drop what moved: the test keeps only the old leaf.
      for (auto it = model.lower_bound(split); it != model.end();) it = model.erase(it);
    }
    ASSERT_EQ(l->Check(), "") << i;
    ASSERT_EQ(Contents(l.mem), model) << i;
  }
}

// ----------------------------------------------------- flush-image crashes
// A tracer that keeps the image of what flush + fence made durable (lines
// copied at flush, committed at the next fence). At every fence and at the
// end, the test decodes the leaf from the image: it must hold the old or
// the new contents, never anything else. Dirty lines that were not flushed
// are treated as lost; the crash simulator (pmcrash) adds early evictions.
using testing_util::ImageTracer;

template <int M>
void CrashImagesOfOps() {
  // Two leaves side by side: [old][new].
  using L = Leaf<M>;
  char* mem = static_cast<char*>(std::aligned_alloc(256, 2 * L::kBytes));
  L* l = reinterpret_cast<L*>(mem);
  L* nl = reinterpret_cast<L*>(mem + L::kBytes);
  L::Format(l, PPtr());
  const PPtr nl_ptr = PPtr::Make(1, 0x100000);
  auto decode = [&](const testing_util::Image& img) {
    std::map<uint64_t, uint64_t> m;
    const L* a = reinterpret_cast<const L*>(img.data());
    EXPECT_EQ(a->Check().find("fingerprint"), std::string::npos) << a->Check();
    m = Contents(a);
    if (a->next() == nl_ptr) {
      auto b = Contents(reinterpret_cast<const L*>(img.data() + L::kBytes));
      m.insert(b.begin(), b.end());
    }
    return m;
  };
  std::map<uint64_t, uint64_t> model;
  uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  bool split_done = false;
  for (int i = 0; i < 300 && !split_done; ++i) {
    ImageTracer tr(mem, 2 * L::kBytes);
    auto before = model;
    uint64_t k = rng() % 200;
    auto after = model;
    const bool present = model.count(k) > 0;
    if (present) after.erase(k);
    else after[k] = i;
    int checks = 0;
    tr.check_ = [&](const testing_util::Image& img) {
      auto got = decode(img);
      ++checks;
      EXPECT_TRUE(got == before || got == after) << "op " << i << " key " << k;
    };
    pm::InstallTracer(&tr);
    if (present) {
      l->RemoveSlot(l->Locate(k));
    } else if (!l->Full()) {
      l->Insert(k, i);
    } else {
      l->SplitInsert(k, i, nl, nl_ptr);
      split_done = true;
    }
    pm::InstallTracer(nullptr);
    tr.check_ = nullptr;
    EXPECT_GT(checks, 0);
    EXPECT_EQ(decode(tr.image_), after) << "op " << i << ": completed op not durable";
    model = after;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_TRUE(split_done);
  std::free(mem);
}

TEST(LbtreeCrashImage, EveryFence256) { CrashImagesOfOps<1>(); }
TEST(LbtreeCrashImage, EveryFence512) { CrashImagesOfOps<2>(); }
TEST(LbtreeCrashImage, EveryFence1024) { CrashImagesOfOps<4>(); }

// ---------------------------------------------------------- tree level
using testing::PoolAndIndex;

PoolAndIndex Make(const std::string& opts) {
  return testing::MakeInMemory("lbtree", opts, 256ull << 20);
}

// What a crash leaves with every store durable: a byte copy of the pool.
PoolAndIndex Reopen(Pool* p) { return testing::ReopenImage(p); }

TEST(LbtreeTree, StaleLockBitsClearedAndEmptyLeavesUnlinked) {
  for (std::string opts : {"node=256", "node=512", "node=1024,rebuild_threads=2"}) {
    SCOPED_TRACE(opts);
    auto t = Make(opts);
    for (uint64_t k = 0; k < 3000; ++k) PMINDEX_ASSERT_OK(t.idx->insert(k * 3, k));
    // Empty a range in the middle: whole leaves become empty.
    for (uint64_t k = 1000; k < 2000; ++k) PMINDEX_ASSERT_OK(t.idx->remove(k * 3));
    PMINDEX_ASSERT_OK(t.idx->verify());
    uint64_t leaves_before = t.idx->stats().leaves;
    // A crash in the middle of a write leaves lock bits set: set them in
    // every leaf of the image.
    std::vector<PPtr> blocks;
    PMINDEX_ASSERT_OK(t.idx->for_each_block([&](PPtr p) { blocks.push_back(p); }));
    auto img = Pool::OpenImage(t.pool->bytes());
    PMINDEX_ASSERT_OK(img);
    uint64_t head = img.value()->root(0);
    for (PPtr p(head); !p.is_null();) {
      uint64_t* w = img.value()->to_ptr<uint64_t>(p);
      *w |= Header::kLockBit;
      p = PPtr(w[LoadRelaxed(w) & Header::kAltBit ? 31 : 30]);
    }
    auto idx = open_index(img.value().get());
    PMINDEX_ASSERT_OK(idx);
    Status v = idx.value()->verify();
    PMINDEX_ASSERT_OK(v);
    EXPECT_LT(idx.value()->stats().leaves, leaves_before);
    for (uint64_t k = 0; k < 3000; ++k) {
      auto got = idx.value()->lookup(k * 3);
      if (k >= 1000 && k < 2000) {
        ASSERT_FALSE(got.has_value()) << k;
      } else {
        ASSERT_TRUE(got.has_value()) << k;
        ASSERT_EQ(*got, k);
      }
    }
    // Writable after recovery, including the unlinked range.
    for (uint64_t k = 1000; k < 2000; ++k) PMINDEX_ASSERT_OK(idx.value()->insert(k * 3, 1));
    PMINDEX_ASSERT_OK(idx.value()->verify());
  }
}

// Parallel rebuild reads the hints; stale or missing hints fall back.
TEST(LbtreeTree, ParallelRebuildMatchesSequential) {
  auto t = Make("node=256,rebuild_threads=2");
  std::vector<KV> kv;
  for (uint64_t k = 0; k < 20000; ++k) kv.push_back({k * 7, k});
  PMINDEX_ASSERT_OK(t.idx->bulk_load(kv, 0.7));
  for (uint64_t k = 0; k < 5000; ++k) PMINDEX_ASSERT_OK(t.idx->insert(k * 7 + 1, k));
  PMINDEX_ASSERT_OK(t.idx->close());
  auto r = Reopen(t.pool.get());
  ASSERT_TRUE(r.idx);
  PMINDEX_ASSERT_OK(r.idx->verify());
  EXPECT_EQ(r.idx->stats().entries, 25000u);
  KV out[3];
  ASSERT_EQ(r.idx->scan(7 * 100, 3, out), 3u);
  EXPECT_EQ(out[0].key, 700u);
  EXPECT_EQ(out[1].key, 701u);
  EXPECT_EQ(out[2].key, 707u);
  // Corrupt the hints (a leaf not at its place): rebuild must still be right.
  uint64_t* hint = r.pool->to_ptr<uint64_t>(PPtr(r.pool->root(1)));
  ASSERT_GT(hint[0], 1u);
  std::swap(hint[1], hint[2]);
  PMINDEX_ASSERT_OK(r.idx->close());
  auto r2 = Reopen(r.pool.get());
  ASSERT_TRUE(r2.idx);
  PMINDEX_ASSERT_OK(r2.idx->verify());
  EXPECT_EQ(r2.idx->stats().entries, 25000u);
}

// The shared PmLeafTree counts its splits and the PM lines they flush
// (IndexStats::extra), so benchmarks can separate split cost from plain
// inserts. Starting from one leaf with inserts only, every leaf but the
// head came from one split.
TEST(PmLeafTreeStats, SplitsCountedWithTheirLineWrites) {
  auto extra = [](const IndexStats& s, const std::string& name) {
    for (const auto& [n, v] : s.extra) {
      if (n == name) return v;
    }
    ADD_FAILURE() << "no extra stat " << name;
    return -1.0;
  };
  for (std::string kind : {"lbtree", "fptree", "wbtree"}) {
    for (std::string opts : {"node=256", "node=1024"}) {
      SCOPED_TRACE(kind + " " + opts);
      PoolOptions po;
      po.size = 16ull << 20;
      po.kind = kind;
      po.index_options = opts;
      auto pool = Pool::CreateInMemory(po);
      PMINDEX_ASSERT_OK(pool);
      auto idx = create_index(kind, opts, pool.value().get());
      PMINDEX_ASSERT_OK(idx);
      const pm::Counters before = pm::ThreadCounters();
      std::mt19937_64 rng(7);
      for (int i = 0; i < 5000; ++i) PMINDEX_ASSERT_OK(idx.value()->insert(rng(), i));
      const pm::Counters spent = pm::ThreadCounters() - before;
      IndexStats s = idx.value()->stats();
      ASSERT_GT(s.leaves, 10u);
      EXPECT_EQ(extra(s, "splits"), static_cast<double>(s.leaves - 1));
      // A split writes at least the new leaf's first line and the old
      // leaf's header line, and is a part of all the lines flushed.
      EXPECT_GE(extra(s, "split_lines"), 2.0 * extra(s, "splits"));
      EXPECT_LT(extra(s, "split_lines"), static_cast<double>(spent.lines_flushed));
      EXPECT_GE(extra(s, "split_fences"), extra(s, "splits"));
    }
  }
}

TEST(LbtreeTree, BadOptionsRejected) {
  PoolOptions po;
  po.kind = "lbtree";
  po.index_options = "node=300";
  auto pool = Pool::CreateInMemory(po);
  PMINDEX_ASSERT_OK(pool);
  auto idx = create_index("lbtree", "node=300", pool.value().get());
  EXPECT_TRUE(idx.status().is_invalid_argument()) << idx.status().ToString();
}

}  // namespace
}  // namespace pmindex::lbtree
