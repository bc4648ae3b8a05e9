// create_index / open_index and the pool they attach to: one index per
// pool at a time, refused opens that change nothing, and the clean flag
// (set only by the close of an index that opened successfully).
//
// A test-only persistent kind, "probe-open", makes the failures
// deterministic: its open fails with Corruption when root slot 1 holds
// kFailAfterWrite (after writing a heap word, as a recovery that finds
// damage halfway would).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "alloc/allocator.h"
#include "gtest/gtest.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "support/kinds.h"
#include "support/stub_index.h"
#include "support/temp_files.h"

namespace pmindex {
namespace {

using testing::Snapshot;
using testing::TempDir;
using Code = Status::Code;

constexpr uint64_t kFailAfterWrite = 0xBAD1;

// Root slot 0 holds a block of the index (so the pool "holds an index");
// the index stores nothing else.
class ProbeIndex : public testing::StubIndex {
 public:
  std::string_view kind() const override { return "probe-open"; }
};

Result<std::unique_ptr<Index>> CreateProbe(const IndexEnv& env, const Options&) {
  auto b = env.alloc->Alloc(64);
  if (!b.ok()) return b.status();
  env.pool->WriteRoot(0, b.value().raw());
  return std::unique_ptr<Index>(new ProbeIndex());
}

Result<std::unique_ptr<Index>> OpenProbe(const IndexEnv& env, const Options&) {
  const uint64_t mode = env.pool->root(1);
  PPtr root(env.pool->root(0));
  char* block = env.pool->to_ptr<char>(root);
  if (mode == kFailAfterWrite) {
    pm::naw(reinterpret_cast<uint64_t*>(block), 0x5EC0);  // half a repair
    return Status::Corruption("probe: damaged (after a repair write)");
  }
  env.alloc->MarkReachable(root);
  return std::unique_ptr<Index>(new ProbeIndex());
}

PMINDEX_REGISTER_TEST_INDEX(probe_open, {},
                            {.name = "probe-open",
                             .persistent = true,
                             .options_help = "",
                             .validate = nullptr,
                             .create = CreateProbe,
                             .open = OpenProbe,
                             .stores_data = false});

PoolOptions ProbePool() {
  PoolOptions o;
  o.size = 4ull << 20;
  o.max_size = 16ull << 20;
  o.kind = "probe-open";
  return o;
}

// A pool file holding a probe index, closed cleanly.
void MakeProbePool(const std::string& path) {
  auto p = Pool::Create(path, ProbePool());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto idx = create_index("probe-open", "", p.value().get());
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  ASSERT_TRUE(idx.value()->close().ok());
  idx.value().reset();
  ASSERT_TRUE(p.value()->Close().ok());
  ASSERT_TRUE(Pool::Inspect(path)->clean);
}

void SetWord(const std::string& path, uint64_t offset, uint64_t value) {
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, &value, sizeof(value), static_cast<off_t>(offset)),
            static_cast<ssize_t>(sizeof(value)));
  close(fd);
}

constexpr uint64_t kCleanFlag = offsetof(pm::PoolHeader, clean);

// Sets root slot `slot` of a closed pool file as a write would: both
// copies, a valid record one write ahead.
void SetRoot(const std::string& path, unsigned slot, uint64_t value) {
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  pm::PoolHeader h;
  ASSERT_EQ(pread(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  h.root_a[slot] = h.root_b[slot] = pm::MakeRootRecord(slot, pm::RootSeq(h.root_a[slot]) + 1, value);
  ASSERT_EQ(pwrite(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  close(fd);
}

TEST(OpenIndex, SecondIndexOnOnePoolIsBusy) {
  PoolOptions o = ProbePool();
  o.kind = "lbtree";
  auto pool = Pool::CreateInMemory(o);
  ASSERT_TRUE(pool.ok());
  Pool* p = pool.value().get();
  auto first = create_index("lbtree", "", p);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first.value()->insert(1, 10).ok());
  EXPECT_TRUE(p->index_attached());

  auto second = open_index(p);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kBusy) << second.status().ToString();
  EXPECT_NE(second.status().message().find("already open"), std::string_view::npos);
  auto again = create_index("lbtree", "", p);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kBusy) << again.status().ToString();
  // The first index is untouched and usable.
  EXPECT_EQ(first.value()->lookup(1).value_or(0), 10u);
  ASSERT_TRUE(first.value()->insert(2, 20).ok());
  ASSERT_TRUE(first.value()->verify().ok());

  // Once it is gone, the pool can be opened again.
  ASSERT_TRUE(first.value()->close().ok());
  first.value().reset();
  EXPECT_FALSE(p->index_attached());
  auto reopened = open_index(p);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(reopened.value()->lookup(2).value_or(0), 20u);
  EXPECT_EQ(open_index(p).status().code(), Code::kBusy);
}

// A refusal before any write (here: a malformed page-table word, found
// while the allocator reads the table) leaves a clean pool file exactly as
// it was, mtime included, whether the pool is closed or destroyed.
TEST(OpenIndex, RefusedBeforeAnyWriteChangesNothing) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakeProbePool(path);
  // Tag 0 with other bits set, in both copies of the page table.
  SetWord(path, pm::kHeaderSize + 8 * 3, 0x100);
  SetWord(path, pm::PageTableMirrorOffset(ProbePool().max_size) + 8 * 3, 0x100);
  Snapshot before = Snapshot::Of(path);
  for (bool explicit_close : {true, false}) {
    auto p = Pool::Open(path);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    auto idx = open_index(p.value().get());
    ASSERT_FALSE(idx.ok());
    EXPECT_EQ(idx.status().code(), Code::kCorruption) << idx.status().ToString();
    if (explicit_close) {
      ASSERT_TRUE(p.value()->Close().ok());
    }
  }
  EXPECT_TRUE(Snapshot::Of(path) == before) << "a refused open_index changed the pool";
  EXPECT_TRUE(Pool::Inspect(path)->clean);
}

// A crashed pool (clean flag clear) whose recovery fails is never marked
// clean: not by Close, not by the Pool destructor.
TEST(OpenIndex, FailedRecoveryNeverMarksThePoolClean) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakeProbePool(path);
  SetWord(path, kCleanFlag, 0);  // as a crash leaves it
  SetRoot(path, 1, kFailAfterWrite);
  for (bool explicit_close : {true, false}) {
    SCOPED_TRACE(explicit_close ? "Close()" : "destructor");
    auto p = Pool::Open(path);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p.value()->was_clean());
    auto idx = open_index(p.value().get());
    ASSERT_FALSE(idx.ok());
    EXPECT_EQ(idx.status().code(), Code::kCorruption);
    EXPECT_FALSE(p.value()->index_attached());
    if (explicit_close) {
      ASSERT_TRUE(p.value()->Close().ok());
    }
    p.value().reset();
    auto info = Pool::Inspect(path);
    ASSERT_TRUE(info.ok());
    EXPECT_FALSE(info->clean) << "a pool whose recovery failed was marked clean";
  }
  // A clean pool whose recovery fails after writing stays unclean too.
  SetWord(path, kCleanFlag, 1);
  {
    auto p = Pool::Open(path);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p.value()->was_clean());
    EXPECT_FALSE(open_index(p.value().get()).ok());
  }
  EXPECT_FALSE(Pool::Inspect(path)->clean);

  // Repaired, the pool opens, and the close of that index marks it clean.
  SetRoot(path, 1, 0);
  {
    auto p = Pool::Open(path);
    ASSERT_TRUE(p.ok());
    auto idx = open_index(p.value().get());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    ASSERT_TRUE(idx.value()->close().ok());
    idx.value().reset();
    ASSERT_TRUE(p.value()->Close().ok());
  }
  EXPECT_TRUE(Pool::Inspect(path)->clean);
}

// An index still alive when its pool is closed has not been closed: the
// pool stays unclean.
TEST(OpenIndex, PoolClosedUnderALiveIndexStaysUnclean) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakeProbePool(path);
  auto p = Pool::Open(path);
  ASSERT_TRUE(p.ok());
  auto idx = open_index(p.value().get());
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  ASSERT_TRUE(p.value()->Close().ok());
  EXPECT_FALSE(Pool::Inspect(path)->clean);
  // The lease outlives the pool object safely.
  p.value().reset();
  idx.value().reset();
}

}  // namespace
}  // namespace pmindex
