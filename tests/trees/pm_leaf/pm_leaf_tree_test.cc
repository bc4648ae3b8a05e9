// PmLeafTree's concurrency protocol (pm_leaf_tree.h, "Locks"), checked
// deterministically: a test leaf type runs a hook in the middle of a
// reader's leaf read, and the hook runs writer operations on the same
// thread (a reader holds no lock, so this is an interleaving two threads
// could produce). The reader must notice the change and retry. Each test
// fails if the corresponding piece of the protocol is removed: the
// reader's validation of the routing leaf, or the version bump of the
// writers' lock step.
#include "trees/pm_leaf/pm_leaf_tree.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "alloc/allocator.h"
#include "pm/pool.h"
#include "support/status.h"
#include "trees/pm_leaf/lbtree_leaf.h"

namespace pmindex::common {
namespace {

// An lbtree leaf (one 256 B block, 14 slots) whose read paths call a hook
// once: kBefore runs before the leaf is read at all, kMid between finding a
// key's slot and reading its value.
struct HookLeaf : lbtree::Leaf<1> {
  enum class When { kBefore, kMid };
  static inline std::function<void()> hook;
  static inline When when = When::kBefore;
  static void Fire(When w) {
    if (hook && when == w) {
      auto h = std::move(hook);
      hook = nullptr;
      h();
    }
  }
  bool Find(uint64_t k, uint64_t* v) const {
    Fire(When::kBefore);
    int id = Locate(k);
    Fire(When::kMid);
    if (id < 0) return false;
    *v = ValueAt(id);
    return true;
  }
  int Collect(KV* out) const {
    Fire(When::kBefore);
    return lbtree::Leaf<1>::Collect(out);
  }
};
static_assert(sizeof(HookLeaf) == 256);

struct HookPolicy {
  static constexpr std::string_view kName = "lbtree";
  using LeafT = HookLeaf;
  static constexpr size_t kMetaBytes = 0;
  void InitMeta(void*) {}
  Status CheckMeta(const void*, const Pool*, std::vector<common::MetaDrop>*) const { return Status::OK(); }
  void RepairMeta(void*, Pool*) {}
  template <typename Route>
  uint64_t SplitRouted(LeafT* l, PPtr, uint64_t k, uint64_t v, LeafT* nl, PPtr nl_ptr, void*,
                       Route&& route) {
    return l->SplitInsert(k, v, nl, nl_ptr, route);
  }
};
using Tree = PmLeafTree<HookPolicy>;

class PmLeafTreeProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    HookLeaf::hook = nullptr;
    PoolOptions po;
    po.size = 8ull << 20;
    po.kind = "lbtree";
    auto p = Pool::CreateInMemory(po);
    PMINDEX_ASSERT_OK(p);
    pool_ = std::move(p).value();
    auto a = alloc::Allocator::Attach(pool_.get(), /*fresh=*/true);
    PMINDEX_ASSERT_OK(a);
    alloc_ = std::move(a).value();
    auto t = Tree::Create(IndexEnv{pool_.get(), alloc_.get()}, 1);
    PMINDEX_ASSERT_OK(t);
    tree_ = std::move(t).value();
  }
  void TearDown() override { HookLeaf::hook = nullptr; }

  std::unique_ptr<Pool> pool_;
  std::unique_ptr<alloc::Allocator> alloc_;
  std::unique_ptr<Index> tree_;
};

// Keys 10..140 fill the head leaf (14 slots); inserting 150 splits it and
// moves 80..140 to a new leaf.
void FillHead(Index* t) {
  for (uint64_t k = 10; k <= 140; k += 10) PMINDEX_ASSERT_OK(t->insert(k, k + 1));
}

TEST_F(PmLeafTreeProtocol, LookupRetriesWhenItsLeafSplitsUnderIt) {
  FillHead(tree_.get());
  bool fired = false;
  HookLeaf::when = HookLeaf::When::kBefore;
  HookLeaf::hook = [&] {
    fired = true;
    PMINDEX_ASSERT_OK(tree_->insert(150, 151));
  };
  // The reader was routed to the head leaf; the split moves 130 out of it
  // before the reader looks. Without validation it would say "absent".
  auto v = tree_->lookup(130);
  EXPECT_TRUE(fired);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 131u);
  PMINDEX_EXPECT_OK(tree_->verify());
}

TEST_F(PmLeafTreeProtocol, LookupRetriesWhenItsSlotIsReused) {
  // 10 is in slot 0. Between finding 10's slot and reading its value, 10
  // is removed and 5 inserted, which takes the free slot 0 (Algorithm 2
  // prefers the header's line). Reading on would return 5's value for 10.
  FillHead(tree_.get());
  PMINDEX_ASSERT_OK(tree_->remove(140));  // room for the insert, no split
  HookLeaf::when = HookLeaf::When::kMid;
  bool fired = false;
  HookLeaf::hook = [&] {
    fired = true;
    PMINDEX_ASSERT_OK(tree_->remove(10));
    PMINDEX_ASSERT_OK(tree_->insert(5, 999));
  };
  auto v = tree_->lookup(10);
  EXPECT_TRUE(fired);
  EXPECT_FALSE(v.has_value()) << "lookup(10) returned " << *v;
  EXPECT_EQ(*tree_->lookup(5), 999u);
}

TEST_F(PmLeafTreeProtocol, ScanRetriesWhenALeafSplitsUnderIt) {
  FillHead(tree_.get());
  HookLeaf::when = HookLeaf::When::kBefore;
  bool fired = false;
  HookLeaf::hook = [&] {
    fired = true;
    PMINDEX_ASSERT_OK(tree_->insert(150, 151));
  };
  // The scan read the routing map before the split (one leaf, no upper
  // fence); without validation it would stop after the old leaf's half.
  std::vector<KV> out(100);
  size_t n = tree_->scan(0, out.size(), out.data());
  EXPECT_TRUE(fired);
  ASSERT_EQ(n, 15u);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i].key, 10 * (i + 1));
    EXPECT_EQ(out[i].value, 10 * (i + 1) + 1);
  }
}

TEST_F(PmLeafTreeProtocol, WritersLeaveTheLockBitClearAndRoutingConsistent) {
  // Every operation kind, then verify(): no leaf keeps its lock bit and the
  // routing map matches the PM list (splits included).
  for (uint64_t k = 1; k <= 2000; ++k) PMINDEX_ASSERT_OK(tree_->insert(k * 7919 % 100003, k));
  for (uint64_t k = 1; k <= 2000; k += 3) PMINDEX_ASSERT_OK(tree_->remove(k * 7919 % 100003));
  for (uint64_t k = 2; k <= 2000; k += 3) PMINDEX_ASSERT_OK(tree_->update(k * 7919 % 100003, 1));
  for (uint64_t k = 3; k <= 2000; k += 3) PMINDEX_ASSERT_OK(tree_->upsert(k * 7919 % 100003, 2));
  PMINDEX_ASSERT_OK(tree_->verify());
  EXPECT_GT(tree_->stats().leaves, 100u);
}

}  // namespace
}  // namespace pmindex::common
