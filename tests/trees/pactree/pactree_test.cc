// pactree: option checks, a std::map oracle at several node sizes with the
// background updater and with inline search-layer updates, with either
// search layer, concurrent writers whose readers meet stale anchors, the
// search layer kept (search=pm) or rebuilt (search=dram) at open, anchors
// the persistent search layer lost restored by open, open's repair of a
// split cut short between its link and its bitmap store, damaged data
// and trie nodes refused at open, and the trie's floor against a std::map
// (also after removes); merges after deleting most keys (fewer nodes, the
// nodes merged away freed), readers crossing merges, and open's repair
// of a merge cut short (dead copies, a leaf naming a node merged away).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "alloc/allocator.h"
#include "common/fingerprint.h"
#include "index/index.h"
#include "pm/pool.h"
#include "support/oracle.h"
#include "support/sorted_node_checks.h"
#include "support/status.h"
#include "trees/pactree/data_node.h"
#include "trees/pactree/pm_trie.h"

namespace pmindex {
namespace {

using testing_util::PoolImage;

Result<std::unique_ptr<Index>> Make(const std::string& options, std::unique_ptr<Pool>* pool) {
  return testing::CreateInPool("pactree", options, pool);
}

TEST(PacTreeOptions, BadOptionsAreRefused) {
  for (const char* bad : {"slots=3", "slots=65", "slots=x", "updater=lazy", "levels=4",
                          "slots=8,slots=8", "search=ssd"}) {
    std::unique_ptr<Pool> pool;
    auto idx = Make(bad, &pool);
    EXPECT_TRUE(idx.status().is_invalid_argument()) << bad << ": " << idx.status().ToString();
  }
  for (const char* good : {"", "slots=4", "slots=64", "slots=17,updater=inline", "updater=thread",
                           "search=dram", "search=pm,slots=4"}) {
    std::unique_ptr<Pool> pool;
    auto idx = Make(good, &pool);
    PMINDEX_EXPECT_OK(idx) << good;
  }
}

TEST(PacTreeOracle, NodeSizesAndUpdaters) {
  for (const char* opt : {"slots=4", "slots=4,updater=inline", "slots=5", "slots=64",
                          "slots=4,search=dram", "slots=4,search=dram,updater=inline"}) {
    SCOPED_TRACE(opt);
    std::unique_ptr<Pool> pool;
    auto idx = Make(opt, &pool);
    PMINDEX_ASSERT_OK(idx);
    testing::OracleOptions o;
    o.seed = 7;
    o.ops = 4000;
    ASSERT_NO_FATAL_FAILURE(testing::RunOracle(*idx.value(), o));
  }
}

// Four writers split tiny nodes while a reader looks up keys already
// acknowledged: until the updater applies a split, the reader reaches the
// new node through its left sibling.
TEST(PacTreeConcurrency, ReadersFollowSplitsBeforeTheSearchLayerKnowsThem) {
  std::unique_ptr<Pool> pool;
  auto idx = Make("slots=4", &pool);
  PMINDEX_ASSERT_OK(idx);
  Index& t = *idx.value();
  constexpr int kWriters = 4, kPer = 3000;
  std::atomic<int> done{0};
  std::atomic<uint64_t> acked[kWriters] = {};
  std::atomic<bool> bad{false};
  std::vector<std::thread> ws;
  for (int w = 0; w < kWriters; ++w) {
    ws.emplace_back([&, w] {
      for (int i = 0; i < kPer; ++i) {
        const Key k = static_cast<Key>(i) * kWriters + w;
        if (!t.insert(k, k + 1).ok()) bad = true;
        acked[w].store(i + 1, std::memory_order_release);
      }
      done.fetch_add(1);
    });
  }
  std::mt19937_64 rng(3);
  while (done.load() < kWriters) {
    const int w = static_cast<int>(rng() % kWriters);
    const uint64_t n = acked[w].load(std::memory_order_acquire);
    if (n == 0) continue;
    const Key k = (rng() % n) * kWriters + w;
    if (t.lookup(k) != std::optional<Value>(k + 1)) bad = true;
  }
  for (auto& th : ws) th.join();
  EXPECT_FALSE(bad.load());
  PMINDEX_ASSERT_OK(t.verify());
  EXPECT_EQ(t.stats().entries, uint64_t{kWriters * kPer});
  KV out[16];
  ASSERT_EQ(t.scan(100, 16, out), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i].key, 100u + i);
}

void ReopenWithEveryAnchor(const char* opt) {
  std::unique_ptr<Pool> pool;
  auto idx = Make(opt, &pool);
  PMINDEX_ASSERT_OK(idx);
  ASSERT_NO_FATAL_FAILURE(testing_util::ExpectBulkLoadSurvivesReopen(
      *pool, &idx.value(), 0.75,
      [](const IndexStats& s) { EXPECT_GE(s.leaves, 2000u / 6); }));  // bulk-loaded 6 per node
}

// After a crash and after a clean close, open keeps (search=pm) or
// rebuilds (search=dram) a search layer with every anchor.
TEST(PacTreeOpen, KeepsOrRebuildsTheSearchLayer) {
  for (const char* opt : {"slots=8", "slots=8,search=dram"}) {
    SCOPED_TRACE(opt);
    ReopenWithEveryAnchor(opt);
  }
}

// Data-node words (data_node.h): version, tag, anchor, next, bitmap, pad x3,
// fingerprint words x8, then the slots (key, value) from word 16.
struct NodeWords {
  uint64_t* w;
  uint64_t& next() { return w[3]; }
  uint64_t& anchor() { return w[2]; }
  uint64_t& bitmap() { return w[4]; }
  uint64_t& key(int i) { return w[16 + 2 * i]; }
  uint64_t& value(int i) { return w[17 + 2 * i]; }
  void SetFingerprint(int i, uint8_t fp) {
    const int shift = (i % 8) * 8;
    w[8 + i / 8] = (w[8 + i / 8] & ~(uint64_t{0xff} << shift)) | (uint64_t{fp} << shift);
  }
};

// slots=4: 10, 20, 30, 40 fill the head; 50 splits it into {10, 20} and a
// sibling anchored at 30 holding {30, 40, 50}. Returns a crash image.
std::vector<std::byte> SplitImage(std::unique_ptr<Pool>* pool) {
  auto idx = Make("slots=4", pool);
  PMINDEX_EXPECT_OK(idx);
  for (Key k = 10; k <= 50; k += 10) PMINDEX_EXPECT_OK(idx.value()->insert(k, k + 1));
  PMINDEX_EXPECT_OK(idx.value()->verify());
  return PoolImage(**pool, &idx.value(), true);
}

// A crash after a split's link and before the bitmap store that clears the
// moved pairs leaves them live in the left node; they are dead by the
// right node's anchor, readers never return them, and open clears them.
TEST(PacTreeOpen, RepairsASplitCutShortBeforeItsBitmapStore) {
  std::unique_ptr<Pool> pool;
  std::vector<std::byte> bytes = SplitImage(&pool);
  auto img = Pool::OpenImage(bytes);
  PMINDEX_ASSERT_OK(img);
  Pool& p = *img.value();
  NodeWords head{p.to_ptr<uint64_t>(PPtr(p.root(0)))};
  NodeWords right{p.to_ptr<uint64_t>(PPtr(head.next()))};
  ASSERT_EQ(right.anchor(), 30u);
  ASSERT_EQ(head.bitmap(), 0b0011u);  // 10 and 20 kept, 30 and 40 moved
  ASSERT_EQ(head.key(2), 30u);
  head.value(2) = 999;  // the left copy differs: open must take the right one
  head.bitmap() = 0b1111;
  auto re = open_index(&p);
  PMINDEX_ASSERT_OK(re);
  EXPECT_EQ(head.bitmap(), 0b0011u);
  Index& t = *re.value();
  PMINDEX_ASSERT_OK(t.verify());
  EXPECT_EQ(t.stats().entries, 5u);
  EXPECT_EQ(t.lookup(30), std::optional<Value>(31));
  KV out[8];
  ASSERT_EQ(t.scan(0, 8, out), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i].key, 10u * (i + 1));
}

// Damage no crash leaves is refused at open, naming what is wrong.
TEST(PacTreeOpen, DamagedNodesAreRefused) {
  struct Case {
    const char* what;
    void (*damage)(NodeWords& head, NodeWords& right);
  };
  const Case cases[] = {
      {"fingerprint", [](NodeWords& h, NodeWords&) { h.key(0) = 11; }},
      {"below the anchor",
       [](NodeWords&, NodeWords& r) {
         r.key(0) = 5;
         r.SetFingerprint(0, common::Fingerprint(5));
       }},
      {"not above the previous anchor", [](NodeWords&, NodeWords& r) { r.anchor() = 0; }},
      {"past the node's", [](NodeWords& h, NodeWords&) { h.bitmap() |= 1u << 4; }},
      {"twice",
       [](NodeWords& h, NodeWords&) {
         h.key(1) = 10;
         h.SetFingerprint(1, common::Fingerprint(10));
       }},
      {"data node", [](NodeWords& h, NodeWords&) { h.next() = 7; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::unique_ptr<Pool> pool;
    std::vector<std::byte> bytes = SplitImage(&pool);
    auto img = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(img);
    Pool& p = *img.value();
    NodeWords head{p.to_ptr<uint64_t>(PPtr(p.root(0)))};
    NodeWords right{p.to_ptr<uint64_t>(PPtr(head.next()))};
    c.damage(head, right);
    auto re = open_index(&p);
    ASSERT_TRUE(re.status().is_corruption()) << re.status().ToString();
    EXPECT_NE(re.status().ToString().find(c.what), std::string::npos) << re.status().ToString();
  }
}

// search=pm: the trie root the head names (data_node.h's `search`, word 6),
// and its child words (pm_trie.h: a 64-byte header, its `bits` at byte 20,
// then the children); *count receives their number.
uint64_t* TrieRootChildren(Pool& p, int* count) {
  const uint64_t* head = p.to_ptr<uint64_t>(PPtr(p.root(0)));
  auto* root = p.to_ptr<uint64_t>(PPtr(head[6]));
  *count = 1 << reinterpret_cast<const uint32_t*>(root)[5];
  return root + 8;
}

// Keys spread over the whole key space and dense small ones, so that the
// trie forks at many depths.
std::vector<std::byte> TrieImage(std::unique_ptr<Pool>* pool, std::map<Key, Value>* kept) {
  auto idx = Make("slots=4,updater=inline", pool);
  PMINDEX_EXPECT_OK(idx);
  for (Key i = 1; i <= 300; ++i) {
    const Key k = i % 2 == 0 ? i * 0x9E3779B97F4A7C15ull : i * 3;
    PMINDEX_EXPECT_OK(idx.value()->insert(k, i));
    (*kept)[k] = i;
  }
  PMINDEX_EXPECT_OK(idx.value()->verify());
  const IndexStats s = idx.value()->stats();
  EXPECT_GT(s.inner_nodes, 20u);  // trie nodes below the root
  EXPECT_EQ(s.dram_bytes, 0u);
  return PoolImage(**pool, &idx.value(), true);
}

// Anchors the trie lacks (update-log entries a crash lost: here every leaf
// but the head's is cut off) are found by open and applied after it; the
// trie then maps every anchor again.
TEST(PacTreeOpen, RestoresAnchorsTheTrieLost) {
  std::unique_ptr<Pool> pool;
  std::map<Key, Value> kept;
  std::vector<std::byte> bytes = TrieImage(&pool, &kept);
  {
    auto img = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(img);
    int count = 0;
    uint64_t* child = TrieRootChildren(*img.value(), &count);
    ASSERT_EQ(count, 16);  // a 16 MiB pool's root (RootBitsFor)
    for (int c = 0; c < count; ++c) child[c] = 0;
    child[0] = img.value()->root(0) | 1;  // the head's leaf (anchor 0)
    bytes = PoolImage(*img.value(), nullptr, true);
  }
  testing::Reopened re;
  PMINDEX_ASSERT_OK(testing::ReopenBytes(bytes, &re));
  Index& t = *re.idx;
  const IndexStats before = t.stats();
  double repaired = -1;
  for (const auto& [name, v] : before.extra)
    if (name == "search_layer_repaired") repaired = v;
  EXPECT_EQ(repaired, static_cast<double>(before.leaves - 1));
  PMINDEX_ASSERT_OK(t.verify());  // drains the logs, then compares trie and chain
  for (const auto& [k, v] : kept) ASSERT_EQ(t.lookup(k), std::optional<Value>(v)) << k;
  PMINDEX_ASSERT_OK(t.close());
}

// A damaged trie is refused at open, naming what is wrong.
TEST(PacTreeOpen, DamagedTrieIsRefused) {
  struct Case {
    const char* what;
    void (*damage)(Pool& p, uint64_t* root_children, int last);
  };
  const Case cases[] = {
      {"no trie tag", [](Pool&, uint64_t* c, int) { c[-8] = 1; }},
      {"names no search layer",
       [](Pool& p, uint64_t*, int) { p.to_ptr<uint64_t>(PPtr(p.root(0)))[6] = 0; }},
      {"not a data node", [](Pool& p, uint64_t* c, int l) { c[l] = p.root(0) + 64 + 1; }},
      {"path",
       [](Pool&, uint64_t* c, int l) {
         c[l] = c[0];  // a subtree or leaf at a path its keys do not have
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::unique_ptr<Pool> pool;
    std::map<Key, Value> kept;
    std::vector<std::byte> bytes = TrieImage(&pool, &kept);
    auto img = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(img);
    int count = 0;
    uint64_t* children = TrieRootChildren(*img.value(), &count);
    c.damage(*img.value(), children, count - 1);
    auto re = open_index(img.value().get());
    ASSERT_TRUE(re.status().is_corruption()) << re.status().ToString();
    EXPECT_NE(re.status().ToString().find(c.what), std::string::npos) << re.status().ToString();
  }
}

double Extra(const IndexStats& s, const std::string& name) {
  for (const auto& [n, v] : s.extra)
    if (n == name) return v;
  return -1;
}

// Deleting 90% of the keys merges underfull data nodes (the paper's rule:
// a node and its right sibling with fewer than slots/2 pairs together):
// the chain shrinks, the nodes merged away leave the search layer and are
// freed (the allocator's live blocks are exactly what the index reaches),
// and every remaining key is found, in order, also after a reopen.
TEST(PacTreeMerge, DeletesMergeNodesAndFreeThem) {
  for (const char* opt : {"slots=8,updater=inline", "slots=8", "slots=8,search=dram", "slots=64"}) {
    SCOPED_TRACE(opt);
    std::unique_ptr<Pool> pool;
    auto idx = Make(opt, &pool);
    PMINDEX_ASSERT_OK(idx);
    Index& t = *idx.value();
    std::vector<Key> keys(4000);
    for (Key i = 0; i < keys.size(); ++i) keys[i] = i * 7 + 1;
    std::shuffle(keys.begin(), keys.end(), std::mt19937_64(5));
    for (Key k : keys) PMINDEX_ASSERT_OK(t.insert(k, k + 1));
    t.quiesce();
    const IndexStats before = t.stats();
    std::map<Key, Value> kept;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i % 10 == 0) {
        kept[keys[i]] = keys[i] + 1;
      } else {
        PMINDEX_ASSERT_OK(t.remove(keys[i]));
      }
    }
    t.quiesce();
    PMINDEX_ASSERT_OK(t.verify());
    const IndexStats after = t.stats();
    EXPECT_GT(Extra(after, "merges"), 0);
    EXPECT_LT(after.leaves * 2, before.leaves);
    EXPECT_LT(after.pm_bytes, before.pm_bytes);
    EXPECT_EQ(after.entries, kept.size());
    uint64_t live = 0, reached = 0;
    t.allocator()->ForEachLiveBlock([&](PPtr, size_t) { ++live; });
    PMINDEX_ASSERT_OK(t.for_each_block([&](PPtr) { ++reached; }));
    EXPECT_EQ(live, reached);
    for (size_t i = 0; i < keys.size(); i += 3)
      ASSERT_EQ(t.lookup(keys[i]), i % 10 == 0 ? std::optional<Value>(keys[i] + 1) : std::nullopt);
    std::vector<KV> out(kept.size() + 1);
    ASSERT_EQ(t.scan(0, out.size(), out.data()), kept.size());
    auto it = kept.begin();
    for (size_t i = 0; i < kept.size(); ++i, ++it) ASSERT_EQ(out[i].key, it->first);
    for (bool crash : {true, false}) {
      std::vector<std::byte> bytes = PoolImage(*pool, &idx.value(), crash);
      testing::Reopened re;
      PMINDEX_ASSERT_OK(testing::ReopenBytes(bytes, &re));
      PMINDEX_ASSERT_OK(re.idx->verify());
      EXPECT_EQ(re.idx->stats().leaves, after.leaves);
      for (const auto& [k, v] : kept) ASSERT_EQ(re.idx->lookup(k), std::optional<Value>(v));
    }
  }
}

// Readers and writers meet nodes being merged away: lookups of keys never
// deleted always find them (a reader on a node merged away is sent to the
// node that took its pairs), scans stay ascending and complete, and the
// index verifies after.
TEST(PacTreeConcurrency, ReadersCrossMerges) {
  std::unique_ptr<Pool> pool;
  auto idx = Make("slots=4", &pool);
  PMINDEX_ASSERT_OK(idx);
  Index& t = *idx.value();
  constexpr Key kKeys = 6000;
  for (Key k = 0; k < kKeys; ++k) PMINDEX_ASSERT_OK(t.insert(k, k + 1));
  std::atomic<int> done{0};
  std::atomic<bool> bad{false};
  std::vector<std::thread> ws;
  for (int w = 0; w < 2; ++w) {
    ws.emplace_back([&, w] {
      // Every key not a multiple of 3 goes; writer 1 also re-inserts some.
      for (Key k = static_cast<Key>(w); k < kKeys; k += 2) {
        if (k % 3 != 0 && !t.remove(k).ok()) bad = true;
        if (w == 1 && k % 9 == 4 && !t.insert(k, k + 1).ok()) bad = true;
      }
      done.fetch_add(1);
    });
  }
  std::mt19937_64 rng(9);
  KV out[32];
  while (done.load() < 2) {
    const Key k = (rng() % (kKeys / 3)) * 3;
    if (t.lookup(k) != std::optional<Value>(k + 1)) bad = true;
    const size_t n = t.scan(k, 32, out);
    if (n == 0 || out[0].key != k) bad = true;
    for (size_t i = 1; i < n; ++i)
      if (out[i].key <= out[i - 1].key || out[i].key - out[i - 1].key > 3) bad = true;
  }
  for (auto& th : ws) th.join();
  EXPECT_FALSE(bad.load());
  PMINDEX_ASSERT_OK(t.verify());
  EXPECT_GT(Extra(t.stats(), "merges"), 0);
  Key expect = 0;
  for (Key k = 0; k < kKeys; ++k) expect += (k % 3 == 0 || (k % 9 == 4 && k % 2 == 1)) ? 1 : 0;
  EXPECT_EQ(t.stats().entries, expect);
}

// A merge's states a crash can leave (docs/layout/pactree.md): its pairs
// copied into the left node and their bits set before the unlink (dead
// copies, cleared by open), and the unlink durable while the trie still
// names the node merged away (its leaf cleared by open).
TEST(PacTreeOpen, RepairsAMergeCutShort) {
  for (bool unlinked : {false, true}) {
    SCOPED_TRACE(unlinked);
    std::unique_ptr<Pool> pool;
    auto idx = Make("slots=4,updater=inline", &pool);
    PMINDEX_ASSERT_OK(idx);
    // {10, 20} and {30, 40, 50} (SplitImage); removing 40 and 50 leaves
    // three pairs, too many to merge.
    for (Key k = 10; k <= 50; k += 10) PMINDEX_ASSERT_OK(idx.value()->insert(k, k + 1));
    PMINDEX_ASSERT_OK(idx.value()->remove(40));
    PMINDEX_ASSERT_OK(idx.value()->remove(50));
    std::vector<std::byte> bytes = PoolImage(*pool, &idx.value(), true);
    auto img = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(img);
    Pool& p = *img.value();
    NodeWords head{p.to_ptr<uint64_t>(PPtr(p.root(0)))};
    NodeWords right{p.to_ptr<uint64_t>(PPtr(head.next()))};
    ASSERT_EQ(right.anchor(), 30u);
    ASSERT_EQ(head.bitmap(), 0b0011u);
    head.key(2) = 30;  // the merge's copy of 30
    head.value(2) = 31;
    head.SetFingerprint(2, common::Fingerprint(30));
    head.bitmap() = 0b0111;
    if (unlinked) head.next() = 0;
    auto re = open_index(&p);
    PMINDEX_ASSERT_OK(re);
    Index& t = *re.value();
    EXPECT_EQ(head.bitmap(), unlinked ? 0b0111u : 0b0011u);
    EXPECT_EQ(Extra(t.stats(), "search_layer_repaired"), unlinked ? 1 : 0);
    PMINDEX_ASSERT_OK(t.verify());
    EXPECT_EQ(t.stats().entries, 3u);
    EXPECT_EQ(t.stats().leaves, unlinked ? 1u : 2u);
    for (Key k = 10; k <= 30; k += 10) EXPECT_EQ(t.lookup(k), std::optional<Value>(k + 1));
    EXPECT_EQ(t.lookup(40), std::nullopt);
  }
}

// The trie's floor is exactly the greatest anchor at or below the key once
// it holds every anchor (the index would stay correct with a worse one,
// only slower, so its oracle cannot tell): anchors spread over the key
// space, dense small ones and a cluster sharing a long prefix; queries at,
// beside and between them. Then again after removing two anchors of three
// (merges): subtrees emptied by removes are passed over or unlinked. With
// either root width.
void CheckFloors(const pactree::PmTrie& trie, const std::map<Key, uint64_t>& anchors,
                 std::mt19937_64& rng) {
  PMINDEX_ASSERT_OK(trie.Verify());
  EXPECT_EQ(trie.Size(), anchors.size());
  std::vector<Key> queries = {0, 1, ~Key{0}, 0xABCCFFFFFFFFFFFFull};
  for (const auto& [a, raw] : anchors) {
    queries.push_back(a);
    queries.push_back(a + 1);
    if (a != 0) queries.push_back(a - 1);
  }
  for (int i = 0; i < 2000; ++i) queries.push_back(rng());
  for (Key q : queries) {
    auto it = std::prev(anchors.upper_bound(q));
    ASSERT_EQ(trie.Floor(q), it->second) << "key " << q;
  }
  auto it = anchors.begin();
  trie.ForEach([&](Key a, uint64_t raw) {
    ASSERT_NE(it, anchors.end());
    EXPECT_EQ(a, it->first);
    EXPECT_EQ(raw, it->second);
    ++it;
  });
  EXPECT_EQ(it, anchors.end());
}

TEST(PacTreeTrie, FloorIsTheGreatestAnchorAtOrBelow) {
  for (uint32_t bits : {pactree::PmTrie::kRootBits, pactree::PmTrie::kSmallRootBits}) {
    SCOPED_TRACE(bits);
    PoolOptions po;
    po.size = 16 << 20;
    po.max_size = 16 << 20;
    auto pool = Pool::CreateInMemory(po);
    PMINDEX_ASSERT_OK(pool);
    Pool& p = *pool.value();
    auto alloc = alloc::Allocator::Attach(&p, true);
    PMINDEX_ASSERT_OK(alloc);
    auto root = pactree::PmTrie::MakeRoot(p, *alloc.value(), bits);
    PMINDEX_ASSERT_OK(root);
    pactree::PmTrie trie(p, *alloc.value(), root.value(), 1, 0);
    std::map<Key, uint64_t> anchors;
    auto add = [&](Key a) {
      if (anchors.count(a) != 0) return;
      auto b = alloc.value()->Alloc(sizeof(pactree::NodeHeader));
      ASSERT_TRUE(b.ok());
      auto* x = p.to_ptr<pactree::NodeHeader>(b.value());
      x->tag = pactree::kNodeTag;
      x->anchor = a;
      ASSERT_TRUE(trie.Insert(a, b.value().raw()));
      anchors[a] = b.value().raw();
    };
    std::mt19937_64 rng(11);
    add(0);
    for (Key i = 1; i <= 600; ++i) {
      add(rng());
      add(i * 5);
      add(0xABCD000000000000ull + i * 3);
    }
    ASSERT_TRUE(trie.Insert(0, anchors[0]));  // idempotent
    ASSERT_NO_FATAL_FAILURE(CheckFloors(trie, anchors, rng));
    const uint64_t nodes = trie.Nodes();
    trie.Remove(5, anchors[0]);  // names another node: nothing happens
    size_t n = 0;
    for (auto it = std::next(anchors.begin()); it != anchors.end();) {
      if (n++ % 3 == 0) {
        ++it;
        continue;
      }
      trie.Remove(it->first, it->second);
      it = anchors.erase(it);
    }
    ASSERT_NO_FATAL_FAILURE(CheckFloors(trie, anchors, rng));
    EXPECT_LT(trie.Nodes(), nodes);  // emptied digit nodes were unlinked
    alloc.value()->Reclaim();
  }
}

}  // namespace
}  // namespace pmindex
