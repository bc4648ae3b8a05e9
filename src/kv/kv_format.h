// On-media layout of the key-value store (docs/layout/kv.md has
// the pictures, the persist order of every operation and what recovery
// repairs).
//
// The store lives in its index's pool and allocates from its index's
// allocator. Its blocks are reachable only through the index's values:
//
//   index key   = Prefix(key): the key's first 8 bytes, big-endian,
//                 zero-padded (order-preserving: a < b bytewise implies
//                 Prefix(a) <= Prefix(b))
//   index value = PPtr of a Record (the only key with that prefix), of a
//                 Bucket (every key with that prefix, sorted) or of a
//                 Directory (the root of a copy-on-write B+-tree whose
//                 leaves are Buckets, for a prefix of many keys)
//
// Record   one per key: the key bytes and the head of its version chain.
// Version  one committed (or in-flight) change of a key: its stamp (commit
//          timestamp, or the transaction record of an uncommitted
//          transaction), tombstone flag, the value (inline or in a value
//          block) and the next older version.
// Bucket   a sorted array of (bytes 8..15 of the key, Record) entries,
//          replaced copy-on-write.
// Directory an inner node over Buckets or Directories: (the child's
//          smallest key, the child) entries, replaced copy-on-write.
// TxnRecord the commit word of a multi-key transaction.
// Value block  the bytes of a value too large to sit in its version.
//
// Every block is 64-byte aligned (the allocator's guarantee). Words that
// change after a block is linked (Record::head, Version::stamp,
// Version::older, TxnRecord::commit) are aligned 8-byte words written with
// single stores (failure-atomic) and read with atomic loads. Everything
// else is written before the block is linked and never again.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace pmindex::kv {

inline constexpr size_t kMaxKeyBytes = 1024;
inline constexpr size_t kMaxValueBytes = size_t{1} << 20;

// Block tags (the first two bytes of every block), each distinct, none the
// crash simulator's poison (0xA5A5) nor zero.
inline constexpr uint16_t kRecordTag = 0x5252;   // "RR"
inline constexpr uint16_t kVersionTag = 0x5656;  // "VV"
inline constexpr uint16_t kBucketTag = 0x4242;   // "BB"
inline constexpr uint16_t kTxnTag = 0x5454;      // "TT"
inline constexpr uint16_t kDirectoryTag = 0x4444;  // "DD"

// ---------------------------------------------------------------- Record
//   [0, 2)   tag       kRecordTag
//   [2, 4)   reserved  0
//   [4, 8)   key_len   1 .. kMaxKeyBytes
//   [8, 16)  head      PPtr of the newest version; 0 = no version (an
//                      empty record: the key is absent). The only word
//                      that changes: one NAW links a new version.
//   [16, 16 + key_len) the key
struct Record {
  uint16_t tag;
  uint16_t reserved;
  uint32_t key_len;
  uint64_t head;

  static constexpr size_t kHeaderBytes = 16;
  static constexpr size_t Bytes(size_t key_len) { return kHeaderBytes + key_len; }
  const char* key_bytes() const { return reinterpret_cast<const char*>(this) + kHeaderBytes; }
  char* key_bytes() { return reinterpret_cast<char*>(this) + kHeaderBytes; }
  std::string_view key() const { return {key_bytes(), key_len}; }
};
static_assert(sizeof(Record) == Record::kHeaderBytes);
static_assert(offsetof(Record, key_len) == 4);
static_assert(offsetof(Record, head) == 8);

// ---------------------------------------------------------------- Version
//   [0, 2)   tag    kVersionTag
//   [2, 4)   flags  kTombstone (no value), kSeparate (value in a block)
//   [4, 8)   len    value bytes, 0 .. kMaxValueBytes (0 for a tombstone)
//   [8, 16)  stamp  (ts << 1) | 1: committed at timestamp ts >= 1;
//                   an even non-zero word: the PPtr of the TxnRecord of
//                   the transaction that wrote it, not finalized yet
//                   (committed iff that record's commit word is set).
//                   Finalizing rewrites it to the commit timestamp.
//   [16, 24) older  PPtr of the next older version (smaller timestamp),
//                   0 = none. Set to 0 (one NAW-ordered store) when the
//                   older versions are reclaimed.
//   [24, 32) value  PPtr of the value block (kSeparate), else 0
//   [32, 32 + len)  the value, unless kSeparate or kTombstone
struct Version {
  uint16_t tag;
  uint16_t flags;
  uint32_t len;
  uint64_t stamp;
  uint64_t older;
  uint64_t value;

  static constexpr uint16_t kTombstone = 1;
  static constexpr uint16_t kSeparate = 2;
  static constexpr size_t kHeaderBytes = 32;
  // A value of up to this many bytes sits in its version: the version then
  // stays within the allocator's size classes (128 KiB). A larger one gets
  // a block of exactly its size (whole 256 KiB pages: a 1 MiB value takes
  // four, where a version holding it would take five).
  static constexpr size_t kMaxInline = (size_t{128} << 10) - kHeaderBytes;
  static constexpr bool Inline(size_t len) { return len <= kMaxInline; }
  static constexpr size_t Bytes(size_t len, bool tombstone) {
    return kHeaderBytes + (tombstone || !Inline(len) ? 0 : len);
  }
  bool tombstone() const { return (flags & kTombstone) != 0; }
  bool separate() const { return (flags & kSeparate) != 0; }
  const char* inline_bytes() const { return reinterpret_cast<const char*>(this) + kHeaderBytes; }
  char* inline_bytes() { return reinterpret_cast<char*>(this) + kHeaderBytes; }
};
static_assert(sizeof(Version) == Version::kHeaderBytes);
static_assert(offsetof(Version, len) == 4);
static_assert(offsetof(Version, stamp) == 8);
static_assert(offsetof(Version, older) == 16);
static_assert(offsetof(Version, value) == 24);

// A committed stamp and back.
constexpr uint64_t CommittedStamp(uint64_t ts) { return ts << 1 | 1; }
constexpr bool IsCommittedStamp(uint64_t stamp) { return (stamp & 1) != 0; }
constexpr uint64_t StampTs(uint64_t stamp) { return stamp >> 1; }

// ---------------------------------------------------------------- Bucket
//   [0, 2)   tag      kBucketTag
//   [2, 4)   reserved 0
//   [4, 8)   count    entries, >= 1; >= 2 if the bucket is the prefix's
//                     root (a prefix with one key has a Record)
//   [8, 16)  check    NodeCheck of the bucket's bytes (below)
//   [16, 16 + 16 * count) entries, ascending by their records' full keys:
//            { next8: Next8(key) (bytes 8..15 of the key, big-endian,
//              zero-padded), record: PPtr of the Record }
// Never changed once linked: a new key or a removed one gives a new bucket,
// installed with the index's update of the prefix. A bucket is the root of
// its prefix's keys or a leaf under a Directory (below): a writer keeps
// buckets at most StoreOptions::fanout entries, but a reader accepts any
// count (the fanout is a writer's policy, not part of the format).
struct Bucket {
  struct Entry {
    uint64_t next8;
    uint64_t record;
  };
  uint16_t tag;
  uint16_t reserved;
  uint32_t count;
  uint64_t check;

  static constexpr size_t kHeaderBytes = 16;
  static constexpr size_t Bytes(size_t count) { return kHeaderBytes + count * sizeof(Entry); }
  const Entry* entries() const {
    return reinterpret_cast<const Entry*>(reinterpret_cast<const char*>(this) + kHeaderBytes);
  }
  Entry* entries() { return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) + kHeaderBytes); }
};
static_assert(sizeof(Bucket) == Bucket::kHeaderBytes);
static_assert(sizeof(Bucket::Entry) == 16);
static_assert(offsetof(Bucket, count) == 4);
static_assert(offsetof(Bucket, check) == 8);

// ---------------------------------------------------------------- Directory
// A prefix with more keys than fit one bucket holds them in a copy-on-write
// B+-tree: Buckets are its leaves (level 0), Directories its inner nodes.
//   [0, 2)   tag      kDirectoryTag
//   [2, 4)   level    1 .. kMaxLevel; its children are of level - 1 (level
//                     1: Buckets)
//   [4, 8)   count    children, >= 1 (>= 2 for the prefix's root)
//   [8, 16)  check    NodeCheck of the directory's bytes (below)
//   [16, 16 + 24 * count) entries, ascending: { next8: Next8 of the
//            child's smallest key, first: PPtr of that key's Record,
//            child: PPtr of the child }
// Like a Bucket, never changed once linked: a change under the prefix
// copies the path from the changed leaf to the root (and a sibling it
// merges with), and the index's update of the prefix installs the new
// root. A root of one child is replaced by that child, a root bucket of
// one key by its record, so only nodes below the root hold one entry.
struct Directory {
  struct Entry {
    uint64_t next8;
    uint64_t first;
    uint64_t child;
  };
  uint16_t tag;
  uint16_t level;
  uint32_t count;
  uint64_t check;

  static constexpr size_t kHeaderBytes = 16;
  static constexpr size_t Bytes(size_t count) { return kHeaderBytes + count * sizeof(Entry); }
  const Entry* entries() const {
    return reinterpret_cast<const Entry*>(reinterpret_cast<const char*>(this) + kHeaderBytes);
  }
  Entry* entries() { return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) + kHeaderBytes); }
};
static_assert(sizeof(Directory) == Directory::kHeaderBytes);
static_assert(sizeof(Directory::Entry) == 24);
static_assert(offsetof(Directory, level) == 2);
static_assert(offsetof(Directory, count) == 4);
static_assert(offsetof(Directory, check) == 8);

// The check word of a Bucket or a Directory of `bytes` bytes (its header
// and entries): a hash of its 8-byte words, the check word (word 1) taken
// as zero. Written with the node, compared by recovery's walk and Verify
// (not by lookups): a node's count, level or entries changed after it was
// written (a media error, a stray write) would otherwise read as a smaller
// or different node that is still well formed. Four lanes of words, each
// step a bijection of its lane's state and of the word it takes in, then a
// bijective mix of the lanes: one changed word, the check word included,
// always changes the result.
inline uint64_t NodeCheck(const void* node, size_t bytes) {
  constexpr uint64_t kOdd = 0x9E3779B97F4A7C15ull;
  const char* p = static_cast<const char*>(node);
  const size_t words = bytes / 8;
  auto step = [](uint64_t a, uint64_t w) { return std::rotl((a ^ w) * kOdd, 29); };
  auto word = [p](size_t i) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    return i == 1 ? 0 : w;
  };
  // Four named lanes (not an array: they stay in registers).
  uint64_t a0 = bytes, a1 = 0x6A09E667F3BCC909ull, a2 = 0xBB67AE8584CAA73Bull, a3 = 0x3C6EF372FE94F82Bull;
  size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    a0 = step(a0, word(i));
    a1 = step(a1, word(i + 1));
    a2 = step(a2, word(i + 2));
    a3 = step(a3, word(i + 3));
  }
  if (i < words) a0 = step(a0, word(i++));
  if (i < words) a1 = step(a1, word(i++));
  if (i < words) a2 = step(a2, word(i++));
  uint64_t h = a0 + std::rotl(a1, 16) + std::rotl(a2, 32) + std::rotl(a3, 48);
  h ^= h >> 31;
  h *= 0xD6E8FEB86659FD93ull;
  return h ^ (h >> 32);
}

// A hash of `n` bytes at `p` (any length and alignment; the last partial
// word zero-padded, the length mixed in), for the store's content record
// (docs/layout/kv.md "Content record"): the same four lanes as NodeCheck,
// whose steps are bijections of the lane and of the word taken in, so one
// changed word always changes the result. About one multiply per 8 bytes
// per lane, so hashing a value costs little more than reading it.
inline uint64_t BytesCheck(const void* p, size_t n) {
  constexpr uint64_t kOdd = 0x9E3779B97F4A7C15ull;
  const char* b = static_cast<const char*>(p);
  auto step = [](uint64_t a, uint64_t w) { return std::rotl((a ^ w) * kOdd, 29); };
  auto word = [b](size_t i) {
    uint64_t w;
    std::memcpy(&w, b + 8 * i, 8);
    return w;
  };
  const size_t words = n / 8;
  uint64_t a0 = n, a1 = 0x510E527FADE682D1ull, a2 = 0x9B05688C2B3E6C1Full,
           a3 = 0x1F83D9ABFB41BD6Bull;
  size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    a0 = step(a0, word(i));
    a1 = step(a1, word(i + 1));
    a2 = step(a2, word(i + 2));
    a3 = step(a3, word(i + 3));
  }
  if (i < words) a0 = step(a0, word(i++));
  if (i < words) a1 = step(a1, word(i++));
  if (i < words) a2 = step(a2, word(i++));
  if (const size_t tail = n % 8; tail != 0) {
    uint64_t w = 0;
    std::memcpy(&w, b + 8 * words, tail);
    a3 = step(a3, w);
  }
  uint64_t h = a0 + std::rotl(a1, 16) + std::rotl(a2, 32) + std::rotl(a3, 48);
  h ^= h >> 31;
  h *= 0xD6E8FEB86659FD93ull;
  return h ^ (h >> 32);
}

// The deepest a prefix's tree may be: a root at this level is not split
// (it grows past the fanout instead), so a walk's depth is bounded.
inline constexpr uint16_t kMaxLevel = 15;

// ---------------------------------------------------------------- TxnRecord
//   [0, 2)   tag     kTxnTag
//   [2, 4)   reserved 0
//   [4, 8)   writes  keys the transaction writes (informational)
//   [8, 16)  commit  0 while the transaction is in flight; its committed
//                    stamp, (ts << 1) | 1, once committed: one NAW, the
//                    commit point of the whole transaction
//   [16, 64) reserved 0
struct TxnRecord {
  uint16_t tag;
  uint16_t reserved;
  uint32_t writes;
  uint64_t commit;
  uint64_t reserved2[6];
};
static_assert(sizeof(TxnRecord) == 64);
static_assert(offsetof(TxnRecord, commit) == 8);

// ---------------------------------------------------------------- keys
// 8 bytes of `key` from `at`, big-endian, zero-padded past its end.
inline uint64_t BigEndian8(std::string_view key, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) {
    const size_t j = at + i;
    v = v << 8 | (j < key.size() ? static_cast<uint8_t>(key[j]) : 0);
  }
  return v;
}
// The index key of `key`: order-preserving (bytewise order of keys maps to
// non-decreasing prefixes; keys with equal prefixes share a bucket).
inline uint64_t Prefix(std::string_view key) { return BigEndian8(key, 0); }
// Bytes 8..15 of `key`: the bucket's search key (non-decreasing along a
// bucket sorted by full key, so a binary search over it finds the run of
// entries that can hold the key, and only ties read records).
inline uint64_t Next8(std::string_view key) { return BigEndian8(key, 8); }

// Bytewise order (memcmp; a key before its extensions): <0, 0, >0.
inline int CompareKeys(std::string_view a, std::string_view b) {
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  const int c = n == 0 ? 0 : std::memcmp(a.data(), b.data(), n);
  if (c != 0) return c;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

}  // namespace pmindex::kv
