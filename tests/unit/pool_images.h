// Test helper: an in-memory image of a cleanly closed pool holding an
// index of `kind` with `keys` entries (key ImageKey(i), value i), opened
// with Pool::OpenImage, for tests that damage or inspect pool bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "index/index.h"
#include "pm/pool.h"

namespace pmindex::testing {

inline uint64_t ImageKey(int i) { return uint64_t(i) * 3 + 1; }

inline std::unique_ptr<Pool> CleanImage(const std::string& kind, int keys) {
  PoolOptions po;
  po.size = 16ull << 20;
  po.max_size = 64ull << 20;
  po.kind = kind;
  auto pool = Pool::CreateInMemory(po);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  auto idx = create_index(kind, "", pool.value().get());
  EXPECT_TRUE(idx.ok()) << kind << ": " << idx.status().ToString();
  for (int i = 0; i < keys; ++i) EXPECT_TRUE(idx.value()->insert(ImageKey(i), i).ok());
  EXPECT_TRUE(idx.value()->close().ok());
  idx.value().reset();
  auto img = Pool::OpenImage(pool.value()->bytes());
  EXPECT_TRUE(img.ok()) << img.status().ToString();
  return std::move(img).value();
}

}  // namespace pmindex::testing
