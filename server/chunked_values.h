// Values larger than one store value (KvStore::kMaxValueBytes), stored in
// pieces by the databases' views (databases.h), so that every layer above
// (items, collections, the commands) reads and writes whole values.
//
// In database namespace `ns` (docs/server.md "Large values"), a value V of
// key K stored in pieces is
//
//   [ns][slot][0][K]                         a HEAD record (below)
//   [ns][0x4000|slot][gen 8B BE]['c'][i 4B BE]   piece i of V: bytes
//                                            [i*P, min((i+1)*P, |V|))
//
// i.e. the pieces are element records of a generation of their own (the
// collections' element region, collections.h), so a replaced, deleted,
// expired or flushed value's pieces are reclaimed as a collection's
// elements are: garbage-listed in the transaction that drops the head
// (Databases::ReclaimGarbageStep removes them later), or with the whole
// namespace. A generation is never reused. A value replaced whole gets a
// new generation; a patch of it (APPEND, SETRANGE, SETBIT: the store's
// PatchIfVersion) rewrites in place only the pieces it touches, adds the
// pieces past the old end, and rewrites the head (its length and
// prefix), all in one store transaction. So a piece changes only in a
// transaction that writes its head too: a reader reads a head and its
// pieces in one transaction whose commit validates the head, and then
// has exactly the value that head was written with. Head and pieces are
// written in one store transaction, so a crash keeps all of a value (or
// of a patch) or none of it.
//
// The head record's value:
//   byte 0      0x70 (no item or collection record starts so)
//   byte 1      format, 1
//   8 bytes     |V|, little endian
//   8 bytes     generation, little endian (never 0)
//   2 bytes     element slot, little endian (< 0x4000: K's hash slot)
//   4 bytes     P, the piece size, little endian (> 0)
//   rest        V's first min(|V|, kPrefixBytes) bytes: the item header,
//               for the expiry sweep, which reads heads without pieces
//
// A value is stored in pieces iff it is longer than the store's value
// limit or starts with the head tag (so a head is never mistaken for a
// value, or the other way round).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pmindex::server::chunk_codec {

inline constexpr uint8_t kTag = 0x70;
inline constexpr uint8_t kFormat = 1;
inline constexpr size_t kFixedBytes = 24;
inline constexpr size_t kPrefixBytes = 32;
// The sub-space byte of pieces, after the generation (collections.h).
inline constexpr char kPieceSpace = 'c';

struct Head {
  uint64_t bytes = 0;
  uint64_t gen = 0;
  uint16_t slot = 0;
  uint32_t piece_bytes = 0;
  std::string prefix;

  uint64_t pieces() const { return (bytes + piece_bytes - 1) / piece_bytes; }
};

inline bool IsHead(std::string_view stored) {
  return !stored.empty() && static_cast<uint8_t>(stored[0]) == kTag;
}
// True iff `value` is stored in pieces under a store whose values are at
// most `max_value_bytes`.
inline bool NeedsPieces(std::string_view value, size_t max_value_bytes) {
  return value.size() > max_value_bytes || IsHead(value);
}
// The head of `value` (its prefix taken from it).
std::string EncodeHead(std::string_view value, uint64_t gen, uint16_t slot, uint32_t piece_bytes);
// The head of a value of `bytes` bytes whose first min(bytes,
// kPrefixBytes) bytes are `prefix`.
std::string EncodeHeadOf(uint64_t bytes, std::string_view prefix, uint64_t gen, uint16_t slot,
                         uint32_t piece_bytes);
// False: not a well-formed head.
bool DecodeHead(std::string_view stored, Head* out);
// [ns][0x4000|slot][gen]['c']: every piece of the generation follows it.
std::string PiecePrefix(uint32_t ns, uint16_t slot, uint64_t gen);
// PiecePrefix + i, 4 bytes big endian.
std::string PieceKey(uint32_t ns, uint16_t slot, uint64_t gen, uint32_t i);

}  // namespace pmindex::server::chunk_codec
