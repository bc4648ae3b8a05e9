// Pools and indexes for tests:
//   MakeInMemory(kind, options)  an in-memory pool (16 MiB, growing to
//                                `max_size`) holding a new index
//   ReopenImage(pool)            a byte copy of a live pool, recovered: what
//                                a crash leaves when every store is durable
//   FillInMemory / ClosedBytes / CleanImage
//                                an index filled with known keys, and the
//                                bytes of its pool after a clean close, for
//                                tests that damage or inspect pool bytes
// Failures are reported with EXPECT (the makers return values, so they
// cannot ASSERT); a failed open leaves `idx` null.
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
#include "support/status.h"

namespace pmindex::testing {

struct PoolAndIndex {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
};

inline PoolAndIndex MakeInMemory(const std::string& kind, const std::string& options,
                                 uint64_t max_size = 512ull << 20) {
  PoolOptions po;
  po.size = 16ull << 20;
  po.max_size = max_size;
  po.kind = kind;
  po.index_options = options;
  auto pool = Pool::CreateInMemory(po);
  PMINDEX_EXPECT_OK(pool) << kind;
  if (!pool.ok()) return {};
  auto idx = create_index(kind, options, pool.value().get());
  PMINDEX_EXPECT_OK(idx) << kind << " " << options;
  return {std::move(pool).value(), idx.ok() ? std::move(idx).value() : nullptr};
}

inline PoolAndIndex ReopenImage(Pool* p) {
  auto img = Pool::OpenImage(p->bytes());
  PMINDEX_EXPECT_OK(img);
  if (!img.ok()) return {};
  auto idx = open_index(img.value().get());
  PMINDEX_EXPECT_OK(idx);
  return {std::move(img).value(), idx.ok() ? std::move(idx).value() : nullptr};
}

inline uint64_t ImageKey(int i) { return uint64_t(i) * 3 + 1; }

// An in-memory pool of `kind` (16 MiB, growing to 64 MiB) whose new index
// holds keys key(i) with values value(i), i = 0 .. keys-1 (the index
// still open).
using FilledPool = PoolAndIndex;
inline FilledPool FillInMemory(const std::string& kind, int keys,
                               const std::function<uint64_t(int)>& key,
                               const std::function<uint64_t(int)>& value) {
  FilledPool f = MakeInMemory(kind, "", 64ull << 20);
  if (f.idx == nullptr) return f;
  for (int i = 0; i < keys; ++i) PMINDEX_EXPECT_OK(f.idx->insert(key(i), value(i)));
  return f;
}

// The bytes a clean close leaves: the index closed and destroyed (the
// allocator gives back its caches), then the pool's clean flag set as
// Pool::Close sets it. The in-memory pool itself stays open.
inline std::vector<std::byte> ClosedBytes(FilledPool& f) {
  PMINDEX_EXPECT_OK(f.idx->close());
  f.idx.reset();
  auto b = f.pool->bytes();
  std::vector<std::byte> bytes(b.begin(), b.end());
  const uint64_t one = 1;
  std::memcpy(bytes.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
  return bytes;
}

// A clean image of FillInMemory(kind, keys, ImageKey, i -> i), opened
// with Pool::OpenImage (no index attached).
inline std::unique_ptr<Pool> CleanImage(const std::string& kind, int keys) {
  FilledPool f = FillInMemory(kind, keys, ImageKey, [](int i) { return uint64_t(i); });
  PMINDEX_EXPECT_OK(f.idx->close());
  f.idx.reset();
  auto img = Pool::OpenImage(f.pool->bytes());
  PMINDEX_EXPECT_OK(img);
  return std::move(img).value();
}

}  // namespace pmindex::testing
