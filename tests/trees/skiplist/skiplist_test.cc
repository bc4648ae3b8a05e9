// The three skip lists of paper 000 (skiplist-dram, skiplist-pm,
// skiplist-divided): option checks, a std::map oracle at the extreme level
// counts the shared scenarios do not run (1 level: a sorted list; 32
// levels, p = 0.5), the divided list's DRAM levels rebuilt at open, and
// skiplist-pm's recovery of a partly linked tower (what a crash between
// its links leaves) against the states no crash leaves.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "index/index.h"
#include "pm/pool.h"
#include "support/oracle.h"
#include "support/sorted_node_checks.h"
#include "support/status.h"

namespace pmindex {
namespace {

using testing_util::PoolImage;

constexpr const char* kKinds[] = {"skiplist-dram", "skiplist-pm", "skiplist-divided"};

bool Persistent(const std::string& kind) { return kind != "skiplist-dram"; }

// An index of `kind` with `options`; persistent kinds in an in-memory pool
// kept in *pool.
Result<std::unique_ptr<Index>> Make(const std::string& kind, const std::string& options,
                                    std::unique_ptr<Pool>* pool) {
  if (!Persistent(kind)) return create_index(kind, options, nullptr);
  return testing::CreateInPool(kind, options, pool);
}

TEST(SkipListOptions, BadOptionsAreRefused) {
  for (const char* kind : kKinds) {
    for (const char* bad : {"levels=0", "levels=33", "levels=x", "p=0", "p=1", "p=0.999", "p=abc",
                            "height=4", "levels=4,levels=5"}) {
      std::unique_ptr<Pool> pool;
      auto idx = Make(kind, bad, &pool);
      EXPECT_TRUE(idx.status().is_invalid_argument())
          << kind << " " << bad << ": " << idx.status().ToString();
    }
    for (const char* good : {"", "levels=1", "levels=32,p=0.5", "p=0.01", "levels=12,p=0.99"}) {
      std::unique_ptr<Pool> pool;
      auto idx = Make(kind, good, &pool);
      PMINDEX_EXPECT_OK(idx) << kind << " " << good;
    }
  }
}

TEST(SkipListOracle, ExtremeLevelCounts) {
  for (const char* kind : kKinds) {
    for (const char* opt : {"levels=1", "levels=32,p=0.5", "levels=3,p=0.9"}) {
      SCOPED_TRACE(std::string(kind) + " " + opt);
      std::unique_ptr<Pool> pool;
      auto idx = Make(kind, opt, &pool);
      PMINDEX_ASSERT_OK(idx);
      ASSERT_NO_FATAL_FAILURE(testing::RunOracle(*idx.value(), testing::OracleOptions{}));
    }
  }
}

// The divided list after a crash and after a clean close: the DRAM levels
// come back from the bottom list, with every key.
TEST(SkipListDivided, OpenRebuildsTheUpperLevels) {
  std::unique_ptr<Pool> pool;
  auto idx = Make("skiplist-divided", "levels=8,p=0.5", &pool);
  PMINDEX_ASSERT_OK(idx);
  ASSERT_NO_FATAL_FAILURE(
      testing_util::ExpectBulkLoadSurvivesReopen(*pool, &idx.value(), 1.0, [](const IndexStats& s) {
        EXPECT_GT(s.inner_nodes, 300u);  // about half the elements have an upper element at p = 0.5
        EXPECT_GT(s.dram_bytes, 0u);
      }));
}

// A bottom list whose keys no longer ascend is refused at open, unchanged.
TEST(SkipListDivided, UnsortedBottomListIsRefused) {
  std::unique_ptr<Pool> pool;
  auto idx = Make("skiplist-divided", "", &pool);
  PMINDEX_ASSERT_OK(idx);
  for (Key k = 1; k <= 50; ++k) PMINDEX_ASSERT_OK(idx.value()->insert(k * 10, k));
  std::vector<std::byte> bytes = PoolImage(*pool, &idx.value(), true);
  auto img = Pool::OpenImage(bytes);
  PMINDEX_ASSERT_OK(img);
  // Element words: tag, key, value, next. The third element's key drops
  // below the second's.
  uint64_t* head = img.value()->to_ptr<uint64_t>(PPtr(img.value()->root(0)));
  uint64_t* e = img.value()->to_ptr<uint64_t>(PPtr(head[3]));
  e = img.value()->to_ptr<uint64_t>(PPtr(e[3]));
  e = img.value()->to_ptr<uint64_t>(PPtr(e[3]));
  e[1] = 5;
  auto re = open_index(img.value().get());
  ASSERT_TRUE(re.status().is_corruption()) << re.status().ToString();
  EXPECT_NE(re.status().ToString().find("not ascending"), std::string::npos)
      << re.status().ToString();
}

// skiplist-pm tower words: tag, height, key, value, next[0..height).
class PmImage {
 public:
  explicit PmImage(Pool& p) : p_(p) {}
  uint64_t* W(uint64_t raw) const { return p_.to_ptr<uint64_t>(PPtr(raw)); }
  uint64_t head() const { return p_.root(0); }
  // The predecessor on `level` of the tower `raw`.
  uint64_t Pred(uint32_t level, uint64_t raw) const {
    uint64_t x = head();
    while (W(x)[4 + level] != raw) x = W(x)[4 + level];
    return x;
  }
  // The first towers of exactly `height` levels on level 0.
  std::vector<uint64_t> OfHeight(uint64_t height) const {
    std::vector<uint64_t> out;
    for (uint64_t r = W(head())[4]; r != 0; r = W(r)[4])
      if (W(r)[1] == height) out.push_back(r);
    return out;
  }
  // Unlinks tower raw from `level` only.
  void Unlink(uint32_t level, uint64_t raw) { W(Pred(level, raw))[4 + level] = W(raw)[4 + level]; }

 private:
  Pool& p_;
};

std::vector<std::byte> PmWithTowers(std::unique_ptr<Pool>* pool) {
  auto idx = Make("skiplist-pm", "levels=6,p=0.5", pool);
  PMINDEX_EXPECT_OK(idx);
  for (Key k = 1; k <= 400; ++k) PMINDEX_EXPECT_OK(idx.value()->insert(k * 7, k));
  PMINDEX_EXPECT_OK(idx.value()->verify());
  return PoolImage(**pool, &idx.value(), true);
}

// An insert cut short after its bottom link (or a delete cut short before
// it): the tower is linked on a prefix of its levels. Recovery keeps the
// key and lowers the tower's height to those levels.
TEST(SkipListPm, RecoveryRepairsOnePartlyLinkedTower) {
  std::unique_ptr<Pool> pool;
  const std::vector<std::byte> bytes = PmWithTowers(&pool);
  auto img = Pool::OpenImage(bytes);
  PMINDEX_ASSERT_OK(img);
  PmImage m(*img.value());
  const std::vector<uint64_t> tall = m.OfHeight(3);
  ASSERT_FALSE(tall.empty());
  const uint64_t x = tall[0];
  const Key key = m.W(x)[2];
  m.Unlink(2, x);
  m.Unlink(1, x);
  auto re = open_index(img.value().get());
  PMINDEX_ASSERT_OK(re);
  PMINDEX_ASSERT_OK(re.value()->verify());
  EXPECT_EQ(m.W(x)[1], 1u);  // the height now says what is linked
  EXPECT_EQ(re.value()->lookup(key).value_or(0), key / 7);
  EXPECT_EQ(re.value()->stats().entries, 400u);
  PMINDEX_ASSERT_OK(re.value()->remove(key));
  PMINDEX_ASSERT_OK(re.value()->verify());
}

// States no crash leaves: two partly linked towers, a tower linked on an
// upper level but not below it, and one linked above its height.
TEST(SkipListPm, RecoveryRefusesLostLinks) {
  std::unique_ptr<Pool> pool;
  const std::vector<std::byte> bytes = PmWithTowers(&pool);
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    auto img = Pool::OpenImage(bytes);
    PMINDEX_ASSERT_OK(img);
    PmImage m(*img.value());
    const std::vector<uint64_t> tall = m.OfHeight(2);
    ASSERT_GE(tall.size(), 2u);
    const char* expect = nullptr;
    if (variant == 0) {
      m.Unlink(1, tall[0]);
      m.Unlink(1, tall[1]);
      expect = "fewer levels";
    } else if (variant == 1) {
      m.Unlink(0, tall[0]);
      expect = "does not hold";
    } else {
      m.W(tall[0])[1] = 1;  // linked on level 1, height 1
      expect = "is linked on level";
    }
    auto re = open_index(img.value().get());
    ASSERT_TRUE(re.status().is_corruption()) << re.status().ToString();
    EXPECT_NE(re.status().ToString().find(expect), std::string::npos) << re.status().ToString();
  }
}

}  // namespace
}  // namespace pmindex
