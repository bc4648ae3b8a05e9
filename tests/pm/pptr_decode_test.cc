// pm::Decode, the one decoder of persistent pointers read from PM (issue
// 15): each refusal reason, a good pointer, overflow of offset + size, and
// damaged root / hint / meta / split-log pointers of every persistent tree
// refused with Corruption at open, before anything is dereferenced.
#include "pm/pptr_decode.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "index/index.h"
#include "pm/pool.h"
#include "support/status.h"

namespace pmindex {
namespace {

std::unique_ptr<Pool> SmallPool(const std::string& kind = "lbtree", const std::string& opts = "") {
  PoolOptions po;
  po.size = 8ull << 20;
  po.max_size = 64ull << 20;
  po.kind = kind;
  po.index_options = opts;
  po.pool_id = 7;
  auto p = Pool::CreateInMemory(po);
  PMINDEX_EXPECT_OK(p);
  return std::move(p).value();
}

TEST(PPtrDecode, GoodPointer) {
  auto pool = SmallPool();
  const uint64_t off = pool->heap_begin() + 512;
  auto r = pm::Decode<uint64_t>(*pool, PPtr::Make(7, off).raw(), 256, 256, "test block");
  PMINDEX_ASSERT_OK(r);
  EXPECT_EQ(reinterpret_cast<char*>(r.value()), pool->base() + off);
  // The last object that fits exactly.
  auto last = pm::Decode(*pool, PPtr::Make(7, pool->size() - 256).raw(), 256, 256, "last");
  PMINDEX_EXPECT_OK(last);
  // DecodeOrNull takes null.
  auto n = pm::DecodeOrNull<uint64_t>(*pool, 0, 64, 64, "optional");
  PMINDEX_ASSERT_OK(n);
  EXPECT_EQ(n.value(), nullptr);
}

void ExpectRefused(const Pool& pool, uint64_t raw, uint64_t bytes, uint64_t align,
                   pm::PPtrFault want, const std::string& reason) {
  EXPECT_EQ(pm::CheckPPtr(pool, raw, bytes, align), want) << reason;
  auto r = pm::Decode(pool, raw, bytes, align, "test block");
  ASSERT_FALSE(r.ok()) << reason;
  EXPECT_TRUE(r.status().is_corruption()) << r.status().ToString();
  const std::string m(r.status().message());
  EXPECT_NE(m.find("test block"), std::string::npos) << m;
  EXPECT_NE(m.find(reason), std::string::npos) << m;
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(raw));
  EXPECT_NE(m.find(hex), std::string::npos) << m;
}

TEST(PPtrDecode, EachRefusalReason) {
  auto pool = SmallPool();
  const uint64_t hb = pool->heap_begin();
  ExpectRefused(*pool, 0, 64, 64, pm::PPtrFault::kNull, "null");
  ExpectRefused(*pool, PPtr::Make(8, hb).raw(), 64, 64, pm::PPtrFault::kForeignPool, "foreign pool id");
  ExpectRefused(*pool, PPtr::Make(0, hb).raw(), 64, 64, pm::PPtrFault::kForeignPool, "foreign pool id");
  ExpectRefused(*pool, PPtr::Make(7, hb + 8).raw(), 64, 64, pm::PPtrFault::kMisaligned, "misaligned");
  ExpectRefused(*pool, PPtr::Make(7, hb + 64).raw(), 256, 256, pm::PPtrFault::kMisaligned, "misaligned");
  ExpectRefused(*pool, PPtr::Make(7, 4096).raw(), 64, 64, pm::PPtrFault::kBelowHeap, "below the heap");
  ExpectRefused(*pool, PPtr::Make(7, 0).raw(), 64, 64, pm::PPtrFault::kBelowHeap, "below the heap");
  ExpectRefused(*pool, PPtr::Make(7, pool->size()).raw(), 64, 64, pm::PPtrFault::kPastEnd,
                "past the pool's end");
  ExpectRefused(*pool, PPtr::Make(7, pool->size() - 64).raw(), 128, 64, pm::PPtrFault::kPastEnd,
                "past the pool's end");
  ExpectRefused(*pool, PPtr::Make(7, PPtr::kOffsetMask & ~uint64_t{255}).raw(), 256, 256,
                pm::PPtrFault::kPastEnd, "past the pool's end");
}

TEST(PPtrDecode, SizeOverflowIsRefused) {
  auto pool = SmallPool();
  const uint64_t raw = PPtr::Make(7, pool->heap_begin()).raw();
  // offset + bytes wraps around 2^64: a naive sum would pass.
  ExpectRefused(*pool, raw, ~uint64_t{0} - 100, 64, pm::PPtrFault::kPastEnd, "past the pool's end");
  ExpectRefused(*pool, raw, ~uint64_t{0}, 1, pm::PPtrFault::kPastEnd, "past the pool's end");
  // Alignment 1 (byte objects) accepts any offset in the heap.
  EXPECT_EQ(pm::CheckPPtr(*pool, raw + 3, 1, 1), pm::PPtrFault::kOk);
}

// A crash image of a tree holding `keys` keys: the pool's bytes while its
// index is still open (Reopen in trees/nvtree/nvtree_test.cc).
struct Image {
  std::unique_ptr<Pool> pool;
};

Image CrashImage(const std::string& kind, int keys, bool close_first = false) {
  auto src = SmallPool(kind);
  auto idx = create_index(kind, "", src.get());
  PMINDEX_EXPECT_OK(idx) << kind;
  for (int i = 0; i < keys; ++i) PMINDEX_EXPECT_OK(idx.value()->insert(uint64_t(i) * 7 + 1, i));
  if (close_first) {
    PMINDEX_EXPECT_OK(idx.value()->close());
  }
  auto img = Pool::OpenImage(src->bytes());
  PMINDEX_EXPECT_OK(img);
  return {std::move(img).value()};
}

// Adds `delta` bytes to the pointer in root slot `slot` (keeping the tag
// bits nvtree keeps in slot 1) and expects open_index to refuse the pool
// with Corruption naming a misaligned pointer.
void ExpectMisalignedRefused(const std::string& kind, unsigned slot, bool close_first,
                             uint64_t delta = 8) {
  SCOPED_TRACE(kind + " slot " + std::to_string(slot));
  Image im = CrashImage(kind, 3000, close_first);
  const uint64_t s = im.pool->root(slot);
  ASSERT_NE(s, 0u);
  im.pool->WriteRoot(slot, s + delta);
  auto idx = open_index(im.pool.get());
  ASSERT_FALSE(idx.ok());
  EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
  EXPECT_NE(idx.status().message().find("misaligned"), std::string::npos) << idx.status().ToString();
}

TEST(PPtrDecode, MisalignedRootPointersRefusedAtOpen) {
  ExpectMisalignedRefused("cddstree", 0, false);  // meta block (UBSan: cddstree.cc:99)
  ExpectMisalignedRefused("lcbtree", 0, false);   // meta block (UBSan: lcbtree.cc:70)
  ExpectMisalignedRefused("lbtree", 0, false);    // head leaf
  ExpectMisalignedRefused("lbtree", 1, false);    // hint block (UBSan: pm_leaf_tree.h:430)
  ExpectMisalignedRefused("fptree", 2, false);    // split-log area
  ExpectMisalignedRefused("wbtree", 1, false);    // hint block
  ExpectMisalignedRefused("nvtree", 0, false);    // head LN
}

// A clean nvtree's slot 1 is the snapshot pointer with bit 0 set (UBSan:
// nvtree.cc:664). The snapshot only speeds up the open, so a misaligned
// one is refused by the decoder (never read) and the tree is rebuilt from
// its LN list.
TEST(PPtrDecode, MisalignedNvtreeSnapshotFallsBackToRebuild) {
  Image im = CrashImage("nvtree", 3000, /*close_first=*/true);
  const uint64_t s = im.pool->root(1);
  ASSERT_EQ(s & 1, 1u);
  im.pool->WriteRoot(1, s + 8);
  auto idx = open_index(im.pool.get());
  PMINDEX_ASSERT_OK(idx);
  PMINDEX_EXPECT_OK(idx.value()->verify());
  EXPECT_EQ(idx.value()->stats().entries, 3000u);
}

TEST(PPtrDecode, MisalignedSplitLogPointerRefusedAtOpen) {
  for (std::string kind : {"fptree", "wbtree"}) {
    SCOPED_TRACE(kind);
    Image im = CrashImage(kind, 3000);
    auto* logs = im.pool->to_ptr<uint64_t>(PPtr(im.pool->root(2)));
    ASSERT_NE(logs, nullptr);
    // Log 0 made active with a misaligned cur (UBSan: split_log.h:83).
    const uint64_t head = im.pool->root(0);
    logs[0] = head + 8;
    logs[1] = head;
    auto idx = open_index(im.pool.get());
    ASSERT_FALSE(idx.ok());
    EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
    EXPECT_NE(idx.status().message().find("misaligned"), std::string::npos)
        << idx.status().ToString();
    // A log pointing below the heap (the header) is refused too, where
    // the old check let recovery write there.
    Image im2 = CrashImage(kind, 100);
    logs = im2.pool->to_ptr<uint64_t>(PPtr(im2.pool->root(2)));
    logs[0] = PPtr::Make(7, 256).raw();  // inside the page table
    logs[1] = im2.pool->root(0);
    auto idx2 = open_index(im2.pool.get());
    ASSERT_FALSE(idx2.ok());
    EXPECT_NE(idx2.status().message().find("below the heap"), std::string::npos)
        << idx2.status().ToString();
  }
}

}  // namespace
}  // namespace pmindex
