// Pool tests: creation, every refused open (with the file left unchanged),
// growth, clean flag, images, durability.
#include "pm/pool.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "pm/persist.h"
#include "pm/pool_format.h"
#include "support/seed.h"
#include "support/status.h"
#include "support/temp_files.h"

namespace pmindex {
namespace {

namespace fs = std::filesystem;
using testing::Snapshot;
using testing::TempDir;
using Code = Status::Code;

constexpr uint64_t kMiB = 1ull << 20;

PoolOptions SmallOptions(const std::string& kind = "test") {
  PoolOptions o;
  o.size = 4 * kMiB;
  o.max_size = 16 * kMiB;
  o.kind = kind;
  o.index_options = "a=1,b=2";
  return o;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Creates a pool file and closes it.
void MakePool(const std::string& path, const PoolOptions& o = SmallOptions()) {
  auto p = Pool::Create(path, o);
  PMINDEX_ASSERT_OK(p);
  PMINDEX_ASSERT_OK(p.value()->Close());
}

// Rewrites the header of a closed pool file through `edit`, optionally
// refreshing the checksum.
template <class F>
void EditHeader(const std::string& path, F edit, bool fix_checksum) {
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  pm::PoolHeader h;
  ASSERT_EQ(pread(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  edit(h);
  if (fix_checksum) h.checksum = pm::HeaderChecksum(h);
  ASSERT_EQ(pwrite(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  close(fd);
}

// Asserts that Open and Inspect fail with `code` and leave the file alone.
void ExpectRefused(const std::string& path, Code code, const OpenOptions& oo = {}) {
  Snapshot before = Snapshot::Of(path);
  auto p = Pool::Open(path, oo);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), code) << p.status().ToString();
  EXPECT_FALSE(p.status().message().empty());
  EXPECT_TRUE(Snapshot::Of(path) == before) << "Open changed " << path;
  if (code != Code::kWrongKind && code != Code::kBusy) {
    auto info = Pool::Inspect(path);
    ASSERT_FALSE(info.ok());
    EXPECT_EQ(info.status().code(), code) << info.status().ToString();
    EXPECT_TRUE(Snapshot::Of(path) == before) << "Inspect changed " << path;
  }
}

// ------------------------------------------------------------- in memory

TEST(PoolInMemory, CreateLayoutAndRoots) {
  auto r = Pool::CreateInMemory(SmallOptions());
  PMINDEX_ASSERT_OK(r);
  Pool& p = *r.value();
  EXPECT_EQ(p.durability(), Durability::kVolatile);
  EXPECT_TRUE(p.path().empty());
  EXPECT_TRUE(p.was_clean());
  EXPECT_EQ(p.kind(), "test");
  EXPECT_EQ(p.index_options(), "a=1,b=2");
  EXPECT_EQ(p.size(), 4 * kMiB);
  EXPECT_EQ(p.heap_begin() % PoolOptions::kPageSize, 0u);
  EXPECT_GE(p.heap_begin(), pm::kHeaderSize + p.page_table_entries() * 8);
  EXPECT_EQ(p.pages_mapped(), (p.size() - p.heap_begin()) / PoolOptions::kPageSize);
  EXPECT_EQ(p.page_table_entries(), (16 * kMiB - p.heap_begin()) / PoolOptions::kPageSize);
  for (size_t i = 0; i < p.page_table_entries(); ++i) ASSERT_EQ(p.page_table()[i], 0u);
  for (unsigned i = 0; i < Pool::kRootSlots; ++i) {
    EXPECT_EQ(p.root(i), 0u);
    p.WriteRoot(i, 100 + i);
  }
  for (unsigned i = 0; i < Pool::kRootSlots; ++i) EXPECT_EQ(p.root(i), 100 + i);
  EXPECT_EQ(p.bytes().size(), p.size());
  EXPECT_EQ(reinterpret_cast<char*>(p.bytes().data()), p.base());
}

TEST(PoolInMemory, AddressTranslation) {
  PoolOptions o = SmallOptions();
  o.pool_id = 7;
  auto r = Pool::CreateInMemory(o);
  PMINDEX_ASSERT_OK(r);
  Pool& p = *r.value();
  EXPECT_EQ(p.id(), 7);
  char* addr = p.base() + p.heap_begin() + 128;
  PPtr pp = p.to_pptr(addr);
  EXPECT_EQ(pp.pool_id(), 7);
  EXPECT_EQ(pp.offset(), p.heap_begin() + 128);
  EXPECT_EQ(p.to_ptr<char>(pp), addr);
  EXPECT_EQ(p.to_ptr(PPtr()), nullptr);
  EXPECT_TRUE(p.to_pptr(nullptr).is_null());
  EXPECT_TRUE(p.contains(addr));
  EXPECT_FALSE(p.contains(p.base() + p.size()));
}

TEST(PoolInMemory, PoisonFillsHeapButNotHeader) {
  PoolOptions o = SmallOptions();
  o.poison = 0xAB;
  auto r = Pool::CreateInMemory(o);
  PMINDEX_ASSERT_OK(r);
  Pool& p = *r.value();
  for (size_t i = 0; i < p.page_table_entries(); ++i) ASSERT_EQ(p.page_table()[i], 0u);
  EXPECT_EQ(p.root(3), 0u);
  EXPECT_EQ(p.kind(), "test");
  const unsigned char* heap = reinterpret_cast<unsigned char*>(p.base() + p.heap_begin());
  for (size_t i = 0; i < p.pages_mapped() * PoolOptions::kPageSize; i += 4093) {
    ASSERT_EQ(heap[i], 0xAB) << i;
  }
  PMINDEX_ASSERT_OK(p.Grow(p.pages_mapped() + 1));
  const unsigned char* last =
      reinterpret_cast<unsigned char*>(p.base() + p.size() - PoolOptions::kPageSize);
  EXPECT_EQ(last[0], 0xAB);
}

TEST(PoolInMemory, GrowsBySegmentsUpToMaxSize) {
  PoolOptions o = SmallOptions();
  o.segment_size = 3 * kMiB;  // 4 + 3 + 3 + 3 + 3 (cut to 16)
  auto r = Pool::CreateInMemory(o);
  PMINDEX_ASSERT_OK(r);
  Pool& p = *r.value();
  char* base = p.base();
  std::memset(p.base() + p.heap_begin(), 0x5A, 1000);
  size_t pages = p.pages_mapped();
  PMINDEX_ASSERT_OK(p.Grow(pages));
  EXPECT_EQ(p.pages_mapped(), pages);
  PMINDEX_ASSERT_OK(p.Grow(pages + 1));
  EXPECT_EQ(p.size(), 7 * kMiB);
  EXPECT_EQ(p.info().segments, 2u);
  EXPECT_EQ(p.base(), base);
  // The new memory is usable and the old content kept.
  std::memset(p.base() + 6 * kMiB, 1, kMiB);
  EXPECT_EQ(static_cast<unsigned char>(p.base()[p.heap_begin() + 999]), 0x5A);
  size_t max_pages = (16 * kMiB - p.heap_begin()) / PoolOptions::kPageSize;
  Status too_much = p.Grow(max_pages + 1);
  EXPECT_EQ(too_much.code(), Code::kOutOfSpace) << too_much.ToString();
  EXPECT_EQ(p.size(), 7 * kMiB);  // nothing changed
  PMINDEX_ASSERT_OK(p.Grow(max_pages));
  EXPECT_EQ(p.size(), 16 * kMiB);
  EXPECT_EQ(p.info().segments, 5u);
  EXPECT_EQ(p.pages_mapped(), max_pages);
  std::memset(p.base() + 15 * kMiB, 2, kMiB);
  EXPECT_EQ(p.Grow(max_pages + 1).code(), Code::kOutOfSpace);
}

TEST(PoolInMemory, ConcurrentGrowIsSerialized) {
  PoolOptions o = SmallOptions();
  o.segment_size = 1 * kMiB;
  o.max_size = 64 * kMiB;
  auto r = Pool::CreateInMemory(o);
  PMINDEX_ASSERT_OK(r);
  Pool& p = *r.value();
  size_t target = (64 * kMiB - p.heap_begin()) / PoolOptions::kPageSize;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&p, target, t] {
      for (size_t want = p.pages_mapped() + 1 + t; want <= target; want += 3) {
        Status s = p.Grow(want);
        if (!s.ok()) std::abort();
        if (p.pages_mapped() < want) std::abort();
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(p.size(), 64 * kMiB);
  EXPECT_EQ(p.info().segments, 61u);
}

TEST(PoolInMemory, OpenImageAtNewAddress) {
  auto r = Pool::CreateInMemory(SmallOptions());
  PMINDEX_ASSERT_OK(r);
  Pool& p = *r.value();
  PMINDEX_ASSERT_OK(p.Grow(p.pages_mapped() + 1));
  p.WriteRoot(0, 0x1234);
  std::memcpy(p.base() + p.size() - 100, "tail", 4);
  std::vector<std::byte> image(p.bytes().begin(), p.bytes().end());

  auto q = Pool::OpenImage(image, {.expected_kind = "test"});
  PMINDEX_ASSERT_OK(q);
  Pool& c = *q.value();
  EXPECT_NE(c.base(), p.base());
  EXPECT_EQ(c.size(), p.size());
  EXPECT_EQ(c.root(0), 0x1234u);
  EXPECT_EQ(std::memcmp(c.base() + c.size() - 100, "tail", 4), 0);
  EXPECT_FALSE(c.was_clean());  // the source pool was open
  EXPECT_EQ(c.durability(), Durability::kVolatile);
  EXPECT_EQ(c.kind(), "test");
  // Writing the copy leaves the original alone.
  c.WriteRoot(0, 1);
  EXPECT_EQ(p.root(0), 0x1234u);
  // The copy grows like any pool.
  PMINDEX_ASSERT_OK(c.Grow(c.pages_mapped() + 1));
}

TEST(PoolInMemory, OpenImageRefusesBadImages) {
  auto r = Pool::CreateInMemory(SmallOptions());
  PMINDEX_ASSERT_OK(r);
  std::span<std::byte> b = r.value()->bytes();
  std::vector<std::byte> image(b.begin(), b.end());

  EXPECT_EQ(Pool::OpenImage({}).status().code(), Code::kCorruption);
  EXPECT_EQ(Pool::OpenImage(std::span(image).first(100)).status().code(), Code::kCorruption);
  EXPECT_EQ(Pool::OpenImage(std::span(image).first(image.size() - 4096)).status().code(),
            Code::kCorruption);
  EXPECT_EQ(Pool::OpenImage(image, {.expected_kind = "other"}).status().code(), Code::kWrongKind);
  auto bad = image;
  bad[200] ^= std::byte{1};  // inside the options string
  EXPECT_EQ(Pool::OpenImage(bad).status().code(), Code::kCorruption);
  bad = image;
  reinterpret_cast<pm::PoolHeader*>(bad.data())->format_version = pm::kPoolFormatVersion + 1;
  EXPECT_EQ(Pool::OpenImage(bad).status().code(), Code::kNotSupported);
  bad = image;
  reinterpret_cast<pm::PoolHeader*>(bad.data())->segments = 0;
  EXPECT_EQ(Pool::OpenImage(bad).status().code(), Code::kCorruption);
}

TEST(PoolInMemory, RandomImagesNeverCrash) {
  const uint64_t seed = testing::TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  auto r = Pool::CreateInMemory(SmallOptions());
  PMINDEX_ASSERT_OK(r);
  std::span<std::byte> b = r.value()->bytes();
  std::vector<std::byte> image(b.begin(), b.end());
  for (int i = 0; i < 300; ++i) {
    auto bad = image;
    int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      bad[rng() % pm::kHeaderSize] = static_cast<std::byte>(rng());
    }
    auto q = Pool::OpenImage(bad);
    // A flip in the mutable part can leave a valid pool; anything else fails.
    if (q.ok()) {
      EXPECT_EQ(q.value()->size(), image.size());
    }
  }
}

TEST(PoolInMemory, RejectsBadOptions) {
  PoolOptions o = SmallOptions();
  o.size = PoolOptions::kMinSize - 1;
  auto r = Pool::CreateInMemory(o);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("4194304"), std::string_view::npos)
      << r.status().ToString();
  o = SmallOptions();
  o.max_size = o.size - 1;
  EXPECT_EQ(Pool::CreateInMemory(o).status().code(), Code::kInvalidArgument);
  o = SmallOptions(std::string(32, 'k'));
  EXPECT_EQ(Pool::CreateInMemory(o).status().code(), Code::kInvalidArgument);
  o = SmallOptions(std::string(31, 'k'));
  PMINDEX_EXPECT_OK(Pool::CreateInMemory(o));
  o = SmallOptions();
  o.index_options = std::string(1025, 'x');
  EXPECT_EQ(Pool::CreateInMemory(o).status().code(), Code::kInvalidArgument);
  // A page table for 16 TiB does not fit in 4 MiB.
  o = SmallOptions();
  o.max_size = 16ull << 40;
  EXPECT_EQ(Pool::CreateInMemory(o).status().code(), Code::kInvalidArgument);
}

// ----------------------------------------------------------------- files

TEST(PoolFile, CreateCloseReopenKeepsContents) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  {
    auto r = Pool::Create(path, SmallOptions());
    PMINDEX_ASSERT_OK(r);
    Pool& p = *r.value();
    EXPECT_EQ(p.path(), path);
    EXPECT_TRUE(p.was_clean());
    EXPECT_NE(p.durability(), Durability::kVolatile);
    EXPECT_EQ(p.kind(), "test");
    EXPECT_EQ(p.index_options(), "a=1,b=2");
    PMINDEX_ASSERT_OK(p.MarkInUse());
    p.WriteRoot(2, 42);
    pm::naw(&p.page_table()[1], 7);
    std::memcpy(p.base() + p.heap_begin(), "hello", 5);
    PMINDEX_ASSERT_OK(p.Sync());
    PMINDEX_ASSERT_OK(p.Close());
    PMINDEX_ASSERT_OK(p.Close());  // idempotent
  }
  // No temporary file left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(fs::path(path).parent_path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);

  auto info = Pool::Inspect(path);
  PMINDEX_ASSERT_OK(info);
  EXPECT_EQ(info->format_version, pm::kPoolFormatVersion);
  EXPECT_EQ(info->incompat_flags, 0u);
  EXPECT_EQ(info->uuid.size(), 36u);
  EXPECT_EQ(info->size, 4 * kMiB);
  EXPECT_EQ(info->max_size, 16 * kMiB);
  EXPECT_EQ(info->segment_size, 4 * kMiB);
  EXPECT_EQ(info->segments, 1u);
  EXPECT_EQ(info->kind, "test");
  EXPECT_EQ(info->index_options, "a=1,b=2");
  EXPECT_TRUE(info->clean);
  EXPECT_EQ(info->pool_id, 1);

  auto r = Pool::Open(path, {.expected_kind = "test"});
  PMINDEX_ASSERT_OK(r);
  Pool& p = *r.value();
  EXPECT_TRUE(p.was_clean());
  EXPECT_EQ(p.root(2), 42u);
  EXPECT_EQ(p.page_table()[1], 7u);
  EXPECT_EQ(std::memcmp(p.base() + p.heap_begin(), "hello", 5), 0);
  EXPECT_EQ(p.info().uuid, info->uuid);
  EXPECT_TRUE(p.info().clean);  // Open writes nothing
  PMINDEX_ASSERT_OK(p.MarkInUse());
  EXPECT_FALSE(p.info().clean);  // in use now
  auto while_open = Pool::Inspect(path);
  PMINDEX_ASSERT_OK(while_open);
  EXPECT_FALSE(while_open->clean);
}

// Page faults taken while writing one byte per 4 KiB page of the heap.
long FaultsWritingHeap(Pool& p) {
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  for (uint64_t off = p.heap_begin(); off < p.size(); off += 4096) p.base()[off] = 1;
  getrusage(RUSAGE_SELF, &after);
  return after.ru_minflt - before.ru_minflt;
}

// Create (and Open with prefault) fill in the page tables of a pool in
// memory-backed storage, so that writes take no page fault; a plain Open
// maps lazily.
TEST(PoolFile, CreateAndPrefaultedOpenMapPagesAheadOnTmpfs) {
#if defined(__SANITIZE_THREAD__)
  // TSan writes shadow memory (twice the pool's size) on every store, and
  // those page faults outnumber the pool's own.
  GTEST_SKIP() << "page faults of TSan's shadow memory hide the pool's";
#endif
  struct statfs sfs;
  if (statfs("/dev/shm", &sfs) != 0 || static_cast<unsigned long>(sfs.f_type) != TMPFS_MAGIC)
    GTEST_SKIP() << "no tmpfs at /dev/shm";
  TempDir dir;  // for a unique name only
  const std::string path =
      "/dev/shm/" + fs::path(dir.path("p")).parent_path().filename().string() + ".pool";
  struct Remove {
    std::string p;
    ~Remove() { std::remove(p.c_str()); }
  } cleanup{path};
  PoolOptions po = SmallOptions();
  po.size = 16ull << 20;
  long created = 0, lazy = 0, prefaulted = 0;
  {
    auto r = Pool::Create(path, po);
    PMINDEX_ASSERT_OK(r);
    created = FaultsWritingHeap(*r.value());
    PMINDEX_ASSERT_OK(r.value()->Close());
  }
  {
    auto r = Pool::Open(path);
    PMINDEX_ASSERT_OK(r);
    lazy = FaultsWritingHeap(*r.value());
    PMINDEX_ASSERT_OK(r.value()->Close());
  }
  {
    OpenOptions oo;
    oo.prefault = true;
    auto r = Pool::Open(path, oo);
    PMINDEX_ASSERT_OK(r);
    prefaulted = FaultsWritingHeap(*r.value());
    PMINDEX_ASSERT_OK(r.value()->Close());
  }
  // A lazy mapping faults once per page (about 3800 here); sanitizer
  // builds add faults on their shadow memory to all three counts.
  const long pages = static_cast<long>((po.size - (1ull << 20)) / 4096);
  EXPECT_GT(lazy, pages / 2);
  EXPECT_LT(created, lazy / 2);
  EXPECT_LT(prefaulted, lazy / 2);
}

TEST(PoolFile, UuidsDiffer) {
  TempDir dir;
  MakePool(dir.path("a"));
  MakePool(dir.path("b"));
  EXPECT_NE(Pool::Inspect(dir.path("a"))->uuid, Pool::Inspect(dir.path("b"))->uuid);
}

TEST(PoolFile, CreateRefusesExistingPath) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  Snapshot before = Snapshot::Of(path);
  EXPECT_EQ(Pool::Create(path, SmallOptions()).status().code(), Code::kAlreadyExists);
  EXPECT_TRUE(Snapshot::Of(path) == before);
  std::string text = dir.path("notes.txt");
  WriteFile(text, "precious\n");
  before = Snapshot::Of(text);
  EXPECT_EQ(Pool::Create(text, SmallOptions()).status().code(), Code::kAlreadyExists);
  EXPECT_TRUE(Snapshot::Of(text) == before);
}

TEST(PoolFile, CreateRefusesBadSizesWithoutTouchingDisk) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  PoolOptions o = SmallOptions();
  o.size = 1 * kMiB;
  auto r = Pool::Create(path, o);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("minimum"), std::string_view::npos);
  o = SmallOptions();
  o.max_size = 2 * kMiB;
  EXPECT_EQ(Pool::Create(path, o).status().code(), Code::kInvalidArgument);
  o = SmallOptions(std::string(40, 'x'));
  EXPECT_EQ(Pool::Create(path, o).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(fs::path(path).parent_path()));
  EXPECT_EQ(Pool::Create(dir.path("no/such/dir/p"), SmallOptions()).status().code(),
            Code::kIOError);
}

TEST(PoolFile, MissingPath) {
  TempDir dir;
  std::string path = dir.path("absent");
  EXPECT_EQ(Pool::Open(path).status().code(), Code::kNotFound);
  EXPECT_EQ(Pool::Inspect(path).status().code(), Code::kNotFound);
  EXPECT_FALSE(fs::exists(path));
}

TEST(PoolFile, NotAPool) {
  TempDir dir;
  std::string empty = dir.path("empty");
  WriteFile(empty, "");
  ExpectRefused(empty, Code::kCorruption);
  std::string text = dir.path("text");
  WriteFile(text, "This is a text file, not a pool.\n");
  ExpectRefused(text, Code::kCorruption);
  std::mt19937_64 rng(7);
  std::string random(64 * 1024, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  std::string rnd = dir.path("random");
  WriteFile(rnd, random);
  ExpectRefused(rnd, Code::kCorruption);
  auto s = Pool::Open(rnd).status();
  EXPECT_NE(s.message().find("not a pmindex pool"), std::string_view::npos) << s.ToString();
  ExpectRefused(dir.path(""), Code::kCorruption);  // a directory
}

TEST(PoolFile, TruncatedOrExtended) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  fs::resize_file(path, 2 * kMiB);
  ExpectRefused(path, Code::kCorruption);
  EXPECT_NE(Pool::Open(path).status().message().find("truncated or resized"),
            std::string_view::npos);
  fs::resize_file(path, 4 * kMiB + 4096);
  ExpectRefused(path, Code::kCorruption);
  fs::resize_file(path, 4000);  // not even a header
  ExpectRefused(path, Code::kCorruption);
}

TEST(PoolFile, BadChecksum) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  // One flipped bit anywhere in the immutable part is detected.
  for (size_t off : {40ul, 50ul, 104ul, 200ul, 1500ul, pm::kChecksumOffset}) {
    SCOPED_TRACE(off);
    EditHeader(path, [off](pm::PoolHeader& h) { reinterpret_cast<char*>(&h)[off] ^= 0x10; },
               false);
    ExpectRefused(path, Code::kCorruption);
    EXPECT_NE(Pool::Open(path).status().message().find("checksum"), std::string_view::npos);
    EditHeader(path, [off](pm::PoolHeader& h) { reinterpret_cast<char*>(&h)[off] ^= 0x10; },
               false);
    PMINDEX_ASSERT_OK(Pool::Inspect(path));
  }
}

TEST(PoolFile, NewerFormatVersion) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  EditHeader(path, [](pm::PoolHeader& h) { h.format_version = pm::kPoolFormatVersion + 1; }, true);
  ExpectRefused(path, Code::kNotSupported);
  // Even with a stale checksum the version is what is reported.
  EditHeader(path, [](pm::PoolHeader& h) { h.format_version = pm::kPoolFormatVersion + 2; }, false);
  ExpectRefused(path, Code::kNotSupported);
  // An older format (version 1: unprotected root slots, one page table) is
  // NotSupported too.
  EditHeader(path, [](pm::PoolHeader& h) { h.format_version = 1; }, true);
  ExpectRefused(path, Code::kNotSupported);
}

TEST(PoolFile, UnknownIncompatibleFeature) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  EditHeader(path, [](pm::PoolHeader& h) { h.incompat_flags |= 1ull << 5; }, true);
  ExpectRefused(path, Code::kNotSupported);
}

TEST(PoolFile, UnknownCompatibleFeatureIsIgnored) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  EditHeader(path, [](pm::PoolHeader& h) { h.compat_flags |= 1ull << 9; }, true);
  PMINDEX_EXPECT_OK(Pool::Open(path));
}

TEST(PoolFile, BadMutableWords) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  EditHeader(path, [](pm::PoolHeader& h) { h.segments = 0; }, false);
  ExpectRefused(path, Code::kCorruption);
  EditHeader(path, [](pm::PoolHeader& h) { h.segments = 1000; }, false);
  ExpectRefused(path, Code::kCorruption);
  EditHeader(path, [](pm::PoolHeader& h) { h.segments = 2; }, false);  // PATH.1 missing
  ExpectRefused(path, Code::kCorruption);
  EditHeader(path, [](pm::PoolHeader& h) {
    h.segments = 1;
    h.clean = 77;
  }, false);
  ExpectRefused(path, Code::kCorruption);
}

TEST(PoolFile, WrongKind) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path, SmallOptions("lbtree"));
  ExpectRefused(path, Code::kWrongKind, {.expected_kind = "nvtree"});
  auto s = Pool::Open(path, {.expected_kind = "nvtree"}).status();
  EXPECT_NE(s.message().find("lbtree"), std::string_view::npos) << s.ToString();
  PMINDEX_EXPECT_OK(Pool::Open(path, {.expected_kind = "lbtree"}));
}

TEST(PoolFile, OpenTwiceInSameProcessIsBusy) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  auto first = Pool::Open(path);
  PMINDEX_ASSERT_OK(first);
  ExpectRefused(path, Code::kBusy);
  EXPECT_NE(Pool::Open(path).status().message().find("already open in this process"),
            std::string_view::npos);
  PMINDEX_ASSERT_OK(first.value()->Close());
  PMINDEX_EXPECT_OK(Pool::Open(path));
}

TEST(PoolFile, OpenFromChildWhileOpenIsBusy) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  auto first = Pool::Open(path);
  PMINDEX_ASSERT_OK(first);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: the inherited descriptor shares the lock, a new open does not.
    auto r = Pool::Open(path);
    _exit(!r.ok() && r.status().code() == Code::kBusy &&
                  r.status().message().find("open in another process") != std::string_view::npos
              ? 0
              : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(PoolFile, CleanFlag) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  {
    auto r = Pool::Open(path);
    PMINDEX_ASSERT_OK(r);
    EXPECT_TRUE(r.value()->was_clean());
  }  // destructor closes cleanly
  EXPECT_TRUE(Pool::Inspect(path)->clean);
  // A process that dies without Close leaves the flag cleared.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto r = Pool::Open(path);
    if (!r.ok()) _exit(1);
    if (!r.value()->MarkInUse().ok()) _exit(2);
    r.value()->WriteRoot(0, 99);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(Pool::Inspect(path)->clean);
  auto r = Pool::Open(path);
  PMINDEX_ASSERT_OK(r);
  EXPECT_FALSE(r.value()->was_clean());
  EXPECT_EQ(r.value()->root(0), 99u);
  PMINDEX_ASSERT_OK(r.value()->Close());
  // Opened and closed without MarkInUse: a crashed pool stays unclean
  // (nobody recovered it) and the file is not touched.
  Snapshot before = Snapshot::Of(path);
  {
    auto q = Pool::Open(path);
    PMINDEX_ASSERT_OK(q);
    EXPECT_FALSE(q.value()->was_clean());
  }
  EXPECT_TRUE(Snapshot::Of(path) == before);
  EXPECT_FALSE(Pool::Inspect(path)->clean);
  // Marked in use and closed: clean again.
  {
    auto q = Pool::Open(path);
    PMINDEX_ASSERT_OK(q);
    PMINDEX_ASSERT_OK(q.value()->MarkInUse());
    PMINDEX_ASSERT_OK(q.value()->MarkInUse());  // idempotent
    PMINDEX_ASSERT_OK(q.value()->Close());
  }
  EXPECT_TRUE(Pool::Open(path).value()->was_clean());
}

// Open maps the pool and writes nothing: opening and closing a clean pool
// without using it leaves every byte and the mtime of every segment as
// they were.
TEST(PoolFile, OpenAndCloseWriteNothing) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  PoolOptions o = SmallOptions();
  o.segment_size = 4 * kMiB;
  {
    auto r = Pool::Create(path, o);
    PMINDEX_ASSERT_OK(r);
    PMINDEX_ASSERT_OK(r.value()->Grow(r.value()->pages_mapped() + 1));
    PMINDEX_ASSERT_OK(r.value()->Close());
  }
  ASSERT_TRUE(Pool::Inspect(path)->clean);
  Snapshot first = Snapshot::Of(path), second = Snapshot::Of(path + ".1");
  {
    auto r = Pool::Open(path);
    PMINDEX_ASSERT_OK(r);
    EXPECT_TRUE(r.value()->was_clean());
    EXPECT_EQ(r.value()->info().segments, 2u);
    PMINDEX_ASSERT_OK(r.value()->Close());
  }
  {
    auto r = Pool::Open(path);
    PMINDEX_ASSERT_OK(r);
  }  // the destructor closes
  EXPECT_TRUE(Snapshot::Of(path) == first) << "Open/Close changed " << path;
  EXPECT_TRUE(Snapshot::Of(path + ".1") == second) << "Open/Close changed " << path << ".1";
}

// A FIFO, a device, a socket or a directory (as the pool or as one of its
// segment files) is refused with Corruption before any open that could
// block (an O_RDONLY open of a FIFO waits for a writer) or touch a device.
// Run in a child with an alarm so that a regression fails instead of
// hanging the suite.
TEST(PoolFile, NonRegularFilesAreRefusedWithoutBlocking) {
  TempDir dir;
  std::string fifo = dir.path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string sock = dir.path("sock");
  int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sfd, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(bind(sfd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)), 0);
  std::string grown = dir.path("grown.pool");
  {
    auto r = Pool::Create(grown, SmallOptions());
    PMINDEX_ASSERT_OK(r);
    PMINDEX_ASSERT_OK(r.value()->Grow(r.value()->pages_mapped() + 1));
  }
  fs::remove(grown + ".1");
  ASSERT_EQ(mkfifo((grown + ".1").c_str(), 0600), 0);

  struct Case {
    std::string path, type;
  };
  std::vector<Case> cases = {{fifo, "a FIFO"},
                             {sock, "a socket"},
                             {dir.path(""), "a directory"},
                             {grown, "a FIFO"}};
  if (access("/dev/null", F_OK) == 0) cases.push_back({"/dev/null", "a character device"});
  std::vector<Snapshot> before;
  for (const Case& c : cases) before.push_back(Snapshot::Of(c.path));

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);
    int bad = 0;
    for (const Case& c : cases) {
      auto o = Pool::Open(c.path);
      auto i = Pool::Inspect(c.path);
      for (const Status& s : {o.status(), i.status()}) {
        if (s.code() != Code::kCorruption ||
            s.message().find(c.type) == std::string_view::npos ||
            s.message().find("not a") == std::string_view::npos) {
          std::fprintf(stderr, "%s: %s\n", c.path.c_str(), s.ToString().c_str());
          ++bad;
        }
      }
    }
    _exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  close(sfd);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed (signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << "): an open blocked";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(Snapshot::Of(cases[i].path) == before[i]) << cases[i].path;
  }
}

// The 4 KiB blocks a file has on disk.
uint64_t AllocatedBytes(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

// Punches a hole over [off, off+len) of a file (its content reads as zeros
// there either way for a fresh pool's heap).
bool PunchHole(const std::string& path, uint64_t off, uint64_t len) {
  int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return false;
  int rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                     static_cast<off_t>(len));
  close(fd);
  return rc == 0;
}

// A sparse pool file (as cp --sparse or rsync -S leave it) gets its holes
// allocated by Open, content unchanged, so that a full disk is reported at
// open instead of a SIGBUS at the first store into a hole.
TEST(PoolFile, SparseSegmentsAreAllocatedAtOpen) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  PoolOptions o = SmallOptions();
  uint64_t heap = 0;
  {
    auto r = Pool::Create(path, o);
    PMINDEX_ASSERT_OK(r);
    heap = r.value()->heap_begin();
    PMINDEX_ASSERT_OK(r.value()->Grow(r.value()->pages_mapped() + 1));
  }
  if (!PunchHole(path, heap, 4 * kMiB - heap) || !PunchHole(path + ".1", 0, 4 * kMiB)) {
    GTEST_SKIP() << "the file system cannot punch holes";
  }
  ASSERT_LT(AllocatedBytes(path), 4 * kMiB);
  ASSERT_LT(AllocatedBytes(path + ".1"), 4 * kMiB);
  Snapshot first = Snapshot::Of(path), second = Snapshot::Of(path + ".1");
  {
    auto r = Pool::Open(path);
    PMINDEX_ASSERT_OK(r);
    EXPECT_GE(AllocatedBytes(path), 4 * kMiB);
    EXPECT_GE(AllocatedBytes(path + ".1"), 4 * kMiB);
  }
  EXPECT_EQ(Snapshot::Of(path).bytes, first.bytes);
  EXPECT_EQ(Snapshot::Of(path + ".1").bytes, second.bytes);
}

// The same on a (private, 8 MiB) tmpfs that is full: Open refuses the pool
// with OutOfSpace and leaves its content unchanged. Needs a mount
// namespace (root or CAP_SYS_ADMIN); skipped otherwise.
TEST(PoolFile, SparsePoolOnFullDiskIsOutOfSpaceAtOpen) {
  TempDir dir;
  std::string mnt = dir.path("mnt");
  ASSERT_TRUE(fs::create_directory(mnt));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);
    if (unshare(CLONE_NEWNS) != 0) _exit(77);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(77);
    if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=8m") != 0) _exit(77);
    std::string path = mnt + "/p.pool";
    uint64_t heap = 0;
    {
      auto r = Pool::Create(path, SmallOptions());
      if (!r.ok()) _exit(10);
      heap = r.value()->heap_begin();
    }
    if (!PunchHole(path, heap, 4 * kMiB - heap)) _exit(77);
    // Fill the file system.
    int fd = open((mnt + "/filler").c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) _exit(11);
    for (off_t chunk = 1 << 20; chunk >= 4096; chunk /= 2) {
      off_t at = lseek(fd, 0, SEEK_END);
      while (posix_fallocate(fd, at, chunk) == 0) at += chunk;
      if (ftruncate(fd, at) != 0) _exit(12);
    }
    close(fd);
    Snapshot before = Snapshot::Of(path);
    auto r = Pool::Open(path);
    if (r.ok()) _exit(13);  // would SIGBUS at the first store into the hole
    if (r.status().code() != Code::kOutOfSpace) _exit(14);
    if (r.status().message().find("sparse") == std::string_view::npos) _exit(15);
    if (Snapshot::Of(path).bytes != before.bytes) _exit(16);
    // With room again, the same pool opens and is usable.
    fs::remove(mnt + "/filler");
    auto q = Pool::Open(path);
    if (!q.ok()) _exit(17);
    if (!q.value()->MarkInUse().ok()) _exit(18);
    std::memset(q.value()->base() + heap, 7, 4 * kMiB - heap);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no private tmpfs mount (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(PoolFile, GrowsBySegmentFilesAndReopens) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  PoolOptions o = SmallOptions();
  o.segment_size = 5 * kMiB;  // 4 + 5 + 5 + 2 (cut at 16)
  size_t max_pages = 0;
  {
    auto r = Pool::Create(path, o);
    PMINDEX_ASSERT_OK(r);
    Pool& p = *r.value();
    max_pages = (16 * kMiB - p.heap_begin()) / PoolOptions::kPageSize;
    PMINDEX_ASSERT_OK(p.Grow(p.pages_mapped() + 1));
    EXPECT_EQ(p.size(), 9 * kMiB);
    EXPECT_TRUE(fs::exists(path + ".1"));
    EXPECT_EQ(fs::file_size(path + ".1"), 5 * kMiB);
    PMINDEX_ASSERT_OK(p.Grow(max_pages));
    EXPECT_EQ(p.size(), 16 * kMiB);
    EXPECT_EQ(fs::file_size(path + ".3"), 2 * kMiB);
    EXPECT_EQ(p.Grow(max_pages + 1).code(), Code::kOutOfSpace);
    EXPECT_FALSE(fs::exists(path + ".4"));
    // Mark each segment.
    for (uint64_t off : {4 * kMiB - 8, 9 * kMiB - 8, 14 * kMiB - 8, 16 * kMiB - 8}) {
      std::memcpy(p.base() + off, &off, 8);
    }
    PMINDEX_ASSERT_OK(p.Close());
  }
  auto info = Pool::Inspect(path);
  PMINDEX_ASSERT_OK(info);
  EXPECT_EQ(info->segments, 4u);
  EXPECT_EQ(info->size, 16 * kMiB);
  {
    auto r = Pool::Open(path);
    PMINDEX_ASSERT_OK(r);
    Pool& p = *r.value();
    EXPECT_EQ(p.size(), 16 * kMiB);
    EXPECT_EQ(p.pages_mapped(), max_pages);
    for (uint64_t off : {4 * kMiB - 8, 9 * kMiB - 8, 14 * kMiB - 8, 16 * kMiB - 8}) {
      uint64_t v = 0;
      std::memcpy(&v, p.base() + off, 8);
      EXPECT_EQ(v, off);
    }
  }
  // A missing or resized segment file is refused, the others unchanged.
  fs::rename(path + ".2", path + ".2.away");
  ExpectRefused(path, Code::kCorruption);
  EXPECT_NE(Pool::Open(path).status().message().find("missing segment"), std::string_view::npos);
  fs::rename(path + ".2.away", path + ".2");
  Snapshot seg = Snapshot::Of(path + ".1");
  fs::resize_file(path + ".3", kMiB);
  ExpectRefused(path, Code::kCorruption);
  EXPECT_TRUE(Snapshot::Of(path + ".1") == seg);
  fs::resize_file(path + ".3", 2 * kMiB);
  PMINDEX_EXPECT_OK(Pool::Open(path));
}

TEST(PoolFile, LeftoverSegmentFileIsReused) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  WriteFile(path + ".1", "junk from a grow that crashed before its count was persisted");
  auto r = Pool::Open(path);
  PMINDEX_ASSERT_OK(r);
  PMINDEX_ASSERT_OK(r.value()->Grow(r.value()->pages_mapped() + 1));
  EXPECT_EQ(fs::file_size(path + ".1"), 4 * kMiB);
  EXPECT_EQ(r.value()->base()[4 * kMiB], 0);
}

TEST(PoolFile, DiskFullDuringGrowIsOutOfSpaceAndPoolStaysUsable) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  MakePool(path);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: files may not grow past 1 MiB, so the 4 MiB segment fails.
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(10);
    auto r = Pool::Open(path);
    if (!r.ok()) _exit(11);
    Pool& p = *r.value();
    size_t pages = p.pages_mapped();
    Status s = p.Grow(pages + 1);
    if (s.code() != Code::kOutOfSpace) _exit(12);
    if (p.pages_mapped() != pages || p.size() != 4 * kMiB) _exit(13);
    if (fs::exists(path + ".1")) _exit(14);
    p.WriteRoot(1, 5);
    std::memset(p.base() + p.heap_begin(), 3, PoolOptions::kPageSize);
    if (!p.Grow(pages).ok()) _exit(15);
    if (!p.Close().ok()) _exit(16);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto r = Pool::Open(path);
  PMINDEX_ASSERT_OK(r);
  EXPECT_TRUE(r.value()->was_clean());
  EXPECT_EQ(r.value()->root(1), 5u);
  EXPECT_EQ(r.value()->base()[r.value()->heap_begin() + 100], 3);
  EXPECT_EQ(r.value()->info().segments, 1u);
}

TEST(PoolFile, DiskFullDuringCreateIsOutOfSpaceAndLeavesNoFile) {
  TempDir dir;
  std::string path = dir.path("p.pool");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(10);
    auto r = Pool::Create(path, SmallOptions());
    if (r.ok() || r.status().code() != Code::kOutOfSpace) _exit(11);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(fs::is_empty(fs::path(path).parent_path()));  // no pool, no temporary file
}

TEST(PoolFile, Durability) {
  TempDir dir;
  auto r = Pool::Create(dir.path("p"), SmallOptions());
  PMINDEX_ASSERT_OK(r);
  Durability d = r.value()->durability();
  EXPECT_TRUE(d == Durability::kPowerFailure || d == Durability::kProcessCrash);
  // /dev/shm is tmpfs: never DAX.
  if (fs::is_directory("/dev/shm")) {
    std::string shm = "/dev/shm/pmindex-pool-test-" + std::to_string(getpid());
    auto s = Pool::Create(shm, SmallOptions());
    PMINDEX_ASSERT_OK(s);
    EXPECT_EQ(s.value()->durability(), Durability::kProcessCrash);
    PMINDEX_EXPECT_OK(s.value()->Close());
    fs::remove(shm);
  }
}

TEST(Pool, DurabilityNames) {
  EXPECT_STREQ(DurabilityName(Durability::kPowerFailure), "power-failure (MAP_SYNC)");
  EXPECT_STREQ(DurabilityName(Durability::kProcessCrash),
               "process-crash (msync for power failure)");
  EXPECT_STREQ(DurabilityName(Durability::kVolatile), "volatile");
}

}  // namespace
}  // namespace pmindex
