// Pools (include/pmindex/pool.h, docs/pool-format.md).
//
// Every pool reserves its whole max_size of address space once (PROT_NONE,
// MAP_NORESERVE) and maps each segment MAP_FIXED at its offset inside the
// reservation, so the pool's bytes stay contiguous as it grows and no
// pointer into it ever moves.
//
// Opening validates everything that can be validated from the files
// (header, sizes, segment files, kind) before mapping anything, and writes
// nothing at all: the clean-shutdown flag is cleared by MarkInUse(), which
// the index layer calls before its first write. A refused open therefore
// leaves every file byte-for-byte unchanged. Paths are stat()ed before they
// are opened, so a FIFO or a device is refused without blocking or side
// effects.
#include "pm/pool.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "pm/file_system.h"
#include "pm/lock_holder.h"
#include "pm/persist.h"
#include "pm/pool_format.h"
#include "sync/mutex.h"
#include "util/check.h"

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif

namespace pmindex {

using pm::PoolHeader;

const char* DurabilityName(Durability d) {
  switch (d) {
    case Durability::kPowerFailure:
      return "power-failure (MAP_SYNC)";
    case Durability::kProcessCrash:
      return "process-crash (msync for power failure)";
    case Durability::kVolatile:
      return "volatile";
  }
  return "unknown";
}

namespace {

constexpr uint64_t kPage = PoolOptions::kPageSize;
static_assert(kPage == pm::kPoolPageSize);
static_assert(Pool::kRootSlots == pm::kRootSlotCount);
// Base addresses are aligned to 2 MiB so that DAX mappings can use huge
// pages.
constexpr uint64_t kBaseAlign = 2ull << 20;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t AlignDown(uint64_t v, uint64_t a) { return v / a * a; }

std::string SysError(const std::string& what, const std::string& path, int err) {
  return what + " " + path + ": " + std::strerror(err);
}

// The Status of a failed system call (docs/pool-format.md, "Errors of the
// file system"): OutOfSpace when the file system has no room or a quota or
// file-size limit is reached, IOError for every other error.
Status SysStatus(const std::string& what, const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
    return Status::OutOfSpace(SysError(what, path, err));
  }
  return Status::IOError(SysError(what, path, err));
}

std::string ByteCount(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " GiB", b >> 30);
  } else if (b >= (1ull << 20) && b % (1ull << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " MiB", b >> 20);
  } else {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes", b);
  }
  return buf;
}

struct Geometry {
  uint64_t first = 0, segment = 0, max = 0, heap_begin = 0, entries = 0;
};

// heap_begin and page-table entries for a first segment / max size pair.
void Layout(Geometry* g) {
  // Two copies of the page table (pool_format.h), one word per page of
  // max (an upper bound on the heap's pages).
  g->heap_begin = AlignUp(pm::kHeaderSize + 2 * pm::PageTableBytes(g->max), kPage);
  g->entries = g->max > g->heap_begin ? (g->max - g->heap_begin) / kPage : 0;
}

Result<Geometry> GeometryFor(const PoolOptions& opt) {
  if (opt.kind.size() >= pm::kKindCapacity) {
    return Status::InvalidArgument("index kind '" + opt.kind + "' is longer than " +
                                   std::to_string(pm::kKindCapacity - 1) + " characters");
  }
  if (opt.kind.find('\0') != std::string::npos ||
      opt.index_options.find('\0') != std::string::npos) {
    return Status::InvalidArgument("index kind and options must not contain NUL bytes");
  }
  if ((opt.incompat_flags & ~pm::kKnownIncompatFlags) != 0) {
    return Status::InvalidArgument("unknown incompatible pool feature flags");
  }
  if (opt.index_options.size() >= pm::kOptionsCapacity) {
    return Status::InvalidArgument("index options string is longer than " +
                                   std::to_string(pm::kOptionsCapacity - 1) + " characters");
  }
  if (opt.size < PoolOptions::kMinSize) {
    return Status::InvalidArgument("pool size " + std::to_string(opt.size) +
                                   " bytes is below the minimum of " +
                                   ByteCount(PoolOptions::kMinSize) + " (" +
                                   std::to_string(PoolOptions::kMinSize) + " bytes)");
  }
  if (opt.max_size < opt.size) {
    return Status::InvalidArgument("max_size " + std::to_string(opt.max_size) +
                                   " is smaller than the pool size " + std::to_string(opt.size));
  }
  if (opt.max_size > pm::kMaxPoolSize || opt.size > pm::kMaxPoolSize ||
      opt.segment_size > pm::kMaxPoolSize) {
    return Status::InvalidArgument("pool sizes are limited to " + ByteCount(pm::kMaxPoolSize));
  }
  Geometry g;
  g.first = AlignUp(opt.size, kPage);
  g.segment = opt.segment_size == 0 ? g.first : AlignUp(opt.segment_size, kPage);
  g.max = std::max(AlignDown(opt.max_size, kPage), g.first);
  Layout(&g);
  if (g.heap_begin + kPage > g.first) {
    return Status::InvalidArgument(
        "pool size " + ByteCount(opt.size) + " is too small for max_size " +
        ByteCount(opt.max_size) + ": the header and page table need " +
        ByteCount(g.heap_begin) + " plus one 256 KiB page; raise size or lower max_size");
  }
  return g;
}

PoolHeader MakeHeader(const Geometry& g, const PoolOptions& opt) {
  PoolHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = pm::kPoolMagic;
  h.format_version = pm::kPoolFormatVersion;
  h.header_size = pm::kHeaderSize;
  if (getrandom(h.uuid, sizeof(h.uuid), 0) != static_cast<ssize_t>(sizeof(h.uuid))) {
    // Entropy unavailable: fall back to time and address bits; UUIDs only
    // need to tell pools apart.
    uint64_t a = static_cast<uint64_t>(time(nullptr)) ^ reinterpret_cast<uintptr_t>(&h);
    uint64_t b = static_cast<uint64_t>(clock()) * 0x9E3779B97F4A7C15ull ^ getpid();
    std::memcpy(h.uuid, &a, 8);
    std::memcpy(h.uuid + 8, &b, 8);
  }
  h.uuid[6] = static_cast<uint8_t>((h.uuid[6] & 0x0F) | 0x40);  // version 4
  h.uuid[8] = static_cast<uint8_t>((h.uuid[8] & 0x3F) | 0x80);  // RFC 4122 variant
  h.first_size = g.first;
  h.segment_size = g.segment;
  h.max_size = g.max;
  h.heap_begin = g.heap_begin;
  h.page_table_entries = g.entries;
  h.create_time = static_cast<uint64_t>(time(nullptr));
  h.pool_id = opt.pool_id;
  h.incompat_flags = opt.incompat_flags;
  std::memcpy(h.kind, opt.kind.data(), opt.kind.size());
  std::memcpy(h.options, opt.index_options.data(), opt.index_options.size());
  h.checksum = pm::HeaderChecksum(h);
  for (unsigned i = 0; i < pm::kRootSlotCount; ++i) {
    h.root_a[i] = h.root_b[i] = pm::MakeRootRecord(i, 0, 0);
  }
  h.clean = 1;
  h.segments = 1;
  return h;
}

bool NulTerminated(const char* s, size_t cap) { return std::memchr(s, '\0', cap) != nullptr; }

const char* FileTypeName(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

// Opens a pool or segment file after making sure it is a regular file:
// stat() first, so a FIFO is never opened (an O_RDONLY open of a FIFO
// blocks until a writer appears) and a device never sees an open(); then
// O_NONBLOCK | O_NOCTTY in case the path was replaced in between, checked
// again with fstat. `missing` is the Status for a path that does not
// exist. On success *fd is a blocking descriptor of a regular file.
Status OpenRegularFile(pm::FileSystem& fs, const std::string& path, int flags,
                       const std::string& what, const Status& missing, int* fd) {
  *fd = -1;
  struct stat st;
  if (int err = fs.Stat(path, &st); err != 0) {
    if (err == ENOENT) return missing;
    return SysStatus("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::Corruption(path + " is not a pmindex " + what + " (" +
                              FileTypeName(st.st_mode) + ")");
  }
  int f = -1;
  if (int err = fs.Open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0, &f); err != 0) {
    if (err == ENOENT) return missing;
    return SysStatus("cannot open", path, err);
  }
  if (int err = fs.Fstat(f, &st); err != 0) {
    fs.Close(f);
    return SysStatus("cannot stat the opened", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    fs.Close(f);
    return Status::Corruption(path + " is not a pmindex " + what + " (" +
                              FileTypeName(st.st_mode) + ")");
  }
  if (int err = fs.SetBlocking(f); err != 0) {
    fs.Close(f);
    return SysStatus("cannot set flags of", path, err);
  }
  *fd = f;
  return Status::OK();
}

// The root slots of a header (pool_format.h, "Root slots"): the record
// each slot resolves to, and which slots need their copies rewritten.
struct RootState {
  pm::RootRecord rec[pm::kRootSlotCount];
  unsigned repair = 0;  // bit i: slot i's copies differ from rec[i]
};

Status ResolveRoots(const PoolHeader& h, const std::string& what, RootState* out) {
  RootState st;
  for (unsigned i = 0; i < pm::kRootSlotCount; ++i) {
    bool repair = false;
    if (!pm::ResolveRoot(i, h.root_a[i], h.root_b[i], &st.rec[i], &repair)) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    ": root slot %u has no trustworthy copy (both damaged, or a pair no "
                    "interrupted write leaves; A %#" PRIx64 "/%#" PRIx64 ", B %#" PRIx64
                    "/%#" PRIx64 ")",
                    i, h.root_a[i].value, h.root_a[i].check, h.root_b[i].value,
                    h.root_b[i].check);
      return Status::Corruption(what + buf);
    }
    if (repair) st.repair |= 1u << i;
  }
  if (out != nullptr) *out = st;
  return Status::OK();
}

// Validates a header copy. `have` = bytes available at the header's
// location (file size of the first segment, or image size).
Status ValidateHeader(const PoolHeader& h, uint64_t have, const std::string& what) {
  if (have < pm::kHeaderSize || h.magic != pm::kPoolMagic) {
    return Status::Corruption(what + " is not a pmindex pool" +
                              (have < pm::kHeaderSize
                                   ? " (only " + std::to_string(have) + " bytes)"
                                   : std::string(" (no pool magic number)")));
  }
  if (h.format_version == 0) {
    return Status::Corruption(what + ": pool header has format version 0");
  }
  if (h.format_version < pm::kPoolFormatVersion) {
    return Status::NotSupported(
        what + " has pool format version " + std::to_string(h.format_version) +
        "; this build of pmindex reads version " + std::to_string(pm::kPoolFormatVersion) +
        " only (version 2 protects the root slots and the page table with redundant copies; "
        "copy the data out with the pmindex release that wrote the pool)");
  }
  if (h.format_version > pm::kPoolFormatVersion) {
    return Status::NotSupported(what + " has pool format version " +
                                std::to_string(h.format_version) +
                                "; this build of pmindex reads version " +
                                std::to_string(pm::kPoolFormatVersion) + " only");
  }
  if ((h.incompat_flags & ~pm::kKnownIncompatFlags) != 0) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%" PRIx64, h.incompat_flags & ~pm::kKnownIncompatFlags);
    return Status::NotSupported(what + " uses incompatible features unknown to this build (flags " +
                                buf + ")");
  }
  uint32_t sum = pm::HeaderChecksum(h);
  if (sum != h.checksum) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "stored 0x%08x, computed 0x%08x", h.checksum, sum);
    return Status::Corruption(what + ": pool header checksum mismatch (" + buf + ")");
  }
  // The checksum matched, so the fields below were written by a pmindex
  // writer; they are still checked so that no byte pattern can crash us.
  Geometry g;
  g.first = h.first_size;
  g.segment = h.segment_size;
  g.max = h.max_size;
  bool geometry_ok = h.header_size == pm::kHeaderSize && g.first % kPage == 0 &&
                     g.segment % kPage == 0 && g.segment > 0 && g.max % kPage == 0 &&
                     g.first >= PoolOptions::kMinSize && g.max >= g.first &&
                     g.max <= pm::kMaxPoolSize;
  if (geometry_ok) {
    Layout(&g);
    geometry_ok = g.heap_begin == h.heap_begin && g.entries == h.page_table_entries &&
                  g.heap_begin + kPage <= g.first;
  }
  if (!geometry_ok) return Status::Corruption(what + ": pool header has inconsistent sizes");
  if (!NulTerminated(h.kind, sizeof(h.kind)) || !NulTerminated(h.options, sizeof(h.options))) {
    return Status::Corruption(what + ": pool header has an unterminated kind or options string");
  }
  // Mutable words.
  if (h.clean > 1) {
    return Status::Corruption(what + ": pool header has a bad clean-shutdown flag (" +
                              std::to_string(h.clean) + ")");
  }
  if (h.segments == 0 || (h.segments > 1 && pm::SegmentEnd(h, h.segments - 1) >= h.max_size)) {
    return Status::Corruption(what + ": pool header has an impossible segment count (" +
                              std::to_string(h.segments) + ")");
  }
  return ResolveRoots(h, what, nullptr);
}

Status CheckKind(const PoolHeader& h, const OpenOptions& opt, const std::string& what) {
  if (!opt.expected_kind.empty() && opt.expected_kind != h.kind) {
    return Status::WrongKind(what + " holds index kind '" + std::string(h.kind) + "', not '" +
                             opt.expected_kind + "'");
  }
  return Status::OK();
}

std::string SegmentPath(const std::string& path, uint64_t i) {
  return i == 0 ? path : path + "." + std::to_string(i);
}

// Checks that segment files 1..segments-1 exist with their exact sizes.
Status CheckSegmentFiles(pm::FileSystem& fs, const PoolHeader& h, const std::string& path) {
  for (uint64_t i = 1; i < h.segments; ++i) {
    std::string sp = SegmentPath(path, i);
    struct stat st;
    if (int err = fs.Stat(sp, &st); err != 0) {
      if (err == ENOENT) {
        return Status::Corruption("missing segment file " + sp + " (pool " + path + " has " +
                                  std::to_string(h.segments) + " segments)");
      }
      return SysStatus("cannot stat segment file", sp, err);
    }
    if (!S_ISREG(st.st_mode)) {
      return Status::Corruption("segment file " + sp + " is not a regular file (" +
                                FileTypeName(st.st_mode) + ")");
    }
    uint64_t want = pm::SegmentEnd(h, i + 1) - pm::SegmentEnd(h, i);
    if (static_cast<uint64_t>(st.st_size) != want) {
      return Status::Corruption("segment file " + sp + " is truncated or resized (" +
                                std::to_string(st.st_size) + " bytes, expected " +
                                std::to_string(want) + ")");
    }
  }
  return Status::OK();
}

// Reads the header of an open pool file into *h and validates the header
// and the first file's size. Leaves the file unchanged.
Status ReadHeader(pm::FileSystem& fs, int fd, const std::string& path, PoolHeader* h) {
  struct stat st;
  if (int err = fs.Fstat(fd, &st); err != 0) {
    return SysStatus("cannot stat (to read the header of)", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::Corruption(path + " is not a pmindex pool (" + FileTypeName(st.st_mode) +
                              ")");
  }
  std::memset(h, 0, sizeof(*h));
  uint64_t have = static_cast<uint64_t>(st.st_size);
  if (have >= pm::kHeaderSize) {
    size_t got = 0;
    // A short read is continued; end of file before 4 KiB (the file was
    // cut while being read) leaves `have` short, which is Corruption below.
    while (got < pm::kHeaderSize) {
      size_t r = 0;
      int err = fs.Pread(fd, reinterpret_cast<char*>(h) + got, pm::kHeaderSize - got, got, &r);
      if (err != 0) return SysStatus("cannot read the header of", path, err);
      if (r == 0) break;
      got += r;
    }
    have = got;
  }
  PMINDEX_RETURN_IF_ERROR(ValidateHeader(*h, have, path));
  if (static_cast<uint64_t>(st.st_size) != h->first_size) {
    return Status::Corruption("pool file " + path + " is truncated or resized (" +
                              std::to_string(st.st_size) + " bytes, header says " +
                              std::to_string(h->first_size) + ")");
  }
  return Status::OK();
}

// Makes a directory entry just created or renamed in path's directory
// durable. A file system whose directories cannot be fsynced (EINVAL)
// keeps its entries durable by other means.
Status SyncDirectoryOf(pm::FileSystem& fs, const std::string& path) {
  std::string dir = ".";
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  int dfd = -1;
  if (int err = fs.Open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, &dfd); err != 0) {
    return SysStatus("cannot open directory", dir, err);
  }
  int err = fs.Fsync(dfd);
  fs.Close(dfd);
  if (err != 0 && err != EINVAL) return SysStatus("cannot fsync directory", dir, err);
  return Status::OK();
}

// posix_fallocate with the error classes pools report.
Status Allocate(pm::FileSystem& fs, int fd, uint64_t len, const std::string& path) {
  int rc = fs.Allocate(fd, len);
  if (rc == 0) return Status::OK();
  if (rc == ENOSPC || rc == EFBIG || rc == EDQUOT) {
    return Status::OutOfSpace("no space for " + ByteCount(len) + " in " + path + ": " +
                              std::strerror(rc));
  }
  return Status::IOError(SysError("cannot allocate space for", path, rc));
}

// A file with holes (e.g. copied with cp --sparse or rsync -S) would get
// its blocks only when a page of the mapping is first written, and a full
// disk then raises SIGBUS. Reserve them now: posix_fallocate only
// allocates blocks and never changes the file's content or size.
Status ReserveHoles(pm::FileSystem& fs, int fd, uint64_t len, const std::string& path) {
  struct stat st;
  if (int err = fs.Fstat(fd, &st); err != 0) {
    return SysStatus("cannot stat (to count the allocated blocks of)", path, err);
  }
  if (static_cast<uint64_t>(st.st_blocks) * 512 >= len) return Status::OK();
  Status s = Allocate(fs, fd, len, path);
  if (s.is_out_of_space()) {
    return Status::OutOfSpace(std::string(s.message()) +
                              " (the file is sparse; its holes must be allocated before use)");
  }
  return s;
}

}  // namespace

// ------------------------------------------------------------------ Impl

// Shared with the lease an attached index holds, so that destroying the
// index after the pool is harmless.
struct Pool::IndexState {
  sync::Mutex mu;
  bool attached PMINDEX_GUARDED_BY(mu) = false;  // a lease is alive
  // The last create/open of an index failed after MarkInUse.
  bool failed PMINDEX_GUARDED_BY(mu) = false;
};

struct Pool::Impl {
  pm::FileSystem* fs = nullptr;  // every system call of this pool
  std::string path;     // empty for in-memory pools
  int lock_fd = -1;     // first segment, holds the flock
  mode_t file_mode = 0644;
  char* reserve = nullptr;  // whole reservation (base is inside it)
  size_t reserve_len = 0;
  int poison = -1;
  Durability durability = Durability::kVolatile;
  bool was_clean = true;
  bool open = false;   // holds a reservation and/or the lock
  bool ready = false;  // fully mapped; the header is live
  sync::Mutex use_mu;
  bool in_use = false;  // MarkInUse() cleared the clean flag (or found it clear)
  std::shared_ptr<IndexState> index_state = std::make_shared<IndexState>();
  std::string kind, options;
  uint64_t incompat_flags = 0;  // the header's, as validated at open/create
  sync::Mutex grow_mu;
  bool reserve_broken = false;  // a failed Grow could not restore the reservation
  struct Segment {
    char* addr;
    size_t len;
  };
  std::vector<Segment> segments;

  // Root slots (pool_format.h): the write counter of each slot's newest
  // record, the slots MarkInUse must rewrite, and the writers' lock.
  sync::Mutex root_mu;
  uint32_t root_seq[pm::kRootSlotCount] PMINDEX_GUARDED_BY(root_mu) = {};
  unsigned root_repair PMINDEX_GUARDED_BY(root_mu) = 0;

  PoolHeader* header(char* base) const { return reinterpret_cast<PoolHeader*>(base); }
};

Pool::Pool() : impl_(std::make_unique<Impl>()) {}

Pool::~Pool() { IgnoreError(Close(), "a destructor has no caller to report to; Close() returns it"); }

namespace {

// Reserves address space for max_size bytes at a 2 MiB aligned base.
Status Reserve(pm::FileSystem& fs, uint64_t max_size, char** reserve, size_t* reserve_len,
               char** base) {
  size_t len = max_size + kBaseAlign;
  void* p = nullptr;
  if (int err = fs.Map(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                       &p);
      err != 0) {
    return Status::IOError("cannot reserve " + ByteCount(max_size) +
                           " of address space: " + std::strerror(err));
  }
  *reserve = static_cast<char*>(p);
  *reserve_len = len;
  *base = reinterpret_cast<char*>(AlignUp(reinterpret_cast<uintptr_t>(p), kBaseAlign));
  return Status::OK();
}

// Anonymous read-write memory at [addr, addr+len) inside a reservation.
// `populate` pre-faults it (for memory about to be overwritten in full).
Status CommitAnonymous(pm::FileSystem& fs, char* addr, size_t len, int poison,
                       bool populate = false) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE;
  if (populate) flags |= MAP_POPULATE;
  void* p = nullptr;
  if (int err = fs.Map(addr, len, PROT_READ | PROT_WRITE, flags, -1, &p); err != 0) {
    return Status::OutOfSpace("cannot map " + ByteCount(len) + " of memory: " +
                              std::strerror(err));
  }
  if (poison >= 0) std::memset(addr, poison, len);
  return Status::OK();
}

// True iff fd's file system keeps the file in memory with no copy to write
// back (tmpfs, ramfs, hugetlbfs), or the mapping is DAX (MAP_SYNC worked):
// the media where filling in page tables ahead of time costs no I/O.
bool MemoryBacked(int fd, Durability durability) {
  if (durability == Durability::kPowerFailure) return true;
  struct statfs sfs;
  if (fstatfs(fd, &sfs) != 0) return false;
  const auto type = static_cast<unsigned long>(sfs.f_type);
  return type == TMPFS_MAGIC || type == RAMFS_MAGIC || type == HUGETLBFS_MAGIC;
}

// Maps a segment file at addr (MAP_FIXED). Tries MAP_SYNC first; on a file
// system without DAX falls back to a plain shared mapping and lowers
// *durability. `populate` (OpenOptions::prefault) fills in the page tables
// for writing now, on memory-backed files only: on a disk-backed file it
// would dirty every page of the page cache. Best effort: a kernel without
// MADV_POPULATE_WRITE (before 5.14) maps lazily as before.
Status MapFile(pm::FileSystem& fs, int fd, char* addr, size_t len, const std::string& path,
               Durability* durability, bool populate) {
  void* p = nullptr;
  int err = fs.Map(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC | MAP_FIXED,
                   fd, &p);
  if (err == EOPNOTSUPP || err == EINVAL) {
    err = fs.Map(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, &p);
    if (err == 0) *durability = Durability::kProcessCrash;
  }
  if (err != 0) return SysStatus("cannot map", path, err);
#ifdef MADV_POPULATE_WRITE
  if (populate && MemoryBacked(fd, *durability)) (void)madvise(addr, len, MADV_POPULATE_WRITE);
#endif
  return Status::OK();
}

}  // namespace

// ---------------------------------------------------------------- create

Result<std::unique_ptr<Pool>> Pool::Create(const std::string& path, const PoolOptions& opt) {
  if (path.empty()) return Status::InvalidArgument("pool path is empty");
  auto g = GeometryFor(opt);
  if (!g.ok()) return g.status();
  pm::FileSystem& fs = opt.file_system != nullptr ? *opt.file_system : *pm::DefaultFileSystem();
  // A fast refusal only: the rename below never replaces a file, whatever
  // this check saw (an lstat that fails for another reason is ignored).
  struct stat st;
  if (fs.Lstat(path, &st) == 0) return Status::AlreadyExists(path + " already exists");
  PoolHeader h = MakeHeader(g.value(), opt);

  // Until the rename, everything happens in a temporary file, removed on
  // any failure: PATH appears complete or not at all.
  std::string tmp = path + ".tmp-" + std::to_string(getpid());
  int fd = -1;
  if (int err = fs.Open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644, &fd); err != 0) {
    return SysStatus("cannot create", tmp, err);
  }
  auto fail = [&](Status s) {
    if (fd >= 0) fs.Close(fd);
    fs.Unlink(tmp);
    return s;
  };
  Status s = Allocate(fs, fd, h.first_size, path);
  if (!s.ok()) return fail(s);
  size_t done = 0;
  while (done < sizeof(h)) {
    size_t w = 0;
    int err = fs.Pwrite(fd, reinterpret_cast<const char*>(&h) + done, sizeof(h) - done, done, &w);
    if (err != 0) return fail(SysStatus("cannot write the header of", tmp, err));
    // A regular file with its blocks allocated takes every byte; no
    // progress at all would loop for ever.
    if (w == 0) {
      return fail(Status::IOError("cannot write the header of " + tmp + ": no bytes written"));
    }
    done += w;
  }
  if (int err = fs.Fsync(fd); err != 0) return fail(SysStatus("cannot fsync", tmp, err));
  fs.Close(fd);
  fd = -1;
  // Atomic and never replaces an existing file.
  if (int err = fs.RenameNoReplace(tmp, path); err != 0) {
    if (err == EINVAL || err == ENOSYS) {
      // File system without RENAME_NOREPLACE: link() fails if path exists.
      err = fs.Link(tmp, path);
      if (err == 0) fs.Unlink(tmp);
    }
    if (err != 0) {
      fs.Unlink(tmp);
      if (err == EEXIST) return Status::AlreadyExists(path + " already exists");
      return SysStatus("cannot rename " + tmp + " to", path, err);
    }
  }
  // From here PATH is a complete pool with no index in it. A failure
  // removes it again, so that a failed create leaves nothing behind.
  auto undo = [&](Status s) {
    fs.Unlink(path);
    IgnoreError(SyncDirectoryOf(fs, path), "the create's own error is the one reported");
    return s;
  };
  if (s = SyncDirectoryOf(fs, path); !s.ok()) return undo(s);
  OpenOptions oo;
  oo.prefault = true;
  oo.file_system = &fs;
  auto pool = Open(path, oo);
  // Busy: another process opened the new pool in between; it is theirs now.
  if (!pool.ok() && pool.status().code() != Status::Code::kBusy) return undo(pool.status());
  return pool;
}

// ------------------------------------------------------------------ open

Result<std::unique_ptr<Pool>> Pool::Open(const std::string& path, const OpenOptions& opt) {
  if (path.empty()) return Status::InvalidArgument("pool path is empty");
  pm::FileSystem& fs = opt.file_system != nullptr ? *opt.file_system : *pm::DefaultFileSystem();
  int fd = -1;
  PMINDEX_RETURN_IF_ERROR(
      OpenRegularFile(fs, path, O_RDWR, "pool", Status::NotFound("no pool at " + path), &fd));
  auto fail = [&](Status s) {
    fs.Close(fd);
    return s;
  };
  // flock locks belong to the open file description: a second Open, even in
  // this process, gets its own description and is refused here.
  if (int err = fs.Lock(fd, LOCK_EX | LOCK_NB); err != 0) {
    if (err == EWOULDBLOCK) {
      const bool here = pm::FlockHeldByThisProcess(fd);
      return fail(Status::Busy("pool " + path +
                               (here ? " is already open in this process"
                                     : " is open in another process")));
    }
    return fail(SysStatus("cannot lock", path, err));
  }
  PoolHeader h;
  Status s = ReadHeader(fs, fd, path, &h);
  if (s.ok()) s = CheckSegmentFiles(fs, h, path);
  if (s.ok()) s = CheckKind(h, opt, path);
  if (!s.ok()) return fail(s);
  struct stat st;
  if (int err = fs.Fstat(fd, &st); err != 0) {
    return fail(SysStatus("cannot stat (to read the mode of)", path, err));
  }

  // Every check passed: reserve the blocks of sparse files and map. Nothing
  // is written (MarkInUse clears the clean flag before the first write).
  std::unique_ptr<Pool> pool(new Pool());
  Impl& im = *pool->impl_;
  im.fs = &fs;
  im.path = path;
  im.lock_fd = fd;  // owned by the pool from here on
  im.file_mode = st.st_mode & 07777;
  im.durability = Durability::kPowerFailure;
  im.kind = h.kind;
  im.options = h.options;
  im.incompat_flags = h.incompat_flags;
  im.open = true;  // from here on, ~Pool unmaps and unlocks
  PMINDEX_RETURN_IF_ERROR(Reserve(fs, h.max_size, &im.reserve, &im.reserve_len, &pool->base_));
  for (uint64_t i = 0; i < h.segments; ++i) {
    uint64_t start = i == 0 ? 0 : pm::SegmentEnd(h, i);
    uint64_t end = pm::SegmentEnd(h, i + 1);
    std::string sp = SegmentPath(path, i);
    int sfd = fd;
    if (i > 0) {
      PMINDEX_RETURN_IF_ERROR(OpenRegularFile(
          fs, sp, O_RDWR, "segment file",
          Status::Corruption("segment file " + sp + " disappeared while being opened"), &sfd));
    }
    // The file may have changed since it was checked; mapping past its end
    // would turn later accesses into SIGBUS.
    struct stat sst;
    if (int err = fs.Fstat(sfd, &sst); err != 0) {
      s = SysStatus("cannot stat (to check the size of)", sp, err);
    } else if (static_cast<uint64_t>(sst.st_size) != end - start) {
      s = Status::Corruption("pool file " + sp + " was resized while being opened");
    } else {
      s = ReserveHoles(fs, sfd, end - start, sp);
      if (s.ok()) {
        s = MapFile(fs, sfd, pool->base_ + start, end - start, sp, &im.durability, opt.prefault);
      }
    }
    if (i > 0) fs.Close(sfd);
    if (!s.ok()) return s;
    im.segments.push_back({pool->base_ + start, end - start});
  }
  pool->id_ = h.pool_id;
  pool->size_.store(pm::SegmentEnd(h, h.segments), std::memory_order_release);
  im.was_clean = im.header(pool->base_)->clean == 1;
  PMINDEX_RETURN_IF_ERROR(pool->LoadRoots(path));
  im.ready = true;
  return pool;
}

Result<std::unique_ptr<Pool>> Pool::CreateInMemory(const PoolOptions& opt) {
  auto g = GeometryFor(opt);
  if (!g.ok()) return g.status();
  PoolHeader h = MakeHeader(g.value(), opt);
  std::unique_ptr<Pool> pool(new Pool());
  Impl& im = *pool->impl_;
  pm::FileSystem& fs = opt.file_system != nullptr ? *opt.file_system : *pm::DefaultFileSystem();
  im.fs = &fs;
  im.poison = opt.poison;
  im.durability = Durability::kVolatile;
  im.kind = opt.kind;
  im.options = opt.index_options;
  im.incompat_flags = opt.incompat_flags;
  im.was_clean = true;
  im.open = true;
  PMINDEX_RETURN_IF_ERROR(Reserve(fs, h.max_size, &im.reserve, &im.reserve_len, &pool->base_));
  PMINDEX_RETURN_IF_ERROR(CommitAnonymous(fs, pool->base_, h.first_size, opt.poison));
  im.segments.push_back({pool->base_, h.first_size});
  h.clean = 0;
  pm::copy(pool->base_, &h, sizeof(h));
  pm::flush(pool->base_, pm::kHeaderSize);
  if (opt.poison > 0) {
    // Fresh anonymous memory is already zero; only poisoned memory needs it.
    // Both copies of the page table.
    pm::fill(pool->base_ + pm::kHeaderSize, 0, h.heap_begin - pm::kHeaderSize);
    pm::flush(pool->base_ + pm::kHeaderSize, h.heap_begin - pm::kHeaderSize);
  }
  pm::fence();
  pool->id_ = h.pool_id;
  pool->size_.store(h.first_size, std::memory_order_release);
  PMINDEX_RETURN_IF_ERROR(pool->LoadRoots("in-memory pool"));
  im.ready = true;
  return pool;
}

Result<std::unique_ptr<Pool>> Pool::OpenImage(std::span<const std::byte> image,
                                              const OpenOptions& opt) {
  PoolHeader h;
  std::memset(&h, 0, sizeof(h));
  if (image.size() >= sizeof(h)) std::memcpy(&h, image.data(), sizeof(h));
  const std::string what = "pool image";
  PMINDEX_RETURN_IF_ERROR(ValidateHeader(h, image.size(), what));
  uint64_t want = pm::SegmentEnd(h, h.segments);
  if (image.size() != want) {
    return Status::Corruption("pool image is truncated or resized (" +
                              std::to_string(image.size()) + " bytes, header says " +
                              std::to_string(want) + ")");
  }
  PMINDEX_RETURN_IF_ERROR(CheckKind(h, opt, what));
  std::unique_ptr<Pool> pool(new Pool());
  Impl& im = *pool->impl_;
  pm::FileSystem& fs = opt.file_system != nullptr ? *opt.file_system : *pm::DefaultFileSystem();
  im.fs = &fs;
  im.durability = Durability::kVolatile;
  im.kind = h.kind;
  im.options = h.options;
  im.incompat_flags = h.incompat_flags;
  im.open = true;
  PMINDEX_RETURN_IF_ERROR(Reserve(fs, h.max_size, &im.reserve, &im.reserve_len, &pool->base_));
  PMINDEX_RETURN_IF_ERROR(CommitAnonymous(fs, pool->base_, want, -1, /*populate=*/true));
  im.segments.push_back({pool->base_, want});
  std::memcpy(pool->base_, image.data(), want);
  pool->id_ = h.pool_id;
  pool->size_.store(want, std::memory_order_release);
  im.was_clean = im.header(pool->base_)->clean == 1;
  PMINDEX_RETURN_IF_ERROR(pool->LoadRoots(what));
  im.ready = true;
  return pool;
}

Result<Pool::Info> Pool::Inspect(const std::string& path, pm::FileSystem* file_system) {
  if (path.empty()) return Status::InvalidArgument("pool path is empty");
  pm::FileSystem& fs = file_system != nullptr ? *file_system : *pm::DefaultFileSystem();
  int fd = -1;
  PMINDEX_RETURN_IF_ERROR(
      OpenRegularFile(fs, path, O_RDONLY, "pool", Status::NotFound("no pool at " + path), &fd));
  PoolHeader h;
  Status s = ReadHeader(fs, fd, path, &h);
  Durability durability = Durability::kProcessCrash;
  if (s.ok()) {
    // A read-only MAP_SYNC mapping succeeds exactly where Open's would; a
    // failure of the probe only means "not DAX".
    void* m = nullptr;
    if (fs.Map(nullptr, pm::kHeaderSize, PROT_READ, MAP_SHARED_VALIDATE | MAP_SYNC, fd, &m) == 0) {
      durability = Durability::kPowerFailure;
      munmap(m, pm::kHeaderSize);
    }
  }
  fs.Close(fd);
  if (s.ok()) s = CheckSegmentFiles(fs, h, path);
  if (!s.ok()) return s;
  Info info;
  info.format_version = h.format_version;
  info.incompat_flags = h.incompat_flags;
  info.uuid = pm::FormatUuid(h.uuid);
  info.size = pm::SegmentEnd(h, h.segments);
  info.max_size = h.max_size;
  info.segment_size = h.segment_size;
  info.segments = static_cast<uint32_t>(h.segments);
  info.kind = h.kind;
  info.index_options = h.options;
  info.clean = h.clean == 1;
  info.pool_id = h.pool_id;
  info.durability = durability;
  return info;
}

// ----------------------------------------------------------- close, sync

Status Pool::Sync() {
  Impl& im = *impl_;
  if (!im.ready || im.durability != Durability::kProcessCrash) return Status::OK();
  for (size_t i = 0; i < im.segments.size(); ++i) {
    const auto& seg = im.segments[i];
    if (int err = im.fs->Msync(seg.addr, seg.len); err != 0) {
      return SysStatus("cannot msync", SegmentPath(im.path, i), err);
    }
  }
  return Status::OK();
}

Status Pool::Close() {
  Impl& im = *impl_;
  if (!im.open) return Status::OK();
  Status result;
  if (im.ready && !im.path.empty()) {
    result = Sync();
    bool mark_clean = im.in_use;
    {
      sync::MutexLock g(im.index_state->mu);
      // An index still attached has not been closed; one that failed to
      // open (recovery refused a damaged or half-recovered pool) must be
      // recovered again by the next open.
      if (im.index_state->attached || im.index_state->failed) mark_clean = false;
    }
    // The clean flag is set only after all data is durable.
    if (result.ok() && mark_clean) {
      pm::naw(&im.header(base_)->clean, 1);
      result = Sync();
    }
  }
  if (im.reserve != nullptr) munmap(im.reserve, im.reserve_len);
  im.reserve = nullptr;
  im.segments.clear();
  if (im.lock_fd >= 0) {
    im.fs->Close(im.lock_fd);  // releases the flock
    im.lock_fd = -1;
  }
  im.open = false;
  im.ready = false;
  im.in_use = false;
  base_ = nullptr;
  size_.store(0, std::memory_order_release);
  return result;
}

// ------------------------------------------------- clean flag, index lease

Status Pool::MarkInUse() {
  Impl& im = *impl_;
  sync::MutexLock g(im.use_mu);
  if (!im.ready) return Status::InvalidArgument("MarkInUse on a closed pool");
  if (im.in_use) return Status::OK();
  PoolHeader* h = im.header(base_);
  if (h->clean != 0) {
    pm::naw(&h->clean, 0);
    if (!im.path.empty() && im.durability != Durability::kPowerFailure) {
      // The cleared flag must reach the file before any data page the
      // kernel may write back on its own. If it cannot, nothing may be
      // written: the flag is set back (nothing was written since it was
      // cleared, so the pool is as clean as it was), the caller gets the
      // error, and the next call starts over.
      if (int err = im.fs->Msync(base_, pm::kHeaderSize); err != 0) {
        pm::naw(&h->clean, 1);
        return SysStatus("cannot msync the header (to clear the clean flag) of", im.path, err);
      }
    }
  }
  im.in_use = true;
  RepairRoots();
  return Status::OK();
}

Status Pool::LoadRoots(const std::string& what) {
  Impl& im = *impl_;
  RootState st;
  PMINDEX_RETURN_IF_ERROR(ResolveRoots(*im.header(base_), what, &st));
  sync::MutexLock g(im.root_mu);
  for (unsigned i = 0; i < kRootSlots; ++i) {
    im.root_seq[i] = pm::RootSeq(st.rec[i]);
    roots_[i].store(st.rec[i].value, std::memory_order_release);
  }
  im.root_repair = st.repair;
  return Status::OK();
}

namespace {
// Writes one copy of a root record: both words, flush, fence.
void WriteRootCopy(pm::RootRecord* r, const pm::RootRecord& v, pm::Site site) {
  pm::store(&r->value, v.value);
  pm::store(&r->check, v.check);
  pm::flush(r, sizeof *r, site);
  pm::fence(site);
}
}  // namespace

void Pool::RepairRoots() {
  // The slots whose copies differ from the record the open resolved them
  // to: copy A, then copy B, as any write (a crash in between leaves a
  // pair that resolves to the same record).
  Impl& im = *impl_;
  sync::MutexLock g(im.root_mu);
  PoolHeader* h = im.header(base_);
  for (unsigned i = 0; i < kRootSlots; ++i) {
    if ((im.root_repair & (1u << i)) == 0) continue;
    const pm::RootRecord rec =
        pm::MakeRootRecord(i, im.root_seq[i], roots_[i].load(std::memory_order_relaxed));
    WriteRootCopy(&h->root_a[i], rec, pm::Site::current());
    WriteRootCopy(&h->root_b[i], rec, pm::Site::current());
  }
  im.root_repair = 0;
}

Result<std::shared_ptr<void>> Pool::AttachIndex(std::string_view op) {
  Impl& im = *impl_;
  if (!im.ready) return Status::InvalidArgument(std::string(op) + ": the pool is closed");
  std::shared_ptr<IndexState> st = im.index_state;
  {
    sync::MutexLock g(st->mu);
    if (st->attached) {
      return Status::Busy(std::string(op) + ": an index is already open on this pool" +
                          (im.path.empty() ? "" : " (" + im.path + ")") +
                          "; close and destroy it first");
    }
    st->attached = true;
  }
  return std::shared_ptr<void>(st.get(), [st](void*) {
    sync::MutexLock g(st->mu);
    st->attached = false;
  });
}

void Pool::IndexFailed() {
  sync::MutexLock g(impl_->index_state->mu);
  impl_->index_state->failed = true;
}

void Pool::IndexReady() {
  sync::MutexLock g(impl_->index_state->mu);
  impl_->index_state->failed = false;
}

bool Pool::index_attached() const {
  sync::MutexLock g(impl_->index_state->mu);
  return impl_->index_state->attached;
}

// ------------------------------------------------------------- accessors

Durability Pool::durability() const { return impl_->durability; }
const std::string& Pool::path() const { return impl_->path; }
bool Pool::was_clean() const { return impl_->was_clean; }
std::string_view Pool::kind() const { return impl_->kind; }
std::string_view Pool::index_options() const { return impl_->options; }
uint16_t Pool::id() const { return id_; }
uint64_t Pool::incompat_flags() const { return impl_->incompat_flags; }

Pool::Info Pool::info() const {
  Info info;
  if (!impl_->ready) return info;
  const PoolHeader& h = *impl_->header(base_);
  info.format_version = h.format_version;
  info.incompat_flags = h.incompat_flags;
  info.uuid = pm::FormatUuid(h.uuid);
  info.size = size();
  info.max_size = h.max_size;
  info.segment_size = h.segment_size;
  // Grow may store the count concurrently (an atomic NAW).
  info.segments = static_cast<uint32_t>(
      std::atomic_ref<uint64_t>(const_cast<uint64_t&>(h.segments)).load(std::memory_order_acquire));
  info.kind = impl_->kind;
  info.index_options = impl_->options;
  info.clean = h.clean == 1;
  info.pool_id = h.pool_id;
  info.durability = impl_->durability;
  return info;
}

void Pool::WriteRoot(unsigned i, uint64_t v, pm::Site site) {
  PMINDEX_CHECK(i < kRootSlots, "root slot %u out of range", i);
  Impl& im = *impl_;
  PMINDEX_CHECK(im.ready, "WriteRoot on a closed pool");
  sync::MutexLock g(im.root_mu);
  const uint32_t seq = im.root_seq[i] + 1;
  const pm::RootRecord rec = pm::MakeRootRecord(i, seq, v);
  PoolHeader* h = im.header(base_);
  // Copy A durable before copy B is touched: a crash leaves at most one
  // copy half written (pool_format.h, "Root slots"). Copy A's flush and
  // fence carry the caller's site: its write is the commit, and pmcrash's
  // mutants of that site (copy A late or not durable while copy B is)
  // leave a pair no crash explains, which Open refuses. Copy B's carry
  // this line's (src/pm is not mutated): copy B is the backup.
  WriteRootCopy(&h->root_a[i], rec, site);
  WriteRootCopy(&h->root_b[i], rec, pm::Site::current());
  im.root_seq[i] = seq;
  im.root_repair &= ~(1u << i);
  roots_[i].store(v, std::memory_order_release);
}

uint64_t Pool::heap_begin() const { return impl_->header(base_)->heap_begin; }

uint64_t* Pool::page_table() { return reinterpret_cast<uint64_t*>(base_ + pm::kHeaderSize); }

uint64_t* Pool::page_table_mirror() {
  return reinterpret_cast<uint64_t*>(base_ + pm::PageTableMirrorOffset(impl_->header(base_)->max_size));
}

size_t Pool::page_table_entries() const { return impl_->header(base_)->page_table_entries; }

size_t Pool::pages_mapped() const {
  uint64_t s = size();
  uint64_t hb = heap_begin();
  return s > hb ? (s - hb) / kPage : 0;
}

std::span<std::byte> Pool::bytes() const {
  return {reinterpret_cast<std::byte*>(base_), static_cast<size_t>(size())};
}

// ------------------------------------------------------------------ grow

Status Pool::Grow(size_t min_pages) {
  Impl& im = *impl_;
  sync::MutexLock g(im.grow_mu);
  if (!im.ready) return Status::InvalidArgument("Grow on a closed pool");
  if (pages_mapped() >= min_pages) return Status::OK();
  if (im.reserve_broken) {
    return Status::IOError("pool " + (im.path.empty() ? std::string("in memory") : im.path) +
                           " cannot grow: a failed grow left its address range unreserved; "
                           "close and reopen it");
  }
  PMINDEX_RETURN_IF_ERROR(MarkInUse());  // Grow writes the segment count
  PoolHeader* h = im.header(base_);
  uint64_t max_pages = (h->max_size - h->heap_begin) / kPage;
  if (min_pages > max_pages) {
    return Status::OutOfSpace("pool is full: " + std::to_string(min_pages) +
                              " pages needed, max_size " + ByteCount(h->max_size) + " holds " +
                              std::to_string(max_pages));
  }
  while (pages_mapped() < min_pages) {
    uint64_t n = h->segments;
    uint64_t start = pm::SegmentEnd(*h, n);
    uint64_t end = pm::SegmentEnd(*h, n + 1);
    PMINDEX_CHECK(start == size() && end > start, "segment geometry");
    char* addr = base_ + start;
    size_t len = end - start;
    pm::FileSystem& fs = *im.fs;
    Status s;
    if (im.path.empty()) {
      s = CommitAnonymous(fs, addr, len, im.poison);
    } else {
      // A leftover PATH.n from a Grow that crashed before its count was
      // persisted belongs to nobody: truncate and reuse it.
      std::string sp = SegmentPath(im.path, n);
      int fd = -1;
      if (int err = fs.Open(sp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, im.file_mode, &fd);
          err != 0) {
        return SysStatus("cannot create segment file", sp, err);
      }
      s = Allocate(fs, fd, len, sp);
      // The file must exist durably before the segment count names it.
      if (s.ok()) {
        if (int err = fs.Fsync(fd); err != 0) s = SysStatus("cannot fsync segment file", sp, err);
      }
      if (s.ok()) s = SyncDirectoryOf(fs, sp);
      if (s.ok()) s = MapFile(fs, fd, addr, len, sp, &im.durability, /*populate=*/true);
      fs.Close(fd);
      // The file is named by no segment count: a failed unlink leaves a
      // leftover that the next Grow reuses and Open ignores.
      if (!s.ok()) fs.Unlink(sp);
    }
    if (!s.ok()) {
      // A failed MAP_FIXED may have left a hole in the reservation. Map it
      // back; if even that fails, some later mmap of the process could
      // land in the hole, and a later Grow's MAP_FIXED would replace it,
      // so the pool grows no more (it stays usable at its size).
      void* p = nullptr;
      if (fs.Map(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
                 &p) != 0) {
        im.reserve_broken = true;
      }
      return s;
    }
    im.segments.push_back({addr, len});
    pm::naw(&h->segments, n + 1);
    size_.store(end, std::memory_order_release);
  }
  return Status::OK();
}

}  // namespace pmindex
