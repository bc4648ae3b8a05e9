// RESP server commands: INFO, COMMAND, CONFIG, TIME, FUNCTION FLUSH.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "pmindex/version.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_protocol.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

// ---- INFO

// Redis's "1.50M": a byte count for people.
std::string HumanBytes(uint64_t n) {
  static constexpr const char* kUnits[] = {"B", "K", "M", "G", "T", "P"};
  if (n < 1024) return std::to_string(n) + "B";
  double d = static_cast<double>(n);
  size_t u = 0;
  while (d >= 1024 && u + 1 < std::size(kUnits)) {
    d /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f%s", d, kUnits[u]);
  return buf;
}

double Seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

// One INFO section: a "# Title" line, then "name:value" lines.
class InfoText {
 public:
  void Section(std::string_view title) {
    if (!text_.empty()) text_.append("\r\n");
    text_.append("# ").append(title).append("\r\n");
  }
  void Field(std::string_view name, std::string_view value) {
    text_.append(name).append(":").append(value).append("\r\n");
  }
  template <class T>
  void Number(std::string_view name, T value) {
    Field(name, std::to_string(value));
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

void InfoServer(CommandCall& c, InfoText& info) {
  const int64_t uptime = (c.items.NowMs() - c.items.stats().start_ms) / 1000;
  info.Section("Server");
  info.Field("redis_version", kRedisCompatibleVersion);
  info.Field("server", "pmserver");
  info.Field("pmserver_version", PMINDEX_VERSION_STRING);
  info.Field("redis_mode", "standalone");
  info.Number("arch_bits", sizeof(void*) * 8);
  info.Number("process_id", static_cast<long long>(getpid()));
  info.Field("tcp_port", c.shared.config().at("port").get());
  info.Number("uptime_in_seconds", uptime);
  info.Number("uptime_in_days", uptime / 86400);
  info.Number("io_threads_active", 0);
  info.Number("threads", c.items.stats().threads);
  info.Field("engine", c.items.Info().engine);
}

void InfoClients(CommandCall& c, InfoText& info) {
  info.Section("Clients");
  info.Number("connected_clients", c.shared.clients().size());
  info.Field("maxclients", c.shared.config().at("maxclients").get());
  info.Number("blocked_clients", c.shared.blocking().size());
}

void InfoMemory(CommandCall& c, InfoText& info) {
  const uint64_t pm = c.items.Info().pm_bytes;
  info.Section("Memory");
  // The data lives in the pool: its bytes are what "used_memory" means
  // for a client deciding whether the server is full.
  info.Number("used_memory", pm);
  info.Field("used_memory_human", HumanBytes(pm));
  info.Number("pm_bytes", pm);
  const uint64_t limit = c.shared.maxmemory();
  info.Number("maxmemory", limit);
  info.Field("maxmemory_human", HumanBytes(limit));
  info.Field("maxmemory_policy", "noeviction");
}

void InfoPersistence(InfoText& info) {
  // Every write is durable in the pool before its reply: there is no
  // snapshot or log to load or rewrite.
  info.Section("Persistence");
  info.Number("loading", 0);
  info.Number("async_loading", 0);
  info.Number("rdb_changes_since_last_save", 0);
  info.Number("rdb_bgsave_in_progress", 0);
  info.Number("aof_enabled", 0);
  info.Number("aof_rewrite_in_progress", 0);
}

void InfoStats(CommandCall& c, InfoText& info) {
  Stats& s = c.items.stats();
  uint64_t commands = 0;
  c.shared.ForEachCounters(
      [&](const Command&, const CommandCounters::Totals& n) { commands += n.calls; });
  info.Section("Stats");
  info.Number("total_connections_received", Stats::Read(s.total_connections));
  info.Number("total_commands_processed", commands);
  info.Number("total_net_input_bytes", Stats::Read(s.bytes_read));
  info.Number("total_net_output_bytes", Stats::Read(s.bytes_written));
  info.Number("rejected_connections", Stats::Read(s.rejected_connections));
  // Lazily (a read found them) and by the maintenance thread's sweep.
  info.Number("expired_keys", Stats::Read(s.get_expired) + Stats::Read(s.expired_keys));
  info.Number("evicted_keys", 0);
  info.Number("keyspace_hits", Stats::Read(s.get_hits));
  info.Number("keyspace_misses", Stats::Read(s.get_misses));
  info.Number("total_error_replies", Stats::Read(s.protocol_errors));
  // memcached's counters (both protocols count into them).
  for (const auto& [name, value] : StatsReport(c.items)) info.Field(name, value);
}

void InfoReplication(InfoText& info) {
  info.Section("Replication");
  info.Field("role", "master");
  info.Number("connected_slaves", 0);
  info.Number("master_repl_offset", 0);
}

void InfoCpu(InfoText& info) {
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  char buf[32];
  info.Section("CPU");
  auto seconds = [&](std::string_view name, const timeval& t) {
    std::snprintf(buf, sizeof(buf), "%.6f", Seconds(t));
    info.Field(name, buf);
  };
  seconds("used_cpu_sys", self.ru_stime);
  seconds("used_cpu_user", self.ru_utime);
  seconds("used_cpu_sys_children", children.ru_stime);
  seconds("used_cpu_user_children", children.ru_utime);
}

void InfoCluster(CommandCall& c, InfoText& info) {
  info.Section("Cluster");
  info.Number("cluster_enabled", c.shared.cluster() != nullptr ? 1 : 0);
}

void InfoKeyspace(CommandCall& c, InfoText& info) {
  info.Section("Keyspace");
  for (const auto& [name, value] : KeyspaceInfo(c.items)) info.Field(name, value);
}

void InfoCommandStats(CommandCall& c, InfoText& info) {
  info.Section("Commandstats");
  std::vector<std::pair<std::string, std::string>> lines;
  c.shared.ForEachCounters([&](const Command& cmd, const CommandCounters::Totals& n) {
    if (n.calls == 0 && n.rejected == 0) return;
    char per_call[32];
    std::snprintf(per_call, sizeof(per_call), "%.2f",
                  n.calls == 0 ? 0.0 : static_cast<double>(n.usec) / static_cast<double>(n.calls));
    lines.emplace_back(std::string("cmdstat_").append(cmd.full_name),
                       "calls=" + std::to_string(n.calls) + ",usec=" + std::to_string(n.usec) +
                           ",usec_per_call=" + per_call +
                           ",rejected_calls=" + std::to_string(n.rejected) +
                           ",failed_calls=" + std::to_string(n.failed));
  });
  std::sort(lines.begin(), lines.end());
  for (const auto& [name, value] : lines) info.Field(name, value);
}

// INFO [section ...]: server, clients, memory, persistence, stats,
// replication, cpu, cluster, keyspace, commandstats; "default" (all but
// commandstats), "all" and "everything".
void Info(CommandCall& c) {
  std::vector<std::string> wanted;
  for (size_t i = 1; i < c.argc(); ++i) wanted.push_back(Lower(c.args[i]));
  if (wanted.empty()) wanted.push_back("default");
  auto has = [&](std::string_view s) {
    return std::find(wanted.begin(), wanted.end(), s) != wanted.end();
  };
  const bool all = has("all") || has("everything");
  const bool by_default = all || has("default");
  InfoText info;
  if (by_default || has("server")) InfoServer(c, info);
  if (by_default || has("clients")) InfoClients(c, info);
  if (by_default || has("memory")) InfoMemory(c, info);
  if (by_default || has("persistence")) InfoPersistence(info);
  if (by_default || has("stats")) InfoStats(c, info);
  if (by_default || has("replication")) InfoReplication(info);
  if (by_default || has("cpu")) InfoCpu(info);
  if (all || has("commandstats")) InfoCommandStats(c, info);
  if (by_default || has("cluster")) InfoCluster(c, info);
  if (by_default || has("keyspace")) InfoKeyspace(c, info);
  c.reply.Verbatim(info.text());
}

// ---- COMMAND

// Key-spec flags as Redis writes them: RO, RW, OW, RM in capitals, the
// others in lower case.
std::vector<std::string> KeySpecFlags(std::string_view words) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < words.size()) {
    const size_t end = std::min(words.find(' ', i), words.size());
    const std::string_view w = words.substr(i, end - i);
    if (!w.empty()) {
      const bool capital = w == "RO" || w == "RW" || w == "OW" || w == "RM";
      out.push_back(capital ? std::string(w) : Lower(w));
    }
    i = end + 1;
  }
  return out;
}

// Redis's ACL categories of a command, in Redis's order: those its flags
// imply and those the entry names.
std::vector<std::string> AclCategories(const Command& cmd) {
  static constexpr std::string_view kOrder[] = {
      "keyspace", "read",   "write",       "set",       "sortedset",  "list",        "hash",
      "string",   "bitmap", "hyperloglog", "geo",       "stream",     "pubsub",      "admin",
      "fast",     "slow",   "blocking",    "dangerous", "connection", "transaction", "scripting"};
  std::vector<std::string> named;
  for (const std::string& w : KeySpecFlags(cmd.categories)) named.push_back(Lower(w));
  if (cmd.flags & kWrite) named.push_back("write");
  if (cmd.flags & kReadonly) named.push_back("read");
  if (cmd.flags & kAdmin) {
    named.push_back("admin");
    named.push_back("dangerous");
  }
  named.push_back(cmd.flags & kFast ? "fast" : "slow");
  if (cmd.flags & kBlocking) named.push_back("blocking");
  std::vector<std::string> cats;
  for (std::string_view c : kOrder) {
    if (std::find(named.begin(), named.end(), c) != named.end())
      cats.push_back(std::string("@").append(c));
  }
  return cats;
}

// The reply of COMMAND INFO for one command (Redis 7.0's ten elements).
void CommandInfo(const Command& cmd, RespReply& r) {
  r.Array(10);
  r.Bulk(cmd.full_name);
  r.Integer(cmd.arity);
  const std::vector<std::string_view> flags = cmd_flag::Names(cmd.flags & ~kMayReplicate);
  r.Set(flags.size());
  for (std::string_view f : flags) r.Simple(f);
  r.Integer(cmd.first_key);
  r.Integer(cmd.last_key);
  r.Integer(cmd.key_step);
  const std::vector<std::string> cats = AclCategories(cmd);
  r.Set(cats.size());
  for (const std::string& cat : cats) r.Simple(cat);
  const std::vector<std::string> tips = KeySpecFlags(cmd.tips);
  r.Set(tips.size());
  for (const std::string& tip : tips) r.Bulk(tip);
  if (cmd.first_key == 0) {
    r.Set(0);
  } else {
    // One key spec: the range first_key .. last_key by key_step, with
    // last_key relative to first_key when it counts from the start.
    r.Set(1);
    r.Map(3);
    r.Bulk("flags");
    const std::vector<std::string> kf = KeySpecFlags(cmd.key_flags);
    r.Set(kf.size());
    for (const std::string& f : kf) r.Simple(f);
    r.Bulk("begin_search");
    r.Map(2);
    r.Bulk("type");
    r.Bulk("index");
    r.Bulk("spec");
    r.Map(1);
    r.Bulk("index");
    r.Integer(cmd.first_key);
    r.Bulk("find_keys");
    r.Map(2);
    r.Bulk("type");
    r.Bulk("range");
    r.Bulk("spec");
    r.Map(3);
    r.Bulk("lastkey");
    r.Integer(cmd.last_key < 0 ? cmd.last_key : cmd.last_key - cmd.first_key);
    r.Bulk("keystep");
    r.Integer(cmd.key_step);
    r.Bulk("limit");
    r.Integer(0);
  }
  if (cmd.subcommands.empty()) {
    r.Set(0);
  } else {
    r.Array(cmd.subcommands.size());
    for (const Command& sub : cmd.subcommands) CommandInfo(sub, r);
  }
}

void CommandDocs(const Command& cmd, RespReply& r) {
  r.Map(cmd.subcommands.empty() ? 2 : 3);
  r.Bulk("summary");
  r.Bulk(cmd.summary);
  r.Bulk("group");
  r.Bulk(cmd.group);
  if (!cmd.subcommands.empty()) {
    r.Bulk("subcommands");
    r.Map(cmd.subcommands.size());
    for (const Command& sub : cmd.subcommands) {
      r.Bulk(sub.full_name);
      CommandDocs(sub, r);
    }
  }
}

// A command by name, "container|sub" naming a subcommand; or nullptr.
const Command* FindByFullName(const CommandTable& t, std::string_view name) {
  const size_t bar = name.find('|');
  const Command* c = t.Find(name.substr(0, bar));
  if (c == nullptr || bar == std::string_view::npos) return c;
  return c->FindSubcommand(name.substr(bar + 1));
}

// The commands in a stable order (by name): COMMAND's replies.
std::vector<const Command*> Sorted(const CommandTable& t) {
  std::vector<const Command*> all;
  t.ForEach([&](const Command& c) { all.push_back(&c); });
  std::sort(all.begin(), all.end(),
            [](const Command* a, const Command* b) { return a->full_name < b->full_name; });
  return all;
}

void CommandAll(CommandCall& c) {
  const std::vector<const Command*> all = Sorted(c.shared.commands());
  c.reply.Array(all.size());
  for (const Command* cmd : all) CommandInfo(*cmd, c.reply);
}

void CommandCount(CommandCall& c) {
  c.reply.Integer(static_cast<int64_t>(c.shared.commands().size()));
}

void CommandInfoCmd(CommandCall& c) {
  if (c.argc() == 2) return CommandAll(c);
  c.reply.Array(c.argc() - 2);
  for (size_t i = 2; i < c.argc(); ++i) {
    const Command* cmd = FindByFullName(c.shared.commands(), c.args[i]);
    if (cmd == nullptr) {
      c.reply.NullArray();
    } else {
      CommandInfo(*cmd, c.reply);
    }
  }
}

void CommandDocsCmd(CommandCall& c) {
  std::vector<const Command*> cmds;
  if (c.argc() == 2) {
    cmds = Sorted(c.shared.commands());
  } else {
    for (size_t i = 2; i < c.argc(); ++i) {
      if (const Command* cmd = FindByFullName(c.shared.commands(), c.args[i])) cmds.push_back(cmd);
    }
  }
  c.reply.Map(cmds.size());
  for (const Command* cmd : cmds) {
    c.reply.Bulk(cmd->full_name);
    CommandDocs(*cmd, c.reply);
  }
}

// COMMAND LIST [FILTERBY MODULE m | ACLCAT cat | PATTERN p]
void CommandList(CommandCall& c) {
  std::string_view filter, value;
  if (c.argc() == 5 && EqualsIgnoreCase(c.args[2], "FILTERBY")) {
    filter = c.args[3];
    value = c.args[4];
    if (!EqualsIgnoreCase(filter, "MODULE") && !EqualsIgnoreCase(filter, "ACLCAT") &&
        !EqualsIgnoreCase(filter, "PATTERN")) {
      return c.reply.Error(kSyntax);
    }
  } else if (c.argc() != 2) {
    return c.reply.Error(kSyntax);
  }
  std::vector<std::string> names;
  auto consider = [&](const Command& cmd) {
    bool keep = true;
    if (EqualsIgnoreCase(filter, "MODULE")) {
      keep = false;  // no modules
    } else if (EqualsIgnoreCase(filter, "ACLCAT")) {
      const std::vector<std::string> cats = AclCategories(cmd);
      keep =
          std::find(cats.begin(), cats.end(), std::string("@").append(Lower(value))) != cats.end();
    } else if (EqualsIgnoreCase(filter, "PATTERN")) {
      keep = GlobMatch(Lower(value), cmd.full_name);
    }
    if (keep) names.push_back(cmd.full_name);
  };
  for (const Command* cmd : Sorted(c.shared.commands())) {
    consider(*cmd);
    for (const Command& sub : cmd->subcommands) consider(sub);
  }
  c.reply.BulkArray(names);
}

// COMMAND GETKEYS command arg...
void CommandGetKeys(CommandCall& c) {
  const std::span<const std::string_view> args = c.args.subspan(2);
  const Command* cmd = c.shared.commands().Find(args[0]);
  if (cmd != nullptr && !cmd->subcommands.empty() && args.size() >= 2)
    cmd = cmd->FindSubcommand(args[1]);
  if (cmd == nullptr) return c.reply.Error("ERR Invalid command specified");
  if (cmd->first_key == 0 && cmd->numkeys_arg == 0)
    return c.reply.Error("ERR The command has no key arguments");
  const auto argc = static_cast<int64_t>(args.size());
  if (cmd->arity >= 0 ? argc != cmd->arity : argc < -cmd->arity)
    return c.reply.Error("ERR Invalid number of arguments specified for command");
  std::vector<std::string_view> keys;
  if (!CommandKeys(*cmd, args, &keys) || keys.empty())
    return c.reply.Error("ERR Invalid arguments specified for command");
  c.reply.BulkArray(keys);
}

void Help(CommandCall& c, std::initializer_list<std::string_view> lines) {
  c.reply.Array(lines.size());
  for (std::string_view line : lines) c.reply.Simple(line);
}

void CommandHelp(CommandCall& c) {
  Help(c, {"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "(no subcommand)",
           "    Describes every command.", "COUNT", "    The number of commands.",
           "LIST [FILTERBY MODULE <m>|ACLCAT <cat>|PATTERN <p>]", "    The names of the commands.",
           "INFO [<command-name> ...]", "    Describes commands: arity, flags, key positions.",
           "DOCS [<command-name> ...]", "    A summary and the group of commands.",
           "GETKEYS <full-command>", "    The keys of a command.", "HELP", "    This text."});
}

// ---- CONFIG

// CONFIG GET pattern [pattern ...]: name/value pairs, each name once.
void ConfigGet(CommandCall& c) {
  std::vector<std::pair<std::string, std::string>> found;
  for (const auto& [name, param] : c.shared.config()) {
    for (size_t i = 2; i < c.argc(); ++i) {
      if (GlobMatch(Lower(c.args[i]), name)) {
        found.emplace_back(name, param.get());
        break;
      }
    }
  }
  c.reply.Map(found.size());
  for (const auto& [name, value] : found) {
    c.reply.Bulk(name);
    c.reply.Bulk(value);
  }
}

// CONFIG SET name value [name value ...]: all or none.
void ConfigSet(CommandCall& c) {
  if (c.argc() % 2 != 0) return c.reply.Error(kSyntax);
  const auto& config = c.shared.config();
  std::vector<std::pair<const RespShared::ConfigParam*, std::string_view>> changes;
  for (size_t i = 2; i < c.argc(); i += 2) {
    auto it = config.find(Lower(c.args[i]));
    if (it == config.end()) {
      return c.reply.Error("ERR Unknown option or number of arguments for CONFIG SET - '" +
                           std::string(c.args[i]) + "'");
    }
    if (!it->second.set) {
      return c.reply.Error("ERR CONFIG SET failed (possibly related to argument '" +
                           std::string(c.args[i]) + "') - can't set immutable config");
    }
    for (const auto& [p, v] : changes) {
      if (p == &it->second) {
        return c.reply.Error("ERR CONFIG SET failed (possibly related to argument '" +
                             std::string(c.args[i]) + "') - duplicate parameter");
      }
    }
    changes.emplace_back(&it->second, c.args[i + 1]);
  }
  // Applied in order; on an error the ones applied are put back.
  std::vector<std::pair<const RespShared::ConfigParam*, std::string>> applied;
  for (size_t i = 0; i < changes.size(); ++i) {
    const auto& [param, value] = changes[i];
    std::string old = param->get();
    const std::string error = param->set(value);
    if (!error.empty()) {
      for (auto it = applied.rbegin(); it != applied.rend(); ++it) it->first->set(it->second);
      return c.reply.Error("ERR CONFIG SET failed (possibly related to argument '" +
                           std::string(c.args[2 + 2 * i]) + "') - " + error);
    }
    applied.emplace_back(param, std::move(old));
  }
  c.reply.Simple("OK");
}

void ConfigResetStat(CommandCall& c) {
  c.shared.ResetCommandCounters();
  c.reply.Simple("OK");
}

void ConfigHelp(CommandCall& c) {
  Help(c, {"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
           "GET <pattern> [<pattern> ...]", "    The settings whose names match.",
           "SET <name> <value> [<name> <value> ...]", "    Changes settings, all or none.",
           "RESETSTAT", "    Zeroes the command counters of INFO commandstats.", "HELP",
           "    This text."});
}

// ---- SAVE, SHUTDOWN

// SAVE: every write is durable in the pool before its reply, so there is
// nothing left to save.
void Save(CommandCall& c) { c.reply.Simple("OK"); }

// SHUTDOWN is refused: a client does not stop pmserver; its operator does,
// with SIGTERM or SIGINT (docs/server.md "Shutdown"). Inside MULTI it is
// refused when queued, as in Redis (no-multi).
void Shutdown(CommandCall& c) {
  c.reply.Error("ERR SHUTDOWN is not served: stop pmserver with SIGTERM");
}

// ---- TIME, FUNCTION

void Time(CommandCall& c) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  c.reply.Array(2);
  c.reply.Bulk(std::to_string(us / 1000000));
  c.reply.Bulk(std::to_string(us % 1000000));
}

// FUNCTION FLUSH [ASYNC|SYNC]: there are no functions to remove.
void FunctionFlush(CommandCall& c) {
  if (c.argc() > 3 || (c.argc() == 3 && !EqualsIgnoreCase(c.args[2], "ASYNC") &&
                       !EqualsIgnoreCase(c.args[2], "SYNC"))) {
    return c.reply.Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
  }
  c.reply.Simple("OK");
}

Command Sub(std::string_view name, int arity, uint64_t flags, std::string_view summary,
            CommandHandler h, std::string_view group = "server", std::string_view categories = "") {
  return Command{.name = name,
                 .arity = arity,
                 .flags = flags,
                 .group = group,
                 .summary = summary,
                 .categories = categories,
                 .handler = h};
}

}  // namespace

void RegisterServerCommands(CommandTable& t) {
  t.Add({.name = "info",
         .arity = -1,
         .flags = kLoading | kStale,
         .group = "server",
         .summary = "Returns the server's state and counters, by section.",
         .categories = "dangerous",
         .tips = "nondeterministic_output request_policy:all_shards response_policy:special",
         .handler = Info});
  t.Add({.name = "time",
         .arity = 1,
         .flags = kLoading | kStale | kFast,
         .group = "server",
         .summary = "Returns the server's time: unix seconds and microseconds.",
         .tips = "nondeterministic_output",
         .handler = Time});
  t.Add({.name = "save",
         .arity = 1,
         .flags = kAdmin | kNoScript | kNoMulti,
         .group = "server",
         .summary = "OK: every write is already durable.",
         .categories = "dangerous",
         .handler = Save});
  t.Add({.name = "shutdown",
         .arity = -1,
         .flags = kAdmin | kNoScript | kLoading | kStale | kNoMulti | kAllowBusy,
         .group = "server",
         .summary = "Refused: pmserver stops on SIGTERM or SIGINT.",
         .categories = "dangerous",
         .handler = Shutdown});
  const uint64_t cf = kLoading | kStale;
  t.Add({.name = "command",
         .arity = -1,
         .flags = cf,
         .group = "server",
         .summary = "Describes the commands.",
         .categories = "connection",
         .tips = "nondeterministic_output_order",
         .handler = CommandAll,
         .subcommands = {
             Sub("count", 2, cf, "The number of commands.", CommandCount, "server", "connection"),
             Sub("info", -2, cf, "Describes commands.", CommandInfoCmd, "server", "connection"),
             Sub("docs", -2, cf, "Summarizes commands.", CommandDocsCmd, "server", "connection"),
             Sub("list", -2, cf, "Lists the command names.", CommandList, "server", "connection"),
             Sub("getkeys", -4, cf, "Extracts the keys of a command.", CommandGetKeys, "server",
                 "connection"),
             Sub("help", 2, cf, "Describes the subcommands.", CommandHelp, "server", "connection"),
         }});
  const uint64_t admin = kAdmin | kNoScript | kLoading | kStale;
  t.Add({.name = "config",
         .arity = -2,
         .group = "server",
         .summary = "A container for the server configuration commands.",
         .subcommands = {
             Sub("get", -3, admin, "Returns settings.", ConfigGet),
             Sub("set", -4, admin, "Changes settings.", ConfigSet),
             Sub("resetstat", 2, admin, "Zeroes the command counters.", ConfigResetStat),
             Sub("help", 2, kLoading | kStale, "Describes the subcommands.", ConfigHelp),
         }});
  t.Add({.name = "function",
         .arity = -2,
         .group = "scripting",
         .summary = "A container for the function commands (there are no functions).",
         .subcommands = {
             Sub("flush", -2, kNoScript | kWrite, "Removes every function: there are none.",
                 FunctionFlush, "scripting", "scripting"),
         }});
}

}  // namespace pmindex::server
