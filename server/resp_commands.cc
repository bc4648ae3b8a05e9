// The command table (resp_command.h) and the helpers its handlers share.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/collections.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "util/check.h"

namespace pmindex::server {

namespace cmd_flag {
std::vector<std::string_view> Names(uint64_t flags) {
  static constexpr std::pair<uint64_t, std::string_view> kNames[] = {
      {kWrite, "write"},
      {kReadonly, "readonly"},
      {kDenyOom, "denyoom"},
      {kAdmin, "admin"},
      {kPubsub, "pubsub"},
      {kNoScript, "noscript"},
      {kBlocking, "blocking"},
      {kLoading, "loading"},
      {kStale, "stale"},
      {kSkipMonitor, "skip_monitor"},
      {kSkipSlowlog, "skip_slowlog"},
      {kAsking, "asking"},
      {kFast, "fast"},
      {kNoAuth, "no_auth"},
      {kMayReplicate, "may_replicate"},
      {kNoMandatoryKeys, "no_mandatory_keys"},
      {kNoMulti, "no_multi"},
      {kMovableKeys, "movablekeys"},
      {kAllowBusy, "allow_busy"},
  };
  std::vector<std::string_view> names;
  for (const auto& [bit, name] : kNames)
    if (flags & bit) names.push_back(name);
  return names;
}
}  // namespace cmd_flag

const CommandTable& RespCommands() {
  // Built once (thread-safe static initialization), read-only after.
  static const CommandTable table = [] {
    CommandTable t;
    RegisterStringCommands(t);
    RegisterBitCommands(t);
    RegisterKeyspaceCommands(t);
    RegisterDatabaseCommands(t);
    RegisterConnectionCommands(t);
    RegisterServerCommands(t);
    RegisterTransactionCommands(t);
    RegisterMultiKeyCommands(t);
    RegisterClusterCommands(t);
    RegisterDumpCommands(t);
    RegisterHashCommands(t);
    RegisterSetCommands(t);
    RegisterZsetCommands(t);
    RegisterListCommands(t);
    RegisterZsetBlockingCommands(t);
    RegisterSortCommands(t);
    return t;
  }();
  return table;
}

namespace {
// ASCII lower case, inline: what std::tolower does in the "C" locale,
// which pmserver never changes, without a library call per byte (the
// command name's lookup runs for every command).
inline unsigned char AsciiLower(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 'A' && u <= 'Z' ? static_cast<unsigned char>(u | 0x20) : u;
}
}  // namespace

size_t CommandTable::CaseInsensitiveHash::operator()(std::string_view s) const {
  size_t h = 1469598103934665603ull;  // FNV-1a over the lower-cased bytes
  for (char c : s) {
    h ^= AsciiLower(c);
    h *= 1099511628211ull;
  }
  return h;
}

bool CommandTable::CaseInsensitiveEqual::operator()(std::string_view a, std::string_view b) const {
  return EqualsIgnoreCase(a, b);
}

namespace {
// Redis 7.0's commands whose keys follow a count (the "keynum" key spec),
// and the count's argument: the key positions cluster routing and COMMAND
// GETKEYS read (Command::numkeys_arg), kept in one place for every group.
int NumkeysArgOf(std::string_view name) {
  static const std::pair<std::string_view, int> kKeynum[] = {
      {"zunionstore", 2}, {"zinterstore", 2}, {"zdiffstore", 2}, {"zunion", 1},
      {"zinter", 1},      {"zdiff", 1},       {"zintercard", 1}, {"zmpop", 1},
      {"bzmpop", 2},      {"sintercard", 1},  {"lmpop", 1},      {"blmpop", 2},
      {"eval", 2},        {"evalsha", 2},     {"eval_ro", 2},    {"evalsha_ro", 2},
      {"fcall", 2},       {"fcall_ro", 2}};
  for (const auto& [n, at] : kKeynum)
    if (EqualsIgnoreCase(name, n)) return at;
  return 0;
}
}  // namespace

void AddCommands(CommandTable& table, std::span<const CommandSpec> specs, std::string_view group,
                 std::string_view categories) {
  for (const CommandSpec& s : specs) {
    table.Add({.name = s.name,
               .arity = s.arity,
               .flags = s.flags,
               .first_key = s.first_key,
               .last_key = s.last_key,
               .key_step = s.key_step,
               .group = s.group.empty() ? group : s.group,
               .summary = s.summary,
               .key_flags = s.key_flags,
               .categories = s.categories.empty() ? categories : s.categories,
               .tips = s.tips,
               .handler = s.handler});
  }
}

void CommandTable::Add(Command command) {
  if (command.numkeys_arg == 0 && (command.flags & cmd_flag::kMovableKeys))
    command.numkeys_arg = NumkeysArgOf(command.name);
  command.full_name = std::string(command.name);
  command.id = next_id_++;
  for (Command& sub : command.subcommands) {
    sub.full_name = command.full_name + "|" + std::string(sub.name);
    sub.id = next_id_++;
  }
  const std::string name = command.full_name;
  const bool added = commands_.emplace(name, std::make_unique<Command>(std::move(command))).second;
  PMINDEX_CHECK(added, "the RESP command '%s' is registered twice", name.c_str());
}

const Command* CommandTable::Find(std::string_view name) const {
  auto it = commands_.find(name);
  return it == commands_.end() ? nullptr : it->second.get();
}

const Command* Command::FindSubcommand(std::string_view sub) const {
  for (const Command& c : subcommands)
    if (EqualsIgnoreCase(sub, c.name)) return &c;
  return nullptr;
}

std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

std::string Lower(std::string_view s) {
  std::string l(s);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l;
}

bool EqualsIgnoreCase(std::string_view s, std::string_view word) {
  if (s.size() != word.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (AsciiLower(s[i]) != AsciiLower(word[i])) return false;
  }
  return true;
}

// Redis's strict long double: the whole string, no leading space, no
// overflow, not NaN.
bool ParseLongDouble(std::string_view s, long double* v) {
  if (s.empty() || s.size() >= 5 * 1024 || std::isspace(static_cast<unsigned char>(s[0])))
    return false;
  const std::string buf(s);
  char* end = nullptr;
  errno = 0;
  const long double d = std::strtold(buf.c_str(), &end);
  if (end != buf.c_str() + buf.size() || std::isnan(d)) return false;
  if (errno == ERANGE && (std::isinf(d) || d == 0)) return false;
  if (errno == EINVAL) return false;
  *v = d;
  return true;
}

// Redis's "human" text of a long double: 17 decimals, trailing zeros and
// a trailing point dropped, "-0" as "0".
std::string LongDoubleText(long double v) {
  char buf[5 * 1024];
  int n = std::snprintf(buf, sizeof(buf), "%.17Lf", v);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(buf)) return "0";
  std::string s(buf, static_cast<size_t>(n));
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

void ReplyStoreError(CommandCall& call, const Status& s) {
  if (IsWrongType(s)) return call.reply.Error(kWrongType);
  call.reply.Error("ERR " + StoreErrorText(s));
}

bool CommandKeys(const Command& command, std::span<const std::string_view> args,
                 std::vector<std::string_view>* keys) {
  keys->clear();
  const auto argc = static_cast<int64_t>(args.size());
  if (command.first_key > 0) {
    const int64_t last = command.last_key < 0 ? argc + command.last_key : command.last_key;
    for (int64_t i = command.first_key; i <= last && i < argc; i += command.key_step)
      keys->push_back(args[static_cast<size_t>(i)]);
  }
  if (command.numkeys_arg > 0) {
    const auto at = static_cast<size_t>(command.numkeys_arg);
    int64_t n = 0;
    if (at >= args.size() || !ParseNumber(args[at], &n) || n < 0 ||
        n > static_cast<int64_t>(args.size() - at - 1))
      return false;
    for (size_t i = at + 1; i <= at + static_cast<size_t>(n); ++i) keys->push_back(args[i]);
  }
  if (command.more_keys != nullptr) command.more_keys(args, keys);
  return true;
}

bool CheckKey(CommandCall& call, std::string_view key) {
  if (!key.empty() && key.size() <= call.items.max_key_bytes()) return true;
  call.reply.Error("ERR invalid key length (1 to " + std::to_string(call.items.max_key_bytes()) +
                   " bytes)");
  return false;
}

bool ParseScanOptions(CommandCall& call, size_t first, bool allow_type, ScanOptions* o) {
  const std::span<const std::string_view> args = call.args;
  for (size_t i = first; i < args.size(); i += 2) {
    if (EqualsIgnoreCase(args[i], "MATCH")) {
      o->pattern = args[i + 1];
    } else if (EqualsIgnoreCase(args[i], "COUNT")) {
      int64_t n = 0;
      if (!ParseNumber(args[i + 1], &n)) {
        call.reply.Error(kNotInteger);
        return false;
      }
      if (n < 1) {
        call.reply.Error(kSyntax);
        return false;
      }
      o->count = static_cast<size_t>(std::min<int64_t>(n, 100000));
    } else if (allow_type && EqualsIgnoreCase(args[i], "TYPE")) {
      o->type = Lower(args[i + 1]);
    } else {
      call.reply.Error(kSyntax);
      return false;
    }
  }
  return true;
}

bool CheckData(CommandCall& call, std::string_view data) {
  if (data.size() <= call.items.max_data_bytes()) return true;
  call.reply.Error("ERR value too large (at most " + std::to_string(call.items.max_data_bytes()) +
                   " bytes)");
  return false;
}

}  // namespace pmindex::server
