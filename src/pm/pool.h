// Pools: the persistent memory an index lives in (docs/architecture.md section 3.2,
// docs/pool-format.md).
//
// A pool is a file (plus, once it has grown, segment files PATH.1, PATH.2,
// ...) mapped into one reserved, contiguous virtual range, so an offset
// from the pool's base addresses every byte of every segment. On a DAX
// file system the mapping uses MAP_SYNC and flush + fence make data durable
// against power failure; elsewhere data is durable against a process crash
// at once and against power failure after Sync() (msync). In-memory pools
// (tests, crash images) are anonymous mappings.
//
// Layout (offsets from base):
//   [0, 4 KiB)            header (magic, format version, incompat flags,
//                         UUID, sizes, index kind and options, root slots,
//                         clean flag, reserved bytes, checksum)
//   [4 KiB, heap_begin)   page-ownership table: one uint64_t per 256 KiB
//                         page of max_size, owned by the allocator
//   [heap_begin, size)    256 KiB pages (heap_begin is 256 KiB aligned)
//
// The clean-shutdown flag: Open writes nothing. The first writer calls
// MarkInUse() (create_index and open_index do, Grow does), which clears the
// flag durably; Close() sets it again only if the pool was marked in use,
// no index is attached any more, and no index failed to open or be
// created on it (a crashed pool whose recovery failed stays unclean).
//
// Thread safety: to_ptr/to_pptr/base are safe from any thread. Grow() and
// MarkInUse() are internally serialized. Open/Close are not concurrent with
// anything else.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "pm/site.h"
#include "pmindex/status.h"
#include "util/check.h"

namespace pmindex {

class Index;
enum class ReclaimBound;  // index/index.h
struct OpenIndexOptions;  // index/index.h
namespace pm {
class FileSystem;  // pm/file_system.h
}

// An 8-byte persistent pointer: pool id in the top 16 bits, byte offset
// from the pool base below. 0 is null.
class PPtr {
 public:
  static constexpr int kIdShift = 48;
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << kIdShift) - 1;

  constexpr PPtr() = default;
  constexpr explicit PPtr(uint64_t raw) : raw_(raw) {}
  static constexpr PPtr Make(uint16_t pool_id, uint64_t offset) {
    return PPtr((uint64_t{pool_id} << kIdShift) | offset);
  }
  constexpr uint64_t raw() const { return raw_; }
  constexpr uint16_t pool_id() const { return static_cast<uint16_t>(raw_ >> kIdShift); }
  constexpr uint64_t offset() const { return raw_ & kOffsetMask; }
  constexpr bool is_null() const { return raw_ == 0; }
  constexpr explicit operator bool() const { return raw_ != 0; }
  friend constexpr bool operator==(PPtr a, PPtr b) { return a.raw_ == b.raw_; }
  friend constexpr auto operator<=>(PPtr a, PPtr b) { return a.raw_ <=> b.raw_; }

 private:
  uint64_t raw_ = 0;
};

enum class Durability {
  kPowerFailure,  // MAP_SYNC on DAX: flush + fence are enough
  kProcessCrash,  // ordinary file mapping: durable against power failure after Sync()
  kVolatile,      // in-memory pool: gone with the process
};
const char* DurabilityName(Durability d);

struct PoolOptions {
  static constexpr uint64_t kMinSize = 4ull << 20;      // 4 MiB
  static constexpr uint64_t kPageSize = 256ull << 10;  // allocator page

  uint64_t size = 64ull << 20;         // first segment, bytes (>= kMinSize)
  uint64_t max_size = 64ull << 30;     // growth limit over all segments
  uint64_t segment_size = 0;           // bytes per added segment; 0 = same as size
  std::string kind;                    // index kind stored in the header
  std::string index_options;           // "key=value,..." stored in the header
  uint16_t pool_id = 1;                // goes in the top bits of every PPtr
  // Incompatible features of the pool's content (pool_format.h, e.g.
  // pm::kIncompatKvStore), written into the header at create; a bit this
  // build does not know is InvalidArgument.
  uint64_t incompat_flags = 0;
  // In-memory pools only: fill fresh memory with this byte (the crash
  // simulator's poison) instead of zeros. -1 = zeros.
  int poison = -1;
  // The system calls the pool makes, for its whole life (create, grow,
  // sync, close). Null = pm::DefaultFileSystem(). Must outlive the pool.
  pm::FileSystem* file_system = nullptr;
};

struct OpenOptions {
  std::string expected_kind;  // empty = any kind; else WrongKind if it differs
  // Fill in the page tables of every segment for writing now
  // (MADV_POPULATE_WRITE), so that no later access takes a page fault; the
  // open then takes time in proportion to the pool's size. Only for files
  // in memory (tmpfs, ramfs, hugetlbfs) or on DAX; ignored elsewhere (it
  // would dirty the whole page cache). Create and Grow always do it: their
  // memory is new and about to be written, and a page fault in the middle
  // of a write path costs microseconds (the original trees' drivers touch
  // every page of their pools before timing).
  bool prefault = false;
  // As PoolOptions::file_system, for an opened pool.
  pm::FileSystem* file_system = nullptr;
};

class Pool {
 public:
  static constexpr unsigned kRootSlots = 8;

  // Creates PATH (must not exist) atomically: written to a temporary file,
  // then renamed. Errors: AlreadyExists, InvalidArgument (size below
  // kMinSize, max_size < size, kind too long), IOError, OutOfSpace. A
  // failed create leaves no file behind (docs/pool-format.md, "Errors of
  // the file system", has what each failing system call gives).
  static Result<std::unique_ptr<Pool>> Create(const std::string& path, const PoolOptions& opt);

  // Opens an existing pool and locks it (flock) against other processes.
  // Writes nothing to any segment (was_clean() reports the clean flag; see
  // MarkInUse). Segment files with holes (a sparse copy) get their space
  // reserved first (posix_fallocate, which never changes their content),
  // so a full disk is an error here and never a SIGBUS later.
  // Errors, all leaving the content of every file unchanged: NotFound,
  // Corruption (not a pool, not a regular file, bad checksum, truncated or
  // resized file, missing segment), NotSupported (newer format, unknown
  // incompatible feature), WrongKind, Busy (open in another process, or
  // already open in this process),
  // OutOfSpace (no room to fill the holes of a sparse file), IOError.
  static Result<std::unique_ptr<Pool>> Open(const std::string& path, const OpenOptions& opt = {});

  // A pool in anonymous memory. Grows like a file pool, up to max_size.
  static Result<std::unique_ptr<Pool>> CreateInMemory(const PoolOptions& opt);

  // An in-memory pool holding a copy of `image` (a pool's bytes, e.g. a
  // crash image), mapped at a new address, validated like Open().
  static Result<std::unique_ptr<Pool>> OpenImage(std::span<const std::byte> image,
                                                 const OpenOptions& opt = {});

  // Validates a pool file without opening it for use: no lock, no write.
  // A path that is not a regular file (FIFO, device, socket, directory) is
  // refused (Corruption) before it is opened. Used by `pmpool info`.
  struct Info {
    uint32_t format_version = 0;
    uint64_t incompat_flags = 0;
    std::string uuid;
    uint64_t size = 0, max_size = 0, segment_size = 0;
    uint32_t segments = 0;
    std::string kind, index_options;
    bool clean = false;
    uint16_t pool_id = 0;
    // What Open would give (Inspect probes with a read-only MAP_SYNC map).
    Durability durability = Durability::kVolatile;
  };
  static Result<Info> Inspect(const std::string& path, pm::FileSystem* fs = nullptr);

  ~Pool();  // Close() if not closed
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Clears the clean-shutdown flag (NAW; on a non-DAX mapping also an msync
  // of the header page, so the cleared flag reaches the file before any data
  // page). Call it before the first write to an opened pool: create_index,
  // open_index and Grow do. Idempotent, thread-safe; writes nothing if the
  // flag is already clear. If the msync fails (IOError/OutOfSpace) the flag
  // is set back and the caller must not write; the next call starts over.
  Status MarkInUse();

  // Syncs, sets the clean-shutdown flag (NAW) if the rules in the comment at
  // the top of this file allow it, unmaps and unlocks. Close (destroy) the
  // index first: a pool closed while an index is attached stays unclean.
  // A failed sync is returned (IOError/OutOfSpace) and the pool is closed
  // anyway; if it was the sync before the flag, the flag stays clear and
  // the next open recovers.
  Status Close();
  // msync of every segment (no-op for in-memory and MAP_SYNC pools).
  // Errors: IOError, OutOfSpace, naming the segment file.
  Status Sync();

  Durability durability() const;
  const std::string& path() const;  // empty for in-memory pools
  bool was_clean() const;           // clean flag found at open (true after Create)
  bool index_attached() const;      // an index created or opened on this pool is alive
  Info info() const;
  std::string_view kind() const;
  std::string_view index_options() const;
  uint16_t id() const;
  // The header's incompatible-feature flags (pool_format.h): e.g.
  // pm::kIncompatKvStore for a pool that holds a key-value store.
  uint64_t incompat_flags() const;

  // Address translation. REQUIRES: p is null or points into this pool.
  char* base() const { return base_; }
  uint64_t size() const { return size_.load(std::memory_order_acquire); }  // mapped bytes
  template <class T = void>
  T* to_ptr(PPtr p) const {
    return p.is_null() ? nullptr : reinterpret_cast<T*>(base_ + p.offset());
  }
  PPtr to_pptr(const void* p) const {
    return p == nullptr ? PPtr() : PPtr::Make(id_, static_cast<const char*>(p) - base_);
  }
  bool contains(const void* p) const {
    auto* c = static_cast<const char*>(p);
    return c >= base_ && c < base_ + size();
  }

  // Root slots: kRootSlots 8-byte values the index uses to find its
  // structures (docs/pool-format.md, "Root slots"). Each is kept twice in
  // the header with a checksum and a write counter; Open resolved them
  // (a damaged or half-written copy is taken from the other one; a slot
  // with no trustworthy copy is Corruption) and MarkInUse rewrites the
  // copies that differ. root(i) is slot i's value (a DRAM copy: no PM
  // access, cheap on any path). WriteRoot(i, v) writes both copies in
  // turn, each flushed and fenced, so v is durable when it returns and a
  // crash during it leaves the old or the new value.
  // Writes of one slot must not run concurrently (the trees write their
  // slots under their own locks); writes of different slots may. `site`
  // names the caller's persist point for the crash simulator's mutations.
  uint64_t root(unsigned i) const {
    PMINDEX_CHECK(i < kRootSlots, "root slot %u out of range", i);
    return roots_[i].load(std::memory_order_acquire);
  }
  void WriteRoot(unsigned i, uint64_t v, pm::Site site = pm::Site::current());

  // The allocator's region.
  uint64_t heap_begin() const;           // offset of page 0
  // The page table's two copies (pool_format.h): the allocator writes a
  // word to copy A, then copy B, and resolves differing copies on attach.
  uint64_t* page_table();                // copy A, one word per possible page
  uint64_t* page_table_mirror();         // copy B
  size_t page_table_entries() const;     // = pages in max_size
  size_t pages_mapped() const;           // pages in the currently mapped size
  // Maps at least `min_pages` pages in total by adding segments. Returns
  // OutOfSpace (clear message, nothing changed) past max_size or when the
  // disk is full, IOError (nothing changed) when a system call fails.
  // Thread-safe.
  Status Grow(size_t min_pages);

  // The whole mapped range (the crash simulator snapshots it).
  std::span<std::byte> bytes() const;

 private:
  // The index layer (src/index/index.cc) attaches at most one index at a
  // time: AttachIndex returns a lease the index holds until it is destroyed
  // (Busy while another lease is alive), IndexFailed records that a create
  // or open failed after MarkInUse (the pool then stays unclean at Close),
  // IndexReady that one succeeded.
  friend Result<std::unique_ptr<Index>> create_index(std::string_view, std::string_view, Pool*);
  friend Result<std::unique_ptr<Index>> open_index(Pool*, const OpenIndexOptions&);
  Result<std::shared_ptr<void>> AttachIndex(std::string_view op);
  void IndexFailed();
  void IndexReady();

  // Resolves the root slots of the mapped header into roots_ (Corruption
  // if a slot has no trustworthy copy); RepairRoots rewrites the copies
  // that differ from the resolved records (MarkInUse).
  Status LoadRoots(const std::string& what);
  void RepairRoots();

  Pool();
  struct Impl;
  struct IndexState;
  std::unique_ptr<Impl> impl_;
  char* base_ = nullptr;
  std::atomic<uint64_t> size_{0};
  uint16_t id_ = 0;
  std::atomic<uint64_t> roots_[kRootSlots] = {};
};

}  // namespace pmindex
