// pmclient's side of the two wire protocols pmserver speaks: the memcached
// text protocol and RESP2 (Redis). Request encoders, reply parsers that
// accept a reply arriving in any number of pieces, and a blocking TCP
// connection (docs/benchmarking.md "Servers: pmclient").
//
// Only what a closed-loop YCSB client needs: memcached get/gets, the
// storage commands, delete, flush_all, version; any RESP2 command (encoded
// as an array of bulk strings) and every RESP2 reply type.
//
// Thread safety: none; each client thread owns its Connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pmindex/status.h"

namespace pmindex::client {

enum class Protocol : uint8_t { kMemcached, kResp };
const char* ProtocolName(Protocol p);

// A parsed reply of either protocol.
//   RESP2: +status (kStatus), -error (kError), :integer (kInteger),
//          $bulk (kBulk, or kNil for $-1), *array (kArray, or kNil for *-1).
//   memcached: a one-line reply (STORED, DELETED, OK, VERSION ...) is
//          kStatus with the line; ERROR, CLIENT_ERROR ... and SERVER_ERROR
//          ... are kError with the line; a retrieval reply (VALUE items up
//          to END) is kArray with one kBulk per item, `key` its key and
//          `integer` its cas unique (0 if the command was get).
struct Reply {
  enum class Kind : uint8_t { kStatus, kError, kInteger, kBulk, kNil, kArray };
  Kind kind = Kind::kNil;
  std::string text;  // kStatus, kError: the line without CRLF; kBulk: the data
  int64_t integer = 0;
  std::string key;   // memcached items
  // kArray: elements [0, size); the vector may hold more (reused objects,
  // so that a reply read into the same Reply allocates nothing new).
  std::vector<Reply> elems;
  size_t size = 0;
  const Reply& at(size_t i) const { return elems[i]; }
  // The reply as one line for error messages ("-ERR unknown command", "nil", ...).
  std::string Describe() const;
};

// What the memcached reply to a request looks like (RESP replies describe
// themselves).
enum class McShape : uint8_t { kLine, kValues };

// ------------------------------------------------------------- encoders
// RESP2: a command as an array of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").
void AppendResp(std::string* out, std::initializer_list<std::string_view> args);
void AppendResp(std::string* out, std::span<const std::string_view> args);
// memcached: "get KEY\r\n" (cmd get or gets).
void AppendMcRetrieve(std::string* out, std::string_view cmd, std::string_view key);
// memcached: "CMD KEY FLAGS EXPTIME BYTES\r\nDATA\r\n" (cmd set, add, replace, ...).
void AppendMcStore(std::string* out, std::string_view cmd, std::string_view key, uint32_t flags,
                   int64_t exptime, std::string_view data);
// memcached: "delete KEY\r\n".
void AppendMcDelete(std::string* out, std::string_view key);

// pmserver's RESP SCAN walks keys in bytewise order; its cursor names the
// key to start from: the decimal of the big-endian number whose bytes are
// 0x01 followed by the key (the leading 0x01 keeps a key's leading zero
// bytes). This is the cursor of the walk that starts at `key` (inclusive).
std::string PmserverScanCursor(std::string_view key);

// -------------------------------------------------------------- parsers
enum class ParseStatus : uint8_t { kComplete, kIncomplete, kMalformed };

// Limits that make a garbled stream a kMalformed reply instead of a huge
// allocation: a line (status, error, header) of at most kMaxLine bytes,
// a bulk or item of at most kMaxBulk bytes, arrays of at most kMaxElems
// elements nested at most kMaxDepth deep.
inline constexpr size_t kMaxLine = 64 << 10;
inline constexpr int64_t kMaxBulk = int64_t{512} << 20;
inline constexpr int64_t kMaxElems = int64_t{1} << 20;
inline constexpr int kMaxDepth = 8;

// Parses one reply from the front of `in`. kComplete: *out holds it and
// *consumed its length in bytes. kIncomplete: `in` is a proper prefix of a
// reply (read more and call again with the longer input). kMalformed:
// *error says why. *out is unspecified unless kComplete.
ParseStatus ParseResp(std::string_view in, Reply* out, size_t* consumed, std::string* error);
ParseStatus ParseMemcached(std::string_view in, McShape shape, Reply* out, size_t* consumed,
                           std::string* error);

// Reads replies from a byte source through a buffer, however the bytes
// are split into reads; bytes after a reply stay buffered for the next.
class ReplyReader {
 public:
  // Fills up to n bytes at buf; returns how many (0: end of stream) or an
  // error.
  using Source = std::function<Result<size_t>(char* buf, size_t n)>;
  explicit ReplyReader(Source source);

  // The next reply. IOError: the source failed or ended (mid-reply or
  // not); Corruption: the bytes are not a reply of the protocol.
  Status Read(Protocol p, McShape shape, Reply* out);
  // Bytes received and not yet parsed.
  size_t buffered() const { return end_ - begin_; }
  // Reads once from the source into the buffer, parsing nothing: for bytes
  // that are known to be waiting (a read must not block). IOError if the
  // source failed or ended.
  Status Fill();

 private:
  // Makes room for at least 4 KiB more after the buffered bytes.
  void Reserve();
  Source source_;
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0, begin_ = 0, end_ = 0;
};

// ----------------------------------------------------------- connection
// "HOST:PORT", "[V6ADDR]:PORT". InvalidArgument naming the problem.
Status SplitHostPort(std::string_view text, std::string* host, std::string* port);

// A blocking TCP connection (TCP_NODELAY) whose sends and receives give up
// after timeout_ms (IOError).
class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Open(const std::string& host, const std::string& port,
                                                  int timeout_ms);
  // A connection over a connected stream socket `fd`, which it then owns.
  static std::unique_ptr<Connection> Adopt(int fd, int timeout_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends all of `bytes`. Replies that arrive meanwhile are buffered for
  // Receive: a server that stops reading requests until its replies are
  // read (pmserver does) cannot block a long pipelined send forever.
  Status Send(std::string_view bytes);
  Status Receive(Protocol p, McShape shape, Reply* out) { return reader_.Read(p, shape, out); }

 private:
  Connection(int fd, int timeout_ms);
  int fd_;
  int timeout_ms_;
  ReplyReader reader_;
};

}  // namespace pmindex::client
