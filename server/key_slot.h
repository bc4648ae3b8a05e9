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
constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
    t[b] = static_cast<uint16_t>(crc);
  }
  return t;
}
inline constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();
}  // namespace key_slot_detail

inline uint16_t Crc16(std::string_view s) {
  uint16_t crc = 0;
  for (char c : s) {
    const auto byte = static_cast<uint8_t>(c);
    crc = static_cast<uint16_t>((crc << 8) ^
                                key_slot_detail::kCrc16Table[((crc >> 8) ^ byte) & 0xff]);
  }
  return crc;
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
