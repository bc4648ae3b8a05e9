// Sorted sets over the collection layer (collections.h), for the RESP
// commands (resp_zset_commands.cc) and for other command groups that pop
// from a sorted set (BZPOPMIN/BZPOPMAX over the blocking machinery).
//
// A member m of score s is two element records of the collection: 'm' m
// -> OrderedDouble(s), and 's' OrderedDouble(s) m -> "" (the score index,
// ordered by score, then by member bytewise, as Redis orders a sorted
// set). -0.0 is stored as 0.0; NaN is never stored (the commands refuse
// it). The collection's count is the number of members.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pmindex/status.h"
#include "server/collections.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

struct ScoredMember {
  std::string member;
  double score = 0;
};

// Removes up to `count` members of the lowest scores (max: the highest)
// from the sorted set at `key` of database `db`, inside `scope`'s
// transaction, and returns them in pop order (lowest first, or highest
// first); removes the key when it empties. An empty vector: no such key
// (or count 0). WrongTypeError(): the key holds another type. Cost:
// O(log n + count) store work for the lowest; for the highest, about 64
// O(log n) probes per distinct score popped plus the members sharing it
// (the store scans forward only: zset.h's callers need not care).
[[nodiscard]] Result<std::vector<ScoredMember>> PopZset(TxnScope& scope, int db,
                                                        std::string_view key, bool max,
                                                        uint64_t count);

}  // namespace pmindex::server
