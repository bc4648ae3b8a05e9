// The memcached text protocol (memcached's doc/protocol.txt), over Items.
//
// Commands: get, gets (several keys), gat, gats (get and touch), set, add,
// replace, append, prepend, cas, delete, incr, decr, touch, flush_all
// [delay], version, verbosity, stats [items|slabs|settings], quit. Every
// storage, delete, incr/decr, touch, flush_all and verbosity command takes
// a trailing "noreply", which suppresses its reply, error replies included
// (as memcached does).
//
// Differences from memcached, all on malformed input: the data block of a
// storage command whose line is malformed but whose byte count parses is
// swallowed (memcached swallows only for "object too large"), so that the
// data is never run as a command; a byte count over memcached's own bound
// (2^31 - 3) makes the line malformed and swallows nothing, as in
// memcached; a line longer than kMaxLineBytes gets "CLIENT_ERROR line too
// long" and the connection closes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/protocol.h"

namespace pmindex::server {

// memcached's key limit; the store's own limit is larger.
inline constexpr size_t kMemcachedMaxKeyBytes = 250;

// The absolute expiry (unix ms, 0: never) of a memcached exptime:
// 0 never; negative: already expired; up to 30 days: seconds from now;
// larger: a unix time in seconds.
int64_t MemcachedExpiry(int64_t exptime, int64_t now_ms);

// memcached's default item size limit (-I), 1 MiB.
inline constexpr size_t kMemcachedDefaultMaxItemBytes = size_t{1} << 20;

class MemcacheProtocol final : public Protocol {
 public:
  // `max_item_bytes`: the largest data a storage command may carry
  // (memcached's -I), capped by what one item holds.
  explicit MemcacheProtocol(Items& items, size_t max_item_bytes = kMemcachedDefaultMaxItemBytes)
      : Protocol(items), max_data_(std::min(max_item_bytes, items.max_data_bytes())) {}
  size_t Consume(std::string_view in, std::string* out) override;
  size_t max_data_bytes() const { return max_data_; }

 private:
  // Runs the request at the front of `in`, whose first line is `line`
  // (without its line end) and takes `line_bytes` bytes with the line
  // end. Returns the bytes consumed, or 0 if its data block is incomplete.
  size_t Run(std::string_view in, std::string_view line, size_t line_bytes, std::string* out);
  size_t RunStorage(std::string_view in, size_t line_bytes, std::string* out);
  // get/gets, or with `touch` gat/gats.
  void RunGet(bool with_cas, bool touch, std::string* out);
  void RunDelete(std::string* out);
  void RunIncrDecr(bool incr, std::string* out);
  void RunTouch(std::string* out);
  void RunFlush(std::string* out);
  void RunStats(std::string* out);
  // The sub-reports of "stats items", "stats slabs", "stats settings".
  std::vector<std::pair<std::string, std::string>> ItemsReport();
  std::vector<std::pair<std::string, std::string>> SlabsReport();
  std::vector<std::pair<std::string, std::string>> SettingsReport();
  // Appends `reply` and CRLF unless the command said noreply.
  void Reply(std::string_view reply, std::string* out);
  void ReplyError(const Status& s, std::string* out);
  // Drops a trailing "noreply" from tok_, remembering it in noreply_.
  void TakeNoreply();

  std::vector<std::string_view> tok_;  // the current line's tokens
  bool noreply_ = false;               // the current command's
  uint64_t swallow_ = 0;               // bytes of a refused data block still to discard
  size_t max_data_;
};

}  // namespace pmindex::server
