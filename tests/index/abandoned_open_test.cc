// An open that does not complete never writes: with one page
// word of the page table damaged so that the allocator refuses the blocks
// the tree reaches, open_index returns Corruption, the process survives
// (nvtree used to abort with "Alloc called before FinishRecovery()
// succeeded": the half-open index was destroyed and its close() wrote a
// snapshot) and the pool image is unchanged.
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/page_word.h"
#include "alloc/size_classes.h"
#include "gtest/gtest.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "support/kinds.h"
#include "support/pools.h"
#include "support/status.h"
#include "support/stub_index.h"

namespace pmindex {
namespace {

using testing::CleanImage;

// Turns the class page holding the block of root slot 0 into a one-page
// span (docs/allocator.md: a span head of length 1, node kept) in both
// copies of the page table: a well-formed word that Attach accepts, but
// every block the tree reaches in that page past its first byte is no
// longer a block start, so recovery's marks are refused.
void DamagePageWordOfRoot(Pool* p) {
  const uint64_t off = PPtr(p->root(0)).offset();
  const size_t page = (off - p->heap_begin()) / PoolOptions::kPageSize;
  uint64_t& w = p->page_table()[page];
  alloc::PageWord pw;
  ASSERT_TRUE(alloc::PageWord::Decode(w, alloc::kNumClasses, &pw));
  ASSERT_EQ(pw.kind, alloc::PageKind::kClass) << "root block not in a class page";
  w = alloc::PageWord{alloc::PageKind::kSpanHead, 0, pw.node, 1}.Encode();
  p->page_table_mirror()[page] = w;
}

std::vector<std::byte> Bytes(const Pool& p) {
  auto b = p.bytes();
  return {b.begin(), b.end()};
}

class AbandonedOpen : public ::testing::TestWithParam<std::string> {};

TEST_P(AbandonedOpen, DamagedPageTableIsCorruptionWithoutWrites) {
  const std::string kind = GetParam();
  auto img = CleanImage(kind, 3000);
  DamagePageWordOfRoot(img.get());
  const auto before = Bytes(*img);
  {
    auto idx = open_index(img.get());
    ASSERT_FALSE(idx.ok()) << kind;
    EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
  }
  // Nothing changed but the clean flag, which open_index's MarkInUse
  // clears before recovery runs (the image was cleanly closed).
  const auto after = Bytes(*img);
  ASSERT_EQ(before.size(), after.size());
  size_t n = 0, first = 0;
  for (size_t i = 4096; i < before.size(); ++i)
    if (before[i] != after[i] && n++ == 0) first = i;
  EXPECT_EQ(n, 0u) << kind << ": " << n << " bytes past the header changed, first at " << first;
  // In the header's mutable part (root slots, segment count) only the
  // clean flag may differ.
  for (size_t i = pm::kMutableOffset; i < pm::kHeaderSize; ++i) {
    if (i / 8 == offsetof(pm::PoolHeader, clean) / 8) continue;
    EXPECT_EQ(before[i], after[i]) << kind << ": header byte " << i << " changed";
  }
  // And again: the refusal is repeatable.
  auto again = open_index(img.get());
  EXPECT_TRUE(again.status().is_corruption()) << again.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Trees, AbandonedOpen,
                         ::testing::Values("nvtree", "lbtree", "fptree", "wbtree", "lcbtree",
                                           "cddstree"));

// The mechanism itself, with a test kind whose open succeeds but reports a
// pointer the allocator refuses (so FinishRecovery fails after the index
// object exists), and whose close() writes root slot 3 unless abandoned().
// It has no destructor of its own: the library's handle closes it. With
// root slot 2 holding kFailClose, its close fails instead.
constexpr uint64_t kClosedMark = 0xC105ED;
constexpr uint64_t kFailClose = 0xFA11;

class AbandonProbe : public testing::StubIndex {
 public:
  explicit AbandonProbe(Pool* pool) : pool_(pool) {}
  std::string_view kind() const override { return "probe-abandon"; }
  Status close() override {
    if (closed_) return Status::OK();
    closed_ = true;
    if (abandoned()) return Status::OK();
    if (pool_->root(2) == kFailClose) return Status::IOError("probe: close failed");
    pool_->WriteRoot(3, kClosedMark);
    return Status::OK();
  }

 private:
  Pool* pool_;
  bool closed_ = false;
};

Result<std::unique_ptr<Index>> CreateAbandonProbe(const IndexEnv& env, const Options&) {
  auto b = env.alloc->Alloc(256);
  if (!b.ok()) return b.status();
  env.pool->WriteRoot(0, b.value().raw());
  return std::unique_ptr<Index>(new AbandonProbe(env.pool));
}

Result<std::unique_ptr<Index>> OpenAbandonProbe(const IndexEnv& env, const Options&) {
  PPtr root(env.pool->root(0));
  env.alloc->MarkReachable(root);
  // Not a block start: FinishRecovery refuses the pool.
  if (env.pool->root(1) != 0) env.alloc->MarkReachable(PPtr(root.raw() + 64));
  return std::unique_ptr<Index>(new AbandonProbe(env.pool));
}

PMINDEX_REGISTER_TEST_INDEX(probe_abandon, {},
                            {.name = "probe-abandon",
                             .persistent = true,
                             .options_help = "",
                             .validate = nullptr,
                             .create = CreateAbandonProbe,
                             .open = OpenAbandonProbe,
                             .stores_data = false});

PoolOptions ProbePoolOptions() {
  PoolOptions po;
  po.size = 4ull << 20;
  po.max_size = 16ull << 20;
  po.kind = "probe-abandon";
  return po;
}

TEST(AbandonedOpenProbe, IndexRefusedByFinishRecoveryNeverWritesAtClose) {
  auto pool = Pool::CreateInMemory(ProbePoolOptions());
  PMINDEX_ASSERT_OK(pool);
  {
    auto idx = create_index("probe-abandon", "", pool.value().get());
    PMINDEX_ASSERT_OK(idx);
    idx.value().reset();  // a completed index writes at close
  }
  ASSERT_EQ(pool.value()->root(3), kClosedMark);
  auto img = Pool::OpenImage(pool.value()->bytes());
  PMINDEX_ASSERT_OK(img);
  img.value()->WriteRoot(3, 0);
  {
    auto ok = open_index(img.value().get());  // a good open: close writes
    PMINDEX_ASSERT_OK(ok);
  }
  EXPECT_EQ(img.value()->root(3), kClosedMark);
  img.value()->WriteRoot(3, 0);
  img.value()->WriteRoot(1, 1);  // the open now reports a bad block
  auto idx = open_index(img.value().get());
  ASSERT_FALSE(idx.ok());
  EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
  EXPECT_EQ(img.value()->root(3), 0u) << "the abandoned index wrote at destruction";
}

// An index destroyed without close() is closed by the handle, once, and an
// error of that close is reported on stderr, naming the kind and the error.
TEST(AbandonedOpenProbe, ImplicitCloseReportsItsErrorOnStderr) {
  auto pool = Pool::CreateInMemory(ProbePoolOptions());
  PMINDEX_ASSERT_OK(pool);
  auto idx = create_index("probe-abandon", "", pool.value().get());
  PMINDEX_ASSERT_OK(idx);
  pool.value()->WriteRoot(2, kFailClose);
  ::testing::internal::CaptureStderr();
  idx.value().reset();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("probe-abandon"), std::string::npos) << err;
  EXPECT_NE(err.find("probe: close failed"), std::string::npos) << err;
  EXPECT_EQ(pool.value()->root(3), 0u);
  // An explicit close reports to its caller, and the handle adds nothing.
  auto pool2 = Pool::CreateInMemory(ProbePoolOptions());
  PMINDEX_ASSERT_OK(pool2);
  auto idx2 = create_index("probe-abandon", "", pool2.value().get());
  PMINDEX_ASSERT_OK(idx2);
  pool2.value()->WriteRoot(2, kFailClose);
  EXPECT_EQ(idx2.value()->close().code(), Status::Code::kIOError);
  ::testing::internal::CaptureStderr();
  idx2.value().reset();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace pmindex
