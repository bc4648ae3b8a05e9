// The on-media format of a pool header (docs/pool-format.md).
//
// The header fills the first 4 KiB of the pool's first segment:
//
//   [0, 2048)     immutable part, written once at create and covered by
//                 `checksum` (CRC32C of bytes [0, kChecksumOffset)).
//   [2048, 4096)  mutable part, never covered by `checksum`:
//                   root slots, copy A (two lines), the clean-shutdown
//                   flag and the segment count (one line), root slots,
//                   copy B (two lines). The flag and the count are aligned
//                   8-byte words written with pm::naw.
//
// Root slots (format version 2, docs/pool-format.md "Root slots"): each of
// the kRootSlotCount slots is a RootRecord {value, check} in copy A and
// again in copy B. check = seq << 32 | CRC32C(slot, seq, value), seq a
// per-slot write counter. A write stores copy A's record, flushes, fences,
// then does the same for copy B. The reader (ResolveRoot) takes the newest
// valid copy: equal valid copies; copy A alone if valid with seq one past
// B's (B's write was interrupted) or B invalid; copy B alone if A is
// invalid (A's write was interrupted, or A was damaged: B holds the same
// value then). Anything else (both invalid, or two valid copies no single
// interrupted write explains) is Corruption. A crash interrupts at most one
// copy, so a damaged copy is repaired from the other and an interrupted
// write is never mistaken for damage.
//
// Versioning: `format_version` is 2 (version 1 had one unprotected word
// per root slot and a single page table; it is refused with NotSupported).
// A reader refuses any other version and any bit of `incompat_flags` it
// does not know (NotSupported); bits of `compat_flags` it does not know are
// ignored. One incompatible feature is defined: kIncompatKvStore.
//
// Page table (version 2): two copies of `page_table_entries` words, copy A
// at kHeaderSize and copy B at PageTableMirrorOffset(max_size), each
// PageTableBytes(max_size) long, so no 4 KiB page holds the same entry of
// both; heap_begin follows copy B. The allocator writes each word to copy
// A, then to copy B (src/alloc/page_word.h has the word's own check bits
// and the rule that resolves two differing copies).
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
inline constexpr uint32_t kPoolFormatVersion = 2;
// The pool holds a key-value store (src/kv, docs/layout/kv.md): the values
// of its index are pointers to the store's blocks, which the index does not
// know about. Only an open that follows them (kv::Store, through
// open_index's pair visitor) may recover such a pool; a plain open_index
// would let the allocator free every store block, so it refuses the pool
// with WrongKind (docs/pool-format.md "Key-value store pools").
inline constexpr uint64_t kIncompatKvStore = uint64_t{1} << 0;
inline constexpr uint64_t kKnownIncompatFlags = kIncompatKvStore;
inline constexpr size_t kHeaderSize = 4096;
inline constexpr size_t kKindCapacity = 32;        // <= 31 chars + NUL
inline constexpr size_t kOptionsCapacity = 1025;   // <= 1024 chars + NUL
inline constexpr size_t kChecksumOffset = 2040;
inline constexpr size_t kMutableOffset = 2048;
inline constexpr uint64_t kPoolPageSize = 256ull << 10;
// Largest max_size accepted: leaves room for several reservations in a
// 47-bit address space and keeps every offset below PPtr's 48 bits.
inline constexpr uint64_t kMaxPoolSize = 16ull << 40;  // 16 TiB

inline constexpr unsigned kRootSlotCount = 8;

// One copy of one root slot (see "Root slots" above).
struct RootRecord {
  uint64_t value;
  uint64_t check;  // seq << 32 | CRC32C over (slot, seq, value)
};
static_assert(sizeof(RootRecord) == 16);

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
  // ---- mutable
  RootRecord root_a[kRootSlotCount];  // root slots, copy A (two lines)
  uint64_t clean;               // 1 after a clean Close, 0 while open (pm::naw)
  uint64_t segments;            // number of segments, >= 1 (pm::naw)
  uint8_t pad1[48];
  RootRecord root_b[kRootSlotCount];  // root slots, copy B (two lines)
  uint8_t reserved1[kHeaderSize - kMutableOffset - 2 * 128 - 64];
};

static_assert(sizeof(PoolHeader) == kHeaderSize);
static_assert(offsetof(PoolHeader, format_version) == 8);
static_assert(offsetof(PoolHeader, incompat_flags) == 16);
static_assert(offsetof(PoolHeader, pool_id) == 96);
static_assert(offsetof(PoolHeader, kind) == 104);
static_assert(offsetof(PoolHeader, checksum) == kChecksumOffset);
static_assert(offsetof(PoolHeader, root_a) == kMutableOffset);
static_assert(offsetof(PoolHeader, root_a) % 64 == 0);
static_assert(offsetof(PoolHeader, clean) == kMutableOffset + 128);
static_assert(offsetof(PoolHeader, segments) == kMutableOffset + 136);
// Copy B starts a line of its own, 192 bytes after copy A's record of the
// same slot: no 64-byte overwrite reaches both copies of one slot.
static_assert(offsetof(PoolHeader, root_b) == kMutableOffset + 192);
static_assert(offsetof(PoolHeader, root_b) % 64 == 0);

// Root slot 3 is unused by every kind; slot 4 is the key-value store's
// content record (kStoreContentSlot, below). Slot 5 belongs to the
// key-value store (src/kv, docs/layout/kv.md): in a pool flagged
// kIncompatKvStore it holds the store's clock reservation, a timestamp above
// every commit timestamp the store has handed out (0: the store's create
// did not get that far). No index kind may use it.
inline constexpr unsigned kStoreSlot = 5;

// The clean-close record (docs/crash-testing.md): root slot 7, by
// convention of the persistent kinds that keep one (lbtree, fptree, wbtree, cddstree).
// close() writes it before the pool's clean flag can be set; an open that
// finds the flag set compares it with what its validation counted, so
// damage that leaves a smaller well-formed structure (a zeroed leaf reads
// as an empty one) is refused. Value: bit 63 set (0 = no record, e.g. a
// pool closed by a build without it), a count of nodes (the kind says
// which) modulo 2^23 in bits 40..62, the entries modulo 2^40 in bits 0..39.
// lbtree, fptree and wbtree also use its node count as a floor on the leaf
// list after a crash, and write it outside close() to keep that floor
// (trees/pm_leaf/pm_leaf_tree.h, CheckLeafFloor); only a clean open compares the
// whole record.
inline constexpr unsigned kCleanCloseSlot = 7;
inline uint64_t CleanCloseRecord(uint64_t entries, uint64_t nodes) {
  return uint64_t{1} << 63 | (nodes & ((uint64_t{1} << 23) - 1)) << 40 |
         (entries & ((uint64_t{1} << 40) - 1));
}
inline uint64_t CleanCloseEntries(uint64_t rec) { return rec & ((uint64_t{1} << 40) - 1); }
inline uint64_t CleanCloseNodes(uint64_t rec) { return (rec >> 40) & ((uint64_t{1} << 23) - 1); }

// The content record (docs/crash-testing.md): root slot 6, written by close() next to
// the clean-close record, by every persistent kind. It holds a sum over the
// live pairs of ContentTerm(key, value), modulo 2^64, so that the order in
// which a walk meets the pairs does not matter: close() sums what its walk
// finds, an open that finds the clean flag set sums what its read-only
// validation finds, and a different sum means a key or a value changed
// while the pool was closed (a flipped bit changes one term, and the term
// is a bijection of the key for a fixed value and of the value for a fixed
// key). Value: the sum shifted left by one with bit 0 set (0 = no record).
// Not checked after a crash: nothing sums the pairs as they are written.
inline constexpr unsigned kContentSlot = 6;
inline uint64_t ContentMix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7FB5D329728EA185ull;
  x ^= x >> 27;
  x *= 0x81DADEF4BC2DD44Dull;
  return x ^ (x >> 33);
}
// value * odd is a bijection of the value, so the argument of the mix is
// one of key and value for a fixed other; one mix per pair keeps the sum
// cheap (an open of a cleanly closed pool adds one term per pair).
inline uint64_t ContentTerm(uint64_t key, uint64_t value) {
  return ContentMix(key ^ (value * 0x9E3779B97F4A7C15ull));
}
inline uint64_t ContentRecord(uint64_t sum) { return sum << 1 | 1; }

// The key-value store's content record: root slot 4 of a pool flagged
// kIncompatKvStore (no index kind may use it). The store's close() sums,
// over the index's pairs, ContentTerm(prefix, digest of every block the
// pair reaches: records with their keys, versions with their stamps and
// inline values, value blocks, node headers; src/kv/walk.h), and an open
// that finds the clean flag set compares. Root slot 6 (the index's own
// record) covers only the (prefix, pointer) pairs. Value: bits 32..63 the
// sum's, bits 1..31 a mix of root slot 5 (the clock reservation) as the
// close left it, bit 0 set (0 = no record). Every open of a store writes
// slot 5, so a record left by an earlier close (a build that does not
// keep this record opened and closed the pool since) no longer matches
// slot 5 and is ignored, not taken for damage.
inline constexpr unsigned kStoreContentSlot = 4;
inline uint64_t StoreContentRecord(uint64_t sum, uint64_t clock) {
  return (sum & ~uint64_t{0xFFFFFFFF}) | (ContentMix(clock) & 0xFFFFFFFEull) | 1;
}
// Whether `rec` is a record written with root slot 5 at `clock`.
inline bool StoreContentRecordCurrent(uint64_t rec, uint64_t clock) {
  return rec != 0 && (rec & 0xFFFFFFFFull) == (StoreContentRecord(0, clock) & 0xFFFFFFFFull);
}

// CRC32C (Castagnoli), bitwise-table implementation.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// The check word of root slot `slot`'s record holding `value` at write
// number `seq`. A zeroed record is never valid (unit test).
uint64_t RootCheck(unsigned slot, uint32_t seq, uint64_t value);
inline bool RootRecordValid(unsigned slot, const RootRecord& r) {
  return r.check == RootCheck(slot, static_cast<uint32_t>(r.check >> 32), r.value);
}
inline RootRecord MakeRootRecord(unsigned slot, uint32_t seq, uint64_t value) {
  return RootRecord{value, RootCheck(slot, seq, value)};
}
inline uint32_t RootSeq(const RootRecord& r) { return static_cast<uint32_t>(r.check >> 32); }

// The reader's rule for one slot (see "Root slots" above). Returns false
// (Corruption) if no copy can be trusted; else *out is the record to use
// and *repair is true iff the two copies are not both equal to it.
bool ResolveRoot(unsigned slot, const RootRecord& a, const RootRecord& b, RootRecord* out,
                 bool* repair);

// Page-table geometry of a pool of max_size bytes: each copy's size (4 KiB
// aligned) and where copy B starts.
inline uint64_t PageTableBytes(uint64_t max_size) {
  return (max_size / kPoolPageSize * sizeof(uint64_t) + 4095) / 4096 * 4096;
}
inline uint64_t PageTableMirrorOffset(uint64_t max_size) {
  return kHeaderSize + PageTableBytes(max_size);
}

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
