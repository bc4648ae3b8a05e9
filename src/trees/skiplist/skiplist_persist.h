// What the two persistent skip lists share at open: adopting the blocks
// their read-only validation reached.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "alloc/allocator.h"
#include "index/registry.h"
#include "pmindex/status.h"

namespace pmindex::skiplist {

// Reports every block validation reached, checks each is an allocated
// block and that recovery's reclaim stays within its bound, then clears
// the pool's clean flag. Nothing is written before it returns OK.
inline Status AdoptBlocks(const IndexEnv& env, const std::vector<uint64_t>& blocks,
                          std::string_view kind) {
  for (uint64_t b : blocks) env.alloc->MarkReachable(PPtr(b));
  for (uint64_t b : blocks)
    if (!env.alloc->IsLive(PPtr(b)))
      return Status::Corruption(std::string(kind) + ": node " + std::to_string(b) +
                                " is not an allocated block");
  PMINDEX_RETURN_IF_ERROR(env.alloc->CheckRecoveryBound());
  return env.pool->MarkInUse();
}

}  // namespace pmindex::skiplist
