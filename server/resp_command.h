// The RESP command table: every command pmserver serves over RESP, with
// Redis's description of it (arity, flags, key positions), and the
// handler that runs it.
//
// Commands are added by groups, one file per group, each with a
// `void RegisterXxxCommands(CommandTable&)` (declared at the end of this
// header) that RespCommands() (resp_commands.cc) calls once: a new group
// is a new file and one line there. A group lists its plain commands as a
// table of CommandSpec rows, added by AddCommands; containers (CLIENT,
// OBJECT) are built as Commands with subcommands. The table answers COMMAND (its INFO,
// COUNT, DOCS, GETKEYS and LIST replies are derived from it) and is what
// the dispatcher (resp_protocol.cc) checks before a handler runs:
//
//   1. the name (any case): unknown -> "ERR unknown command '...', with
//      args beginning with: ..."; a container command (CONFIG, CLIENT,
//      OBJECT, ...) looks up its subcommand in argv[1]: unknown ->
//      "ERR unknown subcommand '...'. Try CONFIG HELP.";
//   2. the arity, Redis's convention: N > 0 is exactly N arguments, the
//      name included; -N is at least N. Else "ERR wrong number of
//      arguments for 'name' command" ('config|get' for a subcommand);
//   3. authentication: a client that has not authenticated (a password
//      is set) may run only commands flagged kNoAuth;
//   4. the keys at first_key, first_key + key_step, ... last_key (last_key
//      < 0 counts from the end: -1 is the last argument) must be 1 to
//      max_key_bytes() bytes (KvStore's key limit; Redis has none);
//   5. the handler, which checks the rest and writes exactly one reply.
//
// Threads: the table is built once, before any connection, and is then
// read-only. A handler runs on its connection's event-loop thread; what
// it shares with other connections (RespShared) is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pmindex/status.h"
#include "server/items.h"
#include "server/protocol.h"
#include "server/resp_reply.h"
#include "server/resp_shared.h"

namespace pmindex::server {

// Command flags, Redis's words for them (COMMAND INFO's third element).
namespace cmd_flag {
inline constexpr uint64_t kWrite = 1 << 0;
inline constexpr uint64_t kReadonly = 1 << 1;
inline constexpr uint64_t kDenyOom = 1 << 2;
inline constexpr uint64_t kAdmin = 1 << 3;
inline constexpr uint64_t kPubsub = 1 << 4;
inline constexpr uint64_t kNoScript = 1 << 5;
inline constexpr uint64_t kBlocking = 1 << 6;
inline constexpr uint64_t kLoading = 1 << 7;
inline constexpr uint64_t kStale = 1 << 8;
inline constexpr uint64_t kSkipMonitor = 1 << 9;
inline constexpr uint64_t kSkipSlowlog = 1 << 10;
inline constexpr uint64_t kAsking = 1 << 11;
inline constexpr uint64_t kFast = 1 << 12;
inline constexpr uint64_t kNoAuth = 1 << 13;
inline constexpr uint64_t kMayReplicate = 1 << 14;
inline constexpr uint64_t kNoMandatoryKeys = 1 << 15;
inline constexpr uint64_t kNoMulti = 1 << 16;
inline constexpr uint64_t kMovableKeys = 1 << 17;
inline constexpr uint64_t kAllowBusy = 1 << 18;
// Redis's names of the flags set in `flags`, in Redis's order.
std::vector<std::string_view> Names(uint64_t flags);
}  // namespace cmd_flag

struct CommandCall;
using CommandHandler = void (*)(CommandCall&);

struct Command {
  std::string_view name{};  // lower case; a subcommand's own name ("get")
  int arity = 0;            // Redis's convention (above), the name counted
  uint64_t flags = 0;       // cmd_flag bits
  int first_key = 0;        // 0: no keys
  int last_key = 0;         // < 0: from the end
  int key_step = 0;
  // > 0: more keys follow a count at this argument (Redis's "keynum" key
  // spec, e.g. ZUNIONSTORE dest numkeys key...): the count's keys start
  // right after it (such commands carry kMovableKeys).
  int numkeys_arg = 0;
  // Appends the keys that options name (Redis's "keyword" key specs, e.g.
  // SORT ... STORE dest) to *keys, after the others; nullptr: none.
  void (*more_keys)(std::span<const std::string_view> args,
                    std::vector<std::string_view>* keys) = nullptr;
  // Redis's command group ("string", "generic", "connection", "server")
  // and a one-line description (COMMAND DOCS).
  std::string_view group{};
  std::string_view summary{};
  // Redis's key-spec flags of the keys (COMMAND INFO), space-separated,
  // e.g. "RW ACCESS UPDATE"; and its ACL categories other than those the
  // flags imply (@read, @write, @fast, @slow, @admin, @dangerous), e.g.
  // "string" or "keyspace dangerous".
  std::string_view key_flags{};
  std::string_view categories{};
  // Redis's command tips (COMMAND INFO), space-separated, in lower case,
  // e.g. "request_policy:multi_shard response_policy:agg_sum".
  std::string_view tips{};
  // Runs the command. A container command (non-empty subcommands) needs
  // one only if it may be called without a subcommand (COMMAND).
  CommandHandler handler = nullptr;
  std::vector<Command> subcommands{};
  // Set by CommandTable::Add: "name", or "container|name"; and a number
  // from 0 to CommandTable::ids() - 1, unique among commands and
  // subcommands.
  std::string full_name{};
  uint32_t id = 0;

  const Command* FindSubcommand(std::string_view name) const;
};

class CommandTable {
 public:
  // Adds a command (and its subcommands). A name added twice is a bug
  // (checked).
  void Add(Command command);
  // The command named `name`, in any case, or nullptr.
  const Command* Find(std::string_view name) const;
  size_t size() const { return commands_.size(); }
  // How many commands and subcommands there are (Command::id's range).
  uint32_t ids() const { return next_id_; }
  // Every command, in no particular order.
  template <class F>
  void ForEach(F&& f) const {
    for (const auto& [name, c] : commands_) f(*c);
  }

 private:
  struct CaseInsensitiveHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
  };
  struct CaseInsensitiveEqual {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const;
  };
  std::unordered_map<std::string, std::unique_ptr<Command>, CaseInsensitiveHash,
                     CaseInsensitiveEqual>
      commands_;
  uint32_t next_id_ = 0;
};

// The table of every command pmserver serves, built on first use.
const CommandTable& RespCommands();

// One command being run: what a handler is given.
struct CommandCall {
  const Command& command;
  std::span<const std::string_view> args;  // args[0] is the name as sent
  Items& items;
  RespClient& client;
  RespShared& shared;
  RespReply& reply;
  bool close = false;  // set: close the connection after this reply
  // Set by a blocking command that parked (resp_blocking.h) instead of
  // replying: the connection waits for the waiter's reply. `waker` is
  // the connection's (Protocol::set_waker; null or empty: none, as in
  // EXEC and in tests without a server), for Waiter::wake.
  std::shared_ptr<Waiter> park{};
  const std::function<void()>* waker = nullptr;

  size_t argc() const { return args.size(); }
};

// The Redis version whose commands and replies pmserver follows (HELLO,
// INFO's redis_version): clients pick features by it.
inline constexpr std::string_view kRedisCompatibleVersion = "7.0.15";

// Reply strings and helpers the handlers share.
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kSyntax = "ERR syntax error";
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
// True iff `s` equals `word` ignoring ASCII case.
bool EqualsIgnoreCase(std::string_view s, std::string_view word);
void ReplyStoreError(CommandCall& call, const Status& s);
// The key arguments of `args` (args[0] is the name; a subcommand's keys
// count from it too) by the command's key spec; false (and *keys
// unspecified) if a count of keys (numkeys_arg) is not a number or names
// more arguments than there are.
bool CommandKeys(const Command& command, std::span<const std::string_view> args,
                 std::vector<std::string_view>* keys);
// Cluster mode (cluster.h): true iff this node runs the call on these keys
// (a command without keys always runs); else replies Redis's redirect or
// error (MOVED, ASK, CROSSSLOT, TRYAGAIN) and returns false. Always true
// outside cluster mode. On a slot this node is migrating, the command runs
// only if every key is still here, and *hold then holds the slot's lock
// (Cluster::SlotLock) shared, to be kept until the reply is written.
bool RouteInCluster(CommandCall& call, const std::vector<std::string_view>& keys,
                    std::shared_lock<std::shared_mutex>* hold);
// Redis's strict long double (INCRBYFLOAT, HINCRBYFLOAT): the whole
// string, no leading space, no overflow, not NaN.
bool ParseLongDouble(std::string_view s, long double* v);
// Redis's "human" text of a long double: 17 decimals, trailing zeros and
// a trailing point dropped, "-0" as "0".
std::string LongDoubleText(long double v);
// True iff `key` is a key the store takes; else replies the error.
bool CheckKey(CommandCall& call, std::string_view key);
// The options of SCAN, HSCAN, SSCAN and ZSCAN, from args[first] on, in
// pairs (the caller checked that they are): MATCH pattern, COUNT n (1 or more; capped at 100000)
// and, if `type` is given (SCAN), TYPE name (lower-cased). True iff they parse; else replies the
// error (Redis's: a COUNT below 1 is a syntax error).
struct ScanOptions {
  std::string_view pattern;  // empty: every name
  size_t count = 10;
  std::optional<std::string> type;
};
bool ParseScanOptions(CommandCall& call, size_t first, bool allow_type, ScanOptions* o);
// True iff `data` fits one item; else replies the error.
bool CheckData(CommandCall& call, std::string_view data);

// INFO's Keyspace section: ("dbN", "keys=K,expires=E,avg_ttl=0") for
// each database with keys (walks them; resp_database_commands.cc).
std::vector<std::pair<std::string, std::string>> KeyspaceInfo(Items& items);

// One row of a command group's registration table: the fields of a
// Command that differ from one command of the group to the next.
// AddCommands fills in the rest.
struct CommandSpec {
  std::string_view name;
  int arity;
  uint64_t flags;
  int first_key, last_key, key_step;
  std::string_view key_flags;
  std::string_view summary;
  CommandHandler handler;
  std::string_view tips = "";
  // Empty: the group and categories given to AddCommands.
  std::string_view group = "";
  std::string_view categories = "";
};

// Adds a Command to `table` for each spec, of Redis's command group
// `group` and ACL categories `categories` unless the spec names its own.
void AddCommands(CommandTable& table, std::span<const CommandSpec> specs, std::string_view group,
                 std::string_view categories);

// The command groups (one file each).
void RegisterStringCommands(CommandTable& table);      // resp_string_commands.cc
void RegisterBitCommands(CommandTable& table);         // resp_bit_commands.cc
void RegisterKeyspaceCommands(CommandTable& table);    // resp_keyspace_commands.cc
void RegisterDatabaseCommands(CommandTable& table);    // resp_database_commands.cc
void RegisterConnectionCommands(CommandTable& table);  // resp_connection_commands.cc
void RegisterServerCommands(CommandTable& table);      // resp_server_commands.cc
void RegisterTransactionCommands(CommandTable& table);  // resp_transaction.cc
void RegisterMultiKeyCommands(CommandTable& table);     // resp_multikey_commands.cc
void RegisterListCommands(CommandTable& table);         // resp_list_commands.cc
void RegisterClusterCommands(CommandTable& table);      // resp_cluster_commands.cc
void RegisterDumpCommands(CommandTable& table);         // resp_dump_commands.cc
void RegisterHashCommands(CommandTable& table);         // resp_hash_commands.cc
void RegisterSetCommands(CommandTable& table);          // resp_set_commands.cc
void RegisterZsetCommands(CommandTable& table);         // resp_zset_commands.cc
void RegisterZsetBlockingCommands(CommandTable& table);  // resp_zset_blocking.cc
void RegisterSortCommands(CommandTable& table);          // resp_sort_commands.cc

}  // namespace pmindex::server
