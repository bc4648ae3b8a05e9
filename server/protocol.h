// One wire protocol spoken on one connection: bytes in, replies out.
//
// A handler is given the connection's unconsumed input and runs the
// complete requests at its front, in order, each against the store before
// its reply is appended (so a reply that acknowledges a write follows the
// write's persist point). It knows nothing of sockets or threads: the
// server (server.h) owns those, and the tests feed it byte strings cut at
// every position.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/items.h"

namespace pmindex::server {

// The longest request line either protocol accepts (a memcached command
// line, a RESP inline command or a RESP length line). A longer line gets
// an error reply and the connection closes: it cannot be resynchronized.
inline constexpr size_t kMaxLineBytes = 64 * 1024;
// Consume stops running requests once this many reply bytes wait in *out
// (the caller writes them and calls again), so that a pipeline of reads
// cannot make one connection hold unbounded replies.
inline constexpr size_t kReplyBudgetBytes = 1 << 20;
// The largest reply of one multi-key read (memcached get, RESP MGET);
// a larger one is refused with an error instead.
inline constexpr size_t kMaxMultiReplyBytes = 64u << 20;

class Protocol {
 public:
  explicit Protocol(Items& items) : items_(items) {}
  virtual ~Protocol() = default;
  Protocol(const Protocol&) = delete;
  Protocol& operator=(const Protocol&) = delete;

  // Runs the complete requests at the front of `in` and appends their
  // replies to *out, stopping early once *out holds kReplyBudgetBytes.
  // Returns how many bytes of `in` it consumed; the rest is complete
  // requests left for the next call (if it stopped early) or the start of
  // an incomplete request, to be passed again with more bytes after it.
  // So: call again after sending *out if it is not empty; read more
  // otherwise. Once close_requested(), it consumes all input and runs
  // nothing more.
  virtual size_t Consume(std::string_view in, std::string* out) = 0;

  // True after a request that ends the connection (quit, or input that
  // cannot be parsed further): send what is in *out, then close.
  bool close_requested() const { return close_; }

 protected:
  Items& items_;
  bool close_ = false;
};

// The counters both protocols report (memcached "stats", RESP "INFO"), as
// name/value pairs in a fixed order.
std::vector<std::pair<std::string, std::string>> StatsReport(Items& items);

// The text a store error is reported with (after the protocol's prefix).
std::string StoreErrorText(const Status& s);

}  // namespace pmindex::server
