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
#include <cstdint>
#include <functional>
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

  // Parking (RESP's blocking commands, resp_blocking.h). A request that
  // must wait parks the connection: Consume stops after it, and consumes
  // nothing while parked(). The protocol calls the waker (from any thread)
  // when the parked request may have its reply; the server then calls
  // Unpark on the connection's thread. The server keeps reading while
  // parked, to notice a disconnect (then Abandon), and calls
  // Unpark(out, true) at park_deadline_ms() (steady clock, 0: none).
  virtual bool parked() const { return false; }
  virtual int64_t park_deadline_ms() const { return 0; }
  // Appends the parked request's reply to *out and unparks: its answer if
  // it was served, else (timed_out) its timeout reply. Returns false (and
  // stays parked) if it was not served and not timed_out.
  virtual bool Unpark(std::string* /*out*/, bool /*timed_out*/) { return true; }
  // The connection is closing while parked: the request is withdrawn.
  virtual void Abandon() {}
  void set_waker(std::function<void()> waker) { waker_ = std::move(waker); }
  // After Consume: the size the incomplete request it left will have once
  // complete, as far as its framing tells (0: unknown), so that the server
  // makes room for a large value at once rather than growing its input
  // buffer by doubling.
  size_t pending_request_bytes() const { return pending_bytes_; }

 protected:
  Items& items_;
  bool close_ = false;
  size_t pending_bytes_ = 0;
  std::function<void()> waker_;  // see set_waker
};

// The counters both protocols report (memcached "stats", RESP "INFO"), as
// name/value pairs in a fixed order.
std::vector<std::pair<std::string, std::string>> StatsReport(Items& items);

// The text a store error is reported with (after the protocol's prefix).
std::string StoreErrorText(const Status& s);

}  // namespace pmindex::server
