// The hash slot of a key, as Redis Cluster defines it: CRC16 (the XMODEM
// variant: polynomial 0x1021, initial value 0, no reflection) of the key,
// or of its hash tag, modulo 16384. The hash tag is the part between the
// first '{' and the first '}' after it, if that part is not empty; keys
// with the same tag share a slot. pmserver stores every key under its slot
// (databases.h) so that one slot's keys are one range of the store.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace pmindex::server {

inline constexpr uint32_t kHashSlots = 16384;

namespace key_slot_detail {
// kCrc16Tables[0][b]: the CRC of byte b from state 0; [j][b]: of byte b
// followed by j zero bytes. Eight bytes then fold in one step of eight
// independent look-ups (slicing by 8) rather than a chain of eight.
constexpr std::array<std::array<uint16_t, 256>, 8> MakeCrc16Tables() {
  std::array<std::array<uint16_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
    t[0][b] = static_cast<uint16_t>(crc);
  }
  for (size_t j = 1; j < 8; ++j)
    for (uint32_t b = 0; b < 256; ++b)
      t[j][b] = static_cast<uint16_t>((t[j - 1][b] << 8) ^ t[0][t[j - 1][b] >> 8]);
  return t;
}
inline constexpr std::array<std::array<uint16_t, 256>, 8> kCrc16Tables = MakeCrc16Tables();

// One byte at a time: the definition, and the tail of Crc16.
inline uint16_t Crc16Bytewise(uint16_t crc, std::string_view s) {
  for (char c : s) {
    const auto byte = static_cast<uint8_t>(c);
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Tables[0][((crc >> 8) ^ byte) & 0xff]);
  }
  return crc;
}
}  // namespace key_slot_detail

inline uint16_t Crc16(std::string_view s) {
  using key_slot_detail::kCrc16Tables;
  uint16_t crc = 0;
  size_t i = 0;
  // The state folds into the chunk's first two bytes (the CRC is linear).
  for (; i + 8 <= s.size(); i += 8) {
    auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
    crc = static_cast<uint16_t>(
        kCrc16Tables[7][b(0) ^ (crc >> 8)] ^ kCrc16Tables[6][b(1) ^ (crc & 0xff)] ^
        kCrc16Tables[5][b(2)] ^ kCrc16Tables[4][b(3)] ^ kCrc16Tables[3][b(4)] ^
        kCrc16Tables[2][b(5)] ^ kCrc16Tables[1][b(6)] ^ kCrc16Tables[0][b(7)]);
  }
  return key_slot_detail::Crc16Bytewise(crc, s.substr(i));
}

inline uint16_t KeySlot(std::string_view key) {
  // Plain loops rather than find(): GCC 12 at -O3 reports a false
  // -Wstringop-overread on the inlined memchr in some callers.
  size_t open = 0;
  while (open < key.size() && key[open] != '{') ++open;
  if (open < key.size()) {
    size_t close = open + 1;
    while (close < key.size() && key[close] != '}') ++close;
    if (close < key.size() && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<uint16_t>(Crc16(key) & (kHashSlots - 1));
}

}  // namespace pmindex::server
