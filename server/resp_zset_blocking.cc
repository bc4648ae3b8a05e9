// BZPOPMIN and BZPOPMAX: the sorted sets' pop (zset.h's PopZset) over the
// blocking machinery of the lists (resp_list.h, resp_blocking.h).
#include "server/resp_list.h"
#include "server/zset.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

// Pops the member of the lowest (max: highest) score of the first
// non-empty sorted set of `keys`: [key, member, score]. `skip_wrong`: a
// key of another type is passed over (a parked client is served from
// sorted sets only) instead of answering WRONGTYPE.
ServeBody ZpopBody(int db, std::vector<std::string> keys, bool max, bool skip_wrong) {
  return [db, keys = std::move(keys), max, skip_wrong](
             TxnScope& scope, RespReply& r, bool* served, std::vector<std::string>*) -> Status {
    for (const std::string& key : keys) {
      Result<std::vector<ScoredMember>> got = PopZset(scope, db, key, max, 1);
      if (!got.ok()) {
        if (skip_wrong && IsWrongType(got.status())) continue;
        return got.status();
      }
      if (got->empty()) continue;
      r.Array(3);
      r.Bulk(key);
      r.Bulk(got->front().member);
      r.Double(got->front().score);
      *served = true;
      return Status::OK();
    }
    return Status::OK();
  };
}

// BZPOPMIN key... timeout; BZPOPMAX.
void BZpop(CommandCall& c) {
  const bool max = c.command.name == "bzpopmax";
  int64_t deadline = 0;
  if (!ParseTimeout(c, c.args[c.argc() - 1], &deadline)) return;
  std::vector<std::string> keys(c.args.begin() + 1, c.args.end() - 1);
  const int db = c.items.db_index();
  RunBlocking(c, keys, deadline, ZpopBody(db, keys, max, false), ZpopBody(db, keys, max, true),
              false);
}

}  // namespace

void RegisterZsetBlockingCommands(CommandTable& t) {
  for (std::string_view name : {"bzpopmin", "bzpopmax"}) {
    t.Add({.name = name,
           .arity = -3,
           .flags = kWrite | kNoScript | kFast | kBlocking,
           .first_key = 1,
           .last_key = -2,
           .key_step = 1,
           .group = "sorted_set",
           .summary = name == "bzpopmin"
                          ? "Pops the member of the lowest score of the first non-empty sorted "
                            "set, or blocks until one is added."
                          : "Pops the member of the highest score of the first non-empty sorted "
                            "set, or blocks until one is added.",
           .key_flags = "RW ACCESS DELETE",
           .categories = "sortedset",
           .handler = BZpop});
  }
}

}  // namespace pmindex::server
