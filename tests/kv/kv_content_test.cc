// The key-value store's content record (root slot 4, docs/layout/kv.md
// "Content record"): a bit flipped in a key, a value or a version of a
// cleanly closed store is refused at open with Corruption and no byte
// changed, over every persistent kind; damage while the store is open and
// unwritten fails Verify; undamaged pools (reopened, changed, crashed, with
// no record or with one an older build left behind) open intact.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "kv/kv_format.h"
#include "kv/store.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/kv.h"
#include "scenarios/scenario_util.h"
#include "support/persistent_kinds.h"
#include "support/status.h"
#include "support/temp_files.h"

namespace pmindex {
namespace {

using Model = std::map<std::string, std::string>;
using Bytes = std::vector<std::byte>;

// A store-flagged in-memory pool of `kind` and a store on it (the store
// goes first).
struct Mem {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<kv::Store> store;  // destroyed first
};

kv::StoreOptions SmallNodes() {
  kv::StoreOptions so;
  so.fanout = 4;  // keys under one prefix make buckets and directories
  return so;
}

Mem NewStore(const std::string& kind, const std::string& options) {
  PoolOptions po;
  po.size = 8ull << 20;
  po.max_size = 8ull << 20;
  po.kind = kind;
  po.index_options = options;
  po.incompat_flags = pm::kIncompatKvStore;
  Mem m;
  auto pool = Pool::CreateInMemory(po);
  PMINDEX_EXPECT_OK(pool);
  m.pool = std::move(pool).value();
  auto s = kv::Store::Create(m.pool.get(), kind, options, SmallNodes());
  PMINDEX_EXPECT_OK(s) << kind;
  m.store = std::move(s).value();
  return m;
}

// Keys with their own prefixes and keys sharing one (a tree of buckets and
// directories); values unique in the pool's bytes, one in a value block,
// one empty; some keys written twice (two versions), one removed.
Model Fill(kv::Store& s) {
  Model m;
  auto put = [&](const std::string& k, const std::string& v) {
    std::string_view vv = v;
    PMINDEX_ASSERT_OK(s.Write(k, &vv, kv::Store::Cond::kNone, 0));
    m[k] = v;
  };
  for (int i = 0; i < 40; ++i) {
    const std::string n = std::to_string(1000 + i);
    put("own" + n + "/key-with-a-long-tail-" + n,
        "value of own key " + n + std::string(i * 7, 'a' + i % 26));
    put("shared:/" + n + "-key-" + n,
        "value of shared key " + n + std::string(i * 5, 'A' + i % 26));
  }
  for (int i = 0; i < 40; i += 4) {
    const std::string n = std::to_string(1000 + i);
    put("own" + n + "/key-with-a-long-tail-" + n, "second value of own key " + n);
  }
  std::string big = "big value:";
  while (big.size() < kv::Version::kMaxInline + 1000) big += std::to_string(big.size()) + ",";
  put("big", big);
  put("empty", "");
  PMINDEX_EXPECT_OK(
      s.Write("own1001/key-with-a-long-tail-1001", nullptr, kv::Store::Cond::kNone, 0));
  m.erase("own1001/key-with-a-long-tail-1001");
  return m;
}

Bytes CleanBytes(Mem& m) {
  PMINDEX_EXPECT_OK(m.store->Close());
  m.store.reset();
  Bytes b(m.pool->bytes().begin(), m.pool->bytes().end());
  const uint64_t one = 1;
  std::memcpy(b.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
  return b;
}

Model Contents(kv::Store& s) {
  Model m;
  auto add = [&](std::string_view k, std::string_view v) {
    m.emplace(std::string(k), std::string(v));
    return true;
  };
  PMINDEX_EXPECT_OK(s.ScanAt(s.visible_ts(), "", std::nullopt, add));
  return m;
}

// Opens the bytes as a store: it must hold `model` and pass Verify.
Mem ExpectIntact(const Bytes& bytes, const Model& model, const std::string& what) {
  SCOPED_TRACE(what);
  Mem m;
  auto pool = Pool::OpenImage(bytes);
  PMINDEX_EXPECT_OK(pool);
  if (!pool.ok()) return m;
  m.pool = std::move(pool).value();
  auto s = kv::Store::Open(m.pool.get(), SmallNodes());
  PMINDEX_EXPECT_OK(s);
  if (!s.ok()) return m;
  m.store = std::move(s).value();
  PMINDEX_EXPECT_OK(m.store->Verify());
  EXPECT_EQ(Contents(*m.store), model);
  EXPECT_EQ(m.store->Stats().keys, model.size());
  return m;
}

void ExpectRefusedUnchanged(const Bytes& bytes, const std::string& what) {
  SCOPED_TRACE(what);
  auto pool = Pool::OpenImage(bytes);
  PMINDEX_ASSERT_OK(pool);
  {
    auto s = kv::Store::Open(pool.value().get(), SmallNodes());
    ASSERT_FALSE(s.ok()) << "opened";
    EXPECT_TRUE(s.status().is_corruption()) << s.status().ToString();
  }
  auto after = pool.value()->bytes();
  EXPECT_TRUE(std::equal(after.begin(), after.end(), bytes.begin()))
      << "the refused open changed the pool";
}

// Offsets of every copy of `s` in the bytes.
std::vector<size_t> Find(const Bytes& b, std::string_view s) {
  std::vector<size_t> at;
  const char* p = reinterpret_cast<const char*>(b.data());
  for (size_t off = 0; off + s.size() <= b.size();) {
    const void* hit = memmem(p + off, b.size() - off, s.data(), s.size());
    if (hit == nullptr) break;
    at.push_back(static_cast<size_t>(static_cast<const char*>(hit) - p));
    off = at.back() + 1;
  }
  return at;
}

// Writes root slot `slot` of the image as a later write would (both copies).
void ForgeSlot(Bytes& b, unsigned slot, uint64_t value) {
  pm::PoolHeader h;
  std::memcpy(&h, b.data(), sizeof h);
  const pm::RootRecord rec = pm::MakeRootRecord(slot, pm::RootSeq(h.root_a[slot]) + 1, value);
  std::memcpy(b.data() + offsetof(pm::PoolHeader, root_a) + sizeof rec * slot, &rec, sizeof rec);
  std::memcpy(b.data() + offsetof(pm::PoolHeader, root_b) + sizeof rec * slot, &rec, sizeof rec);
}
uint64_t Slot(const Bytes& b, unsigned slot) {
  pm::PoolHeader h;
  std::memcpy(&h, b.data(), sizeof h);
  return h.root_a[slot].value;
}

class KvContentOverKind : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(KvContentOverKind, FlippedBitsOfACleanStoreAreRefused) {
  const auto& [kind, options] = GetParam();
  scenario::SeedScope seed;
  scenario::Rng rng(seed);
  Mem m = NewStore(kind, options);
  const Model model = Fill(*m.store);
  const Bytes clean = CleanBytes(m);
  ASSERT_NE(Slot(clean, pm::kStoreContentSlot), 0u) << "no content record written";
  ExpectIntact(clean, model, "undamaged");
  // Sampled keys and values (every copy in the pool: a key's record is its
  // only copy; an old version holds an earlier value), one bit each.
  std::vector<std::string> keys, values;
  for (const auto& [k, v] : model) {
    if (k.size() > 16) keys.push_back(k);
    if (v.size() >= 16) values.push_back(v);
  }
  for (int n = 0; n < 4; ++n) {
    const std::string& k = keys[rng.uniform(keys.size())];
    const std::vector<size_t> at = Find(clean, k);
    ASSERT_EQ(at.size(), 1u) << k;
    // A byte past the prefix and the bucket entry's copy (bytes 0..15),
    // which the walk checks without the record; then the key's length.
    Bytes d = clean;
    const size_t off = at[0] + 16 + rng.uniform(k.size() - 16);
    d[off] ^= std::byte{static_cast<uint8_t>(1u << rng.uniform(8))};
    ExpectRefusedUnchanged(d, "key " + k + " byte " + std::to_string(off - at[0]));
    d = clean;
    d[at[0] - kv::Record::kHeaderBytes + 4] ^= std::byte{1};  // key_len
    ExpectRefusedUnchanged(d, "key " + k + " length");
  }
  for (int n = 0; n < 4; ++n) {
    const std::string& v = values[rng.uniform(values.size())];
    const std::vector<size_t> at = Find(clean, v);
    ASSERT_EQ(at.size(), 1u) << v;
    Bytes d = clean;
    const size_t off = at[0] + rng.uniform(v.size());
    d[off] ^= std::byte{static_cast<uint8_t>(1u << rng.uniform(8))};
    ExpectRefusedUnchanged(d, "value " + v.substr(0, 24) + " byte " + std::to_string(off - at[0]));
    // The version holding it: its stamp (the commit timestamp, memcached's
    // cas unique), a bit other than the committed flag.
    if (v.size() > kv::Version::kMaxInline) continue;
    d = clean;
    const size_t stamp = at[0] - kv::Version::kHeaderBytes + offsetof(kv::Version, stamp);
    d[stamp + rng.uniform(3)] ^= std::byte{static_cast<uint8_t>(2u << rng.uniform(7))};
    ExpectRefusedUnchanged(d, "stamp of the version of " + v.substr(0, 24));
  }
  // An old version's value, and a byte of the value block.
  {
    const std::vector<size_t> at = Find(clean, "value of own key 1004eeee");
    ASSERT_EQ(at.size(), 1u);
    Bytes d = clean;
    d[at[0] + 9] ^= std::byte{0x20};
    ExpectRefusedUnchanged(d, "the older version's value");
    const std::vector<size_t> big = Find(clean, "big value:");
    ASSERT_EQ(big.size(), 1u);
    d = clean;
    d[big[0] + 100000 + rng.uniform(10000)] ^= std::byte{0x04};
    ExpectRefusedUnchanged(d, "a byte of the value block");
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, KvContentOverKind, ::testing::ValuesIn(testing::PersistentKinds()),
                         [](const auto& info) { return testing::KindName(info.param); });

TEST(KvContent, DamageWhileOpenAndUnwrittenFailsVerify) {
  Mem m = NewStore("lbtree", "node=256");
  Model model = Fill(*m.store);
  const Bytes clean = CleanBytes(m);
  Mem open = ExpectIntact(clean, model, "undamaged");
  ASSERT_NE(open.store, nullptr);
  const std::vector<size_t> at = Find(clean, "value of shared key 1017");
  ASSERT_EQ(at.size(), 1u);
  std::byte* b = open.pool->bytes().data() + at[0] + 3;
  *b ^= std::byte{0x01};
  const Status v = open.store->Verify();
  EXPECT_TRUE(v.is_corruption()) << v.ToString();
  *b ^= std::byte{0x01};
  PMINDEX_EXPECT_OK(open.store->Verify());
  // Once written, the store's contents are no longer the record's: Verify
  // checks the structure only, and the close writes a new record.
  std::string_view nv = "new";
  PMINDEX_ASSERT_OK(open.store->Write("another", &nv, kv::Store::Cond::kNone, 0));
  model["another"] = "new";
  PMINDEX_EXPECT_OK(open.store->Verify());
  const Bytes again = CleanBytes(open);
  ExpectIntact(again, model, "closed after a write");
}

TEST(KvContent, ReopenedCrashedAndOlderPoolsOpen) {
  Mem m = NewStore("fptree", "");
  Model model = Fill(*m.store);
  Bytes bytes = CleanBytes(m);
  // Reopened and closed without a write (the record is rewritten for the
  // new clock without a walk), then with writes, twice each.
  for (int round = 0; round < 4; ++round) {
    Mem o = ExpectIntact(bytes, model, "round " + std::to_string(round));
    ASSERT_NE(o.store, nullptr);
    if (round % 2 == 1) {
      const std::string k = "round " + std::to_string(round), v = "value " + std::to_string(round);
      const std::string gone = "own" + std::to_string(1010 + round) + "/key-with-a-long-tail-" +
                               std::to_string(1010 + round);
      std::string_view vv = v;
      PMINDEX_ASSERT_OK(o.store->Write(k, &vv, kv::Store::Cond::kNone, 0));
      PMINDEX_ASSERT_OK(o.store->Write(gone, nullptr, kv::Store::Cond::kNone, 0));
      model[k] = v;
      model.erase(gone);
    }
    bytes = CleanBytes(o);
  }
  // A crash (no clean close): the record is not read, and the open's
  // repairs are no false alarm.
  {
    Mem o = ExpectIntact(bytes, model, "before the crash");
    ASSERT_NE(o.store, nullptr);
    std::string_view vv = "written before the crash";
    PMINDEX_ASSERT_OK(o.store->Write("crash", &vv, kv::Store::Cond::kNone, 0));
    model["crash"] = "written before the crash";
    const Bytes crashed(o.pool->bytes().begin(), o.pool->bytes().end());
    Mem c = ExpectIntact(crashed, model, "crashed");
    ASSERT_NE(c.store, nullptr);
    bytes = CleanBytes(c);
  }
  ExpectIntact(bytes, model, "closed after the crash's recovery");
  // No record (a pool a build without it closed): opens unchecked.
  {
    Bytes none = bytes;
    ForgeSlot(none, pm::kStoreContentSlot, 0);
    ExpectIntact(none, model, "no content record");
  }
  // A record an older build left behind: it opened the pool (writing root
  // slot 5, as every open does), changed a value and closed without
  // writing slot 4. The stale record is ignored, not taken for damage.
  {
    Bytes stale = bytes;
    ForgeSlot(stale, pm::kStoreSlot, Slot(stale, pm::kStoreSlot) + (1u << 20));
    const std::vector<size_t> at = Find(stale, "value of shared key 1021");
    ASSERT_EQ(at.size(), 1u);
    stale[at[0]] = std::byte{'V'};
    Model changed = model;
    changed["shared:/1021-key-1021"][0] = 'V';
    ExpectIntact(stale, changed, "a stale record");
  }
}

TEST(KvContent, FlippedByteInAFileIsRefusedAndTheFileUnchanged) {
  testing::TempDir dir;
  const std::string path = dir.path("kv.pool");
  {
    DbOptions o;
    o.size = 4ull << 20;
    o.max_size = 64ull << 20;
    auto kv = KvStore::Create(path, "lbtree", "", o);
    PMINDEX_ASSERT_OK(kv);
    for (int i = 0; i < 100; ++i) {
      const std::string n = std::to_string(i);
      PMINDEX_ASSERT_OK(kv.value()->Put("key " + n, "the value of key " + n));
    }
    PMINDEX_ASSERT_OK(kv.value()->Close());
  }
  {
    // Undamaged: opens, and closes clean again.
    auto kv = KvStore::Open(path);
    PMINDEX_ASSERT_OK(kv);
    PMINDEX_ASSERT_OK(kv.value()->Verify());
    PMINDEX_ASSERT_OK(kv.value()->Close());
  }
  testing::Snapshot before = testing::Snapshot::Of(path);
  const size_t at = before.bytes.find("the value of key 42");
  ASSERT_NE(at, std::string::npos);
  before.bytes[at + 17] ^= 0x02;  // "42" -> "62": a value still well formed
  {
    std::ofstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(static_cast<std::streamoff>(at + 17));
    out.put(before.bytes[at + 17]);
  }
  before = testing::Snapshot::Of(path);
  auto kv = KvStore::Open(path);
  ASSERT_FALSE(kv.ok()) << "opened a damaged value";
  EXPECT_TRUE(kv.status().is_corruption()) << kv.status().ToString();
  EXPECT_TRUE(testing::Snapshot::Of(path) == before) << "the refused open changed the file";
}

}  // namespace
}  // namespace pmindex
