// Structural damage that used to open as a smaller, well-formed tree is
// refused at open with Corruption and changes no byte (the pool
// fuzzer's zero-4k / zero-256k / damage-seg / overwrite classes):
//   - lbtree, fptree, wbtree: a zeroed leaf reads as an empty leaf without
//     a sibling, so the list ends there. A cleanly closed pool is refused
//     by its clean-close record (root slot 7: entries and kept leaves); a
//     crashed one by its hints (hinted leaves missing from the list beyond
//     what splits in flight explain). A leaf whose valid slot has a wrong
//     fingerprint is refused by recovery's leaf checks (verify used to
//     find it after the open).
//   - cddstree: a zeroed node reads as an inner node without entries;
//     recovery checks each node's repaired copy as verify() does.
//   - nvtree: a zeroed element of an LN (key 0) lies outside the LN's
//     fences; recovery checks every live key against them as verify()
//     does (it read LN headers only).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "index/index.h"
#include "kv/store.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/db.h"
#include "support/pools.h"
#include "support/temp_files.h"

namespace pmindex {
namespace {

using testing::ImageKey;

struct Image {
  std::vector<std::byte> bytes;
  std::vector<uint64_t> blocks;  // offsets of for_each_block's blocks, in its order
  uint64_t leaves = 0;           // stats().leaves
};

// The bytes of a pool holding `keys` entries of `kind`: closed cleanly
// (index closed, clean flag set as Pool::Close leaves it) or crashed (the
// bytes as they are while the index is open).
Image Build(const std::string& kind, int keys, bool clean) {
  testing::FilledPool f = testing::FillInMemory(kind, keys, ImageKey, [](int i) { return uint64_t(i); });
  Pool* p = f.pool.get();
  auto& idx = f.idx;
  Image img;
  img.leaves = idx->stats().leaves;
  const auto* base = p->bytes().data();
  EXPECT_TRUE(idx->for_each_block([&](PPtr b) {
                   img.blocks.push_back(static_cast<uint64_t>(p->to_ptr<std::byte>(b) - base));
                 }).ok());
  if (clean) {
    img.bytes = testing::ClosedBytes(f);
  } else {
    auto b = p->bytes();
    img.bytes.assign(b.begin(), b.end());
  }
  return img;
}

// Opens the damaged bytes: open_index must refuse with Corruption and
// leave every byte as it was. Returns the refusal's message.
std::string ExpectRefusedUnchanged(const std::vector<std::byte>& bytes, const std::string& what) {
  SCOPED_TRACE(what);
  auto pool = Pool::OpenImage(bytes);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  if (!pool.ok()) return "";
  std::string msg;
  {
    auto idx = open_index(pool.value().get());
    EXPECT_FALSE(idx.ok()) << "opened: " << (idx.ok() ? std::to_string(idx.value()->stats().entries) : "");
    if (!idx.ok()) {
      EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
      msg = std::string(idx.status().message());
    }
  }
  auto after = pool.value()->bytes();
  EXPECT_TRUE(std::equal(after.begin(), after.end(), bytes.begin())) << "the refused open changed the pool";
  return msg;
}

// The undamaged bytes open intact (the control).
void ExpectIntact(const std::vector<std::byte>& bytes, int keys, const std::string& what) {
  SCOPED_TRACE(what);
  auto pool = Pool::OpenImage(bytes);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto idx = open_index(pool.value().get());
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_TRUE(idx.value()->verify().ok());
  EXPECT_EQ(idx.value()->stats().entries, static_cast<uint64_t>(keys));
}

constexpr int kKeys = 4000;

TEST(DamageChecks, ZeroedLeafOfCleanPoolIsRefused) {
  for (std::string kind : {"lbtree", "fptree", "wbtree"}) {
    Image img = Build(kind, kKeys, /*clean=*/true);
    ExpectIntact(img.bytes, kKeys, kind + " undamaged");
    ASSERT_GT(img.leaves, 20u) << kind;
    // A leaf in the middle of the list (for_each_block gives the leaves
    // first, in list order): the list used to end there, and the leaves
    // after it share their allocator page with reachable ones.
    std::vector<std::byte> d = img.bytes;
    std::memset(d.data() + img.blocks[img.leaves / 2], 0, 256);
    std::string msg = ExpectRefusedUnchanged(d, kind + " clean, zeroed leaf");
    EXPECT_TRUE(msg.find("closed cleanly") != std::string::npos || msg.find("hinted") != std::string::npos)
        << kind << ": " << msg;
  }
}

TEST(DamageChecks, CleanCloseRecordCatchesLostEntries) {
  // A leaf's valid bits cleared (as a zeroed header word of an fptree leaf
  // would): the list stays whole, the entries are gone.
  Image img = Build("fptree", kKeys, /*clean=*/true);
  std::vector<std::byte> d = img.bytes;
  std::memset(d.data() + img.blocks[img.leaves / 2], 0, 8);  // bitmap word
  std::string msg = ExpectRefusedUnchanged(d, "fptree clean, bitmap zeroed");
  EXPECT_NE(msg.find("closed cleanly"), std::string::npos) << msg;
}

TEST(DamageChecks, ZeroedLeafOfCrashedPoolIsRefusedByTheHints) {
  // The second leaf zeroed: the list ends at it, and nearly every hinted
  // leaf (up to 63) is missing from it.
  if (std::thread::hardware_concurrency() >= 48) GTEST_SKIP() << "more assumed writers than hints";
  for (std::string kind : {"lbtree", "fptree", "wbtree"}) {
    Image img = Build(kind, kKeys, /*clean=*/false);
    ExpectIntact(img.bytes, kKeys, kind + " undamaged");
    std::vector<std::byte> d = img.bytes;
    std::memset(d.data() + img.blocks[1], 0, 256);
    std::string msg = ExpectRefusedUnchanged(d, kind + " crashed, zeroed leaf");
    EXPECT_NE(msg.find("hinted leaves are not on the leaf list"), std::string::npos) << kind << ": " << msg;
  }
}

TEST(DamageChecks, WrongFingerprintIsRefusedByRecovery) {
  Image img = Build("lbtree", kKeys, /*clean=*/false);
  std::vector<std::byte> d = img.bytes;
  const uint64_t leaf = img.blocks[img.leaves / 2];
  uint64_t w0;
  std::memcpy(&w0, d.data() + leaf, 8);
  const uint32_t bitmap = static_cast<uint32_t>(w0 & 0x3fff);
  ASSERT_NE(bitmap, 0u);
  const int s = __builtin_ctz(bitmap);
  d[leaf + 2 + s] ^= std::byte{0x5a};  // slot s's fingerprint byte
  std::string msg = ExpectRefusedUnchanged(d, "lbtree, fingerprint byte changed");
  EXPECT_NE(msg.find("fingerprint mismatch"), std::string::npos) << msg;
}

TEST(DamageChecks, ZeroedCddsNodeIsRefused) {
  for (bool clean : {true, false}) {
    Image img = Build("cddstree", kKeys, clean);
    ExpectIntact(img.bytes, kKeys, clean ? "clean" : "crashed");
    // blocks[0] is the meta block, then the nodes: zero the first leaf.
    size_t i = 1;
    for (; i < img.blocks.size(); ++i) {
      uint32_t leaf;
      std::memcpy(&leaf, img.bytes.data() + img.blocks[i] + 4, 4);
      if (leaf == 1) break;
    }
    ASSERT_LT(i, img.blocks.size());
    std::vector<std::byte> d = img.bytes;
    std::memset(d.data() + img.blocks[i], 0, 1024);  // node=1024, the default
    std::string msg = ExpectRefusedUnchanged(d, clean ? "clean, zeroed leaf" : "crashed, zeroed leaf");
    EXPECT_NE(msg.find("inner node without live entries"), std::string::npos) << msg;
  }
}

// A salvage open (open_index with ReclaimBound::kNone, as `pmpool salvage`
// opens its in-memory copy) of a cddstree with a zeroed node cuts the
// subtree off instead of keeping an inner node without a live entry, which
// lookup, stats and scan would follow to a null node (they crashed).
TEST(DamageChecks, SalvageOfZeroedCddsNodesCutsThemOff) {
  for (bool clean : {true, false}) {
    Image img = Build("cddstree", kKeys, clean);
    // blocks: the meta block, then the nodes in preorder (root first).
    const uint64_t root = img.blocks[1];
    uint64_t inner = 0, leaf = 0;
    for (size_t i = 2; i < img.blocks.size() && (inner == 0 || leaf == 0); ++i) {
      uint32_t is_leaf;
      std::memcpy(&is_leaf, img.bytes.data() + img.blocks[i] + 4, 4);
      (is_leaf != 0 ? leaf : inner) = img.blocks[i];
    }
    ASSERT_NE(inner, 0u) << "the tree must have three levels";
    struct Damage {
      const char* what;
      uint64_t offset, bytes;
    };
    for (const Damage& dmg : {Damage{"a leaf", leaf, 1024}, Damage{"an inner node", inner, 1024},
                              Damage{"the leaf's 4 KiB page", leaf / 4096 * 4096, 4096}}) {
      SCOPED_TRACE(std::string(clean ? "clean, " : "crashed, ") + "zeroed " + dmg.what);
      std::vector<std::byte> d = img.bytes;
      std::memset(d.data() + dmg.offset, 0, dmg.bytes);
      auto pool = Pool::OpenImage(d);
      ASSERT_TRUE(pool.ok()) << pool.status().ToString();
      auto idx = open_index(pool.value().get(), {.bound = ReclaimBound::kNone});
      ASSERT_TRUE(idx.ok()) << idx.status().ToString();
      Index& t = *idx.value();
      const IndexStats st = t.stats();
      EXPECT_GT(st.entries, 0u);
      EXPECT_LT(st.entries, static_cast<uint64_t>(kKeys));
      double cut = 0;
      for (const auto& [name, v] : st.extra)
        if (name == "salvage_cut_subtrees") cut = v;
      EXPECT_GE(cut, 1.0);
      std::vector<KV> all(kKeys + 1);
      const size_t n = t.scan(0, all.size(), all.data());
      EXPECT_EQ(n, st.entries);
      size_t found = 0;
      for (int i = 0; i < kKeys; ++i) {
        auto v = t.lookup(ImageKey(i));
        if (v) {
          EXPECT_EQ(*v, uint64_t(i));
          ++found;
        }
      }
      EXPECT_EQ(found, st.entries);
      uint64_t blocks = 0;
      EXPECT_TRUE(t.for_each_block([&](PPtr) { ++blocks; }).ok());
      EXPECT_GT(blocks, 1u);
      IgnoreError(t.verify(), "may report the cut; only that it returns matters");
    }
    // The root zeroed: nothing is reachable, refused with a message.
    std::vector<std::byte> d = img.bytes;
    std::memset(d.data() + root, 0, 1024);
    auto pool = Pool::OpenImage(d);
    ASSERT_TRUE(pool.ok());
    auto idx = open_index(pool.value().get(), {.bound = ReclaimBound::kNone});
    ASSERT_FALSE(idx.ok());
    EXPECT_NE(idx.status().message().find("root node"), std::string_view::npos)
        << idx.status().ToString();
  }
}

// A pool that crashed, then lost its heap (a hole punched, a partial or
// sparse copy: the heap reads as zeros). Recovery used to find the head
// leaf empty without a sibling, give the zeroed pages back (fewer than a
// crash's allocator bound) and mark the pool clean with an empty index.
// The list's floor (root slot 7, written by the last clean close or crashed
// open, and raised as the leaves double) refuses it unchanged.
std::vector<std::byte> ZeroHeap(std::vector<std::byte> bytes) {
  pm::PoolHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  std::memset(bytes.data() + h.heap_begin, 0, bytes.size() - h.heap_begin);
  return bytes;
}

TEST(DamageChecks, ZeroedHeapOfCrashedPoolIsRefused) {
  for (std::string kind : {"lbtree", "fptree", "wbtree"}) {
    SCOPED_TRACE(kind);
    // Closed cleanly with kKeys, then opened, kKeys / 8 more, crashed.
    Image img = Build(kind, kKeys, /*clean=*/true);
    auto pool = Pool::OpenImage(img.bytes);
    ASSERT_TRUE(pool.ok());
    auto idx = open_index(pool.value().get());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    for (int i = kKeys; i < kKeys + kKeys / 8; ++i) {
      ASSERT_TRUE(idx.value()->insert(ImageKey(i), i).ok());
    }
    auto b = pool.value()->bytes();
    const std::vector<std::byte> crashed(b.begin(), b.end());
    ExpectIntact(crashed, kKeys + kKeys / 8, "crashed after a clean close");
    std::string msg =
        ExpectRefusedUnchanged(ZeroHeap(crashed), "crashed after a clean close, heap zeroed");
    EXPECT_NE(msg.find("damage cut it short"), std::string::npos) << msg;

    // Never closed: the floor raised by the splits covers it.
    Image never = Build(kind, kKeys, /*clean=*/false);
    if (never.leaves <= 2 * std::max<uint64_t>(16, std::thread::hardware_concurrency())) continue;
    ExpectIntact(never.bytes, kKeys, "crashed, never closed");
    msg = ExpectRefusedUnchanged(ZeroHeap(never.bytes), "crashed, never closed, heap zeroed");
    EXPECT_NE(msg.find("damage cut it short"), std::string::npos) << msg;
  }
}

// Key "key<i>", value "v<i>".
Status Put(kv::Store& st, int i) {
  char key[32], value[32];
  std::snprintf(key, sizeof key, "key%d", i);
  std::snprintf(value, sizeof value, "v%d", i);
  const std::string_view v = value;
  return st.Write(key, &v, kv::Store::Cond::kNone, 0);
}

// The same over a key-value store (its index is the leaf-list tree's).
TEST(DamageChecks, ZeroedHeapOfCrashedKvStoreIsRefused) {
  for (std::string kind : {"lbtree", "fptree"}) {
    SCOPED_TRACE(kind);
    PoolOptions po;
    po.size = 16ull << 20;
    po.max_size = 64ull << 20;
    po.kind = kind;
    po.incompat_flags = pm::kIncompatKvStore;
    auto pool = Pool::CreateInMemory(po);
    ASSERT_TRUE(pool.ok());
    std::vector<std::byte> closed;
    {
      auto st = kv::Store::Create(pool.value().get(), kind, "");
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      for (int i = 0; i < 3000; ++i) ASSERT_TRUE(Put(*st.value(), i).ok());
      ASSERT_TRUE(st.value()->Close().ok());
    }
    auto b = pool.value()->bytes();
    closed.assign(b.begin(), b.end());
    const uint64_t one = 1;
    std::memcpy(closed.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
    auto again = Pool::OpenImage(closed);
    ASSERT_TRUE(again.ok());
    auto st = kv::Store::Open(again.value().get());
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    for (int i = 3000; i < 3300; ++i) ASSERT_TRUE(Put(*st.value(), i).ok());
    auto cb = again.value()->bytes();
    const std::vector<std::byte> zeroed = ZeroHeap({cb.begin(), cb.end()});
    auto dmg = Pool::OpenImage(zeroed);
    ASSERT_TRUE(dmg.ok());
    auto refused = kv::Store::Open(dmg.value().get());
    ASSERT_FALSE(refused.ok()) << "a store whose heap reads as zeros opened";
    EXPECT_TRUE(refused.status().is_corruption()) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("damage cut it short"), std::string_view::npos)
        << refused.status().ToString();
    auto after = dmg.value()->bytes();
    EXPECT_TRUE(std::equal(after.begin(), after.end(), zeroed.begin())) << "the refused open wrote";
  }
}

// A header rewritten with a valid checksum but without the key-value
// store's flag, over a store's pool: a plain open would recover the index
// alone and give every store block back. Root slot 5 (the store's clock
// reservation, which no index kind uses) gives the store away: refused
// before anything is written, through open_index and through Db::Open.
TEST(DamageChecks, StorePoolWithoutItsFlagIsRefused) {
  for (bool crashed : {true, false}) {
    SCOPED_TRACE(crashed ? "crashed" : "closed cleanly");
    PoolOptions po;
    po.size = 4ull << 20;
    po.max_size = 64ull << 20;
    po.kind = "lbtree";
    po.incompat_flags = pm::kIncompatKvStore;
    auto pool = Pool::CreateInMemory(po);
    ASSERT_TRUE(pool.ok());
    auto st = kv::Store::Create(pool.value().get(), "lbtree", "");
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(Put(*st.value(), i).ok());
    if (!crashed) {
      ASSERT_TRUE(st.value()->Close().ok());
      st.value().reset();
    }
    auto b = pool.value()->bytes();
    std::vector<std::byte> forged(b.begin(), b.end());
    pm::PoolHeader h;
    std::memcpy(&h, forged.data(), sizeof h);
    if (!crashed) h.clean = 1;
    h.incompat_flags &= ~pm::kIncompatKvStore;
    h.checksum = pm::HeaderChecksum(h);
    std::memcpy(forged.data(), &h, sizeof h);
    std::string msg = ExpectRefusedUnchanged(forged, "store's flag cleared");
    EXPECT_NE(msg.find("root slot 5"), std::string::npos) << msg;

    testing::TempDir dir("forged-store");
    const std::string path = dir.path("forged.pool");
    {
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(forged.data()),
                static_cast<std::streamsize>(forged.size()));
    }
    auto db = Db::Open(path);
    ASSERT_FALSE(db.ok());
    EXPECT_TRUE(db.status().is_corruption()) << db.status().ToString();
    std::ifstream in(path, std::ios::binary);
    std::vector<char> now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(now.size(), forged.size());
    EXPECT_EQ(std::memcmp(now.data(), forged.data(), now.size()), 0) << "Db::Open wrote the file";
  }
}

// `pmpool verify` opens with ReclaimBound::kAsIfClean. An nvtree pool that
// crashed while one writer was inserting holds pages whose only blocks are
// LNs that splits replaced (waiting in the writer's allocator cache and
// epoch list; 3 or 4 here, in a pool that grew from 4 MiB); verify used
// to call that damage. Its bound now allows one writer's share for nvtree
// (pmpool_cli_nvtree checks that more is still refused).
TEST(DamageChecks, VerifyBoundAcceptsACrashedNvtree) {
  for (int keys : {20000, 50000}) {
    SCOPED_TRACE(keys);
    PoolOptions po;
    po.size = 4ull << 20;
    po.max_size = 256ull << 20;
    po.kind = "nvtree";
    // Adaptive node sizes (not the default since it was measured slower)
    // are what leave replaced LNs behind a split.
    po.index_options = "adaptive=balanced";
    auto mem = Pool::CreateInMemory(po);
    ASSERT_TRUE(mem.ok());
    auto t = create_index("nvtree", po.index_options, mem.value().get());
    ASSERT_TRUE(t.ok());
    uint64_t x = 12345;
    for (int i = 0; i < keys; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      ASSERT_TRUE(t.value()->upsert(x, i).ok());
    }
    auto mb = mem.value()->bytes();
    Image img;
    img.bytes.assign(mb.begin(), mb.end());
    auto pool = Pool::OpenImage(img.bytes);
    ASSERT_TRUE(pool.ok());
    auto idx = open_index(pool.value().get(), {.bound = ReclaimBound::kAsIfClean});
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    // More than what a clean close leaves (the snapshot block): the case.
    EXPECT_GT(idx.value()->allocator()->recovery_report().units(), 1u);
    EXPECT_TRUE(idx.value()->verify().ok());
    EXPECT_EQ(idx.value()->stats().entries, static_cast<uint64_t>(keys));
  }
}

TEST(DamageChecks, NvtreeKeyOutsideItsFencesIsRefused) {
  for (bool clean : {true, false}) {
    Image img = Build("nvtree", kKeys, clean);
    ExpectIntact(img.bytes, kKeys, clean ? "clean" : "crashed");
    ASSERT_GT(img.leaves, 2u);
    // for_each_block gives the LNs first, in list order: the second LN's
    // element 0 (at +64; its NEGATIVE flag, bit 0 at +32, must be clear).
    const uint64_t ln = img.blocks[1];
    uint64_t n = 0, flags = 0;
    std::memcpy(&n, img.bytes.data() + ln, 8);
    std::memcpy(&flags, img.bytes.data() + ln + 32, 8);
    ASSERT_GT(n, 0u);
    ASSERT_EQ(flags & 1, 0u);
    std::vector<std::byte> d = img.bytes;
    std::memset(d.data() + ln + 64, 0, 16);
    std::string msg = ExpectRefusedUnchanged(d, clean ? "clean, element zeroed" : "crashed, element zeroed");
    EXPECT_NE(msg.find("outside the fences"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace pmindex
