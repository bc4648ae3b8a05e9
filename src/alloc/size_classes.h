// Size classes of the allocator (docs/allocator.md).
//
// 64-byte steps up to 1 KiB (16 classes), then four classes per doubling up
// to 128 KiB (28 classes): 1280, 1536, 1792, 2048, 2560, ..., 4096, ...,
// 131072. Every class size is a multiple of 64, and every class above 1 KiB
// is a multiple of 256. Blocks of a class page sit at page_start + i * size
// and pages are 256 KiB aligned, so a block is 64-byte aligned and a block
// whose size is a multiple of 256 is 256-byte aligned. Requests above
// kMaxSmallSize take whole pages (spans). Small pools map requests to the
// power-of-two classes only (CoarseClassOf).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "pm/pool.h"

namespace pmindex::alloc {

inline constexpr uint64_t kPageBytes = PoolOptions::kPageSize;  // 256 KiB
inline constexpr int kNumClasses = 44;
inline constexpr size_t kMaxSmallSize = 128 * 1024;
inline constexpr size_t kMinBlock = 64;
// Bits needed for the blocks of the smallest class in one page.
inline constexpr size_t kMaxBlocksPerPage = kPageBytes / kMinBlock;  // 4096
inline constexpr size_t kBitmapWords = kMaxBlocksPerPage / 64;      // 64

namespace detail {
constexpr std::array<uint32_t, kNumClasses> MakeClassSizes() {
  std::array<uint32_t, kNumClasses> s{};
  int c = 0;
  for (uint32_t sz = 64; sz <= 1024; sz += 64) s[c++] = sz;
  for (uint32_t base = 1024; base < kMaxSmallSize; base *= 2) {
    for (uint32_t q = 5; q <= 8; ++q) s[c++] = base / 4 * q;
  }
  return s;
}
inline constexpr std::array<uint32_t, kNumClasses> kClassSizes = MakeClassSizes();

// Class of a request of n bytes, indexed by (n - 1) / 64 for 1 <= n <= 128 KiB.
constexpr std::array<uint8_t, kMaxSmallSize / 64> MakeClassIndex() {
  std::array<uint8_t, kMaxSmallSize / 64> idx{};
  int c = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    size_t n = (i + 1) * 64;  // largest request that maps to slot i
    while (kClassSizes[c] < n) ++c;
    idx[i] = static_cast<uint8_t>(c);
  }
  return idx;
}
inline constexpr std::array<uint8_t, kMaxSmallSize / 64> kClassIndex = MakeClassIndex();

// The same for small pools: the smallest class that is a power of two and
// holds n bytes (12 of the 44 classes: 64, 128, ..., 131072).
constexpr std::array<uint8_t, kMaxSmallSize / 64> MakeCoarseClassIndex() {
  std::array<uint8_t, kMaxSmallSize / 64> idx{};
  for (size_t i = 0; i < idx.size(); ++i) {
    int c = kClassIndex[i];
    while ((kClassSizes[c] & (kClassSizes[c] - 1)) != 0) ++c;
    idx[i] = static_cast<uint8_t>(c);
  }
  return idx;
}
inline constexpr std::array<uint8_t, kMaxSmallSize / 64> kCoarseClassIndex = MakeCoarseClassIndex();
}  // namespace detail

static_assert(detail::kClassSizes[15] == 1024);
static_assert(detail::kClassSizes[kNumClasses - 1] == kMaxSmallSize);

inline constexpr uint32_t ClassSize(int c) { return detail::kClassSizes[c]; }
inline constexpr uint32_t ClassBlocks(int c) {
  return static_cast<uint32_t>(kPageBytes / detail::kClassSizes[c]);
}
// REQUIRES: 1 <= n <= kMaxSmallSize.
inline constexpr int ClassOf(size_t n) { return detail::kClassIndex[(n - 1) / 64]; }
// REQUIRES: 1 <= n <= kMaxSmallSize.
inline constexpr int CoarseClassOf(size_t n) { return detail::kCoarseClassIndex[(n - 1) / 64]; }

// A pool whose maximum heap has fewer pages than this uses the coarse
// classes (CoarseClassOf): with a page per class in use, 44 classes could
// take a whole small heap while holding a few blocks each; 12 classes leave
// most of it free. The class of a page is in its page word, so a pool may
// be opened with either mapping.
inline constexpr size_t kCoarseBelowPages = 2 * kNumClasses;

static_assert(ClassSize(ClassOf(1)) == 64);
static_assert(ClassSize(ClassOf(65)) == 128);
static_assert(ClassSize(ClassOf(1025)) == 1280);
static_assert(ClassSize(ClassOf(2048)) == 2048);
static_assert(ClassSize(ClassOf(4096)) == 4096);
static_assert(ClassSize(ClassOf(4097)) == 5120);
static_assert(ClassSize(ClassOf(kMaxSmallSize)) == kMaxSmallSize);
static_assert(ClassSize(CoarseClassOf(1)) == 64);
static_assert(ClassSize(CoarseClassOf(65)) == 128);
static_assert(ClassSize(CoarseClassOf(129)) == 256);
static_assert(ClassSize(CoarseClassOf(1025)) == 2048);
static_assert(ClassSize(CoarseClassOf(4097)) == 8192);
static_assert(ClassSize(CoarseClassOf(kMaxSmallSize)) == kMaxSmallSize);

}  // namespace pmindex::alloc
