// Test helpers for tests that damage or inspect pool bytes: an in-memory
// pool (16 MiB, growing to 64 MiB) with an index of `kind` filled with
// `keys` entries, and an image of such a pool closed cleanly (key
// ImageKey(i), value i), opened with Pool::OpenImage.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "index/index.h"
#include "pm/pool.h"
#include "pm/pool_format.h"

namespace pmindex::testing {

inline uint64_t ImageKey(int i) { return uint64_t(i) * 3 + 1; }

// An in-memory pool of `kind` whose new index holds keys key(i) with
// values value(i), i = 0 .. keys-1 (the index still open).
struct FilledPool {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
};
inline FilledPool FillInMemory(const std::string& kind, int keys, const std::function<uint64_t(int)>& key,
                               const std::function<uint64_t(int)>& value) {
  PoolOptions po;
  po.size = 16ull << 20;
  po.max_size = 64ull << 20;
  po.kind = kind;
  auto pool = Pool::CreateInMemory(po);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  auto idx = create_index(kind, "", pool.value().get());
  EXPECT_TRUE(idx.ok()) << kind << ": " << idx.status().ToString();
  for (int i = 0; i < keys; ++i) EXPECT_TRUE(idx.value()->insert(key(i), value(i)).ok());
  return {std::move(pool).value(), std::move(idx).value()};
}

// The bytes a clean close leaves: the index closed and destroyed (the
// allocator gives back its caches), then the pool's clean flag set as
// Pool::Close sets it. The in-memory pool itself stays open.
inline std::vector<std::byte> ClosedBytes(FilledPool& f) {
  EXPECT_TRUE(f.idx->close().ok());
  f.idx.reset();
  auto b = f.pool->bytes();
  std::vector<std::byte> bytes(b.begin(), b.end());
  const uint64_t one = 1;
  std::memcpy(bytes.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
  return bytes;
}

inline std::unique_ptr<Pool> CleanImage(const std::string& kind, int keys) {
  FilledPool f = FillInMemory(kind, keys, ImageKey, [](int i) { return uint64_t(i); });
  EXPECT_TRUE(f.idx->close().ok());
  f.idx.reset();
  auto img = Pool::OpenImage(f.pool->bytes());
  EXPECT_TRUE(img.ok()) << img.status().ToString();
  return std::move(img).value();
}

}  // namespace pmindex::testing
