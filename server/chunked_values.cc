#include "server/chunked_values.h"

#include <algorithm>

#include "server/collections.h"

namespace pmindex::server::chunk_codec {

namespace {
template <class T>
void PutLittle(T v, std::string* out) {
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
template <class T>
T GetLittle(std::string_view s, size_t pos) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<uint8_t>(s[pos + i])) << (8 * i);
  return v;
}
}  // namespace

std::string EncodeHead(std::string_view value, uint64_t gen, uint16_t slot, uint32_t piece_bytes) {
  return EncodeHeadOf(value.size(), value.substr(0, kPrefixBytes), gen, slot, piece_bytes);
}

std::string EncodeHeadOf(uint64_t bytes, std::string_view prefix, uint64_t gen, uint16_t slot,
                         uint32_t piece_bytes) {
  std::string h;
  h.reserve(kFixedBytes + kPrefixBytes);
  h.push_back(static_cast<char>(kTag));
  h.push_back(static_cast<char>(kFormat));
  PutLittle<uint64_t>(bytes, &h);
  PutLittle<uint64_t>(gen, &h);
  PutLittle<uint16_t>(slot, &h);
  PutLittle<uint32_t>(piece_bytes, &h);
  h.append(prefix.substr(0, kPrefixBytes));
  return h;
}

bool DecodeHead(std::string_view stored, Head* out) {
  if (stored.size() < kFixedBytes || !IsHead(stored) || static_cast<uint8_t>(stored[1]) != kFormat)
    return false;
  out->bytes = GetLittle<uint64_t>(stored, 2);
  out->gen = GetLittle<uint64_t>(stored, 10);
  out->slot = GetLittle<uint16_t>(stored, 18);
  out->piece_bytes = GetLittle<uint32_t>(stored, 20);
  out->prefix.assign(stored.substr(kFixedBytes));
  return out->gen != 0 && out->slot < collection_keys::kElementRegion && out->piece_bytes > 0 &&
         out->pieces() <= UINT32_MAX &&
         out->prefix.size() == std::min<uint64_t>(out->bytes, kPrefixBytes);
}

std::string PiecePrefix(uint32_t ns, uint16_t slot, uint64_t gen) {
  return collection_keys::ElementPrefix(ns, slot, gen, kPieceSpace);
}

std::string PieceKey(uint32_t ns, uint16_t slot, uint64_t gen, uint32_t i) {
  std::string k = PiecePrefix(ns, slot, gen);
  for (int b = 3; b >= 0; --b) k.push_back(static_cast<char>((i >> (8 * b)) & 0xff));
  return k;
}

}  // namespace pmindex::server::chunk_codec
