#include "client/records.h"

#include <algorithm>
#include <cstring>

namespace pmindex::client {

namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr char kFiller[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void PutHex(uint64_t v, char* out) {
  for (int i = 15; i >= 0; --i, v >>= 4) out[i] = kHex[v & 15];
}

bool GetHex(std::string_view s, uint64_t* v) {
  uint64_t r = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    r = r << 4 | static_cast<uint64_t>(d);
  }
  *v = r;
  return true;
}

// Fillers are windows of one fixed pseudo-random pattern of kPeriod
// bytes, repeated: the filler of (k, version) starts at an offset derived
// from both. Writing and checking a value is then a copy or a compare,
// not a generator run per byte (a client thread shares the machine with
// the server it measures).
constexpr size_t kPeriod = size_t{1} << 16;

const char* Pattern() {
  static const std::string pattern = [] {
    std::string p(kPeriod, '\0');
    workload::Rng rng(0x66696c6c6572ull);
    for (size_t i = 0; i < kPeriod; i += 8) {
      uint64_t w = rng.Next();
      for (size_t b = 0; b < 8; ++b, w >>= 8) p[i + b] = kFiller[w & 63];
    }
    return p;
  }();
  return pattern.data();
}

size_t FillerOffset(Key k, uint64_t version) {
  return workload::DeriveSeed(k, version, 0x76616c7565ull) % kPeriod;
}

// Calls fn(piece, len) for consecutive pieces of the n-byte filler of
// (k, version), until they cover it or fn returns false.
template <class Fn>
void ForFiller(Key k, uint64_t version, size_t n, Fn fn) {
  const char* pattern = Pattern();
  size_t off = FillerOffset(k, version);
  while (n > 0) {
    const size_t piece = std::min(n, kPeriod - off);
    if (!fn(pattern + off, piece)) return;
    n -= piece;
    off = 0;
  }
}

}  // namespace

void FormatKey(Key k, char* out) {
  std::memcpy(out, kKeyPrefix.data(), kKeyPrefix.size());
  char* d = out + kKeyBytes;
  for (size_t i = 0; i < kKeyDigits; ++i, k /= 10) *--d = static_cast<char>('0' + k % 10);
}

std::string KeyName(Key k) {
  std::string s(kKeyBytes, '\0');
  FormatKey(k, s.data());
  return s;
}

bool ParseKeyName(std::string_view name, Key* k) {
  if (name.size() != kKeyBytes || !name.starts_with(kKeyPrefix)) return false;
  unsigned __int128 r = 0;
  for (char c : name.substr(kKeyPrefix.size())) {
    if (c < '0' || c > '9') return false;
    r = r * 10 + static_cast<unsigned>(c - '0');
  }
  if (r > UINT64_MAX) return false;
  *k = static_cast<Key>(r);
  return true;
}

void FormatValue(Key k, uint64_t version, size_t size, std::string* out) {
  out->resize(size);
  char* p = out->data();
  PutHex(k, p);
  PutHex(version, p + 16);
  char* at = p + kValueHeaderBytes;
  ForFiller(k, version, size - kValueHeaderBytes, [&](const char* piece, size_t n) {
    std::memcpy(at, piece, n);
    at += n;
    return true;
  });
}

const char* CheckValue(std::string_view value, Key k, size_t size, bool version_zero) {
  if (value.size() != size) return "value of the wrong size";
  uint64_t key = 0, version = 0;
  if (!GetHex(value.substr(0, 16), &key) || !GetHex(value.substr(16, 16), &version))
    return "value without a key/version header";
  if (key != k) return "value of another key";
  if (version_zero && version != 0) return "value of a version no operation wrote yet";
  const char* at = value.data() + kValueHeaderBytes;
  bool same = true;
  ForFiller(k, version, size - kValueHeaderBytes, [&](const char* piece, size_t n) {
    same = std::memcmp(at, piece, n) == 0;
    at += n;
    return same;
  });
  if (!same) return "value with corrupt data";
  return nullptr;
}

}  // namespace pmindex::client
