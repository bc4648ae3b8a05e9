// sync::VersionLock (src/sync/version_lock.h): the optimistic lock word
// of the DRAM B+-tree's nodes and the trees that borrow it.
#include "sync/version_lock.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace pmindex {
namespace {

TEST(VersionLockTest, ProtocolBits) {
  sync::VersionLock l;
  bool restart = false;
  uint64_t v = l.ReadLockOrRestart(restart);
  EXPECT_FALSE(restart);
  l.CheckOrRestart(v, restart);
  EXPECT_FALSE(restart);
  uint64_t w = v;
  l.UpgradeToWriteLockOrRestart(w, restart);
  EXPECT_FALSE(restart);
  EXPECT_TRUE(l.IsLocked());
  bool stale = false;
  l.CheckOrRestart(v, stale);
  EXPECT_TRUE(stale);  // a locked node fails validation
  uint64_t v2 = v;
  bool second = false;
  l.UpgradeToWriteLockOrRestart(v2, second);
  EXPECT_TRUE(second);  // only one writer
  l.WriteUnlock();
  EXPECT_FALSE(l.IsLocked());
  stale = false;
  l.CheckOrRestart(v, stale);
  EXPECT_TRUE(stale);  // the version moved
  l.WriteLock();
  l.WriteUnlockObsolete();
  EXPECT_TRUE(l.IsObsolete());
  bool obs = false;
  l.ReadLockOrRestart(obs);
  EXPECT_TRUE(obs);
}

}  // namespace
}  // namespace pmindex
