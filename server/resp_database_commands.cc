// RESP database commands: SELECT, DBSIZE, FLUSHDB, FLUSHALL. One
// database (0) for now.
#include "server/resp_command.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

void Select(CommandCall& c) {
  if (c.args[1] != "0") return c.reply.Error("ERR DB index is out of range");
  c.reply.Simple("OK");
}

void DbSize(CommandCall& c) { c.reply.Integer(static_cast<int64_t>(c.items.Info().keys)); }

// FLUSHDB, FLUSHALL [SYNC|ASYNC].
void Flush(CommandCall& c) {
  if (c.argc() > 2 || (c.argc() == 2 && !EqualsIgnoreCase(c.args[1], "SYNC") &&
                       !EqualsIgnoreCase(c.args[1], "ASYNC"))) {
    return c.reply.Error(kSyntax);
  }
  Status s = c.items.Flush(0);
  if (!s.ok()) return ReplyStoreError(c, s);
  c.reply.Simple("OK");
}

}  // namespace

void RegisterDatabaseCommands(CommandTable& t) {
  t.Add({.name = "select",
         .arity = 2,
         .flags = kLoading | kStale | kFast,
         .group = "connection",
         .summary = "Selects the database of the connection (only 0).",
         .categories = "connection",
         .handler = Select});
  t.Add({.name = "dbsize",
         .arity = 1,
         .flags = kReadonly | kFast,
         .group = "server",
         .summary = "Returns the number of keys (expired ones not yet removed included).",
         .categories = "keyspace",
         .tips = "request_policy:all_shards response_policy:agg_sum",
         .handler = DbSize});
  for (std::string_view name : {"flushdb", "flushall"}) {
    t.Add({.name = name,
           .arity = -1,
           .flags = kWrite,
           .group = "server",
           .summary = "Removes every key.",
           .categories = "keyspace dangerous",
           .tips = "request_policy:all_shards response_policy:all_succeeded",
           .handler = Flush});
  }
}

}  // namespace pmindex::server
