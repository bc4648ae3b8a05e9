// Shared test bodies for the baseline leaves with a centralized header and
// a split micro-log (fptree_leaf.h, wbtree_leaf.h): randomized operations
// against a std::map, and a flush-image crash check of every persist point
// of insert, delete and the logged split (with the recovery rule applied to
// the image: a logged split whose new leaf is linked is replayed).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "index/index.h"
#include "pm/persist.h"
#include "support/seed.h"
#include "trees/pm_leaf/pm_image_tracer.h"
#include "trees/pm_leaf/split_log.h"

namespace pmindex::testing_util {

using testing::TestSeed;

template <class L>
std::map<uint64_t, uint64_t> LeafContents(const L* l) {
  KV buf[L::kSlots];
  int n = l->Collect(buf);
  std::map<uint64_t, uint64_t> m;
  for (int i = 0; i < n; ++i) m[buf[i].key] = buf[i].value;
  return m;
}

// Memory: [old leaf][new leaf][log area].
template <class L>
void CentralLeafCrashImages() {
  const size_t total = 2 * L::kBytes + common::SplitLogArea::kBytes;
  char* mem = static_cast<char*>(std::aligned_alloc(256, total));
  L* l = reinterpret_cast<L*>(mem);
  L* nl = reinterpret_cast<L*>(mem + L::kBytes);
  void* area = mem + 2 * L::kBytes;
  L::Format(l, PPtr());
  common::SplitLogArea::Format(area);
  common::SplitLogArea logs;
  const PPtr self = PPtr::Make(1, 0x100000), nl_ptr = PPtr::Make(1, 0x200000);
  auto decode = [&](const testing_util::Image& img) {
    const L* a = reinterpret_cast<const L*>(img.data());
    const L* b = reinterpret_cast<const L*>(img.data() + L::kBytes);
    const auto* log = reinterpret_cast<const common::SplitLog*>(img.data() + 2 * L::kBytes);
    auto m = LeafContents(a);
    if (a->next() == nl_ptr) {
      auto nm = LeafContents(b);
      bool logged = false;
      for (int i = 0; i < common::SplitLogArea::kLogs; ++i)
        logged |= log[i].cur == self.raw() && log[i].fresh == nl_ptr.raw();
      if (logged && !nm.empty()) m.erase(m.lower_bound(nm.begin()->first), m.end());
      for (auto& kv : nm) {
        EXPECT_FALSE(m.count(kv.first)) << "key in both leaves without a log: " << kv.first;
        m.insert(kv);
      }
    }
    return m;
  };
  std::map<uint64_t, uint64_t> model;
  uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  bool split_done = false;
  for (int i = 0; i < 400 && !split_done; ++i) {
    ImageTracer tr(mem, total);
    uint64_t k = rng() % 300;
    auto before = model, after = model;
    const bool present = model.count(k) > 0;
    if (present) after.erase(k);
    else after[k] = i;
    int checks = 0;
    tr.check_ = [&](const testing_util::Image& img) {
      ++checks;
      auto got = decode(img);
      EXPECT_TRUE(got == before || got == after) << "op " << i << " key " << k;
    };
    pm::InstallTracer(&tr);
    if (present) {
      l->RemoveSlot(l->Locate(k));
    } else if (!l->Full()) {
      l->Insert(k, i);
    } else {
      l->SplitInsert(k, i, nl, self, nl_ptr, logs, area);
      split_done = true;
    }
    pm::InstallTracer(nullptr);
    tr.check_ = nullptr;
    EXPECT_GT(checks, 0);
    EXPECT_EQ(decode(tr.image_), after) << "op " << i << ": completed op not durable";
    model = after;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_TRUE(split_done);
  EXPECT_EQ(l->Check(), "");
  EXPECT_EQ(nl->Check(), "");
  std::free(mem);
}

// Random insert/delete/update on one leaf (splits keep the low half).
template <class L>
void CentralLeafOracle() {
  L* l = static_cast<L*>(std::aligned_alloc(256, L::kBytes));
  L* nl = static_cast<L*>(std::aligned_alloc(256, L::kBytes));
  char* area = static_cast<char*>(std::aligned_alloc(64, common::SplitLogArea::kBytes));
  L::Format(l, PPtr());
  common::SplitLogArea::Format(area);
  common::SplitLogArea logs;
  std::map<uint64_t, uint64_t> model;
  uint64_t seed = TestSeed();
  PMINDEX_SEED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3000; ++i) {
    uint64_t k = rng() % 4 == 0 ? (rng() % 2 ? 0 : UINT64_MAX) : rng() % 100;
    int s = l->Locate(k);
    ASSERT_EQ(s >= 0, model.count(k) > 0) << i;
    if (s >= 0) {
      if (rng() % 2) {
        l->UpdateSlot(s, i);
        model[k] = i;
      } else {
        l->RemoveSlot(s);
        model.erase(k);
      }
    } else if (!l->Full()) {
      l->Insert(k, i);
      model[k] = i;
    } else {
      L::Format(nl, PPtr());
      uint64_t split = l->SplitInsert(k, i, nl, PPtr::Make(1, 0x1000), PPtr::Make(1, 0x2000), logs, area);
      model[k] = i;
      auto moved = LeafContents(nl);
      for (auto& kv : moved) {
        ASSERT_GE(kv.first, split);
        ASSERT_EQ(model[kv.first], kv.second);
        model.erase(kv.first);
      }
    }
    ASSERT_EQ(l->Check(), "") << i;
    ASSERT_EQ(LeafContents(l), model) << i;
  }
  std::free(l);
  std::free(nl);
  std::free(area);
}

}  // namespace pmindex::testing_util
