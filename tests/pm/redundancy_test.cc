// Root slots and page table kept twice (pool format version 2,
// src/pm/pool_format.h "Root slots", src/alloc/page_word.h): a damaged copy
// is repaired from the other, damage to both is Corruption with the files
// unchanged, and a write a crash interrupted is told apart from damage.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/page_word.h"
#include "alloc/size_classes.h"
#include "gtest/gtest.h"
#include "index/index.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "support/pools.h"
#include "support/status.h"
#include "support/temp_files.h"

namespace pmindex {
namespace {

using alloc::PageKind;
using alloc::PageWord;
using pm::PoolHeader;
using pm::RootRecord;
using testing::TempDir;

// ------------------------------------------------------------ root rule

TEST(RootRecords, ZeroedAndFilledRecordsAreInvalid) {
  for (unsigned i = 0; i < pm::kRootSlotCount; ++i) {
    RootRecord zero{0, 0}, ones{~uint64_t{0}, ~uint64_t{0}};
    EXPECT_FALSE(pm::RootRecordValid(i, zero)) << i;
    EXPECT_FALSE(pm::RootRecordValid(i, ones)) << i;
    EXPECT_TRUE(pm::RootRecordValid(i, pm::MakeRootRecord(i, 0, 0))) << i;
    // One slot's record does not pass as another's.
    EXPECT_FALSE(pm::RootRecordValid((i + 1) % pm::kRootSlotCount, pm::MakeRootRecord(i, 7, 42)));
  }
}

TEST(RootRecords, EveryBitFlipIsDetected) {
  const RootRecord r = pm::MakeRootRecord(3, 17, 0x0001000000123440ull);
  for (int bit = 0; bit < 128; ++bit) {
    RootRecord d = r;
    auto* bytes = reinterpret_cast<unsigned char*>(&d);
    bytes[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    EXPECT_FALSE(pm::RootRecordValid(3, d)) << "bit " << bit;
  }
}

// Every state a crash can leave during one write (copy A's two words in
// any subset, copy B old; then A complete and B's words in any subset)
// resolves to the old or the new value, and to the new one once A is
// complete.
TEST(RootRecords, InterruptedWriteResolvesToOldOrNew) {
  const unsigned slot = 2;
  const RootRecord old_rec = pm::MakeRootRecord(slot, 5, 0x1111);
  const RootRecord new_rec = pm::MakeRootRecord(slot, 6, 0x2222);
  auto mix = [](const RootRecord& base, const RootRecord& upd, int mask) {
    RootRecord r = base;
    if (mask & 1) r.value = upd.value;
    if (mask & 2) r.check = upd.check;
    return r;
  };
  for (int ma = 0; ma < 4; ++ma) {
    const RootRecord a = mix(old_rec, new_rec, ma);
    RootRecord out;
    bool repair = false;
    ASSERT_TRUE(pm::ResolveRoot(slot, a, old_rec, &out, &repair)) << "A mask " << ma;
    EXPECT_EQ(out.value, ma == 3 ? new_rec.value : old_rec.value) << "A mask " << ma;
    EXPECT_EQ(repair, ma != 0) << "A mask " << ma;
  }
  for (int mb = 0; mb < 4; ++mb) {
    const RootRecord b = mix(old_rec, new_rec, mb);
    RootRecord out;
    bool repair = false;
    ASSERT_TRUE(pm::ResolveRoot(slot, new_rec, b, &out, &repair)) << "B mask " << mb;
    EXPECT_EQ(out.value, new_rec.value) << "B mask " << mb;
    EXPECT_EQ(repair, mb != 3) << "B mask " << mb;
  }
}

TEST(RootRecords, StatesNoCrashExplainsAreRefused) {
  const unsigned slot = 0;
  RootRecord out;
  bool repair;
  const RootRecord a = pm::MakeRootRecord(slot, 4, 100);
  // Same counter, different values; B ahead of A; A two writes ahead.
  EXPECT_FALSE(pm::ResolveRoot(slot, a, pm::MakeRootRecord(slot, 4, 200), &out, &repair));
  EXPECT_FALSE(pm::ResolveRoot(slot, a, pm::MakeRootRecord(slot, 5, 100), &out, &repair));
  EXPECT_FALSE(pm::ResolveRoot(slot, a, pm::MakeRootRecord(slot, 2, 100), &out, &repair));
  // Both copies damaged.
  RootRecord da = a, db = a;
  da.value ^= 1;
  db.check ^= 4;
  EXPECT_FALSE(pm::ResolveRoot(slot, da, db, &out, &repair));
}

// ------------------------------------------------------------ root slots in pool files

std::string ReadAll(const std::string& p) { return testing::Snapshot::Of(p).bytes; }
void WriteAll(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct RootPool {
  TempDir dir;
  std::string path = dir.path("p");
  std::vector<uint64_t> values = {0x0001000000040040ull, 0x77, 0, 0xdeadbeef, 1, 2, 3, 4};
  RootPool() {
    PoolOptions po;
    po.size = 4ull << 20;
    po.max_size = 64ull << 20;
    auto p = Pool::Create(path, po);
    PMINDEX_EXPECT_OK(p);
    PMINDEX_EXPECT_OK(p.value()->MarkInUse());
    for (unsigned i = 0; i < Pool::kRootSlots; ++i) {
      // Several writes, so the counters are not all 1.
      for (unsigned k = 0; k <= i; ++k) p.value()->WriteRoot(i, values[i] + k);
      values[i] += i;
    }
    PMINDEX_EXPECT_OK(p.value()->Close());
  }
  void Patch(size_t off, const void* bytes, size_t n) {
    std::string f = ReadAll(path);
    std::memcpy(f.data() + off, bytes, n);
    WriteAll(path, f);
  }
  void Zero(size_t off, size_t n) {
    std::vector<char> z(n, 0);
    Patch(off, z.data(), n);
  }
};

constexpr size_t kA = offsetof(PoolHeader, root_a);
constexpr size_t kB = offsetof(PoolHeader, root_b);

void ExpectRootsIntactAndRepaired(RootPool& rp, const std::string& what) {
  SCOPED_TRACE(what);
  {
    auto p = Pool::Open(rp.path);
    PMINDEX_ASSERT_OK(p);
    for (unsigned i = 0; i < Pool::kRootSlots; ++i) EXPECT_EQ(p.value()->root(i), rp.values[i]) << i;
    PMINDEX_ASSERT_OK(p.value()->MarkInUse());  // the first write repairs
    PMINDEX_ASSERT_OK(p.value()->Close());
  }
  const std::string f = ReadAll(rp.path);
  PoolHeader h;
  std::memcpy(&h, f.data(), sizeof h);
  for (unsigned i = 0; i < Pool::kRootSlots; ++i) {
    EXPECT_EQ(std::memcmp(&h.root_a[i], &h.root_b[i], sizeof(RootRecord)), 0) << "slot " << i;
    EXPECT_TRUE(pm::RootRecordValid(i, h.root_a[i])) << "slot " << i;
    EXPECT_EQ(h.root_a[i].value, rp.values[i]) << "slot " << i;
  }
}

TEST(RootSlots, WrittenValuesSurviveReopen) {
  RootPool rp;
  ExpectRootsIntactAndRepaired(rp, "undamaged");
}

TEST(RootSlots, OneDamagedCopyIsRepaired) {
  for (size_t base : {kA, kB}) {
    for (unsigned slot : {0u, 3u, 7u}) {
      for (int bit : {0, 13, 63, 64, 100, 127}) {
        RootPool rp;
        std::string f = ReadAll(rp.path);
        const size_t byte = base + slot * sizeof(RootRecord) + bit / 8;
        const char c = static_cast<char>(f[byte] ^ (1 << (bit % 8)));
        rp.Patch(byte, &c, 1);
        char what[64];
        std::snprintf(what, sizeof what, "%s slot %u bit %d", base == kA ? "A" : "B", slot, bit);
        ExpectRootsIntactAndRepaired(rp, what);
      }
    }
    RootPool zeroed;
    zeroed.Zero(base, 8 * sizeof(RootRecord));  // a whole copy (two lines)
    ExpectRootsIntactAndRepaired(zeroed, base == kA ? "copy A zeroed" : "copy B zeroed");
    RootPool ff;
    char ones[64];
    std::memset(ones, 0xff, sizeof ones);
    ff.Patch(base + 64, ones, sizeof ones);  // a 64-byte overwrite
    ExpectRootsIntactAndRepaired(ff, base == kA ? "A line 1 overwritten" : "B line 1 overwritten");
  }
}

TEST(RootSlots, BothCopiesDamagedIsCorruptionAndTheFileIsUnchanged) {
  RootPool rp;
  std::string f = ReadAll(rp.path);
  f[kA + 2 * sizeof(RootRecord)] ^= 1;
  f[kB + 2 * sizeof(RootRecord) + 9] ^= 0x40;
  WriteAll(rp.path, f);
  auto p = Pool::Open(rp.path);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(p.status().is_corruption()) << p.status().ToString();
  EXPECT_NE(p.status().message().find("root slot 2"), std::string::npos) << p.status().ToString();
  EXPECT_EQ(ReadAll(rp.path), f);
  auto info = Pool::Inspect(rp.path);
  EXPECT_TRUE(info.status().is_corruption()) << info.status().ToString();
}

// A crash between the two copies of a write: copy A new and complete, copy
// B old. The new value is taken, and the first write repairs copy B.
TEST(RootSlots, WriteInterruptedBetweenTheCopiesTakesTheNewValue) {
  RootPool rp;
  PoolHeader h;
  std::string f = ReadAll(rp.path);
  std::memcpy(&h, f.data(), sizeof h);
  const RootRecord next = pm::MakeRootRecord(4, pm::RootSeq(h.root_a[4]) + 1, 0xabc);
  rp.Patch(kA + 4 * sizeof(RootRecord), &next, sizeof next);
  rp.values[4] = 0xabc;
  ExpectRootsIntactAndRepaired(rp, "A ahead of B");
}

// Version 1 pools (one unprotected word per slot, one page table) are
// refused with NotSupported, and the file is not changed.
TEST(RootSlots, OlderFormatIsNotSupported) {
  RootPool rp;
  std::string f = ReadAll(rp.path);
  PoolHeader h;
  std::memcpy(&h, f.data(), sizeof h);
  h.format_version = 1;
  h.checksum = pm::HeaderChecksum(h);
  std::memcpy(f.data(), &h, sizeof h);
  WriteAll(rp.path, f);
  auto p = Pool::Open(rp.path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Status::Code::kNotSupported) << p.status().ToString();
  EXPECT_NE(p.status().message().find("version 1"), std::string::npos) << p.status().ToString();
  EXPECT_EQ(ReadAll(rp.path), f);
}

// ------------------------------------------------------------ page table

TEST(PageWords, EveryBitFlipOfAnOwnedWordIsInvalid) {
  const uint64_t words[] = {PageWord{PageKind::kClass, 7, 3, 0}.Encode(),
                            PageWord{PageKind::kSpanHead, 0, 1, 5}.Encode(),
                            PageWord{PageKind::kSpanTail, 0, 0, 4}.Encode()};
  for (uint64_t w : words) {
    PageWord pw;
    ASSERT_TRUE(PageWord::Decode(w, alloc::kNumClasses, &pw));
    for (int bit = 0; bit < 64; ++bit) {
      EXPECT_FALSE(PageWord::Decode(w ^ (uint64_t{1} << bit), alloc::kNumClasses, &pw))
          << std::hex << w << " bit " << std::dec << bit;
    }
  }
  // A flipped bit in a free word is invalid too.
  PageWord pw;
  for (int bit = 0; bit < 64; ++bit)
    EXPECT_FALSE(PageWord::Decode(uint64_t{1} << bit, alloc::kNumClasses, &pw)) << bit;
}

TEST(PageWords, ResolveRule) {
  const uint64_t x = PageWord{PageKind::kClass, 2, 0, 0}.Encode();
  const uint64_t y = PageWord{PageKind::kSpanHead, 0, 0, 2}.Encode();
  uint64_t out = 1;
  using C = PageWord::Copies;
  EXPECT_EQ(PageWord::Resolve(x, x, alloc::kNumClasses, &out), C::kAgree);
  EXPECT_EQ(out, x);
  // A crash between the NAWs of a take (A new, B 0) or a give-back (A 0,
  // B old): the owned word wins.
  EXPECT_EQ(PageWord::Resolve(x, 0, alloc::kNumClasses, &out), C::kRepair);
  EXPECT_EQ(out, x);
  EXPECT_EQ(PageWord::Resolve(0, x, alloc::kNumClasses, &out), C::kRepair);
  EXPECT_EQ(out, x);
  // A damaged copy loses to a valid one.
  EXPECT_EQ(PageWord::Resolve(x ^ 0x100, x, alloc::kNumClasses, &out), C::kRepair);
  EXPECT_EQ(out, x);
  EXPECT_EQ(PageWord::Resolve(x, 0x40, alloc::kNumClasses, &out), C::kRepair);
  EXPECT_EQ(out, x);
  // Two valid owners, or nothing valid: no crash explains it.
  EXPECT_EQ(PageWord::Resolve(x, y, alloc::kNumClasses, &out), C::kCorrupt);
  EXPECT_EQ(PageWord::Resolve(x ^ 1, y ^ 1, alloc::kNumClasses, &out), C::kCorrupt);
}

using testing::CleanImage;
using testing::ImageKey;

void ExpectOpensIntact(Pool* img, int keys, const std::string& what) {
  SCOPED_TRACE(what);
  auto idx = open_index(img);
  PMINDEX_ASSERT_OK(idx);
  PMINDEX_EXPECT_OK(idx.value()->verify());
  EXPECT_EQ(idx.value()->stats().entries, static_cast<uint64_t>(keys));
  for (int i = 0; i < keys; i += 97) EXPECT_EQ(idx.value()->lookup(ImageKey(i)), uint64_t(i));
  // Recovery rewrote both copies of every word that differed.
  for (size_t i = 0; i < img->page_table_entries(); ++i)
    ASSERT_EQ(img->page_table()[i], img->page_table_mirror()[i]) << "page " << i;
}

TEST(PageTableCopies, ZeroedPageOfOneCopyIsRepaired) {
  for (std::string kind : {"lbtree", "fptree", "nvtree", "lcbtree", "cddstree"}) {
    for (bool copy_b : {false, true}) {
      auto img = CleanImage(kind, 3000);
      uint64_t* t = copy_b ? img->page_table_mirror() : img->page_table();
      std::memset(t, 0, 4096);  // the 4 KiB page holding the table's words
      ExpectOpensIntact(img.get(), 3000, kind + (copy_b ? " copy B" : " copy A"));
    }
  }
}

TEST(PageTableCopies, FlippedBitInOneCopyIsRepaired) {
  auto img = CleanImage("lbtree", 3000);
  // Every owned word, alternately in copy A and copy B, and free words.
  for (size_t i = 0; i < img->pages_mapped() + 8; ++i) {
    uint64_t* t = i % 2 == 0 ? img->page_table() : img->page_table_mirror();
    t[i] ^= uint64_t{1} << (i * 7 % 64);
  }
  ExpectOpensIntact(img.get(), 3000, "flipped bits");
}

// Two different valid owners of one page (no crash leaves that): open_index
// refuses with Corruption and changes nothing.
TEST(PageTableCopies, DisagreeingValidCopiesAreCorruptionWithoutWrites) {
  auto img = CleanImage("lbtree", 3000);
  size_t page = 0;
  while (img->page_table()[page] == 0) ++page;
  img->page_table_mirror()[page] = PageWord{PageKind::kSpanHead, 0, 0, 1}.Encode();
  auto b = img->bytes();
  const std::vector<std::byte> before(b.begin(), b.end());
  {
    auto idx = open_index(img.get());
    ASSERT_FALSE(idx.ok());
    EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
    EXPECT_NE(idx.status().message().find("disagree"), std::string::npos) << idx.status().ToString();
  }
  auto a = img->bytes();
  EXPECT_TRUE(std::equal(a.begin(), a.end(), before.begin()));
}

// A crash between the two NAWs of a page word (taken: A set, B still 0)
// keeps the page owned; recovery frees it if nothing reaches it.
TEST(PageTableCopies, InterruptedTakeIsOwnedThenReclaimed) {
  PoolOptions po;
  po.size = 16ull << 20;
  po.max_size = 64ull << 20;
  auto pool = Pool::CreateInMemory(po);
  PMINDEX_ASSERT_OK(pool);
  Pool* p = pool.value().get();
  p->page_table()[5] = PageWord{PageKind::kClass, 3, 0, 0}.Encode();
  auto a = alloc::Allocator::Attach(p, false);
  PMINDEX_ASSERT_OK(a);
  EXPECT_EQ(a.value()->stats().pages_owned, 1u);
  PMINDEX_ASSERT_OK(a.value()->FinishRecovery());
  EXPECT_EQ(a.value()->stats().pages_owned, 0u);
  EXPECT_EQ(p->page_table()[5], 0u);
  EXPECT_EQ(p->page_table_mirror()[5], 0u);
}

}  // namespace
}  // namespace pmindex
