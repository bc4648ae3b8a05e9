// RESP server commands: INFO, COMMAND.
#include "server/resp_command.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

void Info(CommandCall& c) {
  std::string info = "# Server\r\nserver:pmserver\r\n";
  for (const auto& [name, value] : StatsReport(c.items))
    info.append(name).append(":").append(value).append("\r\n");
  info.append("\r\n# Keyspace\r\ndb0:keys=")
      .append(std::to_string(c.items.Info().keys))
      .append("\r\n");
  c.reply.Verbatim(info);
}

void CommandReply(CommandCall& c) { c.reply.Array(0); }

}  // namespace

void RegisterServerCommands(CommandTable& t) {
  t.Add({.name = "info",
         .arity = -1,
         .flags = kLoading | kStale,
         .group = "server",
         .summary = "Returns the server's counters.",
         .categories = "dangerous",
         .handler = Info});
  t.Add({.name = "command",
         .arity = -1,
         .flags = kLoading | kStale,
         .group = "server",
         .summary = "Describes the commands (not yet: an empty array).",
         .categories = "connection",
         .handler = CommandReply});
}

}  // namespace pmindex::server
