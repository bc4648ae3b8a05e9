// File-system faults (ctest label `faults`): every system call a pool makes
// on create, open, inspect, grow, sync, MarkInUse and close is failed in
// turn through the file-system seam (src/pm/file_system.h), directly on
// Pool and through Db (lbtree) and KvStore. Each sweep runs the operation
// once with a counting seam, then once per call with that call failed, and
// checks the documented Status (docs/pool-format.md "Errors of the file
// system"), that no descriptor leaks, and that with the faults gone the
// pool opens with everything that was acknowledged before the fault (and a
// failed create leaves no file behind).
#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pm/fault_file_system.h"
#include "pm/file_system.h"
#include "pm/pool.h"
#include "pmindex/db.h"
#include "pmindex/kv.h"
#include "support/status.h"
#include "support/temp_files.h"

namespace pmindex {
namespace {

namespace fs = std::filesystem;
using testing::FaultFileSystem;
using testing::FsOp;
using testing::ScopedDefaultFileSystem;
using testing::Snapshot;
using testing::TempDir;
using Code = Status::Code;

constexpr uint64_t kMiB = 1ull << 20;

// The sweeps create hundreds of pools, each with fsyncs of its file and
// directory: in memory (/dev/shm, tmpfs) when there is one, where a sync
// costs nothing, so the sweeps take a second instead of a minute of disk
// waits. The calls and their failures are the same on any file system.
// Each sweep keeps at most a few pools at a time (RemovePool), under 64
// MiB; /dev/shm is used only with room to spare (a container's may be
// small).
class SweepDir : public TempDir {
 public:
  SweepDir() : TempDir("pmindex-faults", ShmOrDefault()) {}

 private:
  static std::string ShmOrDefault() {
    struct statvfs sv;
    if (access("/dev/shm", W_OK | X_OK) != 0 || statvfs("/dev/shm", &sv) != 0) return "";
    return static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize >= (256ull << 20) ? "/dev/shm" : "";
  }
};

// Removes a pool file and its segment files.
void RemovePool(const std::string& path) {
  fs::remove(path);
  for (int i = 1; fs::remove(path + "." + std::to_string(i)); ++i) {
  }
}

PoolOptions SmallOptions(pm::FileSystem* fsys) {
  PoolOptions o;
  o.size = 4 * kMiB;
  o.max_size = 16 * kMiB;
  o.segment_size = kMiB;
  o.kind = "test";
  o.file_system = fsys;
  return o;
}

// The error injected into a call of kind `op`: ENOSPC where a full disk
// can show (space is allocated, written or flushed), EIO elsewhere.
int ErrorFor(FsOp op) {
  switch (op) {
    case FsOp::kAllocate:
    case FsOp::kPwrite:
    case FsOp::kFsync:
    case FsOp::kMsync:
      return ENOSPC;
    default:
      return EIO;
  }
}

// The calls whose failure a pool tolerates by design: close (its data was
// synced before), lstat in Create (a fast path; the rename's
// RENAME_NOREPLACE is the real check) and unlink (on cleanup paths only).
bool Tolerated(FsOp op) { return op == FsOp::kClose || op == FsOp::kLstat || op == FsOp::kUnlink; }

std::string Describe(const FaultFileSystem& f, size_t i, int err) {
  std::string d = "call " + std::to_string(i) + " of " + std::to_string(f.calls().size());
  if (i >= 1 && i <= f.calls().size()) {
    const auto& c = f.calls()[i - 1];
    d += std::string(" (") + testing::FsOpName(c.op) + " " + c.what + ")";
  }
  return d + " failed with " + std::strerror(err);
}

// The part of an error message before its path or numbers: names the
// site that reported it.
std::string Site(std::string_view msg) {
  size_t end = msg.find_first_of("/:0123456789");
  return std::string(msg.substr(0, end == std::string_view::npos ? msg.size() : end));
}

// Asserts that `s`, from an operation whose call i failed with err, is
// what docs/pool-format.md documents: OutOfSpace for ENOSPC, IOError for
// any other error (an address-space reservation is IOError either way),
// the error's text in the message; OK only for a tolerated call. Adds the
// reporting site to *sites.
void ExpectDocumented(const Status& s, const FaultFileSystem& f, size_t i, int err,
                      std::set<std::string>* sites) {
  const std::string where = Describe(f, i, err);
  ASSERT_GE(f.calls().size(), i) << where;
  const FsOp op = f.calls()[i - 1].op;
  if (s.ok()) {
    EXPECT_TRUE(Tolerated(op)) << where << ": reported nothing";
    return;
  }
  EXPECT_FALSE(Tolerated(op)) << where << ": " << s.ToString();
  const bool reserve = s.message().starts_with("cannot reserve");
  const Code want = err == ENOSPC && !reserve ? Code::kOutOfSpace : Code::kIOError;
  EXPECT_EQ(s.code(), want) << where << ": " << s.ToString();
  EXPECT_NE(s.message().find(std::strerror(err)), std::string_view::npos)
      << where << ": " << s.ToString();
  sites->insert(Site(s.message()));
}

// A file's bytes, read in one piece (Snapshot reads a byte at a time,
// too slow for a sweep that compares megabytes per call).
std::string Contents(const std::string& path) {
  std::string bytes;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  struct stat st;
  if (fstat(fd, &st) == 0) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      ssize_t r = pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    bytes.resize(got);
  }
  close(fd);
  return bytes;
}

OpenOptions WithFs(pm::FileSystem* fsys) {
  OpenOptions o;
  o.file_system = fsys;
  return o;
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " ";
  return s;
}

void ExpectSites(const std::set<std::string>& seen, const std::set<std::string>& want) {
  for (const auto& w : want) EXPECT_TRUE(seen.contains(w)) << "site never reached: '" << w << "'";
  std::string all;
  for (const auto& s : seen) all += "'" + s + "' ";
  EXPECT_EQ(seen.size(), want.size()) << "sites reached: " << all;
}

// Writes recognizable bytes into a pool: a root slot, the first heap byte
// of every segment.
void Mark(Pool& p, uint64_t v) {
  PMINDEX_ASSERT_OK(p.MarkInUse());
  p.WriteRoot(2, v);
  for (uint64_t off = p.heap_begin(); off < p.size(); off += kMiB) {
    std::memcpy(p.base() + off, &v, sizeof v);
  }
}

void ExpectMarked(const Pool& p, uint64_t v) {
  EXPECT_EQ(p.root(2), v);
  for (uint64_t off = p.heap_begin(); off < p.size(); off += kMiB) {
    uint64_t got = 0;
    std::memcpy(&got, p.base() + off, sizeof got);
    EXPECT_EQ(got, v) << "at offset " << off;
  }
}

// ------------------------------------------------------------ Pool level

TEST(PoolFaults, CreateFailsCleanlyAtEveryCall) {
  FaultFileSystem f;
  std::vector<FaultFileSystem::Call> trace;
  {
    SweepDir dir;
    auto r = Pool::Create(dir.path("p.pool"), SmallOptions(&f));
    PMINDEX_ASSERT_OK(r);
    trace = f.calls();  // a run repeats these calls in this order up to its failure
  }
  ASSERT_GT(trace.size(), 10u);
  std::set<std::string> sites;
  for (size_t i = 1; i <= trace.size(); ++i) {
    SweepDir dir;
    const std::string path = dir.path("p.pool");
    const int err = ErrorFor(trace[i - 1].op);
    f.Reset();
    f.FailNth(i, err);
    {
      auto r = Pool::Create(path, SmallOptions(&f));
      ExpectDocumented(r.status(), f, i, err, &sites);
      f.Clear();
      if (r.ok()) {
        PMINDEX_EXPECT_OK(r.value()->Close());
      } else {
        // Nothing left behind: no pool, no temporary file.
        EXPECT_TRUE(fs::is_empty(dir.path(""))) << Describe(f, i, err) << ": left "
                                                << Joined(DirEntries(dir.path("")));
      }
    }
    EXPECT_EQ(f.open_fds(), 0u) << Describe(f, i, err);
    // With the faults gone, the path takes a new pool (nothing half made
    // is in the way), or holds the one made.
    if (!fs::exists(path)) {
      auto again = Pool::Create(path, SmallOptions(&f));
      PMINDEX_EXPECT_OK(again);
    } else {
      auto again = Pool::Open(path);
      PMINDEX_ASSERT_OK(again);
      EXPECT_TRUE(again.value()->was_clean());
    }
  }
  ExpectSites(sites, {"cannot create ", "no space for ", "cannot write the header of ",
                      "cannot fsync ", "cannot rename ", "cannot open directory ",
                      "cannot fsync directory ", "cannot stat ", "cannot open ",
                      "cannot stat the opened ", "cannot set flags of ", "cannot lock ",
                      "cannot stat (to read the header of) ", "cannot read the header of ",
                      "cannot stat (to read the mode of) ", "cannot reserve ",
                      "cannot stat (to check the size of) ",
                      "cannot stat (to count the allocated blocks of) ", "cannot map "});
}

TEST(PoolFaults, CreateWithoutRenameNoReplaceLinksAndNeverReplaces) {
  SweepDir dir;
  FaultFileSystem f;
  const std::string path = dir.path("p.pool");
  f.FailEvery(FsOp::kRename, EINVAL);  // a file system without RENAME_NOREPLACE
  {
    auto r = Pool::Create(path, SmallOptions(&f));
    PMINDEX_ASSERT_OK(r);
    Mark(*r.value(), 5);
  }
  EXPECT_EQ(DirEntries(dir.path("")), std::vector<std::string>{"p.pool"});
  // An existing pool that lstat misses is still never replaced: link()
  // refuses, and the temporary file goes.
  const Snapshot before = Snapshot::Of(path);
  f.FailEvery(FsOp::kLstat, EIO);
  auto r = Pool::Create(path, SmallOptions(&f));
  EXPECT_EQ(r.status().code(), Code::kAlreadyExists) << r.status().ToString();
  EXPECT_TRUE(Snapshot::Of(path) == before);
  EXPECT_EQ(DirEntries(dir.path("")), std::vector<std::string>{"p.pool"});
  // A failing link is an IOError, and leaves nothing.
  f.Clear();
  f.FailEvery(FsOp::kRename, EINVAL);
  f.FailEvery(FsOp::kLink, EIO);
  auto q = Pool::Create(dir.path("q.pool"), SmallOptions(&f));
  EXPECT_EQ(q.status().code(), Code::kIOError) << q.status().ToString();
  EXPECT_EQ(DirEntries(dir.path("")), std::vector<std::string>{"p.pool"});
  EXPECT_EQ(f.open_fds(), 0u);
}

TEST(PoolFaults, ShortTransfersAreContinuedAndNoProgressIsAnError) {
  SweepDir dir;
  FaultFileSystem f;
  f.ShortTransfers(100);
  const std::string path = dir.path("p.pool");
  {
    auto r = Pool::Create(path, SmallOptions(&f));
    PMINDEX_ASSERT_OK(r);
    Mark(*r.value(), 9);
  }
  size_t writes = 0, reads = 0;
  for (const auto& c : f.calls()) {
    writes += c.op == FsOp::kPwrite;
    reads += c.op == FsOp::kPread;
  }
  EXPECT_EQ(writes, 41u);  // 4096 bytes, 100 at a time
  EXPECT_EQ(reads, 41u);
  {
    auto r = Pool::Open(path, WithFs(&f));
    PMINDEX_ASSERT_OK(r);
    ExpectMarked(*r.value(), 9);
  }
  auto info = Pool::Inspect(path, &f);
  PMINDEX_ASSERT_OK(info);
  // A write that moves nothing would loop for ever: IOError, no file left.
  f.ShortTransfers(0);
  auto r = Pool::Create(dir.path("q.pool"), SmallOptions(&f));
  EXPECT_EQ(r.status().code(), Code::kIOError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no bytes written"), std::string_view::npos);
  EXPECT_EQ(DirEntries(dir.path("")), std::vector<std::string>{"p.pool"});
  // A read that ends early (the file was cut while being read): the header
  // is incomplete, Corruption, nothing changed.
  const Snapshot before = Snapshot::Of(path);
  auto o = Pool::Open(path, WithFs(&f));
  EXPECT_EQ(o.status().code(), Code::kCorruption) << o.status().ToString();
  EXPECT_TRUE(Snapshot::Of(path) == before);
  EXPECT_EQ(f.open_fds(), 0u);
}

// A pool of two segments, the second one sparse (a hole where Open must
// reserve blocks), marked with `v` and closed.
bool PunchHole(const std::string& path) {
  int fd = open((path + ".1").c_str(), O_RDWR);
  if (fd < 0) return false;
  const bool punched =
      fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 512 * 1024, 256 * 1024) == 0;
  close(fd);
  return punched;
}

bool MakeTwoSegmentPool(const std::string& path, uint64_t v) {
  {
    auto r = Pool::Create(path, SmallOptions(nullptr));
    if (!r.ok()) return false;
    Pool& p = *r.value();
    if (!p.Grow(p.pages_mapped() + 1).ok()) return false;
    Mark(p, v);
    if (!p.Close().ok()) return false;
  }
  return PunchHole(path);
}

TEST(PoolFaults, OpenAndInspectFailCleanlyAtEveryCall) {
  SweepDir dir;
  if (!MakeTwoSegmentPool(dir.path("probe.pool"), 1)) {
    GTEST_SKIP() << "the file system cannot punch holes";
  }
  FaultFileSystem f;
  std::set<std::string> sites;
  const std::string pool = dir.path("p.pool");
  ASSERT_TRUE(MakeTwoSegmentPool(pool, 77));
  for (bool inspect : {false, true}) {
    // An open that gets that far fills the hole: punch it again (the hole
    // reads as zeros, as the bytes it replaces).
    auto fresh = [&] {
      EXPECT_TRUE(PunchHole(pool));
      return pool;
    };
    // The opened pool is kept until its calls are checked: its close
    // (msync) is not part of the open.
    Result<std::unique_ptr<Pool>> held = Status::NotFound("");
    auto run = [&](const std::string& path) -> Status {
      if (inspect) return Pool::Inspect(path, &f).status();
      held = Pool::Open(path, WithFs(&f));
      return held.status();
    };
    f.Clear();
    f.Reset();
    PMINDEX_ASSERT_OK(run(fresh()));
    const std::vector<FaultFileSystem::Call> trace = f.calls();
    held = Status::NotFound("");
    ASSERT_GT(trace.size(), 8u);
    for (size_t i = 1; i <= trace.size(); ++i) {
      const std::string path = fresh();
      const std::string p0 = Contents(path), p1 = Contents(path + ".1");
      const int err = ErrorFor(trace[i - 1].op);
      f.Reset();
      f.FailNth(i, err);
      Status s = run(path);
      if (inspect && trace[i - 1].op == FsOp::kMap) {
        PMINDEX_EXPECT_OK(s);  // the MAP_SYNC probe: "not DAX"
      } else {
        ExpectDocumented(s, f, i, err, &sites);
      }
      f.Clear();
      held = Status::NotFound("");
      EXPECT_EQ(f.open_fds(), 0u) << Describe(f, i, err);
      // Nothing written: the same bytes (a filled hole reads the same).
      EXPECT_TRUE(Contents(path) == p0) << Describe(f, i, err);
      EXPECT_TRUE(Contents(path + ".1") == p1) << Describe(f, i, err);
      auto r = Pool::Open(path, WithFs(&f));
      PMINDEX_ASSERT_OK(r);
      EXPECT_TRUE(r.value()->was_clean());
      ExpectMarked(*r.value(), 77);
    }
  }
  // Another process's lock is Busy, not IOError.
  const std::string path = dir.path("probe.pool");
  f.Clear();
  f.FailEvery(FsOp::kLock, EWOULDBLOCK);
  EXPECT_EQ(Pool::Open(path, WithFs(&f)).status().code(), Code::kBusy);
  f.Clear();
  EXPECT_EQ(f.open_fds(), 0u);
  ExpectSites(sites, {"cannot stat ", "cannot open ", "cannot stat the opened ",
                      "cannot set flags of ", "cannot lock ",
                      "cannot stat (to read the header of) ", "cannot read the header of ",
                      "cannot stat segment file ", "cannot stat (to read the mode of) ",
                      "cannot reserve ", "cannot stat (to check the size of) ",
                      "cannot stat (to count the allocated blocks of) ", "no space for ",
                      "cannot map "});
}

TEST(PoolFaults, GrowFailsCleanlyAtEveryCallAndThePoolStaysUsable) {
  SweepDir dir;
  FaultFileSystem f;
  std::vector<FaultFileSystem::Call> trace;
  {
    auto r = Pool::Create(dir.path("count.pool"), SmallOptions(&f));
    PMINDEX_ASSERT_OK(r);
    PMINDEX_ASSERT_OK(r.value()->MarkInUse());
    f.Reset();
    PMINDEX_ASSERT_OK(r.value()->Grow(r.value()->pages_mapped() + 1));
    trace = f.calls();
  }
  ASSERT_GT(trace.size(), 5u);
  std::set<std::string> sites;
  for (size_t i = 1; i <= trace.size(); ++i) {
    const std::string path = dir.path("g" + std::to_string(i) + ".pool");
    f.Clear();
    auto r = Pool::Create(path, SmallOptions(&f));
    PMINDEX_ASSERT_OK(r);
    Pool& p = *r.value();
    Mark(p, 3);
    const size_t pages = p.pages_mapped();
    const int err = ErrorFor(trace[i - 1].op);
    f.Reset();
    f.FailNth(i, err);
    Status s = p.Grow(pages + 1);
    ExpectDocumented(s, f, i, err, &sites);
    EXPECT_EQ(f.open_fds(), 1u) << Describe(f, i, err);  // the pool's own
    if (!s.ok()) {
      // Nothing changed: the same size, no segment file, still writable.
      EXPECT_EQ(p.pages_mapped(), pages);
      EXPECT_EQ(p.info().segments, 1u);
      EXPECT_FALSE(fs::exists(path + ".1")) << Describe(f, i, err);
    }
    f.Clear();
    Mark(p, 4);
    PMINDEX_ASSERT_OK(p.Grow(pages + 1));
    Mark(p, 5);
    PMINDEX_ASSERT_OK(p.Close());
    auto q = Pool::Open(path);
    PMINDEX_ASSERT_OK(q);
    EXPECT_TRUE(q.value()->was_clean());
    EXPECT_EQ(q.value()->info().segments, 2u);
    ExpectMarked(*q.value(), 5);
    q = Status::NotFound("");
    RemovePool(path);
  }
  ExpectSites(sites, {"cannot create segment file ", "no space for ",
                      "cannot fsync segment file ", "cannot open directory ",
                      "cannot fsync directory ", "cannot map "});
}

// A grow whose failed MAP_FIXED cannot even be mapped back refuses to
// grow again (a later MAP_FIXED could replace someone else's mapping in
// the hole) until the pool is reopened; in memory the same.
TEST(PoolFaults, GrowThatCannotRestoreItsReservationGrowsNoMore) {
  SweepDir dir;
  FaultFileSystem f;
  const std::string path = dir.path("p.pool");
  {
    auto r = Pool::Create(path, SmallOptions(&f));
    PMINDEX_ASSERT_OK(r);
    Pool& p = *r.value();
    Mark(p, 6);
    const size_t pages = p.pages_mapped();
    f.FailEvery(FsOp::kMap, ENOMEM);
    Status s = p.Grow(pages + 1);
    EXPECT_EQ(s.code(), Code::kIOError) << s.ToString();
    f.Clear();
    s = p.Grow(pages + 1);
    EXPECT_EQ(s.code(), Code::kIOError) << s.ToString();
    EXPECT_NE(s.message().find("close and reopen"), std::string_view::npos) << s.ToString();
    EXPECT_EQ(p.pages_mapped(), pages);
    PMINDEX_ASSERT_OK(p.Close());
  }
  auto r = Pool::Open(path, WithFs(&f));
  PMINDEX_ASSERT_OK(r);
  ExpectMarked(*r.value(), 6);
  PMINDEX_ASSERT_OK(r.value()->Grow(r.value()->pages_mapped() + 1));

  auto m = Pool::CreateInMemory(SmallOptions(&f));
  PMINDEX_ASSERT_OK(m);
  const size_t pages = m.value()->pages_mapped();
  f.FailNth(f.calls().size() + 1, ENOMEM);  // the next call: the segment's mmap
  Status s = m.value()->Grow(pages + 1);
  EXPECT_EQ(s.code(), Code::kOutOfSpace) << s.ToString();
  EXPECT_EQ(m.value()->pages_mapped(), pages);
  f.Clear();
  PMINDEX_EXPECT_OK(m.value()->Grow(pages + 1));
}

TEST(PoolFaults, SyncAndCloseFailWithoutLosingData) {
  SweepDir dir;
  FaultFileSystem f;
  auto fresh = [&](const std::string& path) {
    auto r = Pool::Create(path, SmallOptions(&f));
    PMINDEX_EXPECT_OK(r);
    Pool& p = *r.value();
    PMINDEX_EXPECT_OK(p.Grow(p.pages_mapped() + 1));
    Mark(p, 8);
    return std::move(r).value();
  };
  std::set<std::string> sites;
  // Sync: one msync per segment; each failure is reported, the pool stays.
  {
    auto p = fresh(dir.path("s.pool"));
    f.Reset();
    PMINDEX_ASSERT_OK(p->Sync());
    const size_t n = f.calls().size();
    ASSERT_EQ(n, 2u);
    for (size_t i = 1; i <= n; ++i) {
      f.Reset();
      f.FailNth(i, EIO);
      Status s = p->Sync();
      ExpectDocumented(s, f, i, EIO, &sites);
      EXPECT_NE(s.message().find(i == 1 ? "s.pool:" : "s.pool.1:"), std::string_view::npos)
          << s.ToString();
    }
    f.Clear();
    Mark(*p, 9);
    PMINDEX_EXPECT_OK(p->Sync());
  }
  // Close: sync, set the clean flag, sync again, close the descriptor.
  size_t n = 0;
  {
    auto p = fresh(dir.path("c.pool"));
    f.Reset();
    PMINDEX_ASSERT_OK(p->Close());
    n = f.calls().size();
    ASSERT_EQ(n, 5u);  // msync x2, msync x2, close
  }
  for (size_t i = 1; i <= n; ++i) {
    const std::string path = dir.path("c" + std::to_string(i) + ".pool");
    auto p = fresh(path);
    f.Reset();
    f.FailNth(i, EIO);
    Status s = p->Close();
    ExpectDocumented(s, f, i, EIO, &sites);
    f.Clear();
    EXPECT_EQ(f.open_fds(), 0u);
    p.reset();
    auto q = Pool::Open(path);
    PMINDEX_ASSERT_OK(q);
    ExpectMarked(*q.value(), 8);
    // The clean flag is set only after the data's sync succeeded.
    if (i <= 2) {
      EXPECT_FALSE(q.value()->was_clean()) << Describe(f, i, EIO);
    }
    q = Status::NotFound("");
    RemovePool(path);
  }
  // The sync after the flag (the third msync of a two-segment close): the
  // data was synced, Close reports the error, and the flag set in the
  // mapping reaches the file all the same on this (non-DAX) file system.
  {
    const std::string path = dir.path("late.pool");
    auto p = fresh(path);
    f.Reset();
    f.FailNthOf(FsOp::kMsync, 3, EIO);
    Status s = p->Close();
    EXPECT_EQ(s.code(), Code::kIOError) << s.ToString();
    EXPECT_EQ(f.injected(), 1u);
    f.Clear();
    p.reset();
    auto q = Pool::Open(path);
    PMINDEX_ASSERT_OK(q);
    ExpectMarked(*q.value(), 8);
    EXPECT_TRUE(q.value()->was_clean());
  }
  ExpectSites(sites, {"cannot msync "});
}

TEST(PoolFaults, FailedMarkInUseLeavesThePoolCleanAndIsRetried) {
  SweepDir dir;
  FaultFileSystem f;
  const std::string path = dir.path("p.pool");
  {
    auto r = Pool::Create(path, SmallOptions(&f));
    PMINDEX_ASSERT_OK(r);
  }
  const Snapshot before = Snapshot::Of(path);
  {
    auto r = Pool::Open(path, WithFs(&f));
    PMINDEX_ASSERT_OK(r);
    Pool& p = *r.value();
    f.Reset();
    f.FailEvery(FsOp::kMsync, EIO);
    Status s = p.MarkInUse();
    EXPECT_EQ(s.code(), Code::kIOError) << s.ToString();
    EXPECT_NE(s.message().find("clean flag"), std::string_view::npos) << s.ToString();
    EXPECT_TRUE(p.info().clean);  // set back: nothing was written
    // A grow needs MarkInUse first: refused, nothing grown.
    const size_t pages = p.pages_mapped();
    EXPECT_EQ(p.Grow(pages + 1).code(), Code::kIOError);
    EXPECT_EQ(p.pages_mapped(), pages);
    f.Clear();
  }
  EXPECT_EQ(Snapshot::Of(path).bytes, before.bytes);
  auto r = Pool::Open(path, WithFs(&f));
  PMINDEX_ASSERT_OK(r);
  EXPECT_TRUE(r.value()->was_clean());
  // The retry syncs the header again.
  f.FailEvery(FsOp::kMsync, EIO);
  EXPECT_FALSE(r.value()->MarkInUse().ok());
  f.Clear();
  f.Reset();
  PMINDEX_ASSERT_OK(r.value()->MarkInUse());
  ASSERT_EQ(f.calls().size(), 1u);
  EXPECT_EQ(f.calls()[0].op, FsOp::kMsync);
  EXPECT_FALSE(r.value()->info().clean);
}

// --------------------------------------------------------------- Db level

DbOptions SmallDb() {
  DbOptions o;
  o.size = 4 * kMiB;
  o.max_size = 64 * kMiB;
  o.segment_size = 256 * 1024;
  return o;
}

// Every key of [0, n) maps to key * 3 + 1 in the Db at path (opened with
// faults off).
void ExpectKeys(const std::string& path, uint64_t n, const std::string& where) {
  auto db = Db::Open(path, "lbtree");
  PMINDEX_ASSERT_OK(db) << where;
  EXPECT_EQ(db.value()->Count(), n) << where;
  for (uint64_t k = 0; k < n; ++k) {
    auto v = db.value()->Get(k);
    PMINDEX_ASSERT_OK(v) << where << ": key " << k;
    ASSERT_EQ(v.value(), k * 3 + 1) << where;
  }
  PMINDEX_EXPECT_OK(db.value()->Verify()) << where;
  PMINDEX_EXPECT_OK(db.value()->Close()) << where;
}

// Create, 500 inserts, Sync, Close, Open, 500 more, Close, with call i
// failed: stops at the first failure, then checks (faults off) that what
// was acknowledged is in the pool, or that a failed create left nothing.
TEST(DbFaults, EveryCallOfCreateSyncCloseAndOpenLosesNothing) {
  FaultFileSystem f;
  ScopedDefaultFileSystem scoped(&f);
  std::set<std::string> sites;
  // Returns the keys acknowledged; *created whether Db::Create succeeded.
  auto workload = [&](const std::string& path, size_t fail, int err, bool* created) {
    f.Reset();
    if (fail != 0) f.FailNth(fail, err);
    uint64_t acked = 0;
    *created = false;
    size_t seen = 0;  // faults injected before this step
    auto check = [&](const Status& s) {
      const bool hit = f.injected() > seen;
      seen = f.injected();
      if (hit) {
        ExpectDocumented(s, f, fail, err, &sites);
      } else {
        PMINDEX_EXPECT_OK(s) << "failed with no fault injected";
      }
      return s.ok();
    };
    auto db = Db::Create(path, "lbtree", "", SmallDb());
    if (!check(db.status())) return acked;
    *created = true;
    for (uint64_t k = 0; k < 500; ++k, ++acked) {
      if (!check(db.value()->Insert(k, k * 3 + 1))) return acked;
    }
    if (!check(db.value()->Sync())) return acked;
    if (!check(db.value()->Close())) return acked;
    auto again = Db::Open(path, "lbtree");
    if (!check(again.status())) return acked;
    for (uint64_t k = 500; k < 1000; ++k, ++acked) {
      if (!check(again.value()->Insert(k, k * 3 + 1))) return acked;
    }
    check(again.value()->Close());
    return acked;
  };
  size_t n = 0;
  {
    SweepDir dir;
    bool created = false;
    ASSERT_EQ(workload(dir.path("db.pool"), 0, 0, &created), 1000u);
    n = f.calls().size();
  }
  ASSERT_GT(n, 30u);
  for (size_t i = 1; i <= n; ++i) {
    for (int err : {EIO, ENOSPC}) {
      SweepDir dir;
      const std::string path = dir.path("db.pool");
      bool created = false;
      const uint64_t acked = workload(path, i, err, &created);
      f.Clear();
      EXPECT_EQ(f.open_fds(), 0u) << Describe(f, i, err);
      if (!created) {
        EXPECT_TRUE(fs::is_empty(dir.path(""))) << Describe(f, i, err) << ": left "
                                                << Joined(DirEntries(dir.path("")));
        continue;
      }
      ExpectKeys(path, acked, Describe(f, i, err));
    }
  }
  ExpectSites(sites, {"cannot create ", "no space for ", "cannot write the header of ",
                      "cannot fsync ", "cannot rename ", "cannot open directory ",
                      "cannot fsync directory ", "cannot stat ", "cannot open ",
                      "cannot stat the opened ", "cannot set flags of ", "cannot lock ",
                      "cannot stat (to read the header of) ", "cannot read the header of ",
                      "cannot stat (to read the mode of) ", "cannot reserve ",
                      "cannot stat (to check the size of) ",
                      "cannot stat (to count the allocated blocks of) ", "cannot map ",
                      "cannot msync the header (to clear the clean flag) of ",
                      "cannot msync ", "cannot allocate space for "});
}

// The open of a pool a crash left (recovery writes) fails cleanly at every
// call, and the next open recovers every key acknowledged before the crash.
TEST(DbFaults, OpenOfACrashedPoolFailsCleanlyAtEveryCall) {
  SweepDir dir;
  const std::string path = dir.path("db.pool");
  {
    auto db = Db::Create(path, "lbtree", "", SmallDb());
    PMINDEX_ASSERT_OK(db);
    for (uint64_t k = 0; k < 300; ++k) PMINDEX_ASSERT_OK(db.value()->Insert(k, k * 3 + 1));
    PMINDEX_ASSERT_OK(db.value()->Close());
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto db = Db::Open(path, "lbtree");
    if (!db.ok()) _exit(10);
    for (uint64_t k = 300; k < 600; ++k) {
      if (!db.value()->Insert(k, k * 3 + 1).ok()) _exit(11);
    }
    _exit(0);  // a crash: no Close
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  FaultFileSystem f;
  ScopedDefaultFileSystem scoped(&f);
  const std::string crashed = Contents(path);
  std::vector<FaultFileSystem::Call> trace;
  {
    fs::copy_file(path, dir.path("count.pool"));
    f.Reset();
    auto db = Db::Open(dir.path("count.pool"), "lbtree");
    PMINDEX_ASSERT_OK(db);
    trace = f.calls();
  }
  std::set<std::string> sites;
  for (size_t i = 1; i <= trace.size(); ++i) {
    const std::string work = dir.path("w" + std::to_string(i) + ".pool");
    fs::copy_file(path, work);
    const int err = ErrorFor(trace[i - 1].op);
    f.Reset();
    f.FailNth(i, err);
    {
      auto db = Db::Open(work, "lbtree");
      ExpectDocumented(db.status(), f, i, err, &sites);
    }
    f.Clear();
    EXPECT_EQ(f.open_fds(), 0u);
    EXPECT_TRUE(Contents(work) == crashed) << Describe(f, i, err);
    ExpectKeys(work, 600, Describe(f, i, err));
    RemovePool(work);
  }
  EXPECT_FALSE(sites.empty());
}

// An insert that needs a new segment while its creation fails at call i:
// the insert fails with the documented Status (or succeeds when the
// allocator's retry after ENOSPC grows), every key acknowledged before
// stays, the Db keeps working, and grows once the fault is gone.
TEST(DbFaults, GrowthFailureLosesNothingAndTheDbKeepsWorking) {
  SweepDir dir;
  FaultFileSystem f;
  ScopedDefaultFileSystem scoped(&f);
  // How many ascending inserts fit in the first segment.
  uint64_t fit = 0;
  {
    auto db = Db::Create(dir.path("calibrate.pool"), "lbtree", "", SmallDb());
    PMINDEX_ASSERT_OK(db);
    f.Reset();
    while (f.calls().empty()) {
      PMINDEX_ASSERT_OK(db.value()->Insert(fit, fit * 3 + 1));
      ASSERT_LT(++fit, 10'000'000u);
    }
  }
  ASSERT_GT(fit, 4000u);
  const uint64_t base_keys = fit - 3000, total = fit + 3000;
  const std::string base = dir.path("base.pool");
  {
    auto db = Db::Create(base, "lbtree", "", SmallDb());
    PMINDEX_ASSERT_OK(db);
    for (uint64_t k = 0; k < base_keys; ++k) PMINDEX_ASSERT_OK(db.value()->Insert(k, k * 3 + 1));
    PMINDEX_ASSERT_OK(db.value()->Close());
    ASSERT_FALSE(fs::exists(base + ".1"));
  }
  // Inserts keys from base_keys on; returns the first that failed (or
  // total) and its status in *s.
  auto insert = [&](Db& db, Status* s) {
    for (uint64_t k = base_keys; k < total; ++k) {
      *s = db.Insert(k, k * 3 + 1);
      if (!s->ok()) return k;
    }
    return total;
  };
  size_t n = 0;
  {
    const std::string work = dir.path("count.pool");
    fs::copy_file(base, work);
    auto db = Db::Open(work, "lbtree");
    PMINDEX_ASSERT_OK(db);
    f.Reset();
    Status s;
    ASSERT_EQ(insert(*db.value(), &s), total) << s.ToString();
    n = f.calls().size();
    ASSERT_TRUE(fs::exists(work + ".1"));
  }
  ASSERT_GT(n, 5u);
  std::set<std::string> sites;
  for (size_t i = 1; i <= n; ++i) {
    for (int err : {EIO, ENOSPC}) {
      const std::string work = dir.path("w" + std::to_string(i) + "-" + std::to_string(err));
      fs::copy_file(base, work);
      {
        auto db = Db::Open(work, "lbtree");
        PMINDEX_ASSERT_OK(db);
        f.Reset();
        f.FailNth(i, err);
        Status s;
        const uint64_t stopped = insert(*db.value(), &s);
        const std::string where = Describe(f, i, err);
        if (stopped == total) {
          // Tolerated, or the allocator returned its cached blocks and
          // grew again after an ENOSPC, which the single fault lets pass.
          const bool retried = err == ENOSPC;
          EXPECT_TRUE(Tolerated(f.calls()[i - 1].op) || retried) << where;
        } else {
          ExpectDocumented(s, f, i, err, &sites);
          EXPECT_EQ(db.value()->Get(stopped).status().code(), Code::kNotFound) << where;
          f.Clear();
          // The Db keeps working and grows now.
          for (uint64_t k = stopped; k < total; ++k) {
            PMINDEX_ASSERT_OK(db.value()->Insert(k, k * 3 + 1)) << where << ": key " << k;
          }
        }
        f.Clear();
        PMINDEX_ASSERT_OK(db.value()->Close()) << where;
      }
      EXPECT_EQ(f.open_fds(), 0u);
      ExpectKeys(work, total, Describe(f, i, err));
      RemovePool(work);
    }
  }
  // (ENOSPC from posix_fallocate never shows here: the allocator's retry
  // grows; PoolFaults.GrowFailsCleanly... sees it.)
  ExpectSites(sites, {"cannot create segment file ", "cannot allocate space for ",
                      "cannot fsync segment file ", "cannot open directory ",
                      "cannot fsync directory ", "cannot map "});
}

// ---------------------------------------------------------- KvStore level

// Create a store, put values of 130 KiB (one page each, so the pool grows
// by a segment every few puts), close, open, read them back, with call i
// failed; then (faults off) every acknowledged put is in the store, or a
// failed create left nothing.
TEST(KvFaults, EveryCallOfCreateGrowthCloseAndOpenLosesNothing) {
  FaultFileSystem f;
  ScopedDefaultFileSystem scoped(&f);
  constexpr int kPuts = 15;
  // Above 128 KiB: a span of one page each (docs/allocator.md).
  auto value = [](int k) { return std::string(130 * 1024, static_cast<char>('a' + k)); };
  std::set<std::string> sites;
  auto workload = [&](const std::string& path, size_t fail, bool* created) {
    f.Reset();
    int err = 0;
    if (fail != 0) {
      err = EIO;
      f.FailNth(fail, err);
    }
    int acked = 0;
    *created = false;
    size_t seen = 0;  // faults injected before this step
    auto check = [&](const Status& s) {
      const bool hit = f.injected() > seen;
      seen = f.injected();
      if (hit) {
        ExpectDocumented(s, f, fail, err, &sites);
      } else {
        PMINDEX_EXPECT_OK(s) << "failed with no fault injected";
      }
      return s.ok();
    };
    DbOptions o = SmallDb();
    o.max_size = 16 * kMiB;
    auto kv = KvStore::Create(path, "lbtree", "", o);
    if (!check(kv.status())) return acked;
    *created = true;
    for (int k = 0; k < kPuts; ++k, ++acked) {
      if (!check(kv.value()->Put("key" + std::to_string(k), value(k)))) return acked;
    }
    if (!check(kv.value()->Close())) return acked;
    auto again = KvStore::Open(path);
    if (!check(again.status())) return acked;
    for (int k = 0; k < kPuts; ++k) {
      auto v = again.value()->Get("key" + std::to_string(k));
      EXPECT_TRUE(v.ok() && v.value() == value(k)) << "key" << k;
    }
    check(again.value()->Close());
    return acked;
  };
  size_t n = 0;
  {
    SweepDir dir;
    bool created = false;
    ASSERT_EQ(workload(dir.path("kv.pool"), 0, &created), kPuts);
    n = f.calls().size();
    ASSERT_TRUE(fs::exists(dir.path("kv.pool.2")));  // it grew
  }
  for (size_t i = 1; i <= n; ++i) {
    SweepDir dir;
    const std::string path = dir.path("kv.pool");
    bool created = false;
    const int acked = workload(path, i, &created);
    f.Clear();
    const std::string where = Describe(f, i, EIO);
    EXPECT_EQ(f.open_fds(), 0u) << where;
    if (!created) {
      EXPECT_TRUE(fs::is_empty(dir.path(""))) << where;
      continue;
    }
    auto kv = KvStore::Open(path);
    PMINDEX_ASSERT_OK(kv) << where;
    for (int k = 0; k < acked; ++k) {
      auto v = kv.value()->Get("key" + std::to_string(k));
      PMINDEX_ASSERT_OK(v) << where << ": key" << k;
      EXPECT_TRUE(v.value() == value(k)) << where;
    }
    PMINDEX_EXPECT_OK(kv.value()->Close());
  }
  EXPECT_TRUE(sites.contains("cannot create segment file ")) << "growth was never failed";
  EXPECT_TRUE(sites.contains("cannot msync ")) << "close was never failed";
}

}  // namespace
}  // namespace pmindex
