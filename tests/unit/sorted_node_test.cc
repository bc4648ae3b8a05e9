// common/sorted_node.h: the node layout fastfair and circtree share (with
// and without the Sentinel Array or fingerprints). The trees' own tests
// (fastfair_test.cc, circtree_test.cc) run every search mode and option.
#include "common/sorted_node.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace pmindex::sorted_node {
namespace {

TEST(SortedNodeLayout, CapacitiesWithAndWithoutAuxiliaryArrays) {
  // 512 B: 7 lines after the header; 6 record lines + 1 sentinel line.
  Layout a = Layout::For(512, true);
  EXPECT_EQ(a.cap, 24u);
  EXPECT_EQ(a.rec_off, 128u);
  Layout b = Layout::For(512, false);
  EXPECT_EQ(b.cap, 28u);
  EXPECT_EQ(b.rec_off, 64u);
  // 4 KiB: 63 lines: 56 record lines + 7 sentinel lines.
  Layout c = Layout::For(4096, true);
  EXPECT_EQ(c.cap, 224u);
  EXPECT_EQ(c.rec_off, 64u + 7 * 64);
  EXPECT_EQ(Layout::For(4096, false).cap, 252u);
  // Fingerprints: one byte per slot. 512 B: 6 record lines + 1 line of
  // fingerprints; 4 KiB: 59 record lines (236 slots) + 4 lines.
  Layout f = Layout::For(512, false, true);
  EXPECT_EQ(f.cap, 24u);
  EXPECT_EQ(f.rec_off, 128u);
  EXPECT_TRUE(f.fingerprints);
  Layout g = Layout::For(4096, false, true);
  EXPECT_EQ(g.cap, 236u);
  EXPECT_EQ(g.rec_off, 64u + 4 * 64);
  // Sentinels win over fingerprints (one array per node).
  EXPECT_FALSE(Layout::For(512, true, true).fingerprints);
  for (uint32_t bytes = 256; bytes <= 65536; bytes += 64) {
    SCOPED_TRACE(bytes);
    for (int aux = 0; aux < 3; ++aux) {
      Layout l = Layout::For(bytes, aux == 1, aux == 2);
      EXPECT_GE(l.cap, 4u);
      EXPECT_LE(l.rec_off + l.cap * sizeof(Rec), bytes);
      if (aux == 1) {
        EXPECT_GE(l.rec_off - l.aux_off, l.lines * sizeof(uint64_t));  // one sentinel per record line
      }
      if (aux == 2) {
        EXPECT_GE(l.rec_off - l.aux_off, (l.cap + 15) / 16 * 16);  // whole 16-byte groups of fingerprints
      }
    }
  }
}

// The four-at-a-time scans against std::lower_bound / upper_bound on
// every length around the step of four and every key position (below all,
// equal to each, between each pair, above all), for records and for the
// sentinel search that uses them.
TEST(SortedNodeSearch, LinearAndSentinelScansFindTheLowerBound) {
  for (uint32_t n = 0; n <= 13; ++n) {
    SCOPED_TRACE(n);
    std::vector<Rec> recs(n + 1);
    std::vector<Key> keys(n);
    for (uint32_t i = 0; i < n; ++i) keys[i] = recs[i].key = 10 * (i + 1);
    // Past n: a key a scan must not read as one of the n (it would stop there).
    recs[n].key = 0;
    std::vector<uint64_t> sentinels;
    for (uint32_t i = 0; i < n; i += kRecsPerLine) sentinels.push_back(keys[i]);
    sentinels.push_back(0);
    for (Key k = 0; k <= 10 * n + 11; ++k) {
      const uint32_t want =
          static_cast<uint32_t>(std::lower_bound(keys.begin(), keys.end(), k) - keys.begin());
      EXPECT_EQ(LinearLowerBound(recs.data(), n, k), want) << "k=" << k;
      EXPECT_EQ(SentinelLowerBound(sentinels.data(), n, k, [&](uint32_t i) { return recs[i].key; }),
                want)
          << "k=" << k;
      EXPECT_EQ((CountBelow<1, true>(keys.data(), n, k)),
                static_cast<uint32_t>(std::upper_bound(keys.begin(), keys.end(), k) - keys.begin()))
          << "k=" << k;
    }
  }
  // The largest key: strict counting has no k + 1 to overflow into.
  const uint64_t top[5] = {1, 2, 3, ~uint64_t{0}, 0};
  EXPECT_EQ((CountBelow<1, true>(top, 4, ~uint64_t{0})), 4u);
  EXPECT_EQ((CountBelow<1, false>(top, 4, ~uint64_t{0})), 3u);
}

}  // namespace
}  // namespace pmindex::sorted_node
