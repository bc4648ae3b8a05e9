#include "client/records.h"

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

// The filler of (k, version): n bytes, 8 per generator step (6 bits each).
void FillBytes(Key k, uint64_t version, char* out, size_t n) {
  workload::Rng rng(workload::DeriveSeed(k, version, 0x76616c7565ull));
  size_t i = 0;
  while (i < n) {
    uint64_t w = rng.Next();
    for (int b = 0; b < 8 && i < n; ++b, ++i, w >>= 8) out[i] = kFiller[w & 63];
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
  FillBytes(k, version, p + kValueHeaderBytes, size - kValueHeaderBytes);
}

const char* CheckValue(std::string_view value, Key k, size_t size, bool version_zero) {
  if (value.size() != size) return "value of the wrong size";
  uint64_t key = 0, version = 0;
  if (!GetHex(value.substr(0, 16), &key) || !GetHex(value.substr(16, 16), &version))
    return "value without a key/version header";
  if (key != k) return "value of another key";
  if (version_zero && version != 0) return "value of a version no operation wrote yet";
  // One buffer per thread: no allocation per check once it has grown.
  thread_local std::string want;
  FormatValue(k, version, size, &want);
  if (std::memcmp(want.data() + kValueHeaderBytes, value.data() + kValueHeaderBytes,
                  size - kValueHeaderBytes) != 0)
    return "value with corrupt data";
  return nullptr;
}

}  // namespace pmindex::client
