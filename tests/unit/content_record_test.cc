// The content record of a clean close (root slot 6, common/content_record.h): a key or a
// value damaged while a pool was closed cleanly is refused at open with
// Corruption and no byte changed, for every persistent kind; pools that
// were closed properly (after reopening, after changes, after an index
// destroyed without close()) open intact.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "support/kinds.h"
#include "support/pools.h"

namespace pmindex {
namespace {

constexpr int kKeys = 3000;
// Keys and values whose 8 bytes occur nowhere else in a pool by accident.
uint64_t KeyOf(int i) { return 0x4B45590000000000ull + uint64_t(i) * 0x10001; }
uint64_t ValueOf(int i) { return 0x56414C0000000000ull + uint64_t(i) * 0x20003; }

std::vector<std::string> Kinds() {
  std::vector<std::string> out;
  for (const IndexInfo* info : testing::TestKinds::Get().NonFixtures())
    if (info->persistent && info->stores_data) out.push_back(info->name);
  return out;
}

// Offsets of every 8-byte-aligned copy of w in the bytes.
std::vector<size_t> Find(const std::vector<std::byte>& b, uint64_t w) {
  std::vector<size_t> at;
  for (size_t off = 0; off + 8 <= b.size(); off += 8)
    if (std::memcmp(b.data() + off, &w, 8) == 0) at.push_back(off);
  return at;
}

void ExpectRefusedUnchanged(const std::vector<std::byte>& bytes, const std::string& what) {
  SCOPED_TRACE(what);
  auto pool = Pool::OpenImage(bytes);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  {
    auto idx = open_index(pool.value().get());
    ASSERT_FALSE(idx.ok()) << "opened with " << idx.value()->stats().entries << " entries";
    EXPECT_TRUE(idx.status().is_corruption()) << idx.status().ToString();
  }
  auto after = pool.value()->bytes();
  EXPECT_TRUE(std::equal(after.begin(), after.end(), bytes.begin())) << "the refused open changed the pool";
}

// Opens the bytes, checks every pair and verify(); returns the pool (index
// destroyed) for further use.
std::unique_ptr<Pool> ExpectIntact(const std::vector<std::byte>& bytes, int keys, const std::string& what) {
  SCOPED_TRACE(what);
  auto pool = Pool::OpenImage(bytes);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  if (!pool.ok()) return nullptr;
  auto idx = open_index(pool.value().get());
  EXPECT_TRUE(idx.ok()) << idx.status().ToString();
  if (!idx.ok()) return nullptr;
  EXPECT_TRUE(idx.value()->verify().ok());
  EXPECT_EQ(idx.value()->stats().entries, static_cast<uint64_t>(keys));
  for (int i = 0; i < keys; ++i) EXPECT_EQ(idx.value()->lookup(KeyOf(i)), ValueOf(i)) << i;
  return std::move(pool).value();
}

// The bytes of `pool` as a clean close leaves them, its index `idx` closed
// (or only destroyed, without close()).
std::vector<std::byte> CloseToBytes(Pool* pool, std::unique_ptr<Index> idx, bool call_close) {
  if (call_close) {
    EXPECT_TRUE(idx->close().ok());
  }
  idx.reset();
  auto b = pool->bytes();
  std::vector<std::byte> bytes(b.begin(), b.end());
  const uint64_t one = 1;
  std::memcpy(bytes.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
  return bytes;
}

TEST(ContentRecord, DamagedValueOrKeyOfACleanPoolIsRefused) {
  for (const std::string& kind : Kinds()) {
    SCOPED_TRACE(kind);
    testing::FilledPool f = testing::FillInMemory(kind, kKeys, KeyOf, ValueOf);
    const std::vector<std::byte> clean = testing::ClosedBytes(f);
    EXPECT_NE(pm::ContentRecord(0), 0u);
    ExpectIntact(clean, kKeys, kind + " undamaged");
    for (int i : {0, kKeys / 2, kKeys - 1}) {
      // Every copy of the value (a split may leave a dead one behind), one
      // bit each: the live pair's value differs from the one closed.
      std::vector<std::byte> d = clean;
      const std::vector<size_t> at = Find(d, ValueOf(i));
      ASSERT_FALSE(at.empty()) << "value " << i << " not found";
      for (size_t off : at) d[off + 3] ^= std::byte{0x10};
      ExpectRefusedUnchanged(d, kind + ": value " + std::to_string(i) + " with a flipped bit");
      // The same for the key (inner nodes may hold it as a separator too).
      d = clean;
      const std::vector<size_t> kat = Find(d, KeyOf(i));
      ASSERT_FALSE(kat.empty()) << "key " << i << " not found";
      for (size_t off : kat) d[off + 1] ^= std::byte{0x01};
      ExpectRefusedUnchanged(d, kind + ": key " + std::to_string(i) + " with a flipped bit");
    }
  }
}

TEST(ContentRecord, PoolsClosedAgainOpenIntact) {
  for (const std::string& kind : Kinds()) {
    SCOPED_TRACE(kind);
    testing::FilledPool f = testing::FillInMemory(kind, kKeys, KeyOf, ValueOf);
    std::vector<std::byte> bytes = testing::ClosedBytes(f);
    // Reopened and closed without a change, twice.
    for (int round = 0; round < 2; ++round) {
      auto pool = ExpectIntact(bytes, kKeys, "reopened " + std::to_string(round));
      ASSERT_NE(pool, nullptr);
      auto idx = open_index(pool.get());
      ASSERT_TRUE(idx.ok()) << idx.status().ToString();
      bytes = CloseToBytes(pool.get(), std::move(idx).value(), /*call_close=*/true);
    }
    // Reopened, changed (one pair more, one value updated, one removed and
    // put back), closed.
    {
      auto pool = Pool::OpenImage(bytes);
      ASSERT_TRUE(pool.ok());
      auto idx = open_index(pool.value().get());
      ASSERT_TRUE(idx.ok()) << idx.status().ToString();
      ASSERT_TRUE(idx.value()->insert(KeyOf(kKeys), ValueOf(kKeys)).ok());
      ASSERT_TRUE(idx.value()->update(KeyOf(7), ValueOf(99999)).ok());
      ASSERT_TRUE(idx.value()->update(KeyOf(7), ValueOf(7)).ok());
      ASSERT_TRUE(idx.value()->remove(KeyOf(8)).ok());
      ASSERT_TRUE(idx.value()->insert(KeyOf(8), ValueOf(8)).ok());
      bytes = CloseToBytes(pool.value().get(), std::move(idx).value(), /*call_close=*/true);
    }
    ExpectIntact(bytes, kKeys + 1, "changed and closed");
    // Changed again, and the index destroyed without close(): Pool::Close
    // still marks the pool clean, so the record must be current.
    {
      auto pool = Pool::OpenImage(bytes);
      ASSERT_TRUE(pool.ok());
      auto idx = open_index(pool.value().get());
      ASSERT_TRUE(idx.ok()) << idx.status().ToString();
      ASSERT_TRUE(idx.value()->remove(KeyOf(kKeys)).ok());
      bytes = CloseToBytes(pool.value().get(), std::move(idx).value(), /*call_close=*/false);
    }
    ExpectIntact(bytes, kKeys, "changed and destroyed without close()");
  }
}

}  // namespace
}  // namespace pmindex
