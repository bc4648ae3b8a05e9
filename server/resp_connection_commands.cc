// RESP connection commands: PING, ECHO, QUIT, HELLO, AUTH, CLIENT.
#include <algorithm>
#include <limits>
#include <optional>

#include "pmindex/version.h"
#include "server/numbers.h"
#include "server/resp_command.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr std::string_view kWrongPass =
    "WRONGPASS invalid username-password pair or user is disabled.";

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

// Redis's rule for client names: printable ASCII without spaces.
bool ValidClientName(std::string_view name) {
  for (char ch : name)
    if (ch < '!' || ch > '~') return false;
  return true;
}

// Sets the client's name; false (and the error replied) if it is not a
// valid one.
bool SetName(CommandCall& c, std::string_view name) {
  if (!ValidClientName(name)) {
    c.reply.Error("ERR Client names cannot contain spaces, newlines or special characters.");
    return false;
  }
  c.shared.clients().Update(c.client, [&](RespClient& cl) { cl.name = std::string(name); });
  return true;
}

// HELLO [protover [AUTH user password] [SETNAME name]]
void Hello(CommandCall& c) {
  int64_t version = 0;
  size_t next = 1;
  if (c.argc() >= 2) {
    if (!ParseNumber(c.args[1], &version))
      return c.reply.Error("ERR Protocol version is not an integer or out of range");
    if (version < 2 || version > 3) return c.reply.Error("NOPROTO unsupported protocol version");
    next = 2;
  }
  for (size_t j = next; j < c.argc(); ++j) {
    const size_t more = c.argc() - 1 - j;
    if (EqualsIgnoreCase(c.args[j], "AUTH") && more >= 2) {
      if (!c.shared.Authenticate(c.args[j + 1], c.args[j + 2])) return c.reply.Error(kWrongPass);
      c.client.authenticated = true;
      j += 2;
    } else if (EqualsIgnoreCase(c.args[j], "SETNAME") && more >= 1) {
      if (!SetName(c, c.args[j + 1])) return;
      ++j;
    } else {
      return c.reply.Error("ERR Syntax error in HELLO option '" + std::string(c.args[j]) + "'");
    }
  }
  if (!c.client.authenticated && c.shared.PasswordRequired()) {
    return c.reply.Error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
        "select the RESP protocol version at the same time");
  }
  if (version != 0) c.client.protocol.store(static_cast<int>(version), std::memory_order_relaxed);
  // The reply is in the protocol just chosen.
  RespReply reply(c.reply.out(), c.client.protocol.load(std::memory_order_relaxed));
  reply.Map(7);
  reply.Bulk("server");
  reply.Bulk("redis");
  reply.Bulk("version");
  reply.Bulk(kRedisCompatibleVersion);
  reply.Bulk("proto");
  reply.Integer(c.client.protocol.load(std::memory_order_relaxed));
  reply.Bulk("id");
  reply.Integer(static_cast<int64_t>(c.client.id));
  reply.Bulk("mode");
  reply.Bulk("standalone");
  reply.Bulk("role");
  reply.Bulk("master");
  reply.Bulk("modules");
  reply.Array(0);
}

// AUTH [user] password
void Auth(CommandCall& c) {
  if (c.argc() > 3) return c.reply.Error(kSyntax);
  std::string_view user = "default";
  std::string_view password = c.args[1];
  if (c.argc() == 2) {
    if (!c.shared.PasswordRequired()) {
      return c.reply.Error(
          "ERR AUTH <password> called without any password configured for the default user. "
          "Are you sure your configuration is correct?");
    }
  } else {
    user = c.args[1];
    password = c.args[2];
  }
  if (!c.shared.Authenticate(user, password)) return c.reply.Error(kWrongPass);
  c.client.authenticated = true;
  c.reply.Simple("OK");
}

// ---- CLIENT

// One line of CLIENT LIST / CLIENT INFO, with Redis's fields (those that
// describe Redis's buffers are 0 here). REQUIRES: the registry's mutex is
// held or `cl` is the caller's own client.
void AppendClientLine(const RespClient& cl, int64_t now_ms, std::string* out) {
  const Command* last = cl.last_command.load(std::memory_order_relaxed);
  const int64_t age = (now_ms - cl.created_ms) / 1000;
  const int64_t idle = (SteadyMs() - cl.last_steady_ms.load(std::memory_order_relaxed)) / 1000;
  out->append("id=").append(std::to_string(cl.id));
  out->append(" addr=").append(cl.addr);
  out->append(" laddr=").append(cl.laddr);
  out->append(" fd=-1 name=").append(cl.name);
  out->append(" age=").append(std::to_string(std::max<int64_t>(age, 0)));
  out->append(" idle=").append(std::to_string(std::max<int64_t>(idle, 0)));
  out->append(" flags=").append(cl.no_evict.load(std::memory_order_relaxed) ? "e" : "N");
  out->append(" db=").append(std::to_string(cl.db.load(std::memory_order_relaxed)));
  out->append(" sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0");
  out->append(" rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=");
  out->append(last ? last->full_name : std::string("NULL"));
  out->append(" user=default redir=-1 resp=");
  out->append(std::to_string(cl.protocol.load(std::memory_order_relaxed)));
  if (!cl.lib_name.empty()) out->append(" lib-name=").append(cl.lib_name);
  if (!cl.lib_ver.empty()) out->append(" lib-ver=").append(cl.lib_ver);
  out->append("\n");
}

// Redis's client types: every pmserver client is "normal".
bool ClientType(std::string_view name, bool* normal) {
  *normal = EqualsIgnoreCase(name, "normal");
  return *normal || EqualsIgnoreCase(name, "master") || EqualsIgnoreCase(name, "replica") ||
         EqualsIgnoreCase(name, "slave") || EqualsIgnoreCase(name, "pubsub");
}

void ClientId(CommandCall& c) { c.reply.Integer(static_cast<int64_t>(c.client.id)); }

void ClientSetName(CommandCall& c) {
  if (SetName(c, c.args[2])) c.reply.Simple("OK");
}

void ClientGetName(CommandCall& c) {
  if (c.client.name.empty()) return c.reply.NullBulk();
  c.reply.Bulk(c.client.name);
}

// CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2's).
void ClientSetInfo(CommandCall& c) {
  const bool lib_name = EqualsIgnoreCase(c.args[2], "LIB-NAME");
  if (!lib_name && !EqualsIgnoreCase(c.args[2], "LIB-VER")) {
    return c.reply.Error("ERR Unrecognized option '" + std::string(c.args[2]) + "'");
  }
  if (!ValidClientName(c.args[3])) {
    return c.reply.Error("ERR " + std::string(lib_name ? "lib-name" : "lib-ver") +
                         " cannot contain spaces, newlines or special characters.");
  }
  c.shared.clients().Update(c.client, [&](RespClient& cl) {
    (lib_name ? cl.lib_name : cl.lib_ver) = std::string(c.args[3]);
  });
  c.reply.Simple("OK");
}

void ClientInfo(CommandCall& c) {
  std::string line;
  AppendClientLine(c.client, c.items.NowMs(), &line);
  c.reply.Verbatim(line);
}

// CLIENT LIST [TYPE type | ID id...]
void ClientList(CommandCall& c) {
  std::vector<uint64_t> ids;
  bool all = true;
  if (c.argc() == 4 && EqualsIgnoreCase(c.args[2], "TYPE")) {
    bool normal = false;
    if (!ClientType(c.args[3], &normal))
      return c.reply.Error("ERR Unknown client type '" + std::string(c.args[3]) + "'");
    all = normal;
  } else if (c.argc() > 3 && EqualsIgnoreCase(c.args[2], "ID")) {
    for (size_t i = 3; i < c.argc(); ++i) {
      uint64_t id = 0;
      if (!ParseNumber(c.args[i], &id)) return c.reply.Error("ERR Invalid client ID");
      ids.push_back(id);
    }
  } else if (c.argc() != 2) {
    return c.reply.Error(kSyntax);
  }
  std::string text;
  const int64_t now = c.items.NowMs();
  c.shared.clients().ForEach([&](const RespClient& cl) {
    if (!all) return;
    if (!ids.empty() && std::find(ids.begin(), ids.end(), cl.id) == ids.end()) return;
    AppendClientLine(cl, now, &text);
  });
  c.reply.Verbatim(text);
}

// CLIENT KILL addr | CLIENT KILL [ID id] [TYPE type] [ADDR addr]
// [LADDR addr] [USER user] [SKIPME yes|no] ...
void ClientKill(CommandCall& c) {
  std::optional<std::string_view> addr, laddr;
  uint64_t id = 0;
  bool type_matches = true;
  bool skip_me = true;
  if (c.argc() == 3) {
    addr = c.args[2];
    skip_me = false;  // the old form may kill the caller
  } else {
    for (size_t i = 2; i < c.argc(); i += 2) {
      if (i + 1 >= c.argc()) return c.reply.Error(kSyntax);
      const std::string_view opt = c.args[i], value = c.args[i + 1];
      if (EqualsIgnoreCase(opt, "ID")) {
        if (!ParseNumber(value, &id) || id == 0 ||
            id > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return c.reply.Error("ERR client-id should be greater than 0");
        }
      } else if (EqualsIgnoreCase(opt, "TYPE")) {
        bool normal = false;
        if (!ClientType(value, &normal))
          return c.reply.Error("ERR Unknown client type '" + std::string(value) + "'");
        type_matches = type_matches && normal;
      } else if (EqualsIgnoreCase(opt, "ADDR")) {
        addr = value;
      } else if (EqualsIgnoreCase(opt, "LADDR")) {
        laddr = value;
      } else if (EqualsIgnoreCase(opt, "USER")) {
        if (value != "default")
          return c.reply.Error("ERR No such user '" + std::string(value) + "'");
      } else if (EqualsIgnoreCase(opt, "SKIPME")) {
        if (EqualsIgnoreCase(value, "yes")) {
          skip_me = true;
        } else if (EqualsIgnoreCase(value, "no")) {
          skip_me = false;
        } else {
          return c.reply.Error(kSyntax);
        }
      } else {
        return c.reply.Error(kSyntax);
      }
    }
  }
  bool killed_self = false;
  const size_t n = c.shared.clients().Kill(
      [&](const RespClient& cl) {
        if (!type_matches) return false;
        if (addr && cl.addr != *addr) return false;
        if (laddr && cl.laddr != *laddr) return false;
        if (id != 0 && cl.id != id) return false;
        if (&cl == &c.client) {
          if (skip_me) return false;
          killed_self = true;
        }
        return true;
      },
      &c.client);
  if (killed_self) c.close = true;  // after this reply, as Redis
  if (c.argc() == 3) {
    if (n == 0) return c.reply.Error("ERR No such client");
    return c.reply.Simple("OK");
  }
  c.reply.Integer(static_cast<int64_t>(n));
}

void ClientNoEvict(CommandCall& c) {
  if (EqualsIgnoreCase(c.args[2], "ON")) {
    c.client.no_evict.store(true, std::memory_order_relaxed);
  } else if (EqualsIgnoreCase(c.args[2], "OFF")) {
    c.client.no_evict.store(false, std::memory_order_relaxed);
  } else {
    return c.reply.Error(kSyntax);
  }
  c.reply.Simple("OK");
}

// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends another connection's blocking
// command (resp_blocking.h): 1, or 0 if that client is not parked.
void ClientUnblock(CommandCall& c) {
  uint64_t id = 0;
  if (!ParseNumber(c.args[2], &id)) return c.reply.Error(kNotInteger);
  bool error = false;
  if (c.argc() == 4) {
    if (EqualsIgnoreCase(c.args[3], "error")) {
      error = true;
    } else if (!EqualsIgnoreCase(c.args[3], "timeout")) {
      return c.reply.Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
    }
  } else if (c.argc() > 4) {
    return c.reply.Error(kSyntax);
  }
  c.reply.Integer(c.shared.blocking().Unblock(id, error) ? 1 : 0);
}

void ClientHelp(CommandCall& c) {
  static constexpr std::string_view kLines[] = {
      "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "ID",
      "    The id of this connection.",
      "INFO",
      "    This connection's line of CLIENT LIST.",
      "LIST [TYPE <type> | ID <id> [<id> ...]]",
      "    One line per connection.",
      "KILL <addr> | KILL [ID <id>] [TYPE <type>] [ADDR <addr>] [LADDR <addr>] [SKIPME yes|no]",
      "    Closes the connections that match.",
      "SETNAME <name>",
      "    Names this connection.",
      "GETNAME",
      "    This connection's name, or nil.",
      "SETINFO LIB-NAME|LIB-VER <value>",
      "    Records the client library's name or version.",
      "NO-EVICT ON|OFF",
      "    Accepted; pmserver never evicts clients.",
      "UNBLOCK <id> [TIMEOUT|ERROR]",
      "    Ends a blocking command of connection <id>: a timeout's reply, or an error.",
      "HELP",
      "    This text.",
  };
  c.reply.Array(std::size(kLines));
  for (std::string_view line : kLines) c.reply.Simple(line);
}

// The connection commands other than CLIENT (registered by
// RegisterConnectionCommands).
const CommandSpec kConnectionCommands[] = {
    {"ping", -1, kFast, 0, 0, 0, "", "Answers PONG, or the message given.", Ping,
     "request_policy:all_shards response_policy:all_succeeded"},
    {"echo", 2, kLoading | kStale | kFast, 0, 0, 0, "", "Answers the message given.", Echo},
    {"quit", -1, kAllowBusy | kNoScript | kLoading | kStale | kFast | kNoAuth, 0, 0, 0, "",
     "Answers OK, then closes the connection.", Quit},
    {"hello", -1, kNoScript | kLoading | kStale | kFast | kNoAuth | kAllowBusy, 0, 0, 0, "",
     "Chooses the protocol version (2 or 3), authenticates, names the connection.", Hello},
    {"auth", -2, kNoScript | kLoading | kStale | kFast | kNoAuth | kAllowBusy, 0, 0, 0, "",
     "Authenticates the connection.", Auth},
};

}  // namespace

void RegisterConnectionCommands(CommandTable& t) {
  AddCommands(t, kConnectionCommands, "connection", "connection");

  const uint64_t f = kNoScript | kLoading | kStale;
  auto sub = [](std::string_view name, int arity, uint64_t flags, std::string_view summary,
                CommandHandler h) {
    return Command{.name = name,
                   .arity = arity,
                   .flags = flags,
                   .group = "connection",
                   .summary = summary,
                   .categories = "connection",
                   .handler = h};
  };
  t.Add({.name = "client",
         .arity = -2,
         .group = "connection",
         .summary = "A container for the client connection commands.",
         .subcommands = {
             sub("id", 2, f, "Returns the connection's id.", ClientId),
             sub("info", 2, f, "Describes the connection.", ClientInfo),
             sub("list", -2, kAdmin | f, "Describes every connection.", ClientList),
             sub("kill", -3, kAdmin | f, "Closes connections.", ClientKill),
             sub("setname", 3, f, "Names the connection.", ClientSetName),
             sub("getname", 2, f, "Returns the connection's name.", ClientGetName),
             sub("setinfo", 4, f, "Records the client library's name or version.", ClientSetInfo),
             sub("no-evict", 3, kAdmin | f, "Accepted (pmserver never evicts clients).",
                 ClientNoEvict),
             sub("unblock", -3, kAdmin | f, "Ends another connection's blocking command.",
                 ClientUnblock),
             sub("help", 2, kLoading | kStale, "Describes the subcommands.", ClientHelp),
         }});
}

}  // namespace pmindex::server
