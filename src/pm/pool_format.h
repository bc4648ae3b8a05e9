// The on-media format of a pool header (docs/pool-format.md).
//
// The header fills the first 4 KiB of the pool's first segment:
//
//   [0, 2048)     immutable part, written once at create and covered by
//                 `checksum` (CRC32C of bytes [0, kChecksumOffset)).
//   [2048, 4096)  mutable part, never checksummed; every word in it is an
//                 aligned 8-byte word written with pm::naw (a root slot
//                 may also be stored plainly and persisted by the NAW of
//                 another root slot, see below):
//                   root slots (one cache line), clean-shutdown flag,
//                   segment count.
//
// Versioning: `format_version` is 1. A reader refuses a larger version and
// any bit of `incompat_flags` it does not know (NotSupported); bits of
// `compat_flags` it does not know are ignored. No incompatible feature is
// defined yet.
//
// Geometry (all multiples of kPageSize = 256 KiB):
//   first_size      bytes of the first segment file (header, page table,
//                   the first heap pages)
//   segment_size    bytes of every added segment
//   max_size        growth limit; the last segment is cut to end there
//   heap_begin      offset of heap page 0
// Segment i >= 1 spans [SegmentEnd(i), SegmentEnd(i + 1)) where
// SegmentEnd(n) = min(first_size + (n - 1) * segment_size, max_size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pmindex::pm {

inline constexpr uint64_t kPoolMagic = 0x314C4F4F504D5058ull;  // "XPMPOOL1" little-endian
inline constexpr uint32_t kPoolFormatVersion = 1;
inline constexpr uint64_t kKnownIncompatFlags = 0;  // none defined yet
inline constexpr size_t kHeaderSize = 4096;
inline constexpr size_t kKindCapacity = 32;        // <= 31 chars + NUL
inline constexpr size_t kOptionsCapacity = 1025;   // <= 1024 chars + NUL
inline constexpr size_t kChecksumOffset = 2040;
inline constexpr size_t kMutableOffset = 2048;
inline constexpr uint64_t kPoolPageSize = 256ull << 10;
// Largest max_size accepted: leaves room for several reservations in a
// 47-bit address space and keeps every offset below PPtr's 48 bits.
inline constexpr uint64_t kMaxPoolSize = 16ull << 40;  // 16 TiB

struct PoolHeader {
  // ---- immutable, checksummed
  uint64_t magic;             // kPoolMagic
  uint32_t format_version;    // kPoolFormatVersion
  uint32_t header_size;       // kHeaderSize
  uint64_t incompat_flags;    // unknown bit => refuse to open
  uint64_t compat_flags;      // unknown bit => ignore
  uint8_t uuid[16];           // random at create (version 4 UUID)
  uint64_t first_size;
  uint64_t segment_size;
  uint64_t max_size;
  uint64_t heap_begin;
  uint64_t page_table_entries;  // words at [kHeaderSize, ...)
  uint64_t create_time;         // seconds since the epoch, informational
  uint16_t pool_id;
  uint8_t pad0[6];
  char kind[kKindCapacity];          // NUL-terminated
  char options[kOptionsCapacity];    // NUL-terminated
  uint8_t reserved0[kChecksumOffset - 104 - kKindCapacity - kOptionsCapacity];
  uint32_t checksum;            // CRC32C of [0, kChecksumOffset)
  uint32_t checksum_pad;        // zero
  // ---- mutable (pm::naw only)
  uint64_t root[8];             // root slots, one cache line
  uint64_t clean;               // 1 after a clean Close, 0 while open
  uint64_t segments;            // number of segments, >= 1
  uint8_t reserved1[kHeaderSize - kMutableOffset - 64 - 16];
};

static_assert(sizeof(PoolHeader) == kHeaderSize);
static_assert(offsetof(PoolHeader, format_version) == 8);
static_assert(offsetof(PoolHeader, incompat_flags) == 16);
static_assert(offsetof(PoolHeader, pool_id) == 96);
static_assert(offsetof(PoolHeader, kind) == 104);
static_assert(offsetof(PoolHeader, checksum) == kChecksumOffset);
static_assert(offsetof(PoolHeader, root) == kMutableOffset);
static_assert(offsetof(PoolHeader, root) % 64 == 0);
// A guarantee of the format that index code relies on: the eight root
// slots share one 64-byte line, so a store to one slot persists in program
// order with the stores to the others, and the NAW of any slot also
// persists every earlier store to the other slots (nvtree's create writes
// its format tag in slot 2 with a plain store and lets the NAW of slot 0
// persist it). docs/pool-format.md, "Root slots".
static_assert(sizeof(PoolHeader::root) == 64);  // with the alignment above: one line
static_assert(offsetof(PoolHeader, clean) == kMutableOffset + 64);
static_assert(offsetof(PoolHeader, segments) == kMutableOffset + 72);

// CRC32C (Castagnoli), bitwise-table implementation.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// The checksum a header should carry.
inline uint32_t HeaderChecksum(const PoolHeader& h) { return Crc32c(&h, kChecksumOffset); }

// End offset of the first n segments (n >= 1).
inline uint64_t SegmentEnd(const PoolHeader& h, uint64_t n) {
  uint64_t extra = h.segment_size == 0 ? 0 : (h.max_size - h.first_size) / h.segment_size + 1;
  if (n - 1 >= extra) return h.max_size;
  uint64_t e = h.first_size + (n - 1) * h.segment_size;
  return e < h.max_size ? e : h.max_size;
}

// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
std::string FormatUuid(const uint8_t (&uuid)[16]);

}  // namespace pmindex::pm
