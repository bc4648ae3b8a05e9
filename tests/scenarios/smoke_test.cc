// Indexes that store nothing (the `null` index measuring the harness): every
// call returns without error or crash, from one thread and from several.
#include <thread>

#include "scenario_util.h"
#include "support/status.h"

namespace pmindex::scenario {
namespace {

class NoData : public ::testing::TestWithParam<IndexParam> {};
PMINDEX_SCENARIO_SUITE(NoData, Want::kNoData);

// What a data-less index may answer: success, or "missing" where the
// operation looks for a key.
bool Benign(const Status& s) { return s.ok() || s.is_not_found(); }

TEST_P(NoData, EveryCallSucceeds) {
  SeedScope seed;
  Rng rng(seed);
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  EXPECT_EQ(t->kind(), GetParam().info->name);
  for (int i = 0; i < 1000; ++i) {
    Key k = rng.one_in(10) ? EdgeKey(rng) : rng.next();
    Status s = t->insert(k, i);
    EXPECT_TRUE(s.ok() || s.is_already_exists()) << "insert: " << s.ToString();
    PMINDEX_EXPECT_OK(t->upsert(k, i));
    s = t->update(k, i);
    EXPECT_TRUE(Benign(s)) << "update: " << s.ToString();
    (void)t->lookup(k);
    KV out[16];
    EXPECT_LE(t->scan(k, 16, out), 16u);
    EXPECT_EQ(t->scan(k, 0, out), 0u);
    s = t->remove(k);
    EXPECT_TRUE(Benign(s)) << "remove: " << s.ToString();
  }
  std::vector<KV> pairs = {{1, 1}, {2, 2}, {UINT64_MAX, 3}};
  Status s = t->bulk_load(pairs, 0.7);
  EXPECT_TRUE(s.ok() || s.is_invalid_argument()) << s.ToString();
  PMINDEX_EXPECT_OK(t->verify());
  (void)t->stats();
  PMINDEX_EXPECT_OK(t->close());
  PMINDEX_EXPECT_OK(t->close());  // idempotent
}

TEST_P(NoData, ConcurrentCalls) {
  PMINDEX_ASSERT_OK_AND_ASSIGN(TestIndex t, MakeIndex(GetParam()));
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int th = 0; th < 4; ++th) {
    ts.emplace_back([&, th] {
      KV out[8];
      for (Key k = th; k < 20000; k += 4) {
        if (!t->upsert(k, k).ok()) bad++;
        if (!Benign(t->remove(k))) bad++;
        (void)t->lookup(k);
        if (t->scan(k, 8, out) > 8) bad++;
      }
    });
  }
  for (auto& x : ts) x.join();
  EXPECT_EQ(bad.load(), 0);
  PMINDEX_EXPECT_OK(t->verify());
}

}  // namespace
}  // namespace pmindex::scenario
