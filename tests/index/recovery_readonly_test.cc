// Recovery validates before it repairs: a crash image whose
// recovery has repairs to do (empty leaves to unlink, an active split log
// to replay and clear, nvtree's clean-shutdown word to reset) plus damage
// found only late in the walk must be refused with Corruption and left
// byte-for-byte unchanged; the same image without the damage opens and is
// repaired (so the repairs the refusal skipped were real).
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "index/index.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "support/pools.h"
#include "support/status.h"

namespace pmindex {
namespace {

constexpr int kKeys = 4000;
Key KeyOf(int i) { return uint64_t(i) * 7 + 1; }

struct Built {
  std::unique_ptr<Pool> src;
  std::unique_ptr<Index> idx;
};

Built Build(const std::string& kind, bool remove_some) {
  testing::FilledPool f = testing::FillInMemory(kind, kKeys, KeyOf, [](int i) { return uint64_t(i) + 1000; });
  // Empties leaves early in the list: recovery unlinks them.
  if (remove_some) {
    for (int i = 100; i < 400; ++i) PMINDEX_EXPECT_OK(f.idx->remove(KeyOf(i)));
  }
  return {std::move(f.pool), std::move(f.idx)};
}

std::unique_ptr<Pool> ImageOf(const Pool& p) {
  auto img = Pool::OpenImage(p.bytes());
  PMINDEX_EXPECT_OK(img);
  return std::move(img).value();
}

std::vector<std::byte> Bytes(const Pool& p) {
  auto b = p.bytes();
  return {b.begin(), b.end()};
}

// Replaces every stored (key, value) pair of the largest key (the last
// leaf) by a key smaller than every other: that leaf's keys are then not
// above the previous leaf's, which only the cross-leaf order check sees.
int DamageLastKey(Pool* p) {
  const uint64_t key = KeyOf(kKeys - 1), val = kKeys - 1 + 1000;
  auto b = p->bytes();
  int hits = 0;
  for (size_t off = p->heap_begin(); off + 16 <= b.size(); off += 8) {
    uint64_t w[2];
    std::memcpy(w, b.data() + off, 16);
    if (w[0] == key && w[1] == val) {
      const uint64_t small = 2;  // not a key (keys are 7i+1)
      std::memcpy(b.data() + off, &small, 8);
      ++hits;
    }
  }
  return hits;
}

// Marks split log 0 active for the head leaf and its successor, as a crash
// during that split would leave it (replay must drop nothing here, but it
// clears the log: a write).
void ActivateSplitLog(Pool* p, uint64_t next_offset_in_leaf) {
  auto* logs = p->to_ptr<uint64_t>(PPtr(p->root(2)));
  const uint64_t head = p->root(0);
  const uint64_t next = *reinterpret_cast<uint64_t*>(p->to_ptr<char>(PPtr(head)) + next_offset_in_leaf);
  ASSERT_NE(next, 0u);
  logs[0] = head;
  logs[1] = next;
}

void ExpectRefusedUnchanged(Pool* img, const std::string& kind) {
  const auto before = Bytes(*img);
  auto idx = open_index(img);
  ASSERT_FALSE(idx.ok()) << kind;
  EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
  const auto after = Bytes(*img);
  ASSERT_EQ(before.size(), after.size());
  size_t first = 0, n = 0;
  for (size_t i = 0; i < before.size(); ++i)
    if (before[i] != after[i] && n++ == 0) first = i;
  EXPECT_EQ(n, 0u) << kind << ": refused open changed " << n << " bytes, first at " << first
                   << " (" << idx.status().ToString() << ")";
}

void ExpectRepairedOpen(Pool* img, const std::string& kind, size_t entries) {
  const auto before = Bytes(*img);
  auto idx = open_index(img);
  PMINDEX_ASSERT_OK(idx) << kind;
  PMINDEX_EXPECT_OK(idx.value()->verify());
  EXPECT_EQ(idx.value()->stats().entries, entries);
  EXPECT_NE(before, Bytes(*img)) << kind << ": the undamaged image needed no repair";
}

// fptree's and wbtree's next pointer is the leaf's word at byte 8
// (LayoutOk in their leaf headers).
constexpr uint64_t kNextOffset = 8;

// Sets the persistent lock bit of the head leaf, as a crash inside a write
// leaves it (recovery clears it: a write it does per leaf, after the
// read-only validation). The bit is in the leaf's first word: bit 14 of lbtree's
// block-0 header, bit 63 of fptree's and wbtree's bitmap word.
void SetHeadLockBit(Pool* p, const std::string& kind) {
  auto* w = p->to_ptr<uint64_t>(PPtr(p->root(0)));
  *w |= kind == "lbtree" ? uint64_t{1} << 14 : uint64_t{1} << 63;
}

class LeafTreeRecovery : public ::testing::TestWithParam<std::string> {};

TEST_P(LeafTreeRecovery, LateOrderDamageRefusedWithoutWrites) {
  const std::string kind = GetParam();
  Built b = Build(kind, /*remove_some=*/true);
  {
    auto img = ImageOf(*b.src);
    if (kind != "lbtree") ActivateSplitLog(img.get(), kNextOffset);
    SetHeadLockBit(img.get(), kind);
    ExpectRepairedOpen(img.get(), kind, kKeys - 300);
  }
  auto img = ImageOf(*b.src);
  if (kind != "lbtree") ActivateSplitLog(img.get(), kNextOffset);
  SetHeadLockBit(img.get(), kind);
  ASSERT_GE(DamageLastKey(img.get()), 1);
  ExpectRefusedUnchanged(img.get(), kind);
  // And again: the refusal is repeatable (nothing was half repaired).
  ExpectRefusedUnchanged(img.get(), kind);
}

INSTANTIATE_TEST_SUITE_P(Trees, LeafTreeRecovery, ::testing::Values("lbtree", "fptree", "wbtree"));

// nvtree: a cleanly closed pool (slot 1 = snapshot | 1, which open resets)
// whose second-to-last LN has a damaged next pointer: the snapshot then
// disagrees with the list and the rebuild meets the bad pointer at the end.
TEST(NvtreeRecovery, LateBrokenLinkRefusedWithoutWrites) {
  Built b = Build("nvtree", false);
  PMINDEX_ASSERT_OK(b.idx->close());
  {
    auto img = ImageOf(*b.src);
    ExpectRepairedOpen(img.get(), "nvtree", kKeys);
  }
  auto img = ImageOf(*b.src);
  ASSERT_EQ(img->root(1) & 1, 1u);
  std::vector<uint64_t> lns;
  for (uint64_t raw = img->root(0); raw != 0;
       raw = *reinterpret_cast<uint64_t*>(img->to_ptr<char>(PPtr(raw)) + 8))
    lns.push_back(raw);
  ASSERT_GE(lns.size(), 10u);
  *reinterpret_cast<uint64_t*>(img->to_ptr<char>(PPtr(lns[lns.size() - 2])) + 8) += 8;
  ExpectRefusedUnchanged(img.get(), "nvtree");
}

// nvtree, a cleanly closed pool whose head LN's next pointer is zeroed: the
// list then ends after one LN, which is valid on its own, and only the
// allocator's bound sees that the other LNs' pages were cut off. nvtree
// checks the bound before its first write (the clean flag and slot 1), so
// the refusal changes no byte.
TEST(NvtreeRecovery, CutListRefusedByTheBoundWithoutWrites) {
  PoolOptions po;
  po.size = 16ull << 20;
  po.max_size = 64ull << 20;
  po.kind = "nvtree";
  auto pool = Pool::CreateInMemory(po);
  PMINDEX_ASSERT_OK(pool);
  {
    auto idx = create_index("nvtree", "", pool.value().get());
    PMINDEX_ASSERT_OK(idx);
    // Enough LNs (1 KiB each) for several 256 KiB allocator pages.
    for (int i = 0; i < 60000; ++i) PMINDEX_ASSERT_OK(idx.value()->insert(KeyOf(i), i + 1000));
    PMINDEX_ASSERT_OK(idx.value()->close());
  }
  // The image of the pool as Pool::Close would leave it: clean flag set.
  std::vector<std::byte> closed = Bytes(*pool.value());
  const uint64_t one = 1;
  std::memcpy(closed.data() + offsetof(pm::PoolHeader, clean), &one, 8);
  auto opened = Pool::OpenImage(closed);
  PMINDEX_ASSERT_OK(opened);
  std::unique_ptr<Pool> img = std::move(opened).value();
  ASSERT_EQ(img->root(1) & 1, 1u);
  ASSERT_TRUE(img->was_clean());
  *reinterpret_cast<uint64_t*>(img->to_ptr<char>(PPtr(img->root(0))) + 8) = 0;
  const auto before = Bytes(*img);
  auto idx = open_index(img.get());
  ASSERT_FALSE(idx.ok());
  EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
  EXPECT_NE(idx.status().ToString().find("would reclaim"), std::string::npos)
      << idx.status().ToString();
  EXPECT_TRUE(before == Bytes(*img)) << "a refusal by the bound changed the pool";
}

// Replaces every 8-byte word equal to `from` in the heap by `to`.
int ReplaceWord(Pool* p, uint64_t from, uint64_t to) {
  auto b = p->bytes();
  int hits = 0;
  for (size_t off = p->heap_begin(); off + 8 <= b.size(); off += 8) {
    uint64_t w;
    std::memcpy(&w, b.data() + off, 8);
    if (w == from) {
      std::memcpy(b.data() + off, &to, 8);
      ++hits;
    }
  }
  return hits;
}

// lcbtree (node=1024): an active undo log (one record: the root node's
// current image, so the undo rewrites the root and the meta block's root
// word without changing the tree) plus the largest key, in the last leaf,
// made smaller than its neighbours.
void ActivateLcbUndo(Pool* p) {
  auto* meta = p->to_ptr<uint64_t>(PPtr(p->root(0)));  // tag, root, height, log, node_bytes
  const uint64_t root = meta[1], bytes = meta[4];
  auto* log = p->to_ptr<uint64_t>(PPtr(meta[3]));  // count, old_root, old_height
  char* rec = reinterpret_cast<char*>(log) + 64;
  std::memcpy(rec, &root, 8);
  std::memcpy(rec + 64, p->to_ptr<char>(PPtr(root)), bytes);
  log[1] = root;
  log[2] = meta[2];
  log[0] = 1;
}

TEST(LcbtreeRecovery, LateOrderDamageRefusedWithoutWrites) {
  Built b = Build("lcbtree", false);
  {
    auto img = ImageOf(*b.src);
    ActivateLcbUndo(img.get());
    ExpectRepairedOpen(img.get(), "lcbtree", kKeys);
  }
  auto img = ImageOf(*b.src);
  ActivateLcbUndo(img.get());
  ASSERT_GE(ReplaceWord(img.get(), KeyOf(kKeys - 1), 2), 1);
  ExpectRefusedUnchanged(img.get(), "lcbtree");
  ExpectRefusedUnchanged(img.get(), "lcbtree");
}

// cddstree (node=1024): an uncommitted delete (end > gv, which recovery
// makes live again: a write) of an early key, and a bad header (leaf = 7)
// on the leaf holding the largest key.
TEST(CddstreeRecovery, LateHeaderDamageRefusedWithoutWrites) {
  Built b = Build("cddstree", false);
  auto prepare = [&](Pool* p, bool damage) {
    auto* meta = p->to_ptr<uint64_t>(PPtr(p->root(0)));  // tag, root, gv, node_bytes
    const uint64_t gv = meta[2], bytes = meta[3];
    auto b = p->bytes();
    // Entries are {key, val, start, end} at 64 + 32i from a 64-aligned node.
    int found = 0;
    for (size_t off = p->heap_begin(); off + 32 <= b.size(); off += 32) {
      uint64_t e[4];
      std::memcpy(e, b.data() + off, 32);
      if (e[0] == KeyOf(5) && e[1] == 5 + 1000 && e[3] == ~uint64_t{0}) {
        e[3] = gv + 3;
        std::memcpy(b.data() + off, e, 32);
        ++found;
      }
      if (damage && e[0] == KeyOf(kKeys - 1) && e[1] == kKeys - 1 + 1000 && e[3] == ~uint64_t{0}) {
        // The node's start: the 64-aligned header before this entry whose
        // reserved words are zero and whose leaf word is 1.
        for (size_t base = (off - 64) & ~size_t{63}; base + bytes > off; base -= 64) {
          uint32_t hdr[2];
          uint64_t pad[6];
          std::memcpy(hdr, b.data() + base, 8);
          std::memcpy(pad, b.data() + base + 16, 48);
          bool zero = true;
          for (uint64_t w : pad) zero = zero && w == 0;
          if (hdr[1] == 1 && zero && 64 + 32 * uint64_t{hdr[0]} > off - base) {
            const uint32_t bad = 7;
            std::memcpy(b.data() + base + 4, &bad, 4);
            ++found;
            break;
          }
        }
      }
    }
    ASSERT_EQ(found, damage ? 2 : 1);
  };
  {
    auto img = ImageOf(*b.src);
    prepare(img.get(), false);
    ExpectRepairedOpen(img.get(), "cddstree", kKeys);
  }
  auto img = ImageOf(*b.src);
  prepare(img.get(), true);
  ExpectRefusedUnchanged(img.get(), "cddstree");
  ExpectRefusedUnchanged(img.get(), "cddstree");
}

}  // namespace
}  // namespace pmindex
