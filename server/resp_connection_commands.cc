// RESP connection commands: PING, ECHO, QUIT, CLIENT.
#include "server/resp_command.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

void Ping(CommandCall& c) {
  if (c.argc() > 2) {
    return c.reply.Error("ERR wrong number of arguments for '" + c.command.full_name + "' command");
  }
  if (c.argc() == 2) return c.reply.Bulk(c.args[1]);
  c.reply.Simple("PONG");
}

void Echo(CommandCall& c) { c.reply.Bulk(c.args[1]); }

void Quit(CommandCall& c) {
  c.reply.Simple("OK");
  c.close = true;
}

void ClientSetName(CommandCall& c) {
  c.client.name = std::string(c.args[2]);
  c.reply.Simple("OK");
}

void ClientSetInfo(CommandCall& c) { c.reply.Simple("OK"); }

}  // namespace

void RegisterConnectionCommands(CommandTable& t) {
  t.Add({.name = "ping",
         .arity = -1,
         .flags = kFast,
         .group = "connection",
         .summary = "Answers PONG, or the message given.",
         .categories = "connection",
         .handler = Ping});
  t.Add({.name = "echo",
         .arity = 2,
         .flags = kLoading | kStale | kFast,
         .group = "connection",
         .summary = "Answers the message given.",
         .categories = "connection",
         .handler = Echo});
  t.Add({.name = "quit",
         .arity = -1,
         .flags = kAllowBusy | kNoScript | kLoading | kStale | kFast | kNoAuth,
         .group = "connection",
         .summary = "Answers OK, then closes the connection.",
         .categories = "connection",
         .handler = Quit});
  const uint64_t client_flags = kNoScript | kLoading | kStale;
  t.Add({.name = "client",
         .arity = -2,
         .group = "connection",
         .summary = "A container for the client connection commands.",
         .subcommands = {
             {.name = "setname",
              .arity = 3,
              .flags = client_flags,
              .group = "connection",
              .summary = "Names the connection.",
              .categories = "connection",
              .handler = ClientSetName},
             {.name = "setinfo",
              .arity = 4,
              .flags = client_flags,
              .group = "connection",
              .summary = "Records the client library's name or version (accepted, not kept).",
              .categories = "connection",
              .handler = ClientSetInfo},
         }});
}

}  // namespace pmindex::server
