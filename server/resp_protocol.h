// A subset of RESP2, the Redis protocol, over Items.
//
// Requests are arrays of bulk strings (binary-safe keys and values) or
// inline commands (one line, arguments split at spaces and tabs, no
// quoting). Commands (names in any case):
//
//   GET key                        SET key value [NX|XX] [EX s|PX ms|EXAT t|PXAT t]
//   DEL key...                     EXISTS key...
//   INCR key  DECR key             INCRBY key n  DECRBY key n
//   MGET key...                    MSET key value [key value ...]   (atomic)
//   TTL key  PTTL key              EXPIRE key s  PEXPIRE key ms
//   SCAN cursor [MATCH pattern] [COUNT n]
//   DBSIZE  FLUSHDB  FLUSHALL  PING [msg]  ECHO msg  INFO [section]
//   QUIT  SELECT 0  COMMAND  CLIENT SETNAME|SETINFO ...
//
// SCAN walks the keys in bytewise order. Its cursor is a decimal number
// that encodes the next key to return (the big-endian number of the bytes
// 0x01 then the key), "0" at the start and at the end, so it needs no
// state on the server, survives a restart, and a key present for the
// whole walk is returned exactly once. COUNT (default 10) is how many
// stored keys one call examines; MATCH is a glob (* ? [a-z] [^a] \x).
//
// Limits: a bulk string of at most the store's value size, at most
// kMaxArgs arguments and kMaxRequestBytes bytes in one request. A request
// over a limit, or one that breaks the framing, gets "-ERR Protocol
// error: ..." and the connection closes (as Redis does).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/protocol.h"

namespace pmindex::server {

class RespProtocol final : public Protocol {
 public:
  static constexpr size_t kMaxArgs = 64 * 1024;
  static constexpr size_t kMaxRequestBytes = 64u << 20;

  explicit RespProtocol(Items& items) : Protocol(items) {}
  size_t Consume(std::string_view in, std::string* out) override;

 private:
  // Parses one request at the front of `in` into args_. Returns the bytes
  // it takes, or 0 if incomplete; sets close_ (and replies) on a
  // protocol error.
  size_t Parse(std::string_view in, std::string* out);
  void ProtocolError(std::string_view what, std::string* out);
  void Run(std::string* out);

  std::vector<std::string_view> args_;  // the current request's, into the input
};

// SCAN cursors (see above). CursorToKey returns false for a string that
// is no cursor this server made; "0" decodes to the empty key.
std::string KeyToCursor(std::string_view key);
bool CursorToKey(std::string_view cursor, size_t max_key_bytes, std::string* key);
// Redis's glob: * ? [abc] [a-z] [^a] and \ escapes.
bool GlobMatch(std::string_view pattern, std::string_view s);

}  // namespace pmindex::server
