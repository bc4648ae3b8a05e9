// One-byte key fingerprints and SIMD fingerprint matching, shared by the
// trees whose leaves carry a fingerprint array (lbtree, fptree).
//
// Contract:
// - Fingerprint(k) is a fixed function of the key (it is persisted in PM
//   leaves, so it must never change between versions of the library).
// - MatchMask16(bytes, fp) returns a 16-bit mask whose bit i is set iff
//   bytes[i] == fp. MatchMask32 / MatchMask64 do the same for 32 / 64
//   bytes. The inputs are registers' worth of bytes already loaded by the
//   caller (callers read PM with relaxed atomics, so these functions never
//   touch shared memory themselves).
// - SSE2 is part of x86-64 and always used there. The 32/64-byte variants
//   use AVX2 when CPUID reports it (checked once at start), else two/four
//   SSE2 compares. Non-x86 builds use the scalar loop.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pmindex::common {

inline uint8_t Fingerprint(uint64_t k) {
  // Multiplicative hashing: the top byte of k * (2^64 / golden ratio)
  // depends on every bit of k.
  return static_cast<uint8_t>((k * 0x9E3779B97F4A7C15ull) >> 56);
}

// Scalar reference implementation (also the fallback).
inline uint64_t MatchMaskScalar(const uint8_t* bytes, int n, uint8_t fp) {
  uint64_t m = 0;
  for (int i = 0; i < n; ++i) m |= uint64_t{bytes[i] == fp} << i;
  return m;
}

#if defined(__x86_64__)
inline uint32_t MatchMask16(const uint8_t* bytes, uint8_t fp) {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  __m128i f = _mm_set1_epi8(static_cast<char>(fp));
  return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, f)));
}

namespace detail {
__attribute__((target("avx2"))) inline uint32_t MatchMask32Avx2(const uint8_t* bytes, uint8_t fp) {
  __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes));
  __m256i f = _mm256_set1_epi8(static_cast<char>(fp));
  return static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, f)));
}
inline bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
}  // namespace detail

inline uint32_t MatchMask32(const uint8_t* bytes, uint8_t fp) {
  if (detail::CpuHasAvx2()) return detail::MatchMask32Avx2(bytes, fp);
  return MatchMask16(bytes, fp) | (MatchMask16(bytes + 16, fp) << 16);
}
#else
inline uint32_t MatchMask16(const uint8_t* bytes, uint8_t fp) {
  return static_cast<uint32_t>(MatchMaskScalar(bytes, 16, fp));
}
inline uint32_t MatchMask32(const uint8_t* bytes, uint8_t fp) {
  return static_cast<uint32_t>(MatchMaskScalar(bytes, 32, fp));
}
#endif

// n <= 64 bytes, any length: whole 32/16-byte chunks by SIMD, the rest
// scalar. bytes must be readable for n bytes.
inline uint64_t MatchMask(const uint8_t* bytes, int n, uint8_t fp) {
  uint64_t m = 0;
  int i = 0;
  for (; i + 32 <= n; i += 32) m |= uint64_t{MatchMask32(bytes + i, fp)} << i;
  for (; i + 16 <= n; i += 16) m |= uint64_t{MatchMask16(bytes + i, fp)} << i;
  if (i < n) m |= MatchMaskScalar(bytes + i, n - i, fp) << i;
  return m;
}

}  // namespace pmindex::common
