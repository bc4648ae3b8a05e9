// RESP, the Redis protocol, over Items.
//
// Requests are arrays of bulk strings (binary-safe keys and values) or
// inline commands (one line, split as Redis does, quotes included:
// SplitInline). Each is looked up in the command table (resp_command.h),
// checked there (name, arity, authentication, key sizes) and run by its
// handler; docs/server.md lists the commands and their differences from
// Redis 7.0.
//
// SCAN walks the keys in the store's order ((hash slot, key) in a
// database, docs/server.md "Key encoding and databases"). Its cursor is a decimal number
// that encodes the next key to return (the big-endian number of the bytes
// 0x01 then the key), "0" at the start and at the end, so it needs no
// state on the server, survives a restart, and a key present for the
// whole walk is returned exactly once. COUNT (default 10) is how many
// stored keys one call examines; MATCH is a glob (* ? [a-z] [^a] \x).
//
// Limits: a bulk string of at most proto-max-bulk-len bytes (a server
// setting, 512 MiB by default as Redis), at most kMaxArgs arguments and
// proto-max-bulk-len + kMaxRequestBytes bytes of bulk strings in one
// request. A request over a limit, or one that breaks the framing, gets
// "-ERR Protocol error: ..." and the connection closes (as Redis does). A
// request with a bulk string larger than one item but within
// proto-max-bulk-len (an item layer over a plain store, whose values are
// not stored in pieces) is read and dropped as it arrives, never held
// whole, and answered "-ERR value too large (at most N bytes)"; the
// connection goes on.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/protocol.h"
#include "server/resp_command.h"
#include "server/resp_shared.h"

namespace pmindex::server {

class RespProtocol final : public Protocol {
 public:
  static constexpr size_t kMaxArgs = 64 * 1024;
  static constexpr size_t kMaxRequestBytes = 64u << 20;

  // A connection of a server whose connections share `shared` (which
  // must outlive it), from peer `addr` to local `laddr` ("ip:port"). It is
  // in shared.clients() from construction to destruction.
  RespProtocol(Items& items, RespShared& shared, std::string addr = "", std::string laddr = "");
  // A connection on its own (tests).
  explicit RespProtocol(Items& items);
  ~RespProtocol() override;
  size_t Consume(std::string_view in, std::string* out) override;
  bool parked() const override { return parked_ != nullptr; }
  int64_t park_deadline_ms() const override;
  bool Unpark(std::string* out, bool timed_out) override;
  void Abandon() override;

  RespClient& client() { return client_; }
  RespShared& shared() { return shared_; }

 private:
  // Parses one request at the front of `in` into args_. Returns the bytes
  // it takes, or 0 if incomplete; sets close_ (and replies) on a
  // protocol error.
  size_t Parse(std::string_view in, std::string* out);
  void ProtocolError(std::string_view what, std::string* out);
  // Drops the rest of a request with a bulk string larger than any item
  // (discard_); replies its error once the request has been read whole.
  // Returns the bytes it took (0: it needs more).
  size_t Discard(std::string_view in, std::string* out);
  // Looks up, checks and runs the request in args_.
  void Run(std::string* out);
  // Run's steps. The command (or subcommand) args_ names; nullptr: an
  // error was replied.
  const Command* ResolveCommand(RespReply& reply);
  // Checks the command's keys (into keys_; *keyed set if they were read)
  // and routes them in cluster mode, holding *slot_hold on a slot being
  // migrated; false: rejected, an error was replied.
  bool RouteKeys(CommandCall& call, CommandCounters& counters,
                 std::shared_lock<std::shared_mutex>* slot_hold, bool* keyed);
  // True iff the command is refused for want of memory (replied).
  bool RejectedOnOom(const Command* command, CommandCounters& counters, RespReply& reply);
  // Before the handler: the keys it writes, for the parked clients, and
  // the keys it touches, for OBJECT IDLETIME (into touches_, their
  // buckets of the access clock prefetched; EXEC's touched at once).
  void NoteKeysBeforeRun(const Command* command, bool keyed);
  // After the handler: touches touches_ (RespShared::Touch).
  void TouchKeysAfterRun();

  // Serves the waiters of the keys the last command made ready.
  void ServeReadyKeys();

  std::unique_ptr<RespShared> own_shared_;  // when not given one
  std::shared_ptr<Waiter> parked_;          // the blocking command waiting
  RespShared& shared_;
  RespClient client_;
  std::vector<std::string_view> args_;          // the current request's, into the input
  std::vector<std::string> inline_args_;        // an inline request's (unquoted)
  std::vector<std::string_view> keys_;          // the current request's keys
  std::vector<RespShared::AccessKey> touches_;  // to touch after the handler
  // A request being dropped: the bytes left of the current bulk string
  // (with its CRLF), and how many bulk strings follow it.
  struct DiscardState {
    uint64_t bytes = 0;
    int64_t args_left = 0;
    bool active() const { return bytes > 0 || args_left > 0; }
  } discard_;
};

// SCAN cursors (see above). CursorToKey returns false for a string that
// is no cursor this server made; "0" decodes to the empty key.
std::string KeyToCursor(std::string_view key);
bool CursorToKey(std::string_view cursor, size_t max_key_bytes, std::string* key);
// Splits an inline command line into arguments as Redis does: at spaces;
// "double quotes" with \n \r \t \b \a \xHH and \<char> escapes;
// 'single quotes' with \' the only escape. Returns false for unbalanced
// quotes or a closing quote not followed by a space or the end.
bool SplitInline(std::string_view line, std::vector<std::string>* args);
// Redis's glob: * ? [abc] [a-z] [^a] and \ escapes.
bool GlobMatch(std::string_view pattern, std::string_view s);

}  // namespace pmindex::server
