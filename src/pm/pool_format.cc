#include "pm/pool_format.h"

#include <array>
#include <cstdio>

namespace pmindex::pm {

namespace {
// Reflected CRC32C polynomial.
constexpr uint32_t kCastagnoli = 0x82F63B78u;

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCastagnoli : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();
}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint64_t RootCheck(unsigned slot, uint32_t seq, uint64_t value) {
  // A fixed tag in the checksummed bytes keeps all-zero and all-one
  // records invalid; the slot number keeps one slot's record from passing
  // as another's.
  struct {
    uint64_t tag, slot, seq, value;
  } in{0x544F4F524D504D50ull /* "PMPMROOT" */, slot, seq, value};
  return uint64_t{seq} << 32 | Crc32c(&in, sizeof in);
}

bool ResolveRoot(unsigned slot, const RootRecord& a, const RootRecord& b, RootRecord* out,
                 bool* repair) {
  const bool va = RootRecordValid(slot, a);
  const bool vb = RootRecordValid(slot, b);
  if (va && vb) {
    if (a.value == b.value && a.check == b.check) {
      *out = a;
      *repair = false;
      return true;
    }
    // A write stores copy A first: A one write ahead of B is a write whose
    // second half a crash interrupted.
    if (RootSeq(a) == RootSeq(b) + 1) {
      *out = a;
      *repair = true;
      return true;
    }
    return false;  // two valid copies no single interrupted write explains
  }
  if (va || vb) {
    // A invalid: its write was interrupted (B holds the value before it)
    // or A was damaged (B holds the same value). B invalid: its write was
    // interrupted after A's completed, or B was damaged.
    *out = va ? a : b;
    *repair = true;
    return true;
  }
  return false;
}

std::string FormatUuid(const uint8_t (&u)[16]) {
  char buf[40];
  std::snprintf(buf, sizeof(buf),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                u[15]);
  return buf;
}

}  // namespace pmindex::pm
