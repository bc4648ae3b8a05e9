// common/sorted_node.h: the node layout fastfair and circtree share (with
// and without the Sentinel Array or fingerprints). The trees' own tests
// (trees/sorted_node/) run every search mode and option.
#include <gtest/gtest.h>

#include "common/sorted_node.h"

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

}  // namespace
}  // namespace pmindex::sorted_node
