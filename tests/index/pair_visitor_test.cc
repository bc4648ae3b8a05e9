// open_index's pair visitor (index/pair_visitor.h), for every
// persistent kind: on a cleanly closed pool and on a crashed one, the
// visitor is told exactly the pairs the recovered index holds (on a clean
// pool each exactly once), every visit
// comes before the open's first write (the clean flag is still set), its
// error refuses the open without a byte changed, and a key-value store's
// pool is refused without a visitor (and a plain pool with one).
#include "index/pair_visitor.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "support/persistent_kinds.h"
#include "support/status.h"

namespace pmindex {
namespace {

// Records every visit, whether the pool's clean flag was still set then,
// and fails the open when told to.
class Recorder final : public PairVisitor {
 public:
  explicit Recorder(Status fail = Status::OK()) : fail_(std::move(fail)) {}
  void Start(Pool* pool, alloc::Allocator*) override { pool_ = pool; }
  void Visit(Key k, Value v) override {
    const auto* h = reinterpret_cast<const pm::PoolHeader*>(pool_->base());
    const uint64_t clean = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(h->clean)).load();
    std::lock_guard<std::mutex> g(mu_);
    pairs_[k] = v;
    ++visits_;
    if (clean != 1) ++after_first_write_;
  }
  Status status() const override { return fail_; }
  std::map<Key, Value> pairs_;
  uint64_t visits_ = 0, after_first_write_ = 0;

 private:
  Status fail_;
  Pool* pool_ = nullptr;
  std::mutex mu_;
};

class PairVisitorOverKind : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// An index of `kind` with pairs inserted and some removed, in a pool
// flagged as a store's (the flag is all open_index looks at).
struct Filled {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
  std::map<Key, Value> model;
};
Filled Fill(const std::string& kind, const std::string& options, uint64_t flags) {
  PoolOptions po;
  po.size = 16ull << 20;
  po.max_size = 64ull << 20;
  po.kind = kind;
  po.index_options = options;
  po.incompat_flags = flags;
  Filled f;
  auto pool = Pool::CreateInMemory(po);
  PMINDEX_EXPECT_OK(pool);
  f.pool = std::move(pool).value();
  auto idx = create_index(kind, options, f.pool.get());
  PMINDEX_EXPECT_OK(idx);
  f.idx = std::move(idx).value();
  for (uint64_t i = 0; i < 3000; ++i) {
    const Key k = i == 0 ? 0 : i == 1 ? UINT64_MAX : i * 0x9E3779B97F4A7C15ull;
    PMINDEX_EXPECT_OK(f.idx->insert(k, i * 7 + 1));
    f.model[k] = i * 7 + 1;
  }
  for (uint64_t i = 0; i < 3000; i += 3) {
    const Key k = i == 0 ? 0 : i * 0x9E3779B97F4A7C15ull;
    PMINDEX_EXPECT_OK(f.idx->remove(k));
    f.model.erase(k);
  }
  return f;
}

std::vector<std::byte> Bytes(Filled& f, bool clean) {
  if (clean) {
    PMINDEX_EXPECT_OK(f.idx->close());
    f.idx.reset();
  }
  std::vector<std::byte> b(f.pool->bytes().begin(), f.pool->bytes().end());
  if (clean) {
    const uint64_t one = 1;
    std::memcpy(b.data() + offsetof(pm::PoolHeader, clean), &one, sizeof one);
  }
  return b;
}

// The bytes of a store-flagged pool of `kind` after Fill, cleanly closed
// or crashed; *model (may be null) gets its pairs.
std::vector<std::byte> StoreBytes(const std::string& kind, const std::string& options, bool clean,
                                  std::map<Key, Value>* model) {
  Filled f = Fill(kind, options, pm::kIncompatKvStore);
  if (model != nullptr) *model = f.model;
  return Bytes(f, clean);
}

TEST_P(PairVisitorOverKind, EveryLivePairBeforeTheFirstWrite) {
  const auto& [kind, options] = GetParam();
  for (bool clean : {true, false}) {
    SCOPED_TRACE(clean ? "cleanly closed" : "crashed");
    std::map<Key, Value> model;
    const std::vector<std::byte> bytes = StoreBytes(kind, options, clean, &model);
    auto pool = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(pool);
    Recorder rec;
    OpenIndexOptions oo;
    oo.pairs = &rec;
    auto idx = open_index(pool.value().get(), oo);
    PMINDEX_ASSERT_OK(idx);
    EXPECT_EQ(rec.pairs_, model);
    EXPECT_GE(rec.visits_, model.size());
    if (clean) {
      EXPECT_EQ(rec.after_first_write_, 0u) << "visits after the clean flag was cleared";
      // Once each on the clean path: the key-value store sums its content
      // record over the visits (docs/layout/kv.md "Content record").
      EXPECT_EQ(rec.visits_, model.size()) << "a pair visited twice on a clean pool";
    }
  }
}

TEST_P(PairVisitorOverKind, ItsErrorRefusesTheOpenUnchanged) {
  const auto& [kind, options] = GetParam();
  for (bool clean : {true, false}) {
    SCOPED_TRACE(clean ? "cleanly closed" : "crashed");
    const std::vector<std::byte> bytes = StoreBytes(kind, options, clean, nullptr);
    auto pool = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(pool);
    {
      Recorder rec(Status::Corruption("a value the visitor refused"));
      OpenIndexOptions oo;
      oo.pairs = &rec;
      auto idx = open_index(pool.value().get(), oo);
      ASSERT_FALSE(idx.ok());
      EXPECT_EQ(idx.status().message(), "a value the visitor refused");
    }
    auto after = pool.value()->bytes();
    EXPECT_TRUE(std::equal(after.begin(), after.end(), bytes.begin())) << "the refused open wrote the pool";
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, PairVisitorOverKind,
                         ::testing::ValuesIn(testing::PersistentKinds()),
                         [](const auto& info) { return testing::KindName(info.param); });

TEST(PairVisitor, StorePoolsNeedOneAndPlainPoolsRefuseOne) {
  for (uint64_t flags : {uint64_t{0}, pm::kIncompatKvStore}) {
    Filled f = Fill("lbtree", "", flags);
    const std::vector<std::byte> bytes = Bytes(f, true);
    auto pool = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(pool);
    Recorder rec;
    OpenIndexOptions oo;
    oo.pairs = flags == 0 ? &rec : nullptr;
    auto idx = open_index(pool.value().get(), oo);
    EXPECT_EQ(idx.status().code(), Status::Code::kWrongKind) << idx.status().ToString();
    auto after = pool.value()->bytes();
    EXPECT_TRUE(std::equal(after.begin(), after.end(), bytes.begin()));
  }
}

}  // namespace
}  // namespace pmindex
